package resourcetree_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/onsi/gomega"
	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	addonv1beta1 "open-cluster-management.io/api/addon/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	statusv1alpha1 "github.com/ocm-gitops/argocd-pull-addon/pkg/apis/argocdpull/v1alpha1"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/argocdcache"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/clusterreport"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/hubcache"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/resourcetree"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/statusslices"
	"github.com/ocm-gitops/argocd-pull-addon/test/redisserver"
	"github.com/ocm-gitops/argocd-pull-addon/test/sim"
	"github.com/ocm-gitops/argocd-pull-addon/test/testenv"
)

const addonName = clusterreport.DefaultAddonName

var shared testenv.Shared

func TestMain(m *testing.M) { os.Exit(testenv.RunTests(m, &shared)) }

// TestWritesTheTreesOfPulledApps runs the controller as pkg/hub wires it (the manager's
// cache, which keeps the slices without their trees, and the slices reader) on a real
// apiserver, with a miniredis as the hub Argo CD's Redis, password-protected as a stock
// install's: a pulled app's tree and managed resources are written as the hub
// application-controller would write them, announced, kept up to date when the slice
// changes (its tree alone included), left alone when nothing of the app changed (its
// slice not even read) or when its change shows nowhere in the tree, removed when the
// app goes; an
// app the hub Argo CD reconciles itself is never written; an unreachable Redis shows as
// a Warning Event on the app, and the tree is written once Redis is back.
func TestWritesTheTreesOfPulledApps(t *testing.T) {
	env, hub := begin(t, "cluster1")
	ctx, g, c := hub.Ctx, hub.G, hub.C

	redis := miniredis.RunT(t)
	redis.RequireAuth("s3cret")
	hub.Create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: argocdcache.RedisSecret, Namespace: "argocd"},
		Data: map[string][]byte{argocdcache.RedisPasswordKey: []byte("s3cret")}})
	startTreeManager(t, env, treeOptions(argocdcache.ClientOptions{Addr: redis.Addr(), PasswordSecret: argocdcache.RedisSecret, PasswordKey: argocdcache.RedisPasswordKey}))

	// Two hub apps: one pulled (skip-reconcile), one that the hub Argo CD also pushes.
	pulled := hub.Application("cluster1-web", "cluster1")
	hub.Create(pulled)
	pushed := hub.Application("cluster1-pushed", "cluster1")
	annotations := pushed.GetAnnotations()
	delete(annotations, argoapp.AnnotationSkipReconcile)
	pushed.SetAnnotations(annotations)
	hub.Create(pushed)

	// The agent's slice: a Deployment, its ReplicaSet and Pod.
	addon := hub.EnableAddon("cluster1", addonName)
	healthy := &statusv1alpha1.Health{Status: "Healthy"}
	pod := func(name string) statusv1alpha1.ResourceNode {
		return statusv1alpha1.ResourceNode{Version: "v1", Kind: "Pod", Namespace: "web", Name: name, Health: healthy, Images: []string{"nginx:1"},
			ParentRefs: []statusv1alpha1.ResourceRef{{Group: "apps", Kind: "ReplicaSet", Namespace: "web", Name: "web-5d9c"}}}
	}
	entry := func(name string) statusv1alpha1.AppStatus {
		e := syncedEntry(name, []statusv1alpha1.ResourceStatus{{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "web", Name: "web",
			Status: "Synced", Health: healthy, Images: []string{"nginx:1"}}},
			statusv1alpha1.ResourceNode{Group: "apps", Version: "v1", Kind: "ReplicaSet", Namespace: "web", Name: "web-5d9c", Health: healthy,
				ParentRefs: []statusv1alpha1.ResourceRef{{Group: "apps", Kind: "Deployment", Namespace: "web", Name: "web"}}},
			pod("web-5d9c-a"))
		e.Health = healthy
		return e
	}
	notes := subscribe(t, redis.Addr(), argocdcache.ManagedResourcesKey("cluster1-web"))
	slice := createSlice(hub, addon, entry("cluster1-pushed"), entry("cluster1-web"))

	webKey := treeKey("cluster1-web")
	tree := func(g gomega.Gomega) []string {
		raw, err := redis.Get(webKey)
		got := decodeTree(g, []byte(raw), err)
		var nodes []string
		for _, n := range got.Nodes {
			node := n.Kind + " " + n.Name + " " + n.Health.Status
			if len(n.ParentRefs) > 0 {
				node += " under " + n.ParentRefs[0].Kind
			}
			nodes = append(nodes, node)
		}
		return nodes
	}
	g.Eventually(tree).Should(gomega.Equal([]string{
		"Pod web-5d9c-a Healthy under ReplicaSet", "Deployment web Healthy", "ReplicaSet web-5d9c Healthy under Deployment",
	}))
	g.Expect(redis.TTL(webKey)).To(gomega.BeNumerically("~", time.Hour, time.Minute))
	raw, err := redis.Get(managedKey("cluster1-web"))
	g.Expect(err).NotTo(gomega.HaveOccurred())
	var managed []argocdcache.ResourceDiff
	g.Expect(argocdcache.Decode([]byte(raw), true, &managed)).To(gomega.Succeed())
	g.Expect(managed).To(gomega.BeEmpty(), "a Synced resource is not listed in the managed resources")
	g.Eventually(notes).Should(gomega.Receive(), "the write is announced, as the application-controller announces it")

	// Scaled on the spoke: the new Pod is written.
	// Only this test writes the slice: the object it last wrote is current, and the
	// test reads no slice (the slice reads counted below are the controller's).
	update := func(apps ...statusv1alpha1.AppStatus) {
		slice.Apps = apps
		slice.AppCount = int32(len(apps))
		g.Expect(c.Update(ctx, slice)).To(gomega.Succeed())
	}
	scaled := entry("cluster1-web")
	scaled.Nodes = append(scaled.Nodes, pod("web-5d9c-b"))
	update(entry("cluster1-pushed"), scaled)
	g.Eventually(tree).Should(gomega.ContainElement("Pod web-5d9c-b Healthy under ReplicaSet"))
	g.Eventually(notes).Should(gomega.Receive())

	// Another app's change rewrites nothing of this one, and does not even read the
	// slice for it.
	sliceReads := sliceReadCounter(t, env)
	readsBefore := sliceReads()
	otherChanged := entry("cluster1-pushed")
	otherChanged.Health = &statusv1alpha1.Health{Status: "Degraded"}
	update(otherChanged, scaled)
	g.Consistently(notes, 2*time.Second).ShouldNot(gomega.Receive())
	g.Expect(sliceReads()-readsBefore).To(gomega.BeZero(), "slice reads for a change of another app")

	// A change of this app that shows nowhere in its tree is read, and not written.
	revised := scaled.DeepCopy()
	revised.Sync.Revision = "c0ffee"
	update(otherChanged, *revised)
	g.Eventually(sliceReads).Should(gomega.BeNumerically(">", readsBefore), "the changed app's slice is read")
	g.Consistently(notes, 2*time.Second).ShouldNot(gomega.Receive())

	// The app the hub Argo CD reconciles keeps its own entries.
	g.Expect(redis.Exists(treeKey("cluster1-pushed"))).To(gomega.BeFalse())

	// Redis down: a Warning Event on the app; back: written again, and said so.
	redis.Close()
	failing := entry("cluster1-web")
	update(entry("cluster1-pushed"), failing)
	warnings := func(g gomega.Gomega) []string {
		events := &eventsv1.EventList{}
		g.Expect(c.List(ctx, events, client.InNamespace("argocd"))).To(gomega.Succeed())
		var reasons []string
		for _, e := range events.Items {
			if e.Regarding.Name == pulled.GetName() && e.Regarding.Kind == "Application" {
				reasons = append(reasons, e.Type+" "+e.Reason)
			}
		}
		return reasons
	}
	g.Eventually(warnings).Should(gomega.ContainElement("Warning " + resourcetree.ReasonNotWritten))
	g.Expect(redis.Restart()).To(gomega.Succeed())
	g.Eventually(tree, 30*time.Second).Should(gomega.Not(gomega.ContainElement("Pod web-5d9c-b Healthy under ReplicaSet")))
	g.Eventually(warnings).Should(gomega.ContainElement("Normal " + resourcetree.ReasonWritten))

	// The app goes: its entries go.
	g.Expect(c.Delete(ctx, pulled)).To(gomega.Succeed())
	g.Eventually(func() bool { return redis.Exists(webKey) }).Should(gomega.BeFalse())
	g.Expect(redis.Exists(managedKey("cluster1-web"))).To(gomega.BeFalse())
	g.Expect(c.Delete(ctx, pushed)).To(gomega.Succeed())
}

