package spoke

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	statusv1alpha1 "github.com/ocm-gitops/argocd-pull-addon/pkg/apis/argocdpull/v1alpha1"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/argocdcache"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/clusterreport"
)

// slicesOnHub returns the agent's ApplicationStatusSlices on the hub.
func (f *fixture) slicesOnHub() []statusv1alpha1.ApplicationStatusSlice {
	f.t.Helper()
	list := &statusv1alpha1.ApplicationStatusSliceList{}
	f.g.Expect(f.hub.List(f.ctx, list, client.InNamespace(f.cluster),
		client.MatchingLabels{statusv1alpha1.LabelAddon: testAddonName})).To(gomega.Succeed())
	return list.Items
}

// entries decodes the agent's slices on the hub, by app name; decoding errors fail.
func (f *fixture) entries(g gomega.Gomega) map[string]statusv1alpha1.AppStatus {
	apps, err := clusterreport.DecodeSlices(f.slicesOnHub())
	g.Expect(err).NotTo(gomega.HaveOccurred())
	out := map[string]statusv1alpha1.AppStatus{}
	for _, e := range apps {
		g.Expect(e.Namespace).To(gomega.Equal(f.appNS))
		out[e.Name] = e
	}
	return out
}

// setTree writes an app's resource tree into the fake Argo CD cache the way the
// application-controller does (gzip, the app's instance name, the cache version), and
// publishes its notification.
func (f *fixture) setTree(app, treeJSON string) {
	f.t.Helper()
	instance := argocdcache.InstanceName(f.opts.ArgoCDNamespace, f.appNS, app)
	f.g.Expect(f.redis.Set(argocdcache.StoredKey(argocdcache.TreeKey(instance, 0), argocdcache.CompressionGzip), gzipped(f.t, treeJSON))).To(gomega.Succeed())
	f.redis.Publish(argocdcache.ManagedResourcesKey(instance), "")
}

// degradedTreeJSON is the tree of a Deployment web-000 whose Pod never becomes Ready.
const degradedTreeJSON = `{"nodes":[` +
	`{"group":"apps","version":"v1","kind":"Deployment","namespace":"guestbook","name":"web-000","uid":"u1","images":["registry.example/fail:1"],"health":{"status":"Degraded","message":"Deployment \"web-000\" exceeded its progress deadline"}},` +
	`{"group":"apps","version":"v1","kind":"ReplicaSet","namespace":"guestbook","name":"web-000-5d9c","uid":"u2","parentRefs":[{"group":"apps","kind":"Deployment","namespace":"guestbook","name":"web-000","uid":"u1"}],"health":{"status":"Progressing","message":"Waiting for rollout to finish: 0 out of 1 new replicas are available..."}},` +
	`{"version":"v1","kind":"Pod","namespace":"guestbook","name":"web-000-5d9c-x2x","uid":"u3","parentRefs":[{"group":"apps","kind":"ReplicaSet","namespace":"guestbook","name":"web-000-5d9c","uid":"u2"}],"images":["registry.example/fail:1"],"health":{"status":"Degraded","message":"Back-off pulling image \"registry.example/fail:1\""}}` +
	`]}`

