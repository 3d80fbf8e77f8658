package spoke

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/clusterreport"
)

// forbiddenMessage is the error Argo CD reports when its application-controller lacks
// RBAC on the managed cluster.
const forbiddenMessage = `Failed sync attempt: one or more objects failed to apply, reason: services is forbidden: User "system:serviceaccount:argocd:argocd-application-controller" cannot create resource "services" in API group "" in the namespace "guestbook"`

// expectAvailableKept checks that the framework's condition is as the framework wrote it.
func (f *fixture) expectAvailableKept() {
	f.t.Helper()
	available := f.condition("Available")
	f.g.Expect(available).NotTo(gomega.BeNil(), "the framework's Available condition was removed")
	f.g.Expect(available.Message).To(gomega.Equal("addon is available"))
	f.g.Expect(available.LastTransitionTime.Time).To(gomega.BeTemporally("==", time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)))
}

func TestPublishUpdateDelete(t *testing.T) {
	// On a hub that serves the status slices, the apps are there and the report on the
	// ManagedClusterAddOn only sums them up; on a hub older than the slices, each app has
	// a condition of that report.
	for _, hubWithoutSlices := range []bool{false, true} {
		t.Run(fmt.Sprintf("hubWithoutSlices=%v", hubWithoutSlices), func(t *testing.T) {
			testPublishUpdateDelete(t, newFixture(t, fixtureOptions{hubWithoutSlices: hubWithoutSlices}))
		})
	}
}

