package spoke

import (
	"fmt"
	"testing"
	"time"

	"github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/clusterreport"
)

const (
	// longHubCut is how long TestReportConvergesAfterLongHubCut keeps the hub from the
	// agent: long enough that every backoff involved (the agent's publish retries,
	// client-go's reflector) has grown to its cap.
	longHubCut = 60 * time.Second
	// reconnectConvergence is what the agent promises: once the hub is reachable again,
	// the report on the hub matches the managed cluster within this long.
	reconnectConvergence = 5 * time.Second
)

// TestReportConvergesAfterLongHubCut cuts the agent from the hub for longHubCut while
// the managed cluster's Applications change (sync, health, revision, resources, an app
// created, one deleted), and checks that the report on the hub stays as it was during
// the cut and matches the managed cluster within reconnectConvergence of the hub
// coming back. The agent runs with its production backoff and request timeout.
func TestReportConvergesAfterLongHubCut(t *testing.T) {
	f := newFixture(t, fixtureOptions{proxyHub: true, adjust: func(_ *Options, tn *tuning) {
		production := defaultTuning()
		tn.retryInitial, tn.retryMax, tn.reconnectInterval = production.retryInitial, production.retryMax, production.reconnectInterval
		tn.requestTimeout = production.requestTimeout
	}})
	f.createApp("web", status{sync: "Synced", health: "Healthy", revision: "r1", phase: "Succeeded", resources: 2}.object())
	f.createApp("api", status{sync: "Synced", health: "Healthy", revision: "r1", resources: 1}.object(), fromApplicationSet("openshift-gitops/fleet"))
	f.createApp("worker", status{sync: "OutOfSync", health: "Progressing", revision: "r1"}.object())
	f.createApp("doomed", status{sync: "Synced", health: "Healthy", revision: "r1"}.object())
	f.g.Eventually(f.hubFingerprints).Should(gomega.Equal(f.localFingerprints()))
	f.settle()
	before := f.hubFingerprints()

	f.hubProxy.cut()
	cutAt := time.Now()
	attempts := f.publishAttempts.Load()
	f.setStatus("web", status{sync: "OutOfSync", health: "Degraded", revision: "r2", phase: "Failed", opMessage: "one or more objects failed to apply",
		conditions: [][2]string{{"SyncError", forbiddenMessage}}, resources: 3}.object())
	f.setStatus("api", status{sync: "Synced", health: "Healthy", revision: "r2", resources: 4}.object())
	f.deleteApp("doomed")
	f.createApp("newcomer", status{sync: "Synced", health: "Progressing", revision: "r2", resources: 1}.object())
	// The hub keeps the old report for the whole cut: only the reconnect can fix it. A
	// last change lands late in the cut, when every backoff is at its cap.
	f.g.Consistently(f.hubFingerprints).WithTimeout(longHubCut / 2).WithPolling(time.Second).Should(gomega.Equal(before))
	f.setStatus("worker", status{sync: "Synced", health: "Healthy", revision: "r2", phase: "Succeeded"}.object())
	f.g.Consistently(f.hubFingerprints).WithTimeout(time.Until(cutAt.Add(longHubCut))).WithPolling(time.Second).Should(gomega.Equal(before))
	want := f.localFingerprints()
	f.g.Expect(want).NotTo(gomega.Equal(before))

	// The hub comes back just after a publish attempt failed: the worst moment, when the
	// agent has the longest to wait before it tries again.
	failed := f.publishAttempts.Load()
	f.g.Eventually(f.publishAttempts.Load).WithTimeout(defaultTuning().retryMax + 5*time.Second).Should(gomega.BeNumerically(">", failed))
	f.hubProxy.restore()
	restoredAt := time.Now()
	tries := f.publishAttempts.Load() - attempts
	f.g.Eventually(f.hubFingerprints).WithTimeout(reconnectConvergence).Should(gomega.Equal(want),
		"the report did not match the managed cluster within %v of the hub coming back", reconnectConvergence)
	converged := time.Since(restoredAt)
	t.Logf("hub cut for %v: %d publish attempts; the report matched the managed cluster %v after the hub came back",
		restoredAt.Sub(cutAt).Round(time.Millisecond), tries, converged.Round(time.Millisecond))

	web, _ := f.reportedApp("web")
	f.g.Expect(web.Sync.Revision).To(gomega.Equal("r2"))
	f.g.Expect(web.Health.Status).To(gomega.Equal("Degraded"))
	f.g.Expect(web.Resources).To(gomega.HaveLen(3))
	f.g.Expect(web.Conditions).To(gomega.ContainElement(argoapp.Condition{Type: "SyncError", Message: forbiddenMessage}))
	// The diagnostics are on the ManagedClusterAddOn, which the agent writes after the
	// slices that hubFingerprints reads.
	f.g.Eventually(func() metav1.ConditionStatus {
		return f.condition(clusterreport.ConditionApplicationControllerRBAC).Status
	}).Should(gomega.Equal(metav1.ConditionFalse))
	f.expectAvailableKept()
}

// localFingerprints returns the fingerprint of each Application from the hub in the
// test's namespace on the managed cluster, by key: what the report should say.
func (f *fixture) localFingerprints() map[string]string {
	f.t.Helper()
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(argoapp.GroupVersion.WithKind(argoapp.KindApplication + "List"))
	f.g.Expect(f.spoke.List(f.ctx, list, client.InNamespace(f.appNS))).To(gomega.Succeed())
	out := map[string]string{}
	for i := range list.Items {
		if !isFromHub(&list.Items[i]) {
			continue
		}
		app := observeApplication(&list.Items[i]).report
		out[app.Key()] = fingerprint(f.g, app)
	}
	return out
}

// hubFingerprints returns the fingerprint of each app of the report on the hub, decoded
// by the hub's decoder, by key.
func (f *fixture) hubFingerprints() map[string]string {
	f.t.Helper()
	out := map[string]string{}
	for _, app := range f.report().Apps {
		out[app.Key()] = fingerprint(f.g, app)
	}
	return out
}

// fingerprint returns the app's clusterreport.Fingerprint: its content without
// ObservedAt.
func fingerprint(g *gomega.WithT, app clusterreport.App) string {
	digest, err := clusterreport.Fingerprint(app)
	g.Expect(err).NotTo(gomega.HaveOccurred(), fmt.Sprintf("fingerprint %s", app.Key()))
	return digest
}
