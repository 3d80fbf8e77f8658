package appstatus

// This file holds back the states that a managed cluster passes through on its own while
// it deploys an app (an automatic sync about to start or running, health Progressing),
// so that a rollout writes the hub app once, when the app settles, rather than once for
// each of its steps.

import (
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/observed"
)

// passing reports whether s is a state that the managed cluster leaves on its own
// (argoapp.PassingState).
func passing(s observed.State, syncsAutomatically bool) bool {
	return argoapp.PassingState(s.SyncStatus, s.HealthStatus, s.OperationPhase, syncsAutomatically)
}

// mayWait reports whether the write of desired onto app may wait for the app to settle:
// desired is a passing state, or one of its two channels has not caught up with the
// other (the work agent and the addon's agent each write theirs in their own time); no
// one on the hub waits for it; and nothing in it is news that must not wait. Someone
// waits while the hub Application holds an operation (a hub user's sync, which argocd
// app sync follows, or a RollingSync step's). News are a change of the conditions (Argo
// CD's errors, the hub's notes), which the hub shows within a second whatever the rest
// does, and the answer to a refresh asked on the hub.
func mayWait(app *unstructured.Unstructured, desired Desired) bool {
	if _, operation := app.Object["operation"]; operation {
		return false
	}
	if !(passing(desired.State, argoapp.SyncsAutomatically(app)) || desired.State.ChannelsDiffer) || refreshAnswered(app, desired) {
		return false
	}
	status, _, _ := unstructured.NestedMap(app.Object, "status")
	return equalConditions(ownedConditions(status), desired.conditions())
}

// settleWait returns how much longer the write of desired onto the app key may wait for
// the app to settle: zero or less to write now, as when it would change nothing. A wait
// counts from the first passing state that was not written, so that the hub is never
// more than Settings.SettleWait behind, even while the states keep passing.
func (r *reconciler) settleWait(key types.NamespacedName, app *unstructured.Unstructured, desired Desired, now time.Time) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.held.Wait(key, mayWait(app, desired) && changes(app, desired, now), r.opts.SettleWait, now)
}

// changes reports whether writing desired would change app.
func changes(app *unstructured.Unstructured, desired Desired, now time.Time) bool {
	changed, _ := ApplyStatus(app.DeepCopy(), desired, now)
	return changed
}
