package resourcetree

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argocdcache"
	"github.com/ocm-gitops/argocd-pull-addon/test/redisserver"
)

// TestWriterAsACLUserOverTLS runs a real redis-server that speaks TLS only, requires a
// client certificate (tls-auth-clients yes), and has the ACL user that docs/operations.md
// tells operators to make for the manager (WriterACLRules, with +select for database 2).
// The manager's writer, as that user, over TLS with its client certificate, in database
// 2, runs every command it has: it writes an app's entries, reads their source, sets it,
// extends them and removes them, and checks that Redis still holds its marker (sets it,
// finds it, extends it), without a command refused (ACL LOG stays empty); the entries are
// in database 2, not in 0. The same user is refused Argo CD's other keys and every other
// command.
func TestWriterAsACLUserOverTLS(t *testing.T) {
	const user, password = "argocd-pull-manager", "manager-s3cret"
	certs := redisserver.NewTLS(t)
	server := redisserver.Start(t, redisserver.Options{Password: "default-s3cret", TLS: certs, AuthClients: "yes"})
	server.ACLSetUser(t, user, password, append(WriterACLRules(), "+select"))
	w := startWriter(t, argocdcache.ClientOptions{Addr: server.Addr, DB: 2, Username: user, PasswordSecret: "argocd-pull-manager-redis", PasswordKey: "password",
		TLS: argocdcache.TLSOptions{Enabled: true, CAFile: certs.CAFile, ClientCertFile: certs.ClientCertFile, ClientKeyFile: certs.ClientKeyFile}}, password)

	ctx := context.Background()
	writeWeb(t, ctx, w)
	treeKey := argocdcache.StoredKey(argocdcache.TreeKey("web", 0), argocdcache.CompressionGzip)
	if n := server.Admin(t, 2).Exists(ctx, treeKey, sourceKey("web")).Val(); n != 2 {
		t.Errorf("%d of the tree and its source key in database 2, want 2", n)
	}
	if n := server.Admin(t, 0).DBSize(ctx).Val(); n != 0 {
		t.Errorf("database 0 holds %d keys, want none", n)
	}
	if source, ttl, err := w.source(ctx, "web"); err != nil || source != sourceOf("digest-1") || ttl <= 0 {
		t.Errorf("source: %q, %v, %v", source, ttl, err)
	}
	if err := w.setSource(ctx, "web", sourceOf("digest-2")); err != nil {
		t.Errorf("setSource: %v", err)
	}
	if kept, err := w.extend(ctx, "web"); err != nil || !kept {
		t.Errorf("extend: %v, %v", kept, err)
	}
	if err := w.remove(ctx, "web"); err != nil {
		t.Errorf("remove: %v", err)
	}
	if n := server.Admin(t, 2).DBSize(ctx).Val(); n != 0 {
		t.Errorf("database 2 holds %d keys after remove, want none", n)
	}
	// The check that Redis still holds what the writer wrote: the marker is set when
	// missing, found, and extended when half its expiration is gone.
	if lost, err := w.checkMarker(ctx); err != nil || !lost {
		t.Errorf("checkMarker on an empty Redis: lost %v, %v; want lost", lost, err)
	}
	if lost, err := w.checkMarker(ctx); err != nil || lost {
		t.Errorf("checkMarker once set: lost %v, %v; want kept", lost, err)
	}
	server.Admin(t, 2).Expire(ctx, markerKey, 10*time.Minute)
	if lost, err := w.checkMarker(ctx); err != nil || lost {
		t.Errorf("checkMarker of a marker near its expiration: lost %v, %v; want kept", lost, err)
	}
	if ttl := server.Admin(t, 2).PTTL(ctx, markerKey).Val(); ttl < 59*time.Minute {
		t.Errorf("the marker expires in %v, want an hour: it is not extended", ttl)
	}
	if refusals := server.ACLLog(t); len(refusals) != 0 {
		t.Errorf("Redis refused the writer %d times: %v", len(refusals), refusals)
	}

	// The manager's user touches nothing else.
	for _, cmd := range [][]any{
		{"GET", "mfst|something|1.8.3.gz"},
		{"SET", "cluster|info|https://kubernetes.default.svc|1.8.3", "forged"},
		{"KEYS", "*"},
		{"SCAN", "0"},
		{"FLUSHDB"},
		{"CONFIG", "SET", "requirepass", ""},
		{"ACL", "SETUSER", user, "+@all"},
		{"PUBLISH", "some-channel", ""},
	} {
		err := w.client.Do(ctx, cmd...).Err()
		if err == nil || !strings.HasPrefix(err.Error(), "NOPERM") {
			t.Errorf("%v as %s: %v, want NOPERM", cmd, user, err)
		}
	}
}

