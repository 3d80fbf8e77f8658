package spoke

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argocdcache"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/clusterreport"
)

// argoCDTreeJSON is an ApplicationTree as Argo CD 3.2's application-controller writes it:
// every field of ResourceNode, those the agent ignores included.
const argoCDTreeJSON = `{"nodes":[` +
	`{"group":"apps","version":"v1","kind":"Deployment","namespace":"web","name":"web","uid":"u1","info":[{"name":"Revision","value":"Rev:1"}],"resourceVersion":"10","images":["fail:1"],"health":{"status":"Progressing","message":"Waiting for rollout to finish: 0 of 1 updated replicas are available..."},"createdAt":"2026-01-01T00:00:00Z"},` +
	`{"group":"apps","version":"v1","kind":"ReplicaSet","namespace":"web","name":"web-5d9c","uid":"u2","parentRefs":[{"group":"apps","kind":"Deployment","namespace":"web","name":"web","uid":"u1"}],"info":[{"name":"Revision","value":"Rev:1"}],"resourceVersion":"11","images":["fail:1"],"health":{"status":"Progressing","message":"Waiting for rollout to finish: 0 out of 1 new replicas are available..."},"createdAt":"2026-01-01T00:00:00Z"}` +
	`],"hosts":[{"name":"node-1"}]%s}`

const argoCDPodJSON = `{"nodes":[{"version":"v1","kind":"Pod","namespace":"web","name":"web-5d9c-x2x","uid":"u3","parentRefs":[{"group":"apps","kind":"ReplicaSet","namespace":"web","name":"web-5d9c","uid":"u2"}],"info":[{"name":"Status Reason","value":"ImagePullBackOff"}],"networkingInfo":{"labels":{"app":"web"}},"resourceVersion":"12","images":["fail:1"],"health":{"status":"Degraded","message":"Back-off pulling image \"fail:1\""},"createdAt":"2026-01-01T00:00:01Z"}]}`

