package statusslices

import (
	"testing"

	statusv1alpha1 "github.com/ocm-gitops/argocd-pull-addon/pkg/apis/argocdpull/v1alpha1"
)

// TestAppOfWritesTheTruncationNoteItself: the hub's StatusTruncatedWarning says what the
// entry's truncated field says; an agent's condition of that type is not shown.
func TestAppOfWritesTheTruncationNoteItself(t *testing.T) {
	e := statusv1alpha1.AppStatus{Namespace: "argocd", Name: "web", Conditions: []statusv1alpha1.Condition{
		{Type: ConditionTruncated, Message: "forged by the agent"}, {Type: "SyncError", Message: "boom"},
	}}
	if got := AppOf(e).Conditions; len(got) != 1 || got[0].Type != "SyncError" {
		t.Errorf("conditions %v, want the agent's SyncError only", got)
	}
	e.Truncated = &statusv1alpha1.Truncation{Reason: statusv1alpha1.TruncationExceedsSliceLimit, ResourcesOmitted: 3}
	got := AppOf(e).Conditions
	if len(got) != 2 || got[1].Type != ConditionTruncated || got[1].Message == "forged by the agent" {
		t.Errorf("conditions %v, want SyncError and the hub's own %s", got, ConditionTruncated)
	}
}
