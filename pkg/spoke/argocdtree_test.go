package spoke

import (
	"bytes"
	"compress/gzip"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/ocm-gitops/argocd-pull-addon/test/fleet"
	"github.com/ocm-gitops/argocd-pull-addon/test/testenv"
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

func TestReadTree(t *testing.T) {
	redis := miniredis.RunT(t)
	redis.RequireAuth("s3cret")
	secrets := fake.NewClientset(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: ArgoCDRedisSecret, Namespace: "argocd"},
		Data:       map[string][]byte{"auth": []byte("s3cret")},
	}).CoreV1().Secrets("argocd")
	r := newTreeReader(redis.Addr(), "argocd", secrets, logr.Discard())
	defer r.Close()
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
	r := newTreeReader(redis.Addr(), "argocd", fake.NewClientset().CoreV1().Secrets("argocd"), logr.Discard())
	defer r.Close()
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

// TestArgoCDCacheContract checks what the agent reads of Argo CD's cache against the
// source of the Argo CD the fleet runs (hack/tools/argocd pins it). An upgrade of Argo
// CD that changes a key, the cache version, the default compression, the password
// Secret or the JSON of the tree fails here, naming what changed: the agent's constants
// (argocdtree.go) and docs/design.md, section 8a.2, must then follow.
func TestArgoCDCacheContract(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	modules, err := fleet.ResolveModuleDirs(root)
	if err != nil {
		t.Fatal(err)
	}
	read := func(rel string) string {
		t.Helper()
		data, err := os.ReadFile(filepath.Join(modules.ArgoCD, rel))
		if err != nil {
			t.Fatalf("the pinned Argo CD source has no %s: %v", rel, err)
		}
		return string(data)
	}
	common := read("common/common.go")
	appstate := read("util/cache/appstate/cache.go")
	cache := read("util/cache/cache.go")
	redisCache := read("util/cache/redis.go")
	types := read("pkg/apis/application/v1alpha1/types.go")
	controller := read("controller/appcontroller.go")

	for _, c := range []struct {
		what, source, pattern string
	}{
		{"the cache version", common, `CacheVersion\s*=\s*"` + regexp.QuoteMeta(ArgoCDCacheVersion) + `"`},
		{"the tree key", appstate, `key := "` + regexp.QuoteMeta(argoCDTreeKeyPrefix) + `" \+ appName`},
		{"the tree shard suffix", appstate, `key = fmt.Sprintf\("%s\|%d", key, shard\)`},
		{"the notification channel", appstate, `return "` + regexp.QuoteMeta(argoCDTreeNotificationPrefix) + `" \+ appName`},
		{"the notification after a tree write", appstate, `return c.Cache.NotifyUpdated\(appManagedResourcesKey\(appName\)\)`},
		{"the cache version suffix", cache, `return fmt.Sprintf\("%s\|%s", key, common.CacheVersion\)`},
		{"the gzip suffix", redisCache, `return key \+ "` + regexp.QuoteMeta(argoCDGzipSuffix) + `"`},
		{"gzip by default", cache, `"REDIS_COMPRESSION", string\(RedisCompressionGZip\)`},
		{"the notification is published on the full key", redisCache, `r.client.Publish\(context.TODO\(\), key, ""\)`},
		{"the password Secret", common, `RedisInitialCredentials\s*=\s*"` + ArgoCDRedisSecret + `"`},
		{"the password key", common, `RedisInitialCredentialsKey\s*=\s*"` + argoCDRedisPasswordKey + `"`},
		{"the trees are keyed by instance name", controller, `ctrl.cache.SetAppResourcesTree\(a.InstanceName\(ctrl.namespace\), tree\)`},
		{"the instance name", types, `return app.Namespace \+ "_" \+ app.Name`},
		{"tree nodes", types, "Nodes \\[\\]ResourceNode `json:\"nodes,omitempty\""},
		{"tree shards", types, "ShardsCount int64 `json:\"shardsCount,omitempty\""},
		{"node identity", types, "ResourceRef `json:\",inline\""},
		{"node parents", types, "ParentRefs \\[\\]ResourceRef `json:\"parentRefs,omitempty\""},
		{"node images", types, "Images \\[\\]string `json:\"images,omitempty\""},
		{"node health", types, "Health \\*HealthStatus `json:\"health,omitempty\""},
		{"health status", types, "Status health.HealthStatusCode `json:\"status,omitempty\""},
		{"health message", types, "Message string `json:\"message,omitempty\" protobuf:\"bytes,2,opt,name=message\"`"},
	} {
		if !regexp.MustCompile(c.pattern).MatchString(c.source) {
			t.Errorf("Argo CD changed %s: the pinned source no longer matches %s", c.what, c.pattern)
		}
	}
	for _, field := range []string{"group", "version", "kind", "namespace", "name"} {
		if !strings.Contains(types, "`json:\""+field+",omitempty\" protobuf:") {
			t.Errorf("Argo CD's ResourceRef has no JSON field %q any more", field)
		}
	}
}
