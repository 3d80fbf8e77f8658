package appstatus

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/hubcache"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/observed"
)

// TestApplyStatusHistory: the mirror writes the agent's history as status.history in
// the form of Argo CD's CRD (ids, times, each source as Argo CD's ApplicationSource with
// its helm details), leaves out what the CRD would refuse (an entry without a readable
// deployedAt, a source without repoURL, a multi-source entry of which one source is
// unreadable, details that are not an object), writes nothing when the history is the
// same (also read back from the manager's cache), and removes it when the agent's entry
// has none.
func TestApplyStatusHistory(t *testing.T) {
	now := time.Date(2026, 11, 28, 7, 0, 0, 0, time.UTC)
	history := []argoapp.RevisionHistory{
		{ID: 1, Revision: "aaa", DeployedAt: "2026-11-28T06:01:00+01:00", DeployStartedAt: "2026-11-28T06:00:58+01:00",
			Source:      &argoapp.HistorySource{RepoURL: "https://git.example.com/a.git", Path: "web", TargetRevision: "main", Details: `{"helm":{"valueFiles":["prod.yaml"]}}`},
			InitiatedBy: argoapp.OperationInitiator{Username: "alice"}},
		{ID: 2, Revision: "bbb", DeployedAt: "yesterday", Source: &argoapp.HistorySource{RepoURL: "https://git.example.com/a.git"}},
		{ID: 3, Revisions: []string{"c1", "c2"}, DeployedAt: "2026-11-28T06:03:00Z", DeployStartedAt: "not a time",
			Sources:     []argoapp.HistorySource{{RepoURL: "https://git.example.com/a.git"}, {RepoURL: "https://git.example.com/b.git", Details: "[]"}},
			InitiatedBy: argoapp.OperationInitiator{Automated: true}},
		{ID: 4, Revision: "ddd", DeployedAt: "2026-11-28T06:04:00Z", Source: &argoapp.HistorySource{Path: "no-repo"}},
	}
	want := []any{
		map[string]any{"id": int64(1), "revision": "aaa", "deployedAt": "2026-11-28T05:01:00Z", "deployStartedAt": "2026-11-28T05:00:58Z",
			"source": map[string]any{"repoURL": "https://git.example.com/a.git", "path": "web", "targetRevision": "main",
				"helm": map[string]any{"valueFiles": []any{"prod.yaml"}}},
			"initiatedBy": map[string]any{"username": "alice"}},
		map[string]any{"id": int64(3), "revisions": []any{"c1", "c2"}, "deployedAt": "2026-11-28T06:03:00Z",
			"initiatedBy": map[string]any{"automated": true}},
		map[string]any{"id": int64(4), "revision": "ddd", "deployedAt": "2026-11-28T06:04:00Z"},
	}
	app := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"sync": map[string]any{"status": "Synced"}}}}
	state := observed.State{SyncStatus: "Synced", Reported: true, History: history}
	if changed, _ := ApplyStatus(app, Desired{State: state}, now); !changed {
		t.Fatal("the history was not written")
	}
	got, _, _ := unstructured.NestedSlice(app.Object, "status", "history")
	if !reflect.DeepEqual(got, want) {
		gotJSON, _ := json.Marshal(got)
		wantJSON, _ := json.Marshal(want)
		t.Fatalf("status.history is\n%s\nwant\n%s", gotJSON, wantJSON)
	}
	if changed, _ := ApplyStatus(app, Desired{State: state}, now.Add(time.Minute)); changed {
		t.Error("the same history was written again")
	}
	// As the manager's cache holds the Application, frozen and thawed.
	app.SetAPIVersion("argoproj.io/v1alpha1")
	app.SetKind("Application")
	raw, _ := json.Marshal(app.Object)
	served := &unstructured.Unstructured{}
	if err := served.UnmarshalJSON(raw); err != nil {
		t.Fatal(err)
	}
	cached, err := hubcache.TransformApplication(served)
	if err != nil {
		t.Fatal(err)
	}
	if changed, _ := ApplyStatus(hubcache.Thawed(cached.(*unstructured.Unstructured)), Desired{State: state}, now.Add(time.Minute)); changed {
		t.Error("the same history, read from the manager's cache, was written again")
	}

	if changed, _ := ApplyStatus(app, Desired{State: observed.State{SyncStatus: "Synced", Reported: true}}, now); !changed {
		t.Error("a history the agent no longer reports stayed")
	}
	if _, found, _ := unstructured.NestedFieldNoCopy(app.Object, "status", "history"); found {
		t.Error("status.history stayed")
	}
}