// begin starts a test on the shared apiserver: the hub's argocd namespace, which holds
// the test's Applications, and the clusters' namespaces.
func begin(t *testing.T, clusters ...string) (*testenv.Env, *testenv.Hub) {
	env := shared.Get(t)
	hub := testenv.NewHub(t, env, "argocd")
	for _, ns := range append([]string{"argocd"}, clusters...) {
		hub.CreateNamespace(ns)
	}
	return env, hub
}

// treeOptions returns the controller's options with the hub Argo CD's Redis at redis,
// entries gzip-compressed and expiring after an hour.
func treeOptions(redis argocdcache.ClientOptions) resourcetree.Options {
	return resourcetree.Options{AddonName: addonName, ArgoCDNamespace: "argocd", Concurrency: 2, Settings: resourcetree.Settings{Redis: resourcetree.RedisOptions{
		ClientOptions: redis, Compression: argocdcache.CompressionGzip, Expiration: time.Hour,
	}}}
}

// syncedEntry returns the agent's slice entry of the hub app argocd/name: Synced, observed
// now, its resources and the nodes of its tree read from the spoke Argo CD's cache.
func syncedEntry(name string, resources []statusv1alpha1.ResourceStatus, nodes ...statusv1alpha1.ResourceNode) statusv1alpha1.AppStatus {
	return statusv1alpha1.AppStatus{
		Namespace: "argocd", Name: name, Hub: &statusv1alpha1.ObjectRef{Namespace: "argocd", Name: name},
		ObservedAt: metav1.NewTime(time.Now().Truncate(time.Second)), TreeSource: statusv1alpha1.TreeSourceArgoCDCache,
		Sync: statusv1alpha1.SyncStatus{Status: "Synced"}, Resources: resources, Nodes: nodes,
	}
}