func testPublishUpdateDelete(t *testing.T, f *fixture) {
	failing := status{
		sync: "OutOfSync", health: "Missing", revision: "abc123", phase: "Failed", opMessage: "one or more objects failed to apply",
		conditions: [][2]string{{"SyncError", forbiddenMessage}, {"OrphanedResourceWarning", "1 orphaned resource"}}, resources: 2,
	}
	f.createApp("guestbook", failing.object(), fromApplicationSet("openshift-gitops/guestbook-allclusters-app-set"))
	f.createApp("standalone", status{sync: "Synced", health: "Healthy", revision: "def456", phase: "Succeeded", resources: 1}.object())
	f.createApp("local", status{sync: "Synced", health: "Healthy"}.object(), notFromHub)

	f.g.Eventually(func(g gomega.Gomega) {
		report := f.report()
		var keys []string
		for _, app := range report.Apps {
			keys = append(keys, app.Key())
		}
		g.Expect(keys).To(gomega.Equal([]string{f.appNS + "/guestbook", f.appNS + "/standalone"}))
	}).Should(gomega.Succeed())

	app, _ := f.reportedApp("guestbook")
	f.g.Expect(app.ApplicationSet).To(gomega.Equal("openshift-gitops/guestbook-allclusters-app-set"))
	f.g.Expect(app.ManifestWork).To(gomega.Equal(workName("guestbook")))
	f.g.Expect(app.Sync).To(gomega.Equal(argoapp.SyncStatus{Status: "OutOfSync", Revision: "abc123"}))
	f.g.Expect(app.Health.Status).To(gomega.Equal("Missing"))
	f.g.Expect(app.Operation).To(gomega.Equal(argoapp.OperationState{Phase: "Failed", StartedAt: "2026-01-01T00:00:00Z", Message: "one or more objects failed to apply"}))
	f.g.Expect(app.Resources).To(gomega.HaveLen(2))
	f.g.Expect(app.Resources[0]).To(gomega.Equal(argoapp.ResourceStatus{
		Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "guestbook", Name: "web-000",
		Status: "OutOfSync", Health: argoapp.HealthStatus{Status: "Missing"},
	}))
	f.g.Expect(app.Conditions).To(gomega.Equal([]argoapp.Condition{
		{Type: "SyncError", Message: forbiddenMessage},
		{Type: "OrphanedResourceWarning", Message: "1 orphaned resource"},
	}))
	f.g.Expect(app.ObservedAt).To(gomega.BeTemporally("~", time.Now(), time.Minute))
	standalone, _ := f.reportedApp("standalone")
	f.g.Expect(standalone.ManifestWork).To(gomega.Equal(workName("standalone")))
	f.g.Expect(standalone.ApplicationSet).To(gomega.BeEmpty())

	// The summary is on the ManagedClusterAddOn, which the agent writes after the slices
	// that reportedApp reads.
	f.g.Eventually(func() string { return f.condition(clusterreport.ConditionSummary).Message }).Should(
		gomega.HavePrefix("2 applications: 1 Synced and Healthy, 1 not: " + f.appNS + "/guestbook (OutOfSync/Missing)"))
	condition := f.condition(clusterreport.AppConditionType(f.appNS, "guestbook"))
	summary := f.condition(clusterreport.ConditionSummary)
	if f.inSlices.Load() {
		f.g.Expect(condition).To(gomega.BeNil())
		f.g.Expect(summary.Message).To(gomega.HaveSuffix("The status of each application is in the ApplicationStatusSlices of this addon in this namespace."))
	} else {
		f.g.Expect(condition.Status).To(gomega.Equal(metav1.ConditionFalse))
		f.g.Expect(condition.Reason).To(gomega.Equal("OutOfSync_Missing"))
	}
	f.g.Expect(f.condition(clusterreport.ConditionApplicationCRD).Status).To(gomega.Equal(metav1.ConditionTrue))
	// The scope: the namespaces the agent watches, for the hub to compare.
	f.g.Expect(f.report().Scope).To(gomega.Equal(&clusterreport.Scope{WatchNamespaces: []string{f.appNS}}))
	f.expectAvailableKept()

	// The agent owns its conditions, and only those.
	for _, entry := range f.addon().ManagedFields {
		if entry.Manager == FieldManager {
			f.g.Expect(entry.Operation).To(gomega.Equal(metav1.ManagedFieldsOperationApply))
			f.g.Expect(entry.Subresource).To(gomega.Equal("status"))
			f.g.Expect(string(entry.FieldsV1.Raw)).NotTo(gomega.ContainSubstring(`"k:{\"type\":\"Available\"}"`))
		}
	}

	// Update: the app recovers.
	f.setStatus("guestbook", status{sync: "Synced", health: "Healthy", revision: "abc124", phase: "Succeeded", resources: 2}.object())
	f.eventuallyApp("guestbook", func(g gomega.Gomega, app clusterreport.App) {
		g.Expect(app.SyncedAndHealthy()).To(gomega.BeTrue())
		g.Expect(app.Sync.Revision).To(gomega.Equal("abc124"))
		g.Expect(app.Conditions).To(gomega.BeEmpty())
	})
	if !f.inSlices.Load() {
		f.g.Expect(f.condition(clusterreport.AppConditionType(f.appNS, "guestbook")).Status).To(gomega.Equal(metav1.ConditionTrue))
	}

	// Delete: the app goes from the report, and its condition with it.
	f.deleteApp("standalone")
	f.g.Eventually(func() bool {
		_, reported := f.reportedApp("standalone")
		return reported || f.condition(clusterreport.AppConditionType(f.appNS, "standalone")) != nil
	}).Should(gomega.BeFalse())
	// The summary follows: with the slices, it is written after them.
	f.g.Eventually(func() string { return f.condition(clusterreport.ConditionSummary).Message }).Should(
		gomega.HavePrefix("1 application: all Synced and Healthy."))
	f.expectAvailableKept()

	// Someone else rewrites the conditions without the agent's: the agent restores them.
	f.g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		addon := f.addon()
		addon.Status.Conditions = []metav1.Condition{*f.condition("Available")}
		return f.hub.Status().Update(f.ctx, addon, client.FieldOwner(frameworkManager))
	})).To(gomega.Succeed())
	f.eventuallyApp("guestbook", func(g gomega.Gomega, app clusterreport.App) {
		g.Expect(app.SyncedAndHealthy()).To(gomega.BeTrue())
	})
	f.g.Eventually(func() *metav1.Condition { return f.condition(clusterreport.ConditionSummary) }).ShouldNot(gomega.BeNil())

	// The framework updates its condition while the agent runs: both stay.
	f.g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		addon := f.addon()
		for i := range addon.Status.Conditions {
			if addon.Status.Conditions[i].Type == "Available" {
				addon.Status.Conditions[i].Message = "addon is still available"
			}
		}
		return f.hub.Status().Update(f.ctx, addon, client.FieldOwner(frameworkManager))
	})).To(gomega.Succeed())
	f.createApp("late", status{sync: "Synced", health: "Healthy"}.object())
	f.eventuallyApp("late", func(gomega.Gomega, clusterreport.App) {})
	f.g.Expect(f.condition("Available").Message).To(gomega.Equal("addon is still available"))
}

