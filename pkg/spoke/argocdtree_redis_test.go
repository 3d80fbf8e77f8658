package spoke

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	statusv1alpha1 "github.com/ocm-gitops/argocd-pull-addon/pkg/apis/argocdpull/v1alpha1"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/argocdcache"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/clusterreport"
	"github.com/ocm-gitops/argocd-pull-addon/test/redisserver"
)

// TestReadTreeAsReadOnlyRedisUser runs a real redis-server with the ACL user that
// docs/operations.md tells operators to make for the agent (argocdcache.ReaderACLRules):
// the agent's reader, as that user, reads a tree, the states of the app's managed
// resources (hooks left out) and hears its notification without a single command refused
// (ACL LOG stays empty), and the same user's SET, DEL, PUBLISH, FLUSHALL and reads of
// other keys are refused, while the default user's password (the argocd-redis Secret's)
// writes. The user of an earlier release, without GET on the managed resources, still
// reads the tree, and the states say why they are missing.
func TestReadTreeAsReadOnlyRedisUser(t *testing.T) {
	const defaultPassword, agentUser, agentPassword = "default-s3cret", "argocd-pull-agent", "agent-s3cret"
	server := redisserver.Start(t, redisserver.Options{Password: defaultPassword})
	addr := server.Addr
	ctx := context.Background()
	admin := server.Admin(t, 0)
	if err := admin.Set(ctx, "app|resources-tree|web|1.8.3.gz", gzipped(t, strings.Replace(argoCDTreeJSON, "%s", "", 1)), 0).Err(); err != nil {
		t.Fatal(err)
	}
	// The managed resources as the application-controller caches them: the states of
	// each resource, a Secret's data masked, and a hook, which argocd-server never lists.
	managed := `[{"group":"apps","kind":"Deployment","namespace":"web","name":"web","targetState":"{\"spec\":{\"replicas\":1}}",` +
		`"liveState":"{\"spec\":{\"replicas\":3},\"status\":{}}","normalizedLiveState":"{\"spec\":{\"replicas\":3}}",` +
		`"predictedLiveState":"{\"spec\":{\"replicas\":1}}","modified":true},` +
		`{"kind":"Secret","namespace":"web","name":"db","targetState":"{\"data\":{\"p\":\"++++++++\"}}","liveState":"null","normalizedLiveState":"null","predictedLiveState":"null","modified":true},` +
		`{"group":"batch","kind":"Job","namespace":"web","name":"migrate","targetState":"{}","liveState":"null","hook":true}]`
	if err := admin.Set(ctx, "app|managed-resources|web|1.8.3.gz", gzipped(t, managed), 0).Err(); err != nil {
		t.Fatal(err)
	}
	server.ACLSetUser(t, agentUser, agentPassword, argocdcache.ReaderACLRules())

	// The agent's reader, as the agent's user, its password from its own Secret.
	secrets := fake.NewClientset(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "argocd-pull-redis", Namespace: "argocd"},
		Data:       map[string][]byte{"password": []byte(agentPassword)},
	}).CoreV1().Secrets("argocd")
	r := mustTreeReader(t, argocdcache.ClientOptions{Addr: addr, Username: agentUser, PasswordSecret: "argocd-pull-redis", PasswordKey: "password"}, secrets)
	tree := r.Read(ctx, "argocd", "web")
	if tree.Unavailable != "" || len(tree.Nodes) != 2 {
		t.Fatalf("the tree, read as %s: %+v", agentUser, tree)
	}
	if tree := r.Read(ctx, "argocd", "new"); !strings.Contains(tree.Unavailable, "no resource tree") {
		t.Errorf("a missing tree, read as %s: %+v", agentUser, tree)
	}
	states := r.ReadStates(ctx, "argocd", "web")
	want := clusterreport.States{Diffs: []statusv1alpha1.ResourceDiff{
		{Group: "apps", Kind: "Deployment", Namespace: "web", Name: "web",
			LiveState: `{"spec":{"replicas":3}}`, TargetState: `{"spec":{"replicas":1}}`, PredictedLiveState: `{"spec":{"replicas":1}}`},
		{Kind: "Secret", Namespace: "web", Name: "db", LiveState: "null", TargetState: `{"data":{"p":"++++++++"}}`, PredictedLiveState: "null"},
	}}
	if !reflect.DeepEqual(states, want) {
		t.Errorf("the states, read as %s:\n got %+v\nwant %+v (the normalized live state, no hook)", agentUser, states, want)
	}
	if states := r.ReadStates(ctx, "argocd", "new"); !strings.Contains(states.Unavailable, "no managed resources") {
		t.Errorf("missing states, read as %s: %+v", agentUser, states)
	}
	expectTreeNotification(t, r, admin)
	// go-redis pings an idle subscription every 3 s.
	time.Sleep(4 * time.Second)
	if refusals := server.ACLLog(t); len(refusals) != 0 {
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
	// The user of an earlier release, which may not read the managed resources: the tree
	// is read, and the states say why they are not.
	const oldUser = "argocd-pull-agent-0"
	server.ACLSetUser(t, oldUser, agentPassword, slices.DeleteFunc(argocdcache.ReaderACLRules(), func(rule string) bool {
		return rule == "~"+argocdcache.ManagedResourcesKeyPrefix+"*"
	}))
	old := mustTreeReader(t, argocdcache.ClientOptions{Addr: addr, Username: oldUser, PasswordSecret: "argocd-pull-redis", PasswordKey: "password"}, secrets)
	if states := old.ReadStates(ctx, "argocd", "web"); !strings.Contains(states.Unavailable, "NOPERM") {
		t.Errorf("the states, read as a user without GET on them: %+v", states)
	}
	if tree := old.Read(ctx, "argocd", "web"); tree.Unavailable != "" {
		t.Errorf("the tree, read after the states were refused: %+v", tree)
	}

	// The default user's password, which argocd-redis holds, is a write credential.
	asDefault := redis.NewClient(&redis.Options{Addr: addr, Password: defaultPassword, DisableIdentity: true, Protocol: 2})
	defer asDefault.Close()
	if err := asDefault.Set(ctx, "app|resources-tree|web|1.8.3.gz", "forged", 0).Err(); err != nil {
		t.Errorf("SET as the default user: %v", err)
	}

	// A user without its password never falls back to the default user.
	none := mustTreeReader(t, argocdcache.ClientOptions{Addr: addr, Username: agentUser, PasswordSecret: "missing", PasswordKey: "password"}, secrets)
	if tree := none.Read(ctx, "argocd", "web"); !strings.Contains(tree.Unavailable, `no password for the Redis user "argocd-pull-agent"`) {
		t.Errorf("a user without its password Secret: %+v", tree)
	}
}