// createSlice creates the agent's first slice of the addon's cluster, with apps.
func createSlice(hub *testenv.Hub, addon *addonv1beta1.ManagedClusterAddOn, apps ...statusv1alpha1.AppStatus) *statusv1alpha1.ApplicationStatusSlice {
	slice := clusterreport.SliceObject(addon, clusterreport.Slice{Name: "argocd-pull-0", Apps: apps})
	hub.Create(slice)
	return slice
}

// treeKey and managedKey are the Redis keys of app's tree and managed resources, as the
// controller writes them (gzip-compressed).
func treeKey(app string) string {
	return argocdcache.StoredKey(argocdcache.TreeKey(app, 0), argocdcache.CompressionGzip)
}

func managedKey(app string) string {
	return argocdcache.StoredKey(argocdcache.ManagedResourcesKey(app), argocdcache.CompressionGzip)
}

// decodeTree decodes a tree as the controller stores it, read with err.
func decodeTree(g gomega.Gomega, raw []byte, err error) argocdcache.Tree {
	g.Expect(err).NotTo(gomega.HaveOccurred())
	var tree argocdcache.Tree
	g.Expect(argocdcache.Decode(raw, true, &tree)).To(gomega.Succeed())
	return tree
}

// startTreeManager starts, until t ends, a manager with the resource tree controller as
// pkg/hub wires it: the manager's cache, which keeps the slices without their trees, and
// the slices reader.
func startTreeManager(t *testing.T, env *testenv.Env, opts resourcetree.Options) {
	testenv.StartManager(t, env, hubcache.Scope{AddonName: addonName, ArgoCDNamespace: "argocd"}, &testenv.WriteLog{},
		func(mgr ctrl.Manager, c client.Client) error {
			return resourcetree.Setup(mgr, c, statusslices.NewReader(c, addonName), opts)
		})
}

// sliceReadCounter returns a reader of the apiserver's count of ApplicationStatusSlice
// GETs (apiserver_request_total): the controller's reads, since the tests read none.
func sliceReadCounter(t *testing.T, env *testenv.Env) func() float64 {
	g := testenv.NewGomega(t)
	kube, err := kubernetes.NewForConfig(env.Config)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	return func() float64 {
		counts, err := sim.ReadRequestCounts(context.Background(), kube)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		return counts["GET applicationstatusslices"]
	}
}