func TestMultiSource(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	f.createApp("multi", status{sync: "Synced", health: "Healthy", revisions: []string{"8f2c1e5", "1.2.3"}, resources: 1}.object(), multiSource)
	f.eventuallyApp("multi", func(g gomega.Gomega, app clusterreport.App) {
		g.Expect(app.Sync.Revisions).To(gomega.Equal([]string{"8f2c1e5", "1.2.3"}))
		g.Expect(app.Sync.Revision).To(gomega.BeEmpty())
	})
	f.setStatus("multi", status{sync: "Synced", health: "Healthy", revisions: []string{"9a0b1c2", "1.2.4"}}.object())
	f.eventuallyApp("multi", func(g gomega.Gomega, app clusterreport.App) {
		g.Expect(app.Sync.Revisions).To(gomega.Equal([]string{"9a0b1c2", "1.2.4"}))
	})
}

func TestCoalescing(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	const apps, changesPerApp = 8, 5
	for i := range apps {
		f.createApp(fmt.Sprintf("busy-%d", i), status{sync: "Synced", health: "Healthy", revision: "start"}.object())
	}
	f.g.Eventually(func() int { return len(f.report().Apps) }).Should(gomega.Equal(apps))
	before := f.settle()

	// A burst: every app changes several times, concurrently.
	start := time.Now()
	var wg sync.WaitGroup
	for i := range apps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range changesPerApp {
				f.setStatus(fmt.Sprintf("busy-%d", i), status{sync: "Synced", health: "Healthy", revision: fmt.Sprintf("rev-%d", j)}.object())
			}
		}()
	}
	wg.Wait()
	lastChange := time.Now()
	f.g.Eventually(func(g gomega.Gomega) {
		for _, app := range f.report().Apps {
			g.Expect(app.Sync.Revision).To(gomega.Equal(fmt.Sprintf("rev-%d", changesPerApp-1)))
		}
	}).Should(gomega.Succeed())
	latency := time.Since(lastChange)
	writes := f.settle() - before
	changes := apps * changesPerApp
	t.Logf("%d changes in %v: %d writes; the last change reached the hub within %v",
		changes, lastChange.Sub(start).Round(time.Millisecond), writes, latency.Round(time.Millisecond))
	// At most one write per coalescing window, and far fewer than changes.
	f.g.Expect(writes).To(gomega.BeNumerically("<=", int64(lastChange.Sub(start)/f.opts.PublishDelay)+2))
	f.g.Expect(writes).To(gomega.BeNumerically("<", changes/2))
	f.g.Expect(latency).To(gomega.BeNumerically("<", 3*time.Second))
}

