package spoke

import (
	"fmt"
	"testing"

	"github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	statusv1alpha1 "github.com/ocm-gitops/argocd-pull-addon/pkg/apis/argocdpull/v1alpha1"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/clusterreport"
)

// historyEntry is an entry of status.history as Argo CD's application-controller writes
// it, of a single-source sync (a helm source with value files) to revision rev.
func historyEntry(id int, rev string) map[string]any {
	return map[string]any{
		"id": int64(id), "revision": rev,
		"deployedAt": fmt.Sprintf("2026-11-28T06:%02d:10Z", id), "deployStartedAt": fmt.Sprintf("2026-11-28T06:%02d:05Z", id),
		"source": map[string]any{"repoURL": "https://git.example.com/apps.git", "path": "guestbook", "targetRevision": "main",
			"helm": map[string]any{"valueFiles": []any{"values-prod.yaml"}, "parameters": []any{map[string]any{"name": "replicas", "value": "2"}}}},
		"initiatedBy": map[string]any{"username": "alice"},
	}
}

// TestHistoryReachesTheSlice: the last ten entries of a spoke Application's
// status.history (Argo CD's default revisionHistoryLimit), each with its whole source,
// reach the app's entry in the slices, oldest first; a new sync there brings its entry,
// and the oldest goes.
func TestHistoryReachesTheSlice(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	withHistory := func(n int) map[string]any {
		s := status{sync: "Synced", health: "Healthy", revision: fmt.Sprintf("%040d", n-1), resources: 2}.object()
		var history []any
		for i := range n {
			history = append(history, historyEntry(i, fmt.Sprintf("%040d", i)))
		}
		s["history"] = history
		return s
	}
	f.createApp("web", withHistory(12))
	want := statusv1alpha1.HistorySource{RepoURL: "https://git.example.com/apps.git", Path: "guestbook", TargetRevision: "main",
		Details: `{"helm":{"parameters":[{"name":"replicas","value":"2"}],"valueFiles":["values-prod.yaml"]}}`}
	f.g.Eventually(func(g gomega.Gomega) {
		h := f.entries(g)["web"].History
		g.Expect(h).To(gomega.HaveLen(clusterreport.MaxHistoryEntries))
		g.Expect(h[0].ID).To(gomega.BeEquivalentTo(2))
		g.Expect(h[0].Source).To(gomega.Equal(&want))
		// The same source as the entry before it: not repeated.
		g.Expect(h[9]).To(gomega.Equal(statusv1alpha1.RevisionHistory{
			ID: 11, Revision: fmt.Sprintf("%040d", 11), DeployedAt: "2026-11-28T06:11:10Z", DeployStartedAt: "2026-11-28T06:11:05Z",
			SameSourcesAsPrevious: true, InitiatedBy: &statusv1alpha1.HistoryInitiator{Username: "alice"},
		}))
		g.Expect(*clusterreport.HistoryFromEntry(h)[9].Source).To(gomega.BeEquivalentTo(want))
	}).Should(gomega.Succeed())

	// Argo CD syncs again: its entry comes, the oldest goes (as Argo CD cuts it too).
	f.updateApp("web", func(u *unstructured.Unstructured) {
		history, _, _ := unstructured.NestedSlice(u.Object, "status", "history")
		history = append(history[1:], historyEntry(12, fmt.Sprintf("%040d", 12)))
		g := f.g
		g.Expect(unstructured.SetNestedSlice(u.Object, history, "status", "history")).To(gomega.Succeed())
	})
	f.g.Eventually(func(g gomega.Gomega) {
		h := f.entries(g)["web"].History
		g.Expect(h).To(gomega.HaveLen(clusterreport.MaxHistoryEntries))
		g.Expect(h[0].ID).To(gomega.BeEquivalentTo(3))
		g.Expect(h[9].ID).To(gomega.BeEquivalentTo(12))
	}).Should(gomega.Succeed())
}