func gzipped(t *testing.T, s string) string {
	t.Helper()
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	if _, err := w.Write([]byte(s + "\n")); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

// defaultRedisReader is how a stock agent reaches the Redis at addr: the default user,
// with the password of Argo CD's argocd-redis Secret.
func defaultRedisReader(addr string) argocdcache.ClientOptions {
	return argocdcache.ClientOptions{Addr: addr, PasswordSecret: argocdcache.RedisSecret, PasswordKey: argocdcache.RedisPasswordKey}
}

// mustTreeReader is newTreeReader of options that are valid.
func mustTreeReader(t *testing.T, o argocdcache.ClientOptions, secrets argocdcache.SecretGetter) *treeReader {
	t.Helper()
	r, err := newTreeReader(o, "argocd", secrets, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func TestReadTree(t *testing.T) {
	redis := miniredis.RunT(t)
	redis.RequireAuth("s3cret")
	secrets := fake.NewClientset(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: argocdcache.RedisSecret, Namespace: "argocd"},
		Data:       map[string][]byte{"auth": []byte("s3cret")},
	}).CoreV1().Secrets("argocd")
	r := mustTreeReader(t, defaultRedisReader(redis.Addr()), secrets)
	ctx := context.Background()

	// An app in Argo CD's namespace, one shard, gzip (the default).
	if err := redis.Set("app|resources-tree|web|1.8.3.gz", gzipped(t, strings.Replace(argoCDTreeJSON, "%s", "", 1))); err != nil {
		t.Fatal(err)
	}
	tree := r.Read(ctx, "argocd", "web")
	if tree.Unavailable != "" || len(tree.Nodes) != 2 {
		t.Fatalf("tree %+v", tree)
	}
	rs := tree.Nodes[1]
	if rs.Kind != "ReplicaSet" || rs.ParentRefs[0].Kind != "Deployment" || rs.Health.Status != "Progressing" || rs.Images[0] != "fail:1" {
		t.Errorf("replicaset %+v", rs)
	}

	// An app in another namespace, in two shards, without compression.
	if err := redis.Set("app|resources-tree|team-a_web|1.8.3", strings.Replace(argoCDTreeJSON, "%s", `,"shardsCount":2`, 1)); err != nil {
		t.Fatal(err)
	}
	if err := redis.Set("app|resources-tree|team-a_web|1|1.8.3", argoCDPodJSON); err != nil {
		t.Fatal(err)
	}
	tree = r.Read(ctx, "team-a", "web")
	if tree.Unavailable != "" || len(tree.Nodes) != 3 {
		t.Fatalf("sharded tree %+v", tree)
	}
	pod := tree.Nodes[2]
	if pod.Kind != "Pod" || pod.Health.Status != "Degraded" || pod.Health.Message != `Back-off pulling image "fail:1"` || pod.ParentRefs[0].Name != "web-5d9c" {
		t.Errorf("pod %+v", pod)
	}

	// No tree yet: said so, and Redis is not taken for down.
	if tree := r.Read(ctx, "argocd", "new"); !strings.Contains(tree.Unavailable, "no resource tree") {
		t.Errorf("missing tree: %+v", tree)
	}
	if tree := r.Read(ctx, "argocd", "web"); tree.Unavailable != "" {
		t.Errorf("after a missing tree: %+v", tree)
	}

	// A tree that expands past the bound, in a shard: refused, naming the key, without
	// taking Redis for down.
	if err := redis.Set("app|resources-tree|big|1.8.3", strings.Replace(argoCDTreeJSON, "%s", `,"shardsCount":2`, 1)); err != nil {
		t.Fatal(err)
	}
	if err := redis.Set("app|resources-tree|big|1|1.8.3.gz", gzipped(t, `{"nodes":[`+strings.Repeat(" ", argocdcache.MaxValueBytes)+`]}`)); err != nil {
		t.Fatal(err)
	}
	if tree := r.Read(ctx, "argocd", "big"); !strings.Contains(tree.Unavailable, "key app|resources-tree|big|1|1.8.3.gz") ||
		!strings.Contains(tree.Unavailable, "larger than") || len(tree.Nodes) != 0 {
		t.Errorf("a tree over the bound: %+v", tree)
	}
	if tree := r.Read(ctx, "argocd", "web"); tree.Unavailable != "" {
		t.Errorf("after a tree over the bound: %+v", tree)
	}

	// Redis gone: said so, at once for the next apps.
	redis.Close()
	if tree := r.Read(ctx, "argocd", "web"); tree.Unavailable == "" {
		t.Error("a tree read from a stopped Redis")
	}
	start := time.Now()
	if tree := r.Read(ctx, "argocd", "other"); tree.Unavailable == "" || time.Since(start) > 100*time.Millisecond {
		t.Errorf("the next read waits %v: %+v", time.Since(start), tree)
	}
}

func TestWatchTrees(t *testing.T) {
	redis := miniredis.RunT(t)
	r := mustTreeReader(t, defaultRedisReader(redis.Addr()), fake.NewClientset().CoreV1().Secrets("argocd"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan string, 4)
	go r.Watch(ctx, func(ns, name string) { got <- ns + "/" + name })
	deadline := time.Now().Add(5 * time.Second)
	for _, channel := range []string{"app|managed-resources|web|1.8.3", "app|managed-resources|team-a_api|1.8.3"} {
		// The subscription may not be in place yet: publish until it is heard.
		for redis.Publish(channel, "") == 0 {
			if time.Now().After(deadline) {
				t.Fatal("no subscriber")
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	for _, want := range []string{"argocd/web", "team-a/api"} {
		select {
		case key := <-got:
			if key != want {
				t.Errorf("notified %s, want %s", key, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no notification for %s", want)
		}
	}
}

// TestTreeBoundCoversTheReportableTrees: Argo CD's JSON of a node takes at most about four
// times the agent's entry of it, so the largest tree whose nodes fit an entry
// (clusterreport.MaxSliceBytes) is at most about four times that in Argo CD's cache;
// argocdcache.MaxValueBytes leaves four times more.
func TestTreeBoundCoversTheReportableTrees(t *testing.T) {
	var tree argocdcache.Tree
	if err := argocdcache.Decode([]byte(argoCDPodJSON), false, &tree); err != nil {
		t.Fatal(err)
	}
	ours, err := json.Marshal(convertNodes(tree.Nodes)[0])
	if err != nil {
		t.Fatal(err)
	}
	theirs := len(argoCDPodJSON) - len(`{"nodes":[]}`)
	t.Logf("a Pod node: %d bytes in Argo CD's cache, %d in the agent's entry", theirs, len(ours))
	if theirs > 4*len(ours) {
		t.Errorf("Argo CD's node takes %d bytes, more than four times the entry's %d", theirs, len(ours))
	}
	if argocdcache.MaxValueBytes < 4*4*clusterreport.MaxSliceBytes {
		t.Errorf("MaxValueBytes %d is under 16 times MaxSliceBytes", argocdcache.MaxValueBytes)
	}
}