func TestNoWritesWhileNothingChanges(t *testing.T) {
	f := newFixture(t, fixtureOptions{adjust: func(o *Options, tn *tuning) {
		o.ResyncPeriod = 500 * time.Millisecond // full resyncs must not write either
	}})
	now := time.Now()
	f.createApp("steady", status{sync: "Synced", health: "Healthy", revision: "abc", resources: 3, reconciledAt: now}.object())
	f.createApp("other", status{sync: "OutOfSync", health: "Degraded", conditions: [][2]string{{"ComparisonError", "boom"}}}.object())
	f.createApp("local", status{sync: "Synced", health: "Healthy"}.object(), notFromHub)
	f.eventuallyApp("other", func(gomega.Gomega, clusterreport.App) {})
	f.g.Eventually(func(g gomega.Gomega) { g.Expect(f.entries(g)).To(gomega.HaveLen(3)) }).Should(gomega.Succeed())
	before := f.settle()
	published := f.addon().Status.Conditions
	slicesBefore := f.sliceWrites.Load()
	f.g.Expect(slicesBefore).To(gomega.BeNumerically(">", 0), "the status slices were never written")

	// Changes that do not change the report: the status of an app not from the hub, Argo
	// CD's next reconcile, an annotation.
	f.setStatus("local", status{sync: "OutOfSync", health: "Degraded"}.object())
	f.setStatus("steady", status{sync: "Synced", health: "Healthy", revision: "abc", resources: 3, reconciledAt: now.Add(time.Second)}.object())
	f.updateApp("steady", func(u *unstructured.Unstructured) { u.SetAnnotations(map[string]string{"touched": "yes"}) })
	f.g.Consistently(f.statusWrites.Load).WithTimeout(3 * time.Second).Should(gomega.Equal(before))

	// A restarted agent finds its report on the hub, and writes nothing either.
	f.stopAgent()
	f.startAgent()
	f.g.Consistently(f.statusWrites.Load).WithTimeout(3 * time.Second).Should(gomega.Equal(before))
	f.g.Expect(ownConditions(f.addon().Status.Conditions)).To(gomega.Equal(ownConditions(published)))
	f.g.Expect(f.sliceWrites.Load()).To(gomega.Equal(slicesBefore), "the status slices were rewritten while nothing changed")

	// And a real change is still published.
	f.setStatus("steady", status{sync: "OutOfSync", health: "Healthy", revision: "abd"}.object())
	f.eventuallyApp("steady", func(g gomega.Gomega, app clusterreport.App) { g.Expect(app.Sync.Revision).To(gomega.Equal("abd")) })
}

func TestSizeBudget(t *testing.T) {
	// The budget of the report on the ManagedClusterAddOn, which carries the apps on a
	// hub without the status slices.
	f := newFixture(t, fixtureOptions{hubWithoutSlices: true})
	const healthy, failing, resources = 40, 2, 100
	for i := range healthy {
		f.createApp(fmt.Sprintf("healthy-%02d", i), status{sync: "Synced", health: "Healthy", revision: "8f2c1e5d9a7b6c4d3e2f1a0b9c8d7e6f5a4b3c2d", phase: "Succeeded", resources: resources}.object(),
			fromApplicationSet("openshift-gitops/fleet"))
	}
	for i := range failing {
		f.createApp(fmt.Sprintf("failing-%d", i), status{
			sync: "OutOfSync", health: "Degraded", phase: "Failed", opMessage: forbiddenMessage, resources: resources,
			conditions: [][2]string{{"SyncError", forbiddenMessage}, {"SharedResourceWarning", "shared"}},
		}.object())
	}
	f.g.Eventually(func() int { return len(f.report().Apps) }).Should(gomega.Equal(healthy + failing))
	f.settle()

	addon := f.addon()
	report := f.report()
	bytes := 0
	for _, c := range ownConditions(addon.Status.Conditions) {
		bytes += clusterreport.ConditionSize(c)
	}
	raw, err := json.Marshal(addon)
	f.g.Expect(err).NotTo(gomega.HaveOccurred())
	degraded := 0
	for _, app := range report.Apps {
		if strings.HasPrefix(app.Name, "failing-") {
			f.g.Expect(app.Resources).To(gomega.HaveLen(resources), "a failing app lost resources")
			f.g.Expect(app.Conditions).To(gomega.ContainElement(argoapp.Condition{Type: "SyncError", Message: forbiddenMessage}))
			continue
		}
		f.g.Expect(app.SyncedAndHealthy()).To(gomega.BeTrue())
		if len(app.Resources) == 0 {
			f.g.Expect(app.ResourcesOmitted).To(gomega.Equal(resources))
			degraded++
		}
	}
	t.Logf("%d apps of %d resources: the agent's conditions take %d bytes (budget %d), the ManagedClusterAddOn %d bytes; %d healthy apps lost their resource list",
		healthy+failing, resources, bytes, clusterreport.MaxBytes, len(raw), degraded)
	f.g.Expect(bytes).To(gomega.BeNumerically("<=", clusterreport.MaxBytes))
	f.g.Expect(degraded).To(gomega.BeNumerically(">", 0))
	f.g.Expect(f.condition(clusterreport.ConditionSummary).Message).To(gomega.ContainSubstring(
		fmt.Sprintf("To fit the report in 256 KiB, the agent shortened the resource lists of %d applications", degraded)))
	f.g.Eventually(func() int { return len(f.events(EventReasonReportTruncated)) }).Should(gomega.Equal(1))
	f.expectAvailableKept()
}

