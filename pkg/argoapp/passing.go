package argoapp

import (
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// PassingState reports whether an Application in this state leaves it on its own, usually
// within seconds: an operation running, health Progressing, or OutOfSync for an app that
// syncs automatically and whose last operation did not fail (its sync is about to
// start). The hub's status mirror and the agent's status slices hold such a state back
// for a bounded while, so that a rollout is written when it settles rather than at each
// of its steps (docs/design.md, section 2.3).
func PassingState(syncStatus, healthStatus, operationPhase string, syncsAutomatically bool) bool {
	switch {
	case operationPhase == OperationRunning, healthStatus == HealthProgressing:
		return true
	case syncsAutomatically && syncStatus == SyncOutOfSync:
		return operationPhase != OperationFailed && operationPhase != OperationError
	}
	return false
}

// DefaultSettleWait is how long a passing state may be held back by default: a guestbook
// app on the local fleet goes from Argo CD's first look at it to Synced and Healthy in 5
// to 14 s (test/sim FleetRollout), so that its rollout is written once, when it settles.
// The hub is at most this far behind an app that passes through states; no one on the hub
// waits for them (AwaitedOperation), and a failure or a settled state is not held.
const DefaultSettleWait = 15 * time.Second

// SettleHolds keep, for each key (an app, a report, a cluster's slices), since when its
// write has been held back for a passing state, so that none waits longer than the settle
// wait from the first change it held. The zero value is ready; it is not safe for
// concurrent use.
type SettleHolds[K comparable] struct {
	since map[K]time.Time
}

// Wait returns how much longer the write of key may wait, at most limit from the first
// call that held it: zero or less to write now, as when mayWait is false. A hold ends
// (and the next begins afresh) when it returns zero or less.
func (h *SettleHolds[K]) Wait(key K, mayWait bool, limit time.Duration, now time.Time) time.Duration {
	if !mayWait {
		delete(h.since, key)
		return 0
	}
	since, ok := h.since[key]
	if !ok {
		if h.since == nil {
			h.since = map[K]time.Time{}
		}
		since = now
		h.since[key] = now
	}
	wait := limit - now.Sub(since)
	if wait <= 0 {
		delete(h.since, key)
	}
	return wait
}

// Forget ends the hold of key.
func (h *SettleHolds[K]) Forget(key K) { delete(h.since, key) }

// AwaitedOperation reports whether someone waits for the Application's operation: the
// requested one (.operation) or, without one, the last (status.operationState.operation)
// was started by anyone but the Application's own automated sync policy — a user's
// sync (argocd app sync), a RollingSync step of the ApplicationSet controller, or a sync
// the hub delivered. Without any operation no one waits.
func AwaitedOperation(app *unstructured.Unstructured) bool {
	operation, found, _ := unstructured.NestedFieldNoCopy(app.Object, "operation")
	if !found {
		operation, found, _ = unstructured.NestedFieldNoCopy(app.Object, "status", "operationState", "operation")
	}
	if !found {
		return false
	}
	op, _ := operation.(map[string]any)
	initiatedBy, _ := op["initiatedBy"].(map[string]any)
	automated, _ := initiatedBy["automated"].(bool)
	username, _ := initiatedBy["username"].(string)
	return !automated || username != ""
}