// TestStatusSlices is the scenario on real apiservers: 40 apps of 100 resources
// each reach the hub complete, in bounded slices owned by the ManagedClusterAddOn; a
// change of one app rewrites one slice; the tree from Argo CD's cache brings the
// children's health; apps that go leave their slice, and empty slices go.
func TestStatusSlices(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	const apps, resources = 40, 100
	for i := range apps {
		f.createApp(fmt.Sprintf("app-%02d", i), status{sync: "Synced", health: "Healthy", revision: "8f2c1e5d9a7b6c4d3e2f1a0b9c8d7e6f5a4b3c2d",
			phase: "Succeeded", resources: resources}.object(), fromApplicationSet("argocd/fleet"))
	}
	f.g.Eventually(func(g gomega.Gomega) {
		entries := f.entries(g)
		g.Expect(entries).To(gomega.HaveLen(apps))
		for name, e := range entries {
			g.Expect(e.Resources).To(gomega.HaveLen(resources), name)
			g.Expect(e.Truncated).To(gomega.BeNil(), name)
		}
	}).Should(gomega.Succeed())
	f.settle()

	addon := f.addon()
	onHub := f.slicesOnHub()
	total := 0
	for _, s := range onHub {
		bytes := 0
		for _, e := range s.Apps {
			bytes += clusterreport.EntrySize(e)
		}
		total += bytes
		f.g.Expect(bytes).To(gomega.BeNumerically("<=", clusterreport.SliceTargetBytes), s.Name)
		f.g.Expect(s.OwnerReferences).To(gomega.HaveLen(1))
		f.g.Expect(s.OwnerReferences[0].UID).To(gomega.Equal(addon.UID))
		f.g.Expect(s.OwnerReferences[0].Kind).To(gomega.Equal("ManagedClusterAddOn"))
		f.g.Expect(s.FormatVersion).To(gomega.BeEquivalentTo(clusterreport.SliceFormatVersion))
	}
	t.Logf("%d apps of %d resources: %d slices, %d bytes of apps", apps, resources, len(onHub), total)
	f.g.Expect(len(onHub)).To(gomega.BeNumerically(">", 1))
	// The ManagedClusterAddOn keeps the summary for people.
	f.g.Eventually(func() *metav1.Condition { return f.condition(clusterreport.ConditionSummary) }).ShouldNot(gomega.BeNil())
	// No tree in the cache yet: said so on each app, nothing invented.
	e := f.entries(f.g)["app-00"]
	f.g.Expect(e.TreeSource).To(gomega.Equal(statusv1alpha1.TreeSourceNone))
	f.g.Expect(e.TreeMessage).To(gomega.ContainSubstring("no resource tree"))

	// One app changes: one slice is rewritten.
	before := f.sliceWrites.Load()
	f.setStatus("app-17", status{sync: "OutOfSync", health: "Healthy", revision: "9f2c1e5d9a7b6c4d3e2f1a0b9c8d7e6f5a4b3c2d", phase: "Succeeded", resources: resources}.object())
	f.g.Eventually(func(g gomega.Gomega) {
		g.Expect(f.entries(g)["app-17"].Sync.Status).To(gomega.Equal("OutOfSync"))
	}).Should(gomega.Succeed())
	f.settle()
	f.g.Expect(f.sliceWrites.Load() - before).To(gomega.BeEquivalentTo(1))

	// Argo CD writes a tree in which a Pod never becomes Ready: the hub gets the
	// Deployment's health from it, and the children with their parents and images.
	start := time.Now()
	f.setTree("app-03", degradedTreeJSON)
	f.g.Eventually(func(g gomega.Gomega) {
		e := f.entries(g)["app-03"]
		g.Expect(e.TreeSource).To(gomega.Equal(statusv1alpha1.TreeSourceArgoCDCache))
		var deployment *statusv1alpha1.ResourceStatus
		for i := range e.Resources {
			if e.Resources[i].Name == "web-000" {
				deployment = &e.Resources[i]
			}
		}
		g.Expect(deployment).NotTo(gomega.BeNil())
		// status.resources says Healthy (persisted health), so it is kept; the tree adds
		// the images.
		g.Expect(deployment.Images).To(gomega.Equal([]string{"registry.example/fail:1"}))
		g.Expect(e.Nodes).To(gomega.HaveLen(2))
		pod := e.Nodes[0]
		g.Expect(pod.Kind).To(gomega.Equal("Pod"))
		g.Expect(pod.Health).To(gomega.Equal(&statusv1alpha1.Health{Status: "Degraded", Message: `Back-off pulling image "registry.example/fail:1"`}))
		g.Expect(pod.ParentRefs).To(gomega.Equal([]statusv1alpha1.ResourceRef{{Group: "apps", Kind: "ReplicaSet", Namespace: "guestbook", Name: "web-000-5d9c"}}))
		g.Expect(e.Nodes[1].ParentRefs[0].Kind).To(gomega.Equal("Deployment"))
	}).WithPolling(10 * time.Millisecond).Should(gomega.Succeed())
	t.Logf("a tree written to Argo CD's cache was on the hub %v later", time.Since(start).Round(time.Millisecond))

	// Argo CD 3 does not persist resource health: the tree's is shown.
	f.setStatus("app-04", status{sync: "Synced", health: "Degraded", resources: 1}.object())
	f.updateApp("app-04", func(u *unstructured.Unstructured) {
		resources, _, _ := unstructured.NestedSlice(u.Object, "status", "resources")
		delete(resources[0].(map[string]any), "health")
		u.Object["status"].(map[string]any)["resources"] = resources
	})
	f.setTree("app-04", degradedTreeJSON)
	f.g.Eventually(func(g gomega.Gomega) {
		e := f.entries(g)["app-04"]
		g.Expect(e.Resources).To(gomega.HaveLen(1))
		g.Expect(e.Resources[0].Health).To(gomega.Equal(&statusv1alpha1.Health{Status: "Degraded", Message: `Deployment "web-000" exceeded its progress deadline`}))
	}).Should(gomega.Succeed())

	// An app goes: it leaves its slice. Every app goes: no slice is left.
	f.deleteApp("app-05")
	f.g.Eventually(func(g gomega.Gomega) {
		entries := f.entries(g)
		g.Expect(entries).To(gomega.HaveLen(apps - 1))
		g.Expect(entries).NotTo(gomega.HaveKey("app-05"))
	}).Should(gomega.Succeed())
	for i := range apps {
		f.deleteApp(fmt.Sprintf("app-%02d", i))
	}
	f.g.Eventually(f.slicesOnHub).Should(gomega.BeEmpty())
	f.expectAvailableKept()
}