// subscribe returns a channel of the messages published on channel.
func subscribe(t *testing.T, addr, channel string) <-chan string {
	t.Helper()
	client := redis.NewClient(&redis.Options{Addr: addr, Password: "s3cret", DisableIdentity: true, Protocol: 2})
	t.Cleanup(func() { client.Close() })
	sub := client.Subscribe(context.Background(), channel)
	if _, err := sub.Receive(context.Background()); err != nil {
		t.Fatalf("subscribe to %s: %v", channel, err)
	}
	out := make(chan string, 16)
	go func() {
		for m := range sub.Channel() {
			out <- strings.Clone(m.Channel)
		}
	}()
	return out
}

// TestARestartedManagerLeavesUnchangedTrees: a manager that starts (a restart, a
// failover) leaves the entries that an earlier one wrote from the same slice entry as
// they are, also after changes of the app that showed nowhere in its tree: it reads
// neither the slice nor writes Redis for them. Entries that are gone
// from Redis are written again. Unchanged entries live on: their expiration is set again,
// and nothing else.
func TestARestartedManagerLeavesUnchangedTrees(t *testing.T) {
	const cluster, name = "cluster2", "cluster2-api"
	env, hub := begin(t, cluster)
	ctx, g, c := hub.Ctx, hub.G, hub.C
	redis := miniredis.RunT(t)
	opts := treeOptions(argocdcache.ClientOptions{Addr: redis.Addr()})
	startManager := func(t *testing.T) { startTreeManager(t, env, opts) }

	hub.Create(hub.Application(name, cluster))
	addon := hub.EnableAddon(cluster, addonName)
	healthy := &statusv1alpha1.Health{Status: "Healthy"}
	entry := syncedEntry(name, []statusv1alpha1.ResourceStatus{{Version: "v1", Kind: "Service", Namespace: "api", Name: "api", Status: "Synced", Health: healthy}},
		// A tree, which the manager's cache leaves out: a restarted manager knows the
		// entry by the digest of its whole content.
		statusv1alpha1.ResourceNode{Group: "discovery.k8s.io", Version: "v1", Kind: "EndpointSlice", Namespace: "api", Name: "api-x1",
			ParentRefs: []statusv1alpha1.ResourceRef{{Kind: "Service", Namespace: "api", Name: "api"}}})
	entry.Sync.Revision, entry.Health = "a1", healthy
	slice := createSlice(hub, addon, entry)

	apiKey := treeKey(name)
	sliceReads := sliceReadCounter(t, env)
	sourceKey := "argocd-pull|resource-tree-source|" + name
	t.Run("the first manager writes the tree", func(t *testing.T) {
		startManager(t)
		g.Eventually(func() bool { return redis.Exists(apiKey) }).Should(gomega.BeTrue())
		// A change that shows nowhere in the tree: the entries stay, and say what they
		// are rendered from now.
		before, err := redis.Get(sourceKey)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		notes := subscribe(t, redis.Addr(), argocdcache.ManagedResourcesKey(name))
		entry.Sync.Revision = "b2"
		slice.Apps = []statusv1alpha1.AppStatus{entry}
		g.Expect(c.Update(ctx, slice)).To(gomega.Succeed())
		g.Eventually(func() (string, error) { return redis.Get(sourceKey) }).ShouldNot(gomega.Equal(before))
		g.Expect(redis.TTL(sourceKey)).To(gomega.BeNumerically("~", time.Hour, time.Minute))
		g.Consistently(notes, time.Second).ShouldNot(gomega.Receive())
	})
	// Ten minutes later, as Redis sees it: a write would set the expiration again.
	redis.FastForward(10 * time.Minute)

	t.Run("a restarted manager leaves it", func(t *testing.T) {
		notes := subscribe(t, redis.Addr(), argocdcache.ManagedResourcesKey(name))
		readsBefore, commandsBefore := sliceReads(), redis.CommandCount()
		startManager(t)
		g.Eventually(redis.CommandCount).Should(gomega.BeNumerically(">=", commandsBefore+3), "the manager reads what an earlier one wrote")
		g.Consistently(notes, 2*time.Second).ShouldNot(gomega.Receive())
		g.Expect(redis.TTL(apiKey)).To(gomega.BeNumerically("~", 50*time.Minute, time.Minute), "the tree was written again")
		g.Expect(sliceReads()-readsBefore).To(gomega.BeZero(), "slice reads")
	})

	t.Run("a restarted manager writes a tree that is gone", func(t *testing.T) {
		redis.Del(apiKey)
		startManager(t)
		g.Eventually(func() bool { return redis.Exists(apiKey) }).Should(gomega.BeTrue())
		g.Expect(redis.TTL(apiKey)).To(gomega.BeNumerically("~", time.Hour, time.Minute))
	})

	t.Run("an unchanged tree lives on without its slice read or its entries written", func(t *testing.T) {
		opts.Redis.Expiration = 4 * time.Second // a refresh every 2 s
		readsBefore := sliceReads()
		notes := subscribe(t, redis.Addr(), argocdcache.ManagedResourcesKey(name))
		startManager(t)
		g.Eventually(func() time.Duration { return redis.TTL(apiKey) }, 5*time.Second).Should(
			gomega.BeNumerically("<=", 4*time.Second), "the expiration is set again")
		for _, key := range []string{managedKey(name), sourceKey} {
			g.Expect(redis.TTL(key)).To(gomega.BeNumerically("<=", 4*time.Second), key)
		}
		g.Consistently(notes, 3*time.Second).ShouldNot(gomega.Receive())
		g.Expect(redis.Exists(apiKey)).To(gomega.BeTrue())
		g.Expect(sliceReads()-readsBefore).To(gomega.BeZero(), "slice reads")
	})
}

