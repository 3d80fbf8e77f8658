package appstatus

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/observed"
)

// TestApplyStatusKeepsForeignConditions: the mirror owns Argo CD's condition types (and
// its own notes), not a condition another writer put on the hub Application, nor the
// propagation controller's.
func TestApplyStatusKeepsForeignConditions(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	foreign := map[string]any{"type": "example.com/Reviewed", "message": "approved by the release board", "lastTransitionTime": "2026-01-01T00:00:00Z"}
	propagation := map[string]any{"type": argoapp.ConditionOCMPropagationError, "message": "AddonNotEnabled: no addon", "lastTransitionTime": "2026-01-01T00:00:00Z"}
	for _, tc := range []struct {
		name     string
		reported []argoapp.Condition
		want     []argoapp.Condition
	}{
		{
			name:     "an agent error comes and a stale one goes, the foreign ones stay",
			reported: []argoapp.Condition{{Type: "SyncError", Message: "the sync failed"}},
			want: []argoapp.Condition{
				{Type: "example.com/Reviewed", Message: "approved by the release board"},
				{Type: argoapp.ConditionOCMPropagationError, Message: "AddonNotEnabled: no addon"},
				{Type: "SyncError", Message: "the sync failed"},
			},
		},
		{
			name: "the agent reports nothing, the foreign ones stay",
			want: []argoapp.Condition{
				{Type: "example.com/Reviewed", Message: "approved by the release board"},
				{Type: argoapp.ConditionOCMPropagationError, Message: "AddonNotEnabled: no addon"},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			app := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"conditions": []any{
				foreign,
				propagation,
				map[string]any{"type": "ComparisonError", "message": "gone on the spoke", "lastTransitionTime": "2026-01-01T00:00:00Z"},
			}}}}
			ApplyStatus(app, Desired{State: observed.State{Reported: true, Conditions: tc.reported}}, now)
			items, _, _ := unstructured.NestedSlice(app.Object, "status", "conditions")
			var got []argoapp.Condition
			for _, item := range items {
				c := item.(map[string]any)
				got = append(got, argoapp.Condition{Type: c["type"].(string), Message: c["message"].(string)})
			}
			if len(got) != len(tc.want) {
				t.Fatalf("conditions %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("conditions %v, want %v", got, tc.want)
				}
			}
		})
	}
}
