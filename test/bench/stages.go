package main

import (
	"context"
	"fmt"
	"math"
	"strings"

	"github.com/ocm-gitops/argocd-pull-addon/test/sim"
)

// stage is one step that a P2 change goes through, timed by the histogram of the process
// that runs it.
type stage struct {
	// name says what is timed, and by which process.
	name string
	// manager is true for the manager's metrics, false for the apiserver's.
	manager bool
	// metric is the histogram, and labels the values its series must have.
	metric string
	labels map[string]string
}

// p2Stages are where the time of a P2 change goes: the manager's wait in its queues and
// its reconciles (the status mirror's for the hub app, the report controller's for the
// report), and the apiserver's handling of each write.
var p2Stages = []stage{
	{"app: the mirror's queue", true, "workqueue_queue_duration_seconds", map[string]string{"name": "argocd-pull-appstatus"}},
	{"app: the mirror's reconcile", true, "controller_runtime_reconcile_time_seconds", map[string]string{"controller": "argocd-pull-appstatus"}},
	{"app: the apiserver's PATCH", false, "apiserver_request_duration_seconds", map[string]string{"verb": "PATCH", "resource": "applications", "subresource": ""}},
	{"report: the report's queue", true, "workqueue_queue_duration_seconds", map[string]string{"name": "argocd-pull-report"}},
	{"report: the report's reconcile", true, "controller_runtime_reconcile_time_seconds", map[string]string{"controller": "argocd-pull-report"}},
	{"report: the apiserver's APPLY", false, "apiserver_request_duration_seconds", map[string]string{"verb": "APPLY", "resource": "multiclusterapplicationsetreports"}},
}

// stageTime is the observations of one stage over a span.
type stageTime struct {
	name string
	sim.Histogram
}

// stageTimes are the observations of each stage over a span.
type stageTimes []stageTime

// metricsSnapshot is the text exposition of the apiserver's and the manager's metrics at
// one time.
type metricsSnapshot struct{ apiserver, manager []byte }

func takeMetrics(ctx context.Context, hub *sim.Hub, manager *sim.Manager) (metricsSnapshot, error) {
	apiserver, err := hub.Metrics(ctx)
	if err != nil {
		return metricsSnapshot{}, err
	}
	mgr, err := managerMetrics(ctx, manager)
	if err != nil {
		return metricsSnapshot{}, fmt.Errorf("read the manager's metrics: %w", err)
	}
	return metricsSnapshot{apiserver: apiserver, manager: mgr}, nil
}

// measureBetween keeps, of the span between two snapshots, what P2 reports: the
// apiserver's write requests, its consistency checks, and the time of each of p2Stages.
func measureBetween(r *Results, before, after metricsSnapshot) error {
	var counts [2]sim.Requests
	var checks [2]map[string]float64
	for i, m := range []metricsSnapshot{before, after} {
		var err error
		if counts[i], err = sim.ParseRequestCounts(m.apiserver); err != nil {
			return err
		}
		if checks[i], err = sim.ParseConsistencyChecks(m.apiserver); err != nil {
			return err
		}
	}
	r.ChangeWrites = counts[1].WritesSince(counts[0])
	r.ChangeConsistencyChecks = sim.Increases(checks[1], checks[0])
	var err error
	r.ChangeStages, err = stagesBetween(p2Stages, before, after)
	return err
}

// stagesBetween returns the observations of each of stages between two snapshots.
func stagesBetween(stages []stage, before, after metricsSnapshot) (stageTimes, error) {
	var out stageTimes
	for _, s := range stages {
		match := func(labels map[string]string) bool {
			for name, value := range s.labels {
				if labels[name] != value {
					return false
				}
			}
			return true
		}
		pick := func(m metricsSnapshot) []byte {
			if s.manager {
				return m.manager
			}
			return m.apiserver
		}
		b, err := sim.ParseHistogram(pick(before), s.metric, match)
		if err != nil {
			return nil, err
		}
		a, err := sim.ParseHistogram(pick(after), s.metric, match)
		if err != nil {
			return nil, err
		}
		out = append(out, stageTime{name: s.name, Histogram: a.Since(b)})
	}
	return out, nil
}

// String gives each stage's median and 99th percentile as the bucket bounds they fall
// under, and its count.
func (t stageTimes) String() string {
	var each []string
	for _, s := range t {
		each = append(each, fmt.Sprintf("%s p50 ≤ %s, p99 ≤ %s (%.0f)", s.name, seconds(s.AtMost(0.5)), seconds(s.AtMost(0.99)), s.Total()))
	}
	return strings.Join(each, "; ")
}

// seconds writes a bucket bound in seconds, or in milliseconds under one.
func seconds(s float64) string {
	switch {
	case math.IsInf(s, 1):
		return "∞"
	case s < 1:
		return fmt.Sprintf("%g ms", math.Round(s*1e6)/1e3)
	}
	return fmt.Sprintf("%g s", s)
}