// TestNodesCarryUIDsOnlyWhenTheDestinationIsTheManagedCluster: argocd-server acts on a
// tree node only when it has a UID, and then on the cluster of the hub Application's
// destination. The nodes of a pulled app whose destination is the hub (the documented
// template's in-cluster) carry none, those of an app whose destination names its managed
// cluster do, and a change of the destination rewrites the tree at once, though the
// cluster's slice stays as it was.
func TestNodesCarryUIDsOnlyWhenTheDestinationIsTheManagedCluster(t *testing.T) {
	const cluster, name = "cluster3", "cluster3-canary"
	env, hub := begin(t, cluster)
	g := hub.G
	redis := miniredis.RunT(t)
	opts := treeOptions(argocdcache.ClientOptions{Addr: redis.Addr()})
	opts.HubClusterName = "local-cluster"
	startTreeManager(t, env, opts)

	hub.Create(hub.Application(name, cluster)) // destination: https://kubernetes.default.svc
	createSlice(hub, hub.EnableAddon(cluster, addonName), syncedEntry(name,
		[]statusv1alpha1.ResourceStatus{{Version: "v1", Kind: "ConfigMap", Namespace: "kube-system", Name: "canary", Status: "Synced"}},
		statusv1alpha1.ResourceNode{Version: "v1", Kind: "Pod", Namespace: "kube-system", Name: "canary-0",
			ParentRefs: []statusv1alpha1.ResourceRef{{Kind: "ConfigMap", Namespace: "kube-system", Name: "canary"}}}))

	// uids returns each node's UID and its parent's, as argocd-server reads them.
	uids := func(g gomega.Gomega) []string {
		raw, err := redis.Get(treeKey(name))
		var out []string
		for _, n := range decodeTree(g, []byte(raw), err).Nodes {
			out = append(out, n.Kind+"="+n.UID)
			for _, p := range n.ParentRefs {
				out = append(out, n.Kind+"^"+p.Kind+"="+p.UID)
			}
		}
		return out
	}
	noUIDs := gomega.ConsistOf("ConfigMap=", "Pod=", "Pod^ConfigMap=")
	g.Eventually(uids).Should(noUIDs, "the destination is the hub: no node carries a UID")

	setDestination := func(destination map[string]any) {
		hub.UpdateApp(name, func(app *unstructured.Unstructured) {
			g.Expect(unstructured.SetNestedMap(app.Object, destination, "spec", "destination")).To(gomega.Succeed())
		})
	}
	setDestination(map[string]any{"name": cluster, "namespace": "guestbook"})
	g.Eventually(uids).Should(gomega.HaveEach(gomega.MatchRegexp(`=[0-9a-f-]{36}$`)), "the destination is the managed cluster: every node has a UID")
	g.Expect(uids(g)).To(gomega.HaveLen(3))

	setDestination(map[string]any{"name": "in-cluster", "namespace": "guestbook"})
	g.Eventually(uids).Should(noUIDs, "the destination is the hub again: the UIDs are gone")
}