// TestReadTreeOverTLS runs a real redis-server that speaks TLS only and requires a client
// certificate signed by its CA (tls-auth-clients yes), with the app's tree in database 3:
// the agent's reader, with the options its flags give (--argocd-redis-use-tls, the CA
// and the client certificate files, --argocd-redisdb=3) and as the read-only ACL user,
// reads the tree and hears its notification. Without the client certificate, or without
// TLS, it reports the tree unavailable, saying why; in database 0 it finds no tree.
func TestReadTreeOverTLS(t *testing.T) {
	const agentUser, agentPassword = "argocd-pull-agent", "agent-s3cret"
	certs := redisserver.NewTLS(t)
	server := redisserver.Start(t, redisserver.Options{Password: "default-s3cret", TLS: certs, AuthClients: "yes"})
	ctx := context.Background()
	if err := server.Admin(t, 3).Set(ctx, "app|resources-tree|web|1.8.3.gz", gzipped(t, strings.Replace(argoCDTreeJSON, "%s", "", 1)), 0).Err(); err != nil {
		t.Fatal(err)
	}
	// A database other than 0 is selected on each new connection: docs/operations.md
	// adds +select to the user's rules then.
	server.ACLSetUser(t, agentUser, agentPassword, append(argocdcache.ReaderACLRules(), "+select"))
	secrets := fake.NewClientset(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "argocd-pull-redis", Namespace: "argocd"},
		Data:       map[string][]byte{"password": []byte(agentPassword)},
	}).CoreV1().Secrets("argocd")
	opts := argocdcache.ClientOptions{Addr: server.Addr, DB: 3, Username: agentUser, PasswordSecret: "argocd-pull-redis", PasswordKey: "password",
		TLS: argocdcache.TLSOptions{Enabled: true, CAFile: certs.CAFile, ClientCertFile: certs.ClientCertFile, ClientKeyFile: certs.ClientKeyFile}}

	r := mustTreeReader(t, opts, secrets)
	if tree := r.Read(ctx, "argocd", "web"); tree.Unavailable != "" || len(tree.Nodes) != 2 {
		t.Fatalf("the tree, read over TLS from database 3: %+v", tree)
	}
	expectTreeNotification(t, r, server.Admin(t, 0))
	if refusals := server.ACLLog(t); len(refusals) != 0 {
		t.Errorf("Redis refused the reader %d times: %v", len(refusals), refusals)
	}

	db0 := opts
	db0.DB = 0
	if tree := mustTreeReader(t, db0, secrets).Read(ctx, "argocd", "web"); !strings.Contains(tree.Unavailable, "no resource tree") {
		t.Errorf("the tree, read from database 0: %+v", tree)
	}
	noCert := opts
	noCert.TLS.ClientCertFile, noCert.TLS.ClientKeyFile = "", ""
	if tree := mustTreeReader(t, noCert, secrets).Read(ctx, "argocd", "web"); tree.Unavailable == "" {
		t.Errorf("the tree, read without the client certificate that Redis requires: %+v", tree)
	}
	plain := opts
	plain.TLS = argocdcache.TLSOptions{}
	if tree := mustTreeReader(t, plain, secrets).Read(ctx, "argocd", "web"); tree.Unavailable == "" {
		t.Errorf("the tree, read without TLS: %+v", tree)
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

// expectTreeNotification watches r's tree notifications until the test ends, waits until
// r has subscribed, and checks that a notification admin publishes for the app argocd/web
// reaches it.
func expectTreeNotification(t *testing.T, r *treeReader, admin *redis.Client) {
	t.Helper()
	ctx := t.Context()
	changed := make(chan string, 4)
	go r.Watch(ctx, func(ns, name string) { changed <- ns + "/" + name })
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
}