// TestStatusSlicesSelfHeal: a slice that someone else changes or deletes is written
// back, and a restarted agent writes nothing when nothing changed.
func TestReportMovesToSlicesWhenTheHubServesThem(t *testing.T) {
	// An agent of a hub without the status slices reports each app in a condition of the
	// ManagedClusterAddOn. Once the hub serves them (here: the upgrade grants the agent
	// its slices), the agent writes the slices, then drops the conditions: at every
	// moment of the move, each app is on the hub in one or the other.
	f := newFixture(t, fixtureOptions{hubWithoutSlices: true})
	const apps = 5
	for i := range apps {
		f.createApp(fmt.Sprintf("app-%d", i), status{sync: "Synced", health: "Healthy", revision: "abc", resources: 3}.object())
	}
	f.g.Eventually(func() int { return len(f.report().Apps) }).Should(gomega.Equal(apps))
	f.g.Expect(f.slicesOnHub()).To(gomega.BeEmpty())

	f.grantSlices()
	polls := 0
	f.g.Eventually(func(g gomega.Gomega) {
		polls++
		// The report first, then the slices: the agent writes them in the other order.
		report, err := clusterreport.Decode(f.addon().Status.Conditions)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		entries, err := clusterreport.DecodeSlices(f.slicesOnHub())
		g.Expect(err).NotTo(gomega.HaveOccurred())
		onHub := map[string]bool{}
		for _, app := range report.Apps {
			onHub[app.Name] = true
		}
		for _, e := range entries {
			onHub[e.Name] = true
		}
		if len(onHub) != apps {
			f.t.Errorf("poll %d: %d apps on the hub, in %d conditions and %d slice entries; want all %d", polls, len(onHub), len(report.Apps), len(entries), apps)
		}
		g.Expect(report.Apps).To(gomega.BeEmpty())
		g.Expect(entries).To(gomega.HaveLen(apps))
	}).WithTimeout(time.Minute).Should(gomega.Succeed())
	t.Logf("moved to the slices after %d polls", polls)
	f.g.Eventually(func() string { return f.condition(clusterreport.ConditionSummary).Message }).Should(gomega.Equal(
		"5 applications: all Synced and Healthy. The status of each application is in the ApplicationStatusSlices of this addon in this namespace."))

	// It stays there: a change reaches the slices, and no condition comes back.
	f.setStatus("app-0", status{sync: "OutOfSync", health: "Healthy", revision: "abd", resources: 3}.object())
	f.eventuallyApp("app-0", func(g gomega.Gomega, app clusterreport.App) { g.Expect(app.Sync.Revision).To(gomega.Equal("abd")) })
}