// TestWritesTheTreeAsConfigured runs the controller as pkg/hub wires it against a real
// redis-server that speaks TLS only and requires a client certificate, with the manager's
// ACL user (resourcetree.WriterACLRules, +select) whose password is in a Secret of its
// own: with the options of the manager's flags (--argocd-redis-use-tls, the CA and the
// client certificate files, --argocd-redisdb=4, --argocd-redis-username and its password
// Secret), a pulled app's tree is written in database 4, and database 0 holds nothing.
func TestWritesTheTreeAsConfigured(t *testing.T) {
	const cluster, name = "cluster4", "cluster4-web"
	env, hub := begin(t, cluster)
	ctx, g := hub.Ctx, hub.G
	const user, password = "argocd-pull-manager", "manager-s3cret"
	certs := redisserver.NewTLS(t)
	server := redisserver.Start(t, redisserver.Options{Password: "default-s3cret", TLS: certs, AuthClients: "yes"})
	server.ACLSetUser(t, user, password, append(resourcetree.WriterACLRules(), "+select"))
	hub.Create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "argocd-pull-manager-redis", Namespace: "argocd"},
		Data: map[string][]byte{"password": []byte(password)}})
	opts := treeOptions(argocdcache.ClientOptions{Addr: server.Addr, DB: 4, Username: user,
		PasswordSecret: "argocd-pull-manager-redis", PasswordKey: "password",
		TLS: argocdcache.TLSOptions{Enabled: true, CAFile: certs.CAFile, ClientCertFile: certs.ClientCertFile, ClientKeyFile: certs.ClientKeyFile}})
	opts.HubClusterName = "local-cluster"
	startTreeManager(t, env, opts)

	hub.Create(hub.Application(name, cluster))
	createSlice(hub, hub.EnableAddon(cluster, addonName), syncedEntry(name,
		[]statusv1alpha1.ResourceStatus{{Version: "v1", Kind: "ConfigMap", Namespace: "web", Name: "web", Status: "Synced"}}))

	db4 := server.Admin(t, 4)
	nodes := func(g gomega.Gomega) []string {
		raw, err := db4.Get(ctx, treeKey(name)).Bytes()
		var out []string
		for _, n := range decodeTree(g, raw, err).Nodes {
			out = append(out, n.Kind+" "+n.Name)
		}
		return out
	}
	g.Eventually(nodes).Should(gomega.Equal([]string{"ConfigMap web"}))
	g.Expect(server.Admin(t, 0).DBSize(ctx).Val()).To(gomega.BeZero(), "database 0 holds keys")
	g.Expect(server.ACLLog(t)).To(gomega.BeEmpty(), "Redis refused the manager's user")
}

