package propagation

// This file holds the metric of the hub Applications that are not propagated, by
// reason: a refused or waiting Application records an Event and a condition, and returns
// no error (it is not retried), so the controller's error metrics do not see it.

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// problemsMetric is argocd_pull_applications_not_propagated{reason}: how many pulled hub
// Applications have the OCMPropagationError condition with that reason.
var problemsMetric = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "argocd_pull_applications_not_propagated",
	Help: "Pulled hub Applications whose OCMPropagationError condition has the given reason: refused, or waiting for their cluster.",
}, []string{"reason"})

func init() { metrics.Registry.MustRegister(problemsMetric) }

// sharedProblems tracks the Applications of the process's propagation controller.
var sharedProblems = newProblemTracker(problemsMetric)

// problemTracker keeps the reason each hub Application is not propagated for, and the
// gauge of the counts by reason.
type problemTracker struct {
	mu      sync.Mutex
	reasons map[types.NamespacedName]string
	gauge   *prometheus.GaugeVec
}

func newProblemTracker(gauge *prometheus.GaugeVec) *problemTracker {
	return &problemTracker{reasons: map[types.NamespacedName]string{}, gauge: gauge}
}

// set records the reason of Application key; "" when it has no problem, or is gone.
func (t *problemTracker) set(key types.NamespacedName, reason string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	old, had := t.reasons[key]
	if had && old == reason {
		return
	}
	if had {
		t.gauge.WithLabelValues(old).Dec()
		delete(t.reasons, key)
	}
	if reason != "" {
		t.reasons[key] = reason
		t.gauge.WithLabelValues(reason).Inc()
	}
}