func TestReportGoesOnWhenTheSlicesCannotBeWritten(t *testing.T) {
	// The agent reports in its slices, and may no longer write them (its Role narrowed to
	// reading them): the report on the ManagedClusterAddOn still follows the apps, the
	// slices keep what they held, and they catch up once the agent may write again.
	f := newFixture(t, fixtureOptions{})
	f.createApp("web", status{sync: "Synced", health: "Healthy", revision: "abc", resources: 2}.object())
	f.eventuallyApp("web", func(g gomega.Gomega, app clusterreport.App) { g.Expect(app.Sync.Status).To(gomega.Equal("Synced")) })

	setRules := func(rules []rbacv1.PolicyRule) {
		role := &rbacv1.Role{}
		f.g.Expect(f.hub.Get(f.ctx, client.ObjectKeyFromObject(f.agentRole()), role)).To(gomega.Succeed())
		role.Rules = rules
		f.g.Expect(f.hub.Update(f.ctx, role)).To(gomega.Succeed())
	}
	readOnly := f.agentRole().Rules
	for i := range readOnly {
		if slices.Contains(readOnly[i].Resources, statusv1alpha1.Resource) {
			readOnly[i].Verbs = []string{"get", "list", "watch"}
		}
	}
	setRules(readOnly)
	f.setStatus("web", status{sync: "OutOfSync", health: "Healthy", revision: "abd", resources: 2}.object())
	f.g.Eventually(func() string { return f.condition(clusterreport.ConditionSummary).Message }).Should(
		gomega.HavePrefix("1 application: 0 Synced and Healthy, 1 not: " + f.appNS + "/web (OutOfSync/Healthy)"))
	f.g.Expect(f.entries(f.g)["web"].Sync.Status).To(gomega.Equal("Synced"), "a slice was written without the right to")
	f.g.Expect(f.report().Apps).To(gomega.HaveLen(1)) // still in the slices, and in no condition
	// The hub learns why: the slices diagnostic quotes the refusal.
	slicesDiagnostic := func() string {
		if c := f.condition(clusterreport.ConditionStatusSlices); c != nil {
			return string(c.Status) + " " + c.Reason + " " + c.Message
		}
		return ""
	}
	f.g.Eventually(slicesDiagnostic).Should(gomega.And(gomega.HavePrefix("False "+clusterreport.ReasonSlicesRefused), gomega.ContainSubstring("is forbidden")))

	setRules(f.agentRole().Rules)
	f.eventuallyApp("web", func(g gomega.Gomega, app clusterreport.App) { g.Expect(app.Sync.Status).To(gomega.Equal("OutOfSync")) })
	f.g.Eventually(slicesDiagnostic).Should(gomega.HavePrefix("True " + clusterreport.ReasonSlicesWritten))
}

func TestStatusSlicesSelfHeal(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	f.createApp("web", status{sync: "Synced", health: "Healthy", resources: 3}.object())
	f.g.Eventually(func(g gomega.Gomega) { g.Expect(f.entries(g)).To(gomega.HaveKey("web")) }).Should(gomega.Succeed())
	f.settle()
	before := f.sliceWrites.Load()

	f.stopAgent()
	f.startAgent()
	f.g.Consistently(f.sliceWrites.Load).WithTimeout(2 * time.Second).Should(gomega.Equal(before))

	s := f.slicesOnHub()[0]
	s.Apps[0].Sync.Status = "Forged"
	f.g.Expect(f.hub.Update(f.ctx, &s)).To(gomega.Succeed())
	f.g.Eventually(func(g gomega.Gomega) { g.Expect(f.entries(g)["web"].Sync.Status).To(gomega.Equal("Synced")) }).Should(gomega.Succeed())

	f.g.Expect(f.hub.Delete(f.ctx, &f.slicesOnHub()[0])).To(gomega.Succeed())
	f.g.Eventually(func(g gomega.Gomega) { g.Expect(f.entries(g)).To(gomega.HaveKey("web")) }).Should(gomega.Succeed())
	f.g.Expect(strings.HasPrefix(f.slicesOnHub()[0].Name, testAddonName+"-")).To(gomega.BeTrue())
}