func TestHubLossAndReconnect(t *testing.T) {
	f := newFixture(t, fixtureOptions{proxyHub: true})
	f.createApp("web", status{sync: "Synced", health: "Healthy", revision: "before"}.object())
	f.createApp("doomed", status{sync: "Synced", health: "Healthy"}.object())
	f.eventuallyApp("doomed", func(gomega.Gomega, clusterreport.App) {})
	f.settle()

	f.hubProxy.cut()
	cutAt := time.Now()
	attempts := f.publishAttempts.Load()
	f.setStatus("web", status{sync: "OutOfSync", health: "Progressing", revision: "during"}.object())
	f.deleteApp("doomed")
	// The agent keeps trying, with backoff.
	f.g.Eventually(f.publishAttempts.Load).Should(gomega.BeNumerically(">=", attempts+4))
	tries, elapsed := f.publishAttempts.Load()-attempts, time.Since(cutAt)
	web, _ := f.reportedApp("web")
	f.g.Expect(web.Sync.Revision).To(gomega.Equal("before"))

	f.hubProxy.restore()
	restoredAt := time.Now()
	f.eventuallyApp("web", func(g gomega.Gomega, app clusterreport.App) {
		g.Expect(app.Sync.Revision).To(gomega.Equal("during"))
	})
	f.g.Eventually(func() bool { _, ok := f.reportedApp("doomed"); return ok }).Should(gomega.BeFalse())
	t.Logf("hub cut: %d attempts in %v; the report converged %v after the hub came back",
		tries, elapsed.Round(time.Millisecond), time.Since(restoredAt).Round(time.Millisecond))
	// Backoff: 100ms, 200ms, 400ms... four attempts take at least 700ms.
	f.g.Expect(elapsed).To(gomega.BeNumerically(">=", 500*time.Millisecond))
	f.expectAvailableKept()
}

func TestSpokeLossAndReconnect(t *testing.T) {
	f := newFixture(t, fixtureOptions{proxySpoke: true})
	f.createApp("web", status{sync: "Synced", health: "Healthy", revision: "before"}.object())
	f.eventuallyApp("web", func(gomega.Gomega, clusterreport.App) {})
	before := f.settle()

	f.spokeProxy.cut()
	f.setStatus("web", status{sync: "Synced", health: "Healthy", revision: "during"}.object())
	// Losing the spoke does not empty the report.
	f.g.Consistently(f.statusWrites.Load).Should(gomega.Equal(before))
	web, _ := f.reportedApp("web")
	f.g.Expect(web.Sync.Revision).To(gomega.Equal("before"))

	f.spokeProxy.restore()
	f.eventuallyApp("web", func(g gomega.Gomega, app clusterreport.App) {
		g.Expect(app.Sync.Revision).To(gomega.Equal("during"))
	})
}

