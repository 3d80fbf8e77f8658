package appsetreport

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"

	appsv1alpha1 "github.com/ocm-gitops/argocd-pull-addon/pkg/apis/apps/v1alpha1"
)

// TestTruncationEvents checks when the ApplicationSet hears of its report's cut: when
// it starts and when it ends, once, and never while it stays; before this process has
// seen the report, the stored report's annotation says whether it was cut, and while
// the cache has not seen the last write, the process remembers it.
func TestTruncationEvents(t *testing.T) {
	cut := &appsv1alpha1.ReportTruncation{BudgetBytes: 1 << 20, Clusters: 3, Message: "To stay within its budget of 1048576 bytes, ..."}
	// Each step: the report is cut now (or not), the stored report says it was (stored),
	// and the Event expected, if any.
	type step struct {
		now, stored bool
		want        string
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"the cut starts, stays, ends", []step{
			{false, false, ""}, {true, false, "Warning ReportTruncated " + cut.Message}, {true, true, ""}, {true, true, ""},
			{false, true, "Normal ReportComplete The report fits its budget of 1048576 bytes again, at full detail."}, {false, false, ""},
		}},
		{"a restart with a cut report on the hub announces nothing", []step{{true, true, ""}, {true, true, ""}}},
		{"a restart with a complete report on the hub announces a cut", []step{{true, false, "Warning ReportTruncated " + cut.Message}}},
		{"the cache lags the writes: the process remembers", []step{
			{true, false, "Warning ReportTruncated " + cut.Message}, {true, false, ""}, {true, false, ""},
			{false, false, "Normal ReportComplete The report fits its budget of 1048576 bytes again, at full detail."},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			recorder := events.NewFakeRecorder(10)
			r := &reconciler{recorder: recorder, opts: Options{Settings: Settings{BudgetBytes: 1 << 20}}, truncated: map[types.NamespacedName]bool{}}
			key := types.NamespacedName{Namespace: "openshift-gitops", Name: "guestbook"}
			for i, s := range tt.steps {
				var truncated *appsv1alpha1.ReportTruncation
				if s.now {
					truncated = cut
				}
				r.recordTruncation(context.Background(), key, testAppSet(), truncated, r.swapTruncated(key, s.now, s.stored))
				var got string
				select {
				case got = <-recorder.Events:
				default:
				}
				if got != s.want {
					t.Errorf("step %d (cut %v, stored cut %v): Event %q, want %q", i, s.now, s.stored, got, s.want)
				}
			}
		})
	}
	// A report that goes (its ApplicationSet deleted) is forgotten.
	r := &reconciler{recorder: events.NewFakeRecorder(10), opts: Options{Settings: Settings{BudgetBytes: 1 << 20, WriteInterval: -1}}, written: map[types.NamespacedName]string{},
		truncated: map[types.NamespacedName]bool{}, pace: map[types.NamespacedName]writePace{}}
	key := types.NamespacedName{Namespace: "openshift-gitops", Name: "guestbook"}
	r.swapTruncated(key, true, false)
	r.wrote(key, 0, "", true)
	if len(r.truncated) != 0 {
		t.Errorf("a deleted report is remembered: %v", r.truncated)
	}
}
