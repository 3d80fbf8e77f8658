package appstatus

import (
	"testing"
	"time"

	"github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	statusv1alpha1 "github.com/ocm-gitops/argocd-pull-addon/pkg/apis/argocdpull/v1alpha1"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/clusterreport"
	"github.com/ocm-gitops/argocd-pull-addon/test/testenv"
)

// TestStatusMirrorWritesHistory runs the real status mirror, with the slices reader as
// pkg/hub wires it, on a real apiserver with Argo CD's Application CRD: the history of
// the agent's entry becomes the hub Application's status.history as Argo CD's CRD takes
// it (what `argocd app history` prints and argocd-server's Rollback reads), written once
// and not again while it stays the same; a new sync's entry is written when it comes. A
// history that Argo CD's schema refuses (a helm field of another type) does not stop the
// rest of the status: it is written without the history, and an Event says why.
func TestStatusMirrorWritesHistory(t *testing.T) {
	const appNamespace, cluster = "apps-history", "cluster-history"
	writes := &testenv.WriteLog{}
	opts := mirrorOptions()
	_, hub, app := startSliceMirror(t, appNamespace, cluster, opts, writes)
	ctx, g, c := hub.Ctx, hub.G, hub.C
	work := hub.CreateFedWork(app, cluster, opts.AddonName, map[string]string{
		argoapp.FeedbackHealthStatus: "Healthy", argoapp.FeedbackSyncStatus: "Synced", argoapp.FeedbackSyncRevision: "bbb",
	})
	addon := hub.EnableAddon(cluster, opts.AddonName)

	source := argoapp.HistorySource{RepoURL: "https://git.example.com/apps.git", Path: "guestbook", TargetRevision: "main",
		Details: `{"helm":{"valueFiles":["values-prod.yaml"],"parameters":[{"name":"replicas","value":"2"}]}}`}
	history := []argoapp.RevisionHistory{
		{ID: 0, Revision: "aaa", DeployedAt: "2026-11-28T06:00:10Z", DeployStartedAt: "2026-11-28T06:00:05Z", Source: &source,
			InitiatedBy: argoapp.OperationInitiator{Username: "alice"}},
		{ID: 1, Revision: "bbb", DeployedAt: "2026-11-28T06:01:10Z", DeployStartedAt: "2026-11-28T06:01:05Z", Source: &source,
			InitiatedBy: argoapp.OperationInitiator{Automated: true}},
	}
	observedAt := time.Now().Truncate(time.Second)
	entry := func(history []argoapp.RevisionHistory, revision string) statusv1alpha1.AppStatus {
		return clusterreport.Entry(clusterreport.App{Namespace: "argocd", Name: "web", ManifestWork: work.Name,
			HubNamespace: appNamespace, HubName: "web", Sync: argoapp.SyncStatus{Status: "Synced", Revision: revision},
			Health: argoapp.HealthStatus{Status: "Healthy"}, History: history, ObservedAt: observedAt}, clusterreport.Tree{})
	}
	slice := clusterreport.SliceObject(addon, clusterreport.Slice{Name: "argocd-pull-0", Apps: []statusv1alpha1.AppStatus{entry(history, "bbb")}})
	g.Expect(c.Create(ctx, slice)).To(gomega.Succeed())
	setEntry := func(e statusv1alpha1.AppStatus) {
		hub.UpdateSlice(client.ObjectKeyFromObject(slice), func(cur *statusv1alpha1.ApplicationStatusSlice) {
			cur.Apps = []statusv1alpha1.AppStatus{e}
		})
	}
	historyOf := func(g gomega.Gomega) []any {
		h, _, _ := unstructured.NestedSlice(getApp(ctx, g, c, client.ObjectKeyFromObject(app)).Object, "status", "history")
		return h
	}
	wantSource := map[string]any{"repoURL": "https://git.example.com/apps.git", "path": "guestbook", "targetRevision": "main",
		"helm": map[string]any{"valueFiles": []any{"values-prod.yaml"}, "parameters": []any{map[string]any{"name": "replicas", "value": "2"}}}}
	g.Eventually(func(g gomega.Gomega) {
		g.Expect(historyOf(g)).To(gomega.Equal([]any{
			map[string]any{"id": int64(0), "revision": "aaa", "deployedAt": "2026-11-28T06:00:10Z", "deployStartedAt": "2026-11-28T06:00:05Z",
				"source": wantSource, "initiatedBy": map[string]any{"username": "alice"}},
			map[string]any{"id": int64(1), "revision": "bbb", "deployedAt": "2026-11-28T06:01:10Z", "deployStartedAt": "2026-11-28T06:01:05Z",
				"source": wantSource, "initiatedBy": map[string]any{"automated": true}},
		}))
	}).Should(gomega.Succeed())

	// Settled: no write while nothing changes.
	patches := func() int { return writes.Count("patch", "Application", appNamespace, "web") }
	before := patches()
	g.Consistently(patches).WithTimeout(2 * time.Second).Should(gomega.Equal(before))

	// A rollback on the spoke to entry 0: Argo CD adds entry 2, of revision aaa.
	rollback := append(history, argoapp.RevisionHistory{ID: 2, Revision: "aaa", DeployedAt: "2026-11-28T06:02:10Z",
		DeployStartedAt: "2026-11-28T06:02:05Z", Source: &source, InitiatedBy: argoapp.OperationInitiator{Username: "bob"}})
	setEntry(entry(rollback, "aaa"))
	g.Eventually(func(g gomega.Gomega) {
		h := historyOf(g)
		g.Expect(h).To(gomega.HaveLen(3))
		g.Expect(h[2]).To(gomega.HaveKeyWithValue("revision", "aaa"))
		g.Expect(h[2]).To(gomega.HaveKeyWithValue("initiatedBy", map[string]any{"username": "bob"}))
	}).Should(gomega.Succeed())

	// A history that Argo CD's schema refuses, and a new error: the error is written,
	// the history is not (the hub shows none rather than the last one).
	forged := argoapp.HistorySource{RepoURL: "https://git.example.com/apps.git", Details: `{"helm":{"valueFiles":"not a list"}}`}
	refused := entry([]argoapp.RevisionHistory{{ID: 3, Revision: "ccc", DeployedAt: "2026-11-28T06:03:10Z", Source: &forged}}, "bbb")
	refused.Conditions = []statusv1alpha1.Condition{{Type: "ComparisonError", Message: "the repository is gone"}}
	setEntry(refused)
	g.Eventually(func(g gomega.Gomega) {
		message, found, _ := argoapp.FindCondition(getApp(ctx, g, c, client.ObjectKeyFromObject(app)), "ComparisonError")
		g.Expect(found).To(gomega.BeTrue())
		g.Expect(message).To(gomega.Equal("the repository is gone"))
		g.Expect(historyOf(g)).To(gomega.BeEmpty())
	}).Should(gomega.Succeed())
	g.Eventually(func(g gomega.Gomega) {
		events := &eventsv1.EventList{}
		g.Expect(c.List(ctx, events, client.InNamespace(appNamespace))).To(gomega.Succeed())
		found := false
		for _, e := range events.Items {
			found = found || (e.Reason == "InvalidAgentHistory" && e.Regarding.Name == "web")
		}
		g.Expect(found).To(gomega.BeTrue(), "no InvalidAgentHistory Event")
	}).Should(gomega.Succeed())
}