func TestDiagnosticRBAC(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	f.createApp("denied", status{
		sync: "OutOfSync", health: "Missing", phase: "Failed", opMessage: forbiddenMessage,
		conditions: [][2]string{{"SyncError", forbiddenMessage}},
	}.object())
	f.createApp("fine", status{sync: "Synced", health: "Healthy"}.object())
	f.g.Eventually(func(g gomega.Gomega) {
		c := findCondition(f.addon().Status.Conditions, clusterreport.ConditionApplicationControllerRBAC)
		g.Expect(c).NotTo(gomega.BeNil())
		g.Expect(c.Status).To(gomega.Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(gomega.Equal(clusterreport.ReasonForbidden))
		g.Expect(c.Message).To(gomega.HavePrefix("1 of 2 Applications fail with RBAC errors"))
		g.Expect(c.Message).To(gomega.ContainSubstring(f.appNS + "/denied: Failed sync attempt"))
		g.Expect(c.Message).To(gomega.ContainSubstring("is forbidden"))
	}).Should(gomega.Succeed())
	f.g.Eventually(func() int { return len(f.events(clusterreport.ReasonForbidden)) }).Should(gomega.Equal(1))
	event := f.events(clusterreport.ReasonForbidden)[0]
	f.g.Expect(event.InvolvedObject.Name).To(gomega.Equal(testAddonName))
	f.g.Expect(event.Type).To(gomega.Equal("Warning"))

	f.setStatus("denied", status{sync: "Synced", health: "Healthy", phase: "Succeeded"}.object())
	f.g.Eventually(func() metav1.ConditionStatus {
		return f.condition(clusterreport.ConditionApplicationControllerRBAC).Status
	}).Should(gomega.Equal(metav1.ConditionTrue))
	f.g.Eventually(func() int { return len(f.events(clusterreport.ReasonNoForbidden)) }).Should(gomega.Equal(1))
}

func TestDiagnosticControllerAlive(t *testing.T) {
	f := newFixture(t, fixtureOptions{adjust: func(_ *Options, tn *tuning) {
		tn.controllerStaleAfter = 3 * time.Second
	}})
	controller := func() *metav1.Condition { return f.condition(clusterreport.ConditionApplicationController) }
	f.createApp("web", status{sync: "Synced", health: "Healthy", reconciledAt: time.Now()}.object())
	f.g.Eventually(func(g gomega.Gomega) {
		c := controller()
		g.Expect(c).NotTo(gomega.BeNil())
		g.Expect(c.Status).To(gomega.Equal(metav1.ConditionTrue))
		g.Expect(c.Message).To(gomega.Equal("1 of 1 Applications were reconciled in the last 3s."))
	}).Should(gomega.Succeed())

	// Argo CD stops reconciling: the agent notices with time alone.
	f.g.Eventually(func() string { return controller().Reason }).Should(gomega.Equal(clusterreport.ReasonNotReconciling))
	f.g.Expect(controller().Status).To(gomega.Equal(metav1.ConditionFalse))
	f.g.Eventually(func() int { return len(f.events(clusterreport.ReasonNotReconciling)) }).Should(gomega.Equal(1))

	f.setStatus("web", status{sync: "Synced", health: "Healthy", reconciledAt: time.Now()}.object())
	f.g.Eventually(func() metav1.ConditionStatus { return controller().Status }).Should(gomega.Equal(metav1.ConditionTrue))
}

func TestDiagnosticApplicationCRD(t *testing.T) {
	bare, crd := startBareSpoke(t)
	f := newFixture(t, fixtureOptions{spoke: bare})
	f.g.Eventually(func(g gomega.Gomega) {
		c := findCondition(f.addon().Status.Conditions, clusterreport.ConditionApplicationCRD)
		g.Expect(c).NotTo(gomega.BeNil())
		g.Expect(c.Status).To(gomega.Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(gomega.Equal(clusterreport.ReasonCRDNotFound))
	}).Should(gomega.Succeed())
	f.g.Expect(f.condition(clusterreport.ConditionApplicationController).Status).To(gomega.Equal(metav1.ConditionUnknown))
	f.g.Expect(f.condition(clusterreport.ConditionSummary).Reason).To(gomega.Equal(clusterreport.ReasonNoApplications))
	f.g.Eventually(func() int { return len(f.events(clusterreport.ReasonCRDNotFound)) }).Should(gomega.Equal(1))
	f.expectAvailableKept()

	// Argo CD gets installed: the agent starts reporting.
	_, err := envtest.InstallCRDs(bare, envtest.CRDInstallOptions{Paths: []string{crd}, ErrorIfPathMissing: true})
	f.g.Expect(err).NotTo(gomega.HaveOccurred())
	f.createApp("web", status{sync: "Synced", health: "Healthy"}.object())
	f.eventuallyApp("web", func(gomega.Gomega, clusterreport.App) {})
	f.g.Eventually(func() metav1.ConditionStatus { return f.condition(clusterreport.ConditionApplicationCRD).Status }).Should(
		gomega.Equal(metav1.ConditionTrue))
}

func TestRunWithKubeconfigs(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	f.stopAgent() // this test runs the agent through Run

	dir := t.TempDir()
	hubKubeconfig := writeKubeconfig(t, filepath.Join(dir, "hub.kubeconfig"), f.hubConfig, f.agentUser())
	spokeKubeconfig := writeKubeconfig(t, filepath.Join(dir, "spoke.kubeconfig"), f.spokeConfig, "")
	f.createApp("web", status{sync: "Synced", health: "Healthy"}.object())

	ctx, cancel := context.WithCancel(f.ctx)
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{
			HubKubeconfig: hubKubeconfig, SpokeKubeconfig: spokeKubeconfig,
			ClusterName: f.cluster, AddonNamespace: f.addonNS, WatchNamespaces: []string{f.appNS},
		})
	}()
	f.eventuallyApp("web", func(gomega.Gomega, clusterreport.App) {})
	lease := &coordinationv1.Lease{}
	f.g.Eventually(func() error {
		return f.spoke.Get(f.ctx, types.NamespacedName{Namespace: f.addonNS, Name: testAddonName}, lease)
	}).Should(gomega.Succeed())
	f.g.Expect(lease.Spec.RenewTime).NotTo(gomega.BeNil())

	cancel()
	select {
	case err := <-done:
		f.g.Expect(err).NotTo(gomega.HaveOccurred())
	case <-time.After(15 * time.Second):
		t.Fatal("Run did not return within 15s of its context")
	}

	err := Run(f.ctx, Options{HubKubeconfig: hubKubeconfig, ClusterName: "Not_A_Name"})
	f.g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring("cluster name")))
	err = Run(f.ctx, Options{HubKubeconfig: filepath.Join(dir, "missing"), ClusterName: "c1", SpokeKubeconfig: spokeKubeconfig})
	f.g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring("hub kubeconfig")))
}

// writeKubeconfig writes a kubeconfig for a rest config, impersonating user when set.
func writeKubeconfig(t *testing.T, path string, cfg *rest.Config, user string) string {
	t.Helper()
	kubeconfig := clientcmdapi.NewConfig()
	kubeconfig.Clusters["c"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kubeconfig.AuthInfos["u"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Impersonate: user}
	if user != "" {
		kubeconfig.AuthInfos["u"].ImpersonateGroups = []string{"system:authenticated"}
	}
	kubeconfig.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	kubeconfig.CurrentContext = "c"
	if err := clientcmd.WriteToFile(*kubeconfig, path); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
	return path
}