// TestSpokeLocalApplicationsByIdentity: an Application made on the managed cluster is in
// the slices by its identity alone, so that the hub pulls no other Application over it
// (statusslices.Reader.FindSpokeApplication); its status changes write nothing; taken
// over by a hub Application, it is reported in full; gone, its entry goes.
func TestSpokeLocalApplicationsByIdentity(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	f.createApp("web", status{sync: "Synced", health: "Healthy", resources: 3}.object())
	f.createApp("hand-made", status{sync: "Synced", health: "Healthy", resources: 3,
		conditions: [][2]string{{"SyncError", "a secret of the cluster's team"}}}.object(), notFromHub)
	f.g.Eventually(func(g gomega.Gomega) { g.Expect(f.entries(g)).To(gomega.HaveKey("hand-made")) }).Should(gomega.Succeed())
	local := f.entries(f.g)["hand-made"]
	f.g.Expect(clusterreport.IsSpokeLocalEntry(local)).To(gomega.BeTrue())
	f.g.Expect(local).To(gomega.Equal(statusv1alpha1.AppStatus{Namespace: f.appNS, Name: "hand-made", ObservedAt: local.ObservedAt}),
		"nothing but its identity leaves the cluster")
	f.g.Expect(clusterreport.IsSpokeLocalEntry(f.entries(f.g)["web"])).To(gomega.BeFalse())
	f.settle()

	before := f.sliceWrites.Load()
	f.setStatus("hand-made", status{sync: "OutOfSync", health: "Degraded"}.object())
	f.g.Consistently(f.sliceWrites.Load).WithTimeout(2 * time.Second).Should(gomega.Equal(before))

	// A restarted agent finds the entry on the hub as it would write it.
	f.stopAgent()
	f.startAgent()
	f.g.Consistently(f.sliceWrites.Load).WithTimeout(2 * time.Second).Should(gomega.Equal(before))

	f.updateApp("hand-made", fromApplicationSet("argocd/fleet"))
	f.g.Eventually(func(g gomega.Gomega) {
		e := f.entries(g)["hand-made"]
		g.Expect(clusterreport.IsSpokeLocalEntry(e)).To(gomega.BeFalse())
		g.Expect(e.Sync.Status).To(gomega.Equal("OutOfSync"))
	}).Should(gomega.Succeed())

	f.createApp("hand-made-2", status{sync: "Synced", health: "Healthy"}.object(), notFromHub)
	f.g.Eventually(func(g gomega.Gomega) { g.Expect(f.entries(g)).To(gomega.HaveKey("hand-made-2")) }).Should(gomega.Succeed())
	f.deleteApp("hand-made-2")
	f.g.Eventually(func(g gomega.Gomega) { g.Expect(f.entries(g)).NotTo(gomega.HaveKey("hand-made-2")) }).Should(gomega.Succeed())
}

// TestSlicesCarryTheDiffsOfOutOfSyncResources: an app with an OutOfSync resource reaches
// the hub with the states of Argo CD's diff of that resource, read from the managed
// resources that Argo CD cached next to its tree (the normalized live state as the live
// one); before Argo CD cached them, the entry counts the resource as omitted and says
// why.
func TestSlicesCarryTheDiffsOfOutOfSyncResources(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	f.createApp("drifted", status{sync: "OutOfSync", health: "Healthy", resources: 1}.object())
	f.g.Eventually(func(g gomega.Gomega) {
		e := f.entries(g)["drifted"]
		g.Expect(e.Diffs).To(gomega.BeEmpty())
		g.Expect(e.DiffsOmitted).To(gomega.BeEquivalentTo(1))
		g.Expect(e.DiffsMessage).To(gomega.ContainSubstring("no resource tree"))
	}).Should(gomega.Succeed())

	instance := argocdcache.InstanceName(f.opts.ArgoCDNamespace, f.appNS, "drifted")
	live, target := `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web-000"},"spec":{"replicas":3}}`, `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web-000"},"spec":{"replicas":1}}`
	quoted := func(s string) string { return strings.ReplaceAll(s, `"`, `\"`) }
	managed := `[{"group":"apps","kind":"Deployment","namespace":"guestbook","name":"web-000","targetState":"` + quoted(target) +
		`","liveState":"` + quoted(live) + `","normalizedLiveState":"` + quoted(live) + `","predictedLiveState":"` + quoted(target) + `","modified":true}]`
	f.g.Expect(f.redis.Set(argocdcache.StoredKey(argocdcache.ManagedResourcesKey(instance), argocdcache.CompressionGzip), gzipped(t, managed))).To(gomega.Succeed())
	f.setTree("drifted", degradedTreeJSON)
	f.g.Eventually(func(g gomega.Gomega) {
		e := f.entries(g)["drifted"]
		g.Expect(e.Diffs).To(gomega.Equal([]statusv1alpha1.ResourceDiff{{Group: "apps", Kind: "Deployment", Namespace: "guestbook", Name: "web-000",
			LiveState: live, TargetState: target, PredictedLiveState: target}}))
		g.Expect(e.DiffsOmitted).To(gomega.BeZero())
		g.Expect(e.DiffsMessage).To(gomega.BeEmpty())
	}).Should(gomega.Succeed())
}

