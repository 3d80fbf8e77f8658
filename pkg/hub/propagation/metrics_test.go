package propagation

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/types"
)

func TestProblemTracker(t *testing.T) {
	gauge := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "test_problems"}, []string{"reason"})
	tracker := newProblemTracker(gauge)
	a, b := types.NamespacedName{Namespace: "ns", Name: "a"}, types.NamespacedName{Namespace: "ns", Name: "b"}
	count := func(reason string) float64 { return testutil.ToFloat64(gauge.WithLabelValues(reason)) }

	tracker.set(a, ReasonAddonNotEnabled)
	tracker.set(b, ReasonAddonNotEnabled)
	tracker.set(b, ReasonAddonNotEnabled) // again: no change
	if got := count(ReasonAddonNotEnabled); got != 2 {
		t.Fatalf("AddonNotEnabled = %v, want 2", got)
	}
	tracker.set(a, ReasonMissingSkipReconcile)
	if got, other := count(ReasonAddonNotEnabled), count(ReasonMissingSkipReconcile); got != 1 || other != 1 {
		t.Fatalf("after a reason change: AddonNotEnabled = %v, MissingSkipReconcile = %v; want 1 and 1", got, other)
	}
	tracker.set(a, "")
	tracker.set(b, "")
	tracker.set(b, "") // a gone application twice
	if got, other := count(ReasonAddonNotEnabled), count(ReasonMissingSkipReconcile); got != 0 || other != 0 {
		t.Fatalf("after both resolved: %v and %v; want 0", got, other)
	}
}
