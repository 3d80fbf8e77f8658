package spoke

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argocdcache"
)

// startRedis runs a real redis-server on a free loopback port, its default user's
// password defaultPassword, until the test ends; it skips the test without redis-server.
func startRedis(t *testing.T, defaultPassword string) string {
	t.Helper()
	server, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server is not on PATH: install it (Debian: apt-get install redis-server) to run the test against a real Redis and its ACL")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	dir := t.TempDir()
	cmd := exec.Command(server, "--bind", "127.0.0.1", "--port", fmt.Sprint(port), "--dir", dir, "--save", "", "--appendonly", "no",
		"--requirepass", defaultPassword, "--logfile", filepath.Join(dir, "redis.log"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			log, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
			t.Logf("redis-server log:\n%s", log)
		}
	})
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	admin := redis.NewClient(&redis.Options{Addr: addr, Password: defaultPassword, DisableIdentity: true})
	defer admin.Close()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if err := admin.Ping(context.Background()).Err(); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("redis-server on %s does not answer: %v", addr, err)
		}
	}
	return addr
}

// TestReadTreeAsReadOnlyRedisUser runs a real redis-server with the ACL user that
// docs/operations.md tells operators to make for the agent (argocdcache.ReaderACLRules):
// the agent's reader, as that user, reads a tree and hears its notification without a
// single command refused (ACL LOG stays empty), and the same user's SET, DEL, PUBLISH,
// FLUSHALL and reads of other keys are refused, while the default user's password (the
// argocd-redis Secret's) writes.
func TestReadTreeAsReadOnlyRedisUser(t *testing.T) {
	const defaultPassword, agentUser, agentPassword = "default-s3cret", "argocd-pull-agent", "agent-s3cret"
	addr := startRedis(t, defaultPassword)
	ctx := context.Background()
	admin := redis.NewClient(&redis.Options{Addr: addr, Password: defaultPassword, DisableIdentity: true})
	defer admin.Close()
	setUser := append([]any{"ACL", "SETUSER", agentUser, "on", ">" + agentPassword}, toAny(argocdcache.ReaderACLRules())...)
	if err := admin.Do(ctx, setUser...).Err(); err != nil {
		t.Fatalf("ACL SETUSER: %v", err)
	}
	if err := admin.Set(ctx, "app|resources-tree|web|1.8.3.gz", gzipped(t, strings.Replace(argoCDTreeJSON, "%s", "", 1)), 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := admin.Do(ctx, "ACL", "LOG", "RESET").Err(); err != nil {
		t.Fatal(err)
	}

	// The agent's reader, as the agent's user, its password from its own Secret.
	secrets := fake.NewClientset(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "argocd-pull-redis", Namespace: "argocd"},
		Data:       map[string][]byte{"password": []byte(agentPassword)},
	}).CoreV1().Secrets("argocd")
	r := newTreeReader(redisReaderOptions{addr: addr, username: agentUser, passwordSecret: "argocd-pull-redis", passwordKey: "password"},
		"argocd", secrets, logr.Discard())
	defer r.Close()
	tree := r.Read(ctx, "argocd", "web")
	if tree.Unavailable != "" || len(tree.Nodes) != 2 {
		t.Fatalf("the tree, read as %s: %+v", agentUser, tree)
	}
	if tree := r.Read(ctx, "argocd", "new"); !strings.Contains(tree.Unavailable, "no resource tree") {
		t.Errorf("a missing tree, read as %s: %+v", agentUser, tree)
	}
	watchCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	changed := make(chan string, 4)
	go r.Watch(watchCtx, func(ns, name string) { changed <- ns + "/" + name })
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if n, err := admin.PubSubNumPat(ctx).Result(); err == nil && n == 1 {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("the reader did not subscribe to the tree notifications: %d patterns, %v", n, err)
		}
	}
	if err := admin.Publish(ctx, argocdcache.ManagedResourcesKey("web"), "").Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case app := <-changed:
		if app != "argocd/web" {
			t.Errorf("notified of %s, want argocd/web", app)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no tree notification")
	}
	// go-redis pings an idle subscription every 3 s.
	time.Sleep(4 * time.Second)
	refusals, err := admin.Do(ctx, "ACL", "LOG").Slice()
	if err != nil {
		t.Fatal(err)
	}
	if len(refusals) != 0 {
		t.Errorf("Redis refused the reader %d times: %v", len(refusals), refusals)
	}

	// The agent's user writes nothing, and reads nothing else.
	agent := redis.NewClient(&redis.Options{Addr: addr, Username: agentUser, Password: agentPassword, DisableIdentity: true, Protocol: 2})
	defer agent.Close()
	for _, cmd := range [][]any{
		{"SET", "app|resources-tree|web|1.8.3.gz", "forged"},
		{"SET", "app|managed-resources|web|1.8.3.gz", "forged"},
		{"DEL", "app|resources-tree|web|1.8.3.gz"},
		{"EXPIRE", "app|resources-tree|web|1.8.3.gz", "1"},
		{"GET", "app|managed-resources|web|1.8.3.gz"},
		{"GET", "mfst|something"},
		{"PUBLISH", argocdcache.ManagedResourcesKey("web"), ""},
		{"FLUSHALL"},
		{"CONFIG", "SET", "requirepass", ""},
		{"ACL", "SETUSER", agentUser, "+@all"},
	} {
		err := agent.Do(ctx, cmd...).Err()
		if err == nil || !strings.HasPrefix(err.Error(), "NOPERM") {
			t.Errorf("%v as %s: %v, want NOPERM", cmd, agentUser, err)
		}
	}
	if got, err := admin.Get(ctx, "app|resources-tree|web|1.8.3.gz").Result(); err != nil || got == "forged" {
		t.Errorf("the tree after the agent's attempts: %q, %v", got, err)
	}
	// The default user's password, which argocd-redis holds, is a write credential.
	asDefault := redis.NewClient(&redis.Options{Addr: addr, Password: defaultPassword, DisableIdentity: true, Protocol: 2})
	defer asDefault.Close()
	if err := asDefault.Set(ctx, "app|resources-tree|web|1.8.3.gz", "forged", 0).Err(); err != nil {
		t.Errorf("SET as the default user: %v", err)
	}

	// A user without its password never falls back to the default user.
	none := newTreeReader(redisReaderOptions{addr: addr, username: agentUser, passwordSecret: "missing", passwordKey: "password"},
		"argocd", secrets, logr.Discard())
	defer none.Close()
	if tree := none.Read(ctx, "argocd", "web"); !strings.Contains(tree.Unavailable, `no password for the Redis user "argocd-pull-agent"`) {
		t.Errorf("a user without its password Secret: %+v", tree)
	}
}

// TestOperationsDocumentsTheReaderACL: the ACL SETUSER line of docs/operations.md is the
// one the test above gives the agent's user.
func TestOperationsDocumentsTheReaderACL(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	want := "ACL SETUSER argocd-pull-agent on >" + "$PASSWORD " + strings.Join(argocdcache.ReaderACLRules(), " ")
	if !strings.Contains(string(doc), want) {
		t.Errorf("docs/operations.md does not show the agent's ACL user as\n  %s", want)
	}
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}