// TestSlicesHoldBackARollout: while apps pass through states that their cluster leaves on
// its own (an automatic sync running, health Progressing), the slices keep the hub's
// entries, for at most the settle wait from the first change held, and then write once;
// an error, a sync someone waits for, and a settled state each go at once.
func TestSlicesHoldBackARollout(t *testing.T) {
	const wait = 4 * time.Second
	f := newFixture(t, fixtureOptions{adjust: func(_ *Options, tn *tuning) { tn.settleWait = wait }})
	const apps, revision = 4, "8f2c1e5d9a7b6c4d3e2f1a0b9c8d7e6f5a4b3c2d"
	name := func(i int) string { return fmt.Sprintf("rollout-%d", i) }
	for i := range apps {
		f.createApp(name(i), status{sync: "OutOfSync", health: "Missing", revision: revision}.object(), syncsAutomatically)
	}
	f.g.Eventually(func(g gomega.Gomega) { g.Expect(f.entries(g)).To(gomega.HaveLen(apps)) }).Should(gomega.Succeed())
	f.settle()
	before := f.sliceWrites.Load()

	// Three steps of an automatic sync, each on every app, each of which the agent
	// would otherwise write.
	steps := []status{
		{sync: "OutOfSync", health: "Missing", revision: revision, phase: "Running", autoSync: true},
		{sync: "OutOfSync", health: "Progressing", revision: revision, phase: "Running", autoSync: true, resources: 1},
		{sync: "Synced", health: "Progressing", revision: revision, phase: "Succeeded", autoSync: true, resources: 1},
	}
	start := time.Now()
	for _, s := range steps {
		for i := range apps {
			f.setStatus(name(i), s.object())
		}
		time.Sleep(2 * f.opts.PublishDelay)
	}
	stepped := time.Since(start)
	f.g.Eventually(func(g gomega.Gomega) {
		for _, e := range f.entries(g) {
			g.Expect(e.Operation).NotTo(gomega.BeNil())
			g.Expect(e.Operation.Phase).To(gomega.Equal("Succeeded"))
		}
	}).WithTimeout(2 * wait).Should(gomega.Succeed())
	shown := time.Since(start)
	writes := f.sliceWrites.Load() - before
	t.Logf("%d steps of %d apps in %v: %d slice writes, the last step on the hub after %v", len(steps), apps,
		stepped.Round(time.Millisecond), writes, shown.Round(time.Millisecond))
	// One write when the wait ended, and one more for each wait the steps outlasted.
	f.g.Expect(writes).To(gomega.BeNumerically("<=", 1+int64(stepped/wait)), "slice writes while the rollout passed")
	f.g.Expect(shown).To(gomega.BeNumerically(">=", wait-f.opts.PublishDelay), "the passing states were not held back")

	// Each of these goes at once, though the apps stay in passing states: it must not wait
	// for a hold that a passing change began just before it.
	atOnce := []struct {
		what   string
		status status
		shows  func(e statusv1alpha1.AppStatus) bool
	}{
		{"an error", status{sync: "Synced", health: "Progressing", revision: revision, phase: "Succeeded", autoSync: true, resources: 1,
			conditions: [][2]string{{"SyncError", "deployments.apps is forbidden"}}},
			func(e statusv1alpha1.AppStatus) bool { return len(e.Conditions) == 1 }},
		{"a sync someone waits for", status{sync: "OutOfSync", health: "Progressing", revision: revision, phase: "Running", resources: 1},
			func(e statusv1alpha1.AppStatus) bool { return e.Operation != nil && e.Operation.Phase == "Running" }},
		{"a settled state", status{sync: "Synced", health: "Healthy", revision: revision, phase: "Succeeded", autoSync: true, resources: 1},
			func(e statusv1alpha1.AppStatus) bool { return e.Health != nil && e.Health.Status == "Healthy" }},
	}
	for i, c := range atOnce {
		f.setStatus(name(3), status{sync: "OutOfSync", health: "Progressing", revision: revision, phase: "Running", autoSync: true, resources: i + 2}.object())
		time.Sleep(2 * f.opts.PublishDelay)
		set := time.Now()
		f.setStatus(name(i), c.status.object())
		f.g.Eventually(func(g gomega.Gomega) {
			g.Expect(c.shows(f.entries(g)[name(i)])).To(gomega.BeTrue())
		}).WithTimeout(2*wait).Should(gomega.Succeed(), c.what)
		took := time.Since(set)
		t.Logf("%s on the hub after %v", c.what, took.Round(time.Millisecond))
		f.g.Expect(took).To(gomega.BeNumerically("<", wait-f.opts.PublishDelay), "%s waited for the hold", c.what)
	}
}