// TestOperationsDocumentsTheWriterACL: the ACL SETUSER line of docs/operations.md is the
// one the test above gives the manager's user.
func TestOperationsDocumentsTheWriterACL(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	want := "ACL SETUSER argocd-pull-manager on >" + "$PASSWORD " + strings.Join(WriterACLRules(), " ")
	if !strings.Contains(string(doc), want) {
		t.Errorf("docs/operations.md does not show the manager's ACL user as\n  %s", want)
	}
}

// TestMarkerSurvivesASentinelFailover: a Redis reached through a Sentinel (real
// redis-servers: a master and its replica) fails over to the replica, which has the
// data; the old master is killed. The writer's check, once it reaches the new master,
// finds its marker there and reports nothing lost, so the manager writes nothing again;
// the app's entries are there as written.
func TestMarkerSurvivesASentinelFailover(t *testing.T) {
	const password = "s3cret"
	master := redisserver.Start(t, redisserver.Options{Password: password})
	replica := redisserver.Start(t, redisserver.Options{Password: password, ReplicaOf: master})
	sentinelAddr := redisserver.StartSentinel(t, master, "argocd")
	w := startWriter(t, argocdcache.ClientOptions{SentinelAddrs: []string{sentinelAddr}, SentinelMaster: "argocd",
		PasswordSecret: argocdcache.RedisSecret, PasswordKey: argocdcache.RedisPasswordKey}, password)

	ctx := context.Background()
	writeWeb(t, ctx, w)
	if lost, err := w.checkMarker(ctx); err != nil || !lost {
		t.Fatalf("checkMarker on a Redis without the marker: lost %v, %v; want lost", lost, err)
	}
	if n, err := master.Admin(t, 0).Do(ctx, "WAIT", 1, 5000).Int(); err != nil || n != 1 {
		t.Fatalf("WAIT for the replica: %d, %v", n, err)
	}

	sentinel := redis.NewSentinelClient(&redis.Options{Addr: sentinelAddr, DisableIdentity: true, Protocol: 2})
	defer sentinel.Close()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		// Refused (NOGOODSLAVE) until the Sentinel has seen the replica.
		err := sentinel.Failover(ctx, "argocd").Err()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("SENTINEL FAILOVER: %v", err)
		}
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		got, err := sentinel.GetMasterAddrByName(ctx, "argocd").Result()
		if err == nil && got[0]+":"+got[1] == replica.Addr {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the Sentinel names %v (%v) as the master, want the replica %s", got, err, replica.Addr)
		}
	}
	master.Stop(t)

	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		lost, err := w.checkMarker(ctx)
		if err == nil {
			if lost {
				t.Errorf("checkMarker after a failover to a replica that has the data: lost")
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("checkMarker after the failover: %v", err)
		}
	}
	if source, _, err := w.source(ctx, "web"); err != nil || source != sourceOf("digest-1") {
		t.Errorf("the app's source on the new master: %q, %v", source, err)
	}
	if role, err := replica.Admin(t, 0).Do(ctx, "ROLE").Slice(); err != nil || role[0] != "master" {
		t.Errorf("the replica's role: %v, %v; want master", role, err)
	}
}

// startWriter returns the manager's writer (gzip, an hour's expiration) to the Redis of
// opts, whose password is in the Secret argocd/opts.PasswordSecret; it is closed when t
// ends.
func startWriter(t *testing.T, opts argocdcache.ClientOptions, password string) *cacheWriter {
	t.Helper()
	secrets := fake.NewClientset(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: opts.PasswordSecret, Namespace: "argocd"},
		Data: map[string][]byte{opts.PasswordKey: []byte(password)}}).CoreV1().Secrets("argocd")
	client, err := argocdcache.NewClient(opts, secrets)
	if err != nil {
		t.Fatal(err)
	}
	w := &cacheWriter{client: client, target: opts.Target(), compression: argocdcache.CompressionGzip, expiration: time.Hour}
	t.Cleanup(func() { _ = w.Close() })
	return w
}

// writeWeb writes the entries of the app web, one Pod, rendered from digest-1.
func writeWeb(t *testing.T, ctx context.Context, w *cacheWriter) {
	t.Helper()
	e, err := encodeEntries(argocdcache.Tree{Nodes: []argocdcache.Node{{Ref: argocdcache.Ref{Version: "v1", Kind: "Pod", Name: "web-0"}}}},
		[]argocdcache.ResourceDiff{{Kind: "Pod", Name: "web-0"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.write(ctx, "web", e, sourceOf("digest-1")); err != nil {
		t.Fatalf("write: %v", err)
	}
}
