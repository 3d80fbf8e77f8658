package appstatus

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/observed"
)

func TestMayWait(t *testing.T) {
	app := func(automated bool, operation bool, conditions ...any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{}}}
		if automated {
			u.Object["spec"] = map[string]any{"syncPolicy": map[string]any{"automated": map[string]any{}}}
		}
		if operation {
			u.Object["operation"] = map[string]any{"sync": map[string]any{}}
		}
		if len(conditions) > 0 {
			u.Object["status"] = map[string]any{"conditions": conditions}
		}
		return u
	}
	running := observed.State{SyncStatus: "OutOfSync", HealthStatus: "Missing", OperationPhase: argoapp.OperationRunning}
	outOfSync := observed.State{SyncStatus: "OutOfSync", HealthStatus: "Missing"}
	failed := observed.State{SyncStatus: "OutOfSync", HealthStatus: "Missing", OperationPhase: argoapp.OperationFailed}
	progressing := observed.State{SyncStatus: "Synced", HealthStatus: argoapp.HealthProgressing, OperationPhase: argoapp.OperationSucceeded}
	healthy := observed.State{SyncStatus: "Synced", HealthStatus: argoapp.HealthHealthy, OperationPhase: argoapp.OperationSucceeded}
	syncError := observed.State{SyncStatus: "OutOfSync", OperationPhase: argoapp.OperationRunning, Reported: true,
		Conditions: []argoapp.Condition{{Type: "SyncError", Message: "failed"}}}

	for _, tc := range []struct {
		name    string
		app     *unstructured.Unstructured
		desired Desired
		want    bool
	}{
		{"an automatic sync running", app(false, false), Desired{State: running}, true},
		{"health Progressing", app(false, false), Desired{State: progressing}, true},
		{"OutOfSync, synced automatically", app(true, false), Desired{State: outOfSync}, true},
		{"OutOfSync, synced by hand", app(false, false), Desired{State: outOfSync}, false},
		{"OutOfSync after a failed automatic sync", app(true, false), Desired{State: failed}, false},
		{"Healthy", app(true, false), Desired{State: healthy}, false},
		{"Healthy, which the other channel does not say yet", app(true, false), Desired{State: withChannelsDiffering(healthy)}, true},
		{"a sync asked on the hub, running", app(false, true), Desired{State: running}, false},
		{"a new error", app(false, false), Desired{State: syncError}, false},
		{"an error already shown", app(false, false, map[string]any{"type": "SyncError", "message": "failed"}), Desired{State: syncError}, true},
		{"an error that went", app(false, false, map[string]any{"type": "SyncError", "message": "failed"}), Desired{State: running}, false},
		{"a hub note", app(false, false), Desired{State: running, Stale: &argoapp.Condition{Type: observed.ConditionStale, Message: "stale"}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := mayWait(tc.app, tc.desired); got != tc.want {
				t.Errorf("mayWait = %v; want %v", got, tc.want)
			}
		})
	}
}

// withChannelsDiffering returns s, which one of its channels does not say yet.
func withChannelsDiffering(s observed.State) observed.State {
	s.ChannelsDiffer = true
	return s
}