// TestWritesTheDiffsOfOutOfSyncResources runs the controller against a real redis-server:
// the managed resources of a pulled app, whose slice entry the agent's encoder built
// from the spoke's cached states (clusterreport.Entry), carry the normalized live, target
// and predicted live states of each OutOfSync resource, Secrets as Argo CD redacts them;
// a Synced resource is not listed, whatever states the entry holds for it; a Secret's
// state that is not redacted, written into the slice past the encoder (a faulty or
// hostile agent), never reaches Redis.
func TestWritesTheDiffsOfOutOfSyncResources(t *testing.T) {
	const cluster, name = "cluster5", "cluster5-web"
	env, hub := begin(t, cluster)
	ctx, g := hub.Ctx, hub.G
	server := redisserver.Start(t, redisserver.Options{})
	startTreeManager(t, env, treeOptions(argocdcache.ClientOptions{Addr: server.Addr}))
	hub.Create(hub.Application(name, cluster))
	addon := hub.EnableAddon(cluster, addonName)

	deployment := func(replicas string) string {
		return `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"web"},"spec":{"replicas":` + replicas + `}}`
	}
	configMap := `{"apiVersion":"v1","data":{"k":"v"},"kind":"ConfigMap","metadata":{"name":"web","namespace":"web"}}`
	secret := func(name, value string) string {
		return `{"apiVersion":"v1","data":{"password":"` + value + `"},"kind":"Secret","metadata":{"name":"` + name + `","namespace":"web"},"type":"Opaque"}`
	}
	app := clusterreport.App{Namespace: "argocd", Name: name, HubNamespace: "argocd", HubName: name, ObservedAt: time.Now(),
		Sync: argoapp.SyncStatus{Status: "OutOfSync"},
		Resources: []argoapp.ResourceStatus{
			{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "web", Name: "web", Status: "OutOfSync"},
			{Version: "v1", Kind: "ConfigMap", Namespace: "web", Name: "web", Status: "Synced"},
			{Version: "v1", Kind: "Secret", Namespace: "web", Name: "db", Status: "OutOfSync"},
			{Version: "v1", Kind: "Secret", Namespace: "web", Name: "forged", Status: "OutOfSync"},
		}}
	// What the spoke's application-controller cached: every resource's states, the
	// Secret's data masked.
	states := clusterreport.States{Diffs: []statusv1alpha1.ResourceDiff{
		{Group: "apps", Kind: "Deployment", Namespace: "web", Name: "web", LiveState: deployment("3"), TargetState: deployment("1"), PredictedLiveState: deployment("1")},
		{Kind: "ConfigMap", Namespace: "web", Name: "web", LiveState: configMap, TargetState: configMap, PredictedLiveState: configMap},
		{Kind: "Secret", Namespace: "web", Name: "db", LiveState: secret("db", "++++++++"), TargetState: secret("db", "++++++++++++"), PredictedLiveState: secret("db", "++++++++++++")},
	}}
	entry := clusterreport.FitEntry(clusterreport.Entry(app, clusterreport.Tree{States: states}))
	g.Expect(entry.Diffs).To(gomega.HaveLen(2), "the agent's entry carries the OutOfSync resources' states")
	g.Expect(entry.DiffsOmitted).To(gomega.BeEquivalentTo(1), "the Secret without states in Argo CD's cache is counted")
	// Past the encoder: a Secret's plain data, and states for the Synced ConfigMap.
	entry.Diffs = append(entry.Diffs,
		statusv1alpha1.ResourceDiff{Kind: "Secret", Namespace: "web", Name: "forged", LiveState: secret("forged", "c2VjcmV0"), TargetState: secret("forged", "++++++++")},
		statusv1alpha1.ResourceDiff{Kind: "ConfigMap", Namespace: "web", Name: "web", LiveState: configMap, TargetState: configMap})
	createSlice(hub, addon, entry)

	admin := server.Admin(t, 0)
	managed := func(g gomega.Gomega) map[string]argocdcache.ResourceDiff {
		raw, err := admin.Get(ctx, managedKey(name)).Bytes()
		g.Expect(err).NotTo(gomega.HaveOccurred())
		var items []argocdcache.ResourceDiff
		g.Expect(argocdcache.Decode(raw, true, &items)).To(gomega.Succeed())
		out := map[string]argocdcache.ResourceDiff{}
		for _, d := range items {
			out[d.FullName()] = d
		}
		return out
	}
	g.Eventually(managed).Should(gomega.HaveLen(3))
	got := managed(g)
	g.Expect(got).NotTo(gomega.HaveKey("/ConfigMap/web/web"), "a Synced resource is listed")
	g.Expect(got["apps/Deployment/web/web"]).To(gomega.Equal(argocdcache.ResourceDiff{Group: "apps", Kind: "Deployment", Namespace: "web", Name: "web",
		NormalizedLiveState: deployment("3"), TargetState: deployment("1"), PredictedLiveState: deployment("1"), LiveState: "null", Modified: true}))
	g.Expect(got["/Secret/web/db"]).To(gomega.Equal(argocdcache.ResourceDiff{Kind: "Secret", Namespace: "web", Name: "db",
		NormalizedLiveState: secret("db", "++++++++"), TargetState: secret("db", "++++++++++++"), PredictedLiveState: secret("db", "++++++++++++"), LiveState: "null", Modified: true}))
	g.Expect(got["/Secret/web/forged"]).To(gomega.Equal(argocdcache.ResourceDiff{Kind: "Secret", Namespace: "web", Name: "forged",
		NormalizedLiveState: "null", TargetState: "null", PredictedLiveState: "null", LiveState: "null", Modified: true}))
	keys, err := admin.Keys(ctx, "*").Result()
	g.Expect(err).NotTo(gomega.HaveOccurred())
	for _, key := range keys {
		raw, err := admin.Get(ctx, key).Bytes()
		g.Expect(err).NotTo(gomega.HaveOccurred())
		var plain []byte
		if strings.HasSuffix(key, argocdcache.GzipSuffix) {
			var v any
			g.Expect(argocdcache.Decode(raw, true, &v)).To(gomega.Succeed())
			plain, _ = json.Marshal(v)
		}
		g.Expect(string(raw)+string(plain)).NotTo(gomega.ContainSubstring("c2VjcmV0"), "the forged Secret's data is in %s", key)
	}
}
