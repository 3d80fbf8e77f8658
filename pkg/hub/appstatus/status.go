// Package appstatus mirrors the status of each pulled Application, from its managed
// cluster back onto the hub Application (docs/pull-model.md, section 3):
// sync status and revision(s), health, operation state, and beyond the reference the
// resource list and Argo CD's conditions from the agent's report, so that the hub Argo CD
// UI and CLI show a pulled app as completely as a pushed one.
//
// It owns these fields of status: sync.status, sync.revision, sync.revisions,
// health.status, health.message, operationState.phase, .startedAt, .finishedAt,
// .message and .syncResult, resources, history, reconciledAt, and Argo CD's condition
// types (those ending in Error or
// Warning) except the propagation controller's OCMPropagationError. A condition of
// another type is another writer's, and is kept as it is. It also removes Argo CD's
// refresh annotation once the managed cluster completed that refresh
// (AcknowledgeRefresh). It writes with a merge patch that
// carries the resourceVersion read (optimistic locking), and only when something changed.
package appstatus

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/hubcache"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/observed"
)

// Desired is the status this controller wants on a hub Application.
type Desired struct {
	State observed.State
	// Stale is the stale condition when the cluster's addon is unavailable.
	Stale *argoapp.Condition
	// InvalidReport is the invalid-report condition when the cluster's latest report of
	// the app could not be decoded.
	InvalidReport *argoapp.Condition
	// NotReported is the not-reported condition when the agent's report has no entry
	// for the app although its work is applied.
	NotReported *argoapp.Condition
	// ProgressingFirst: the app's ApplicationSet syncs it by RollingSync steps, which
	// advance on Progressing then Healthy; health reaches Healthy only from Progressing.
	ProgressingFirst bool
	// RefreshID is the id of the refresh that the app's work asks the spoke for
	// (argoapp.AnnotationRefreshID on its payload); empty when none.
	RefreshID string
}

// AcknowledgeRefresh removes the hub Application's refresh annotation once the agent's
// entry is of the refresh that d's work asks for: its status is then from after the
// refresh, and goes in the same write. argocd-server's Get with a refresh returns the
// Application as it is when the annotation leaves, so argocd app get --refresh shows the
// refreshed status. It reports whether it changed app.
func AcknowledgeRefresh(app *unstructured.Unstructured, d Desired) bool {
	if !refreshAnswered(app, d) {
		return false
	}
	annotations := app.GetAnnotations()
	delete(annotations, argoapp.AnnotationRefresh)
	app.SetAnnotations(annotations)
	return true
}

// refreshAnswered reports whether app asks for a refresh, and the agent's entry of d is
// the answer to the refresh that d's work asks the spoke for.
func refreshAnswered(app *unstructured.Unstructured, d Desired) bool {
	_, asked := app.GetAnnotations()[argoapp.AnnotationRefresh]
	return asked && d.RefreshID != "" && d.State.Refreshed == d.RefreshID
}

// conditions returns the conditions that d wants among those this controller owns: the
// agent's, then the hub's notes.
func (d Desired) conditions() []argoapp.Condition {
	return append(slices.DeleteFunc(slices.Clone(d.State.Conditions), isHubNote), d.hubNotes()...)
}

// hubNotes returns the conditions the hub adds about the data it shows.
func (d Desired) hubNotes() []argoapp.Condition {
	var notes []argoapp.Condition
	for _, c := range []*argoapp.Condition{d.Stale, d.InvalidReport, d.NotReported} {
		if c != nil {
			notes = append(notes, *c)
		}
	}
	return notes
}

// isHubNote reports whether a condition is one of the hub's notes, not the agent's.
func isHubNote(c argoapp.Condition) bool {
	return c.Type == observed.ConditionStale || c.Type == observed.ConditionInvalidReport || c.Type == observed.ConditionNotReported
}

// ApplyStatus sets the owned fields of app's status to d, and reports whether anything
// changed. When d.ProgressingFirst and health would become Healthy from anything but
// Progressing, it writes Progressing instead, and holding is true: write again later to
// reach Healthy.
// reconciledAt is set to now when, and only when, something else changed.
//
// The fields from the feedback (sync and health status, revision, operation phase and
// start) are set when known and kept otherwise. Those that only the agent's report
// carries (sync.revisions, the health and operation messages, resources, Argo CD's
// conditions, the history) are the report's entry, or absent when the report has none: the hub never
// shows an earlier entry next to a newer feedback, and d's notes say why there is none.
func ApplyStatus(app *unstructured.Unstructured, d Desired, now time.Time) (changed, holding bool) {
	before := app.DeepCopy()
	status, _, _ := unstructured.NestedMap(app.Object, "status")
	if status == nil {
		status = map[string]any{}
	}
	s := d.State

	if s.SyncStatus != "" {
		sync := mapAt(status, "sync")
		sync["status"] = s.SyncStatus
		setOrDelete(sync, "revision", s.SyncRevision)
		if len(s.SyncRevisions) > 0 {
			sync["revisions"] = anyList(s.SyncRevisions)
		} else {
			delete(sync, "revisions")
		}
	}

	if s.HealthStatus != "" {
		health := mapAt(status, "health")
		current, _ := health["status"].(string)
		target, message := s.HealthStatus, s.HealthMessage
		if d.ProgressingFirst && target == argoapp.HealthHealthy && current != argoapp.HealthHealthy && current != argoapp.HealthProgressing {
			target, message, holding = argoapp.HealthProgressing, "", true
		}
		health["status"] = target
		setOrDelete(health, "message", message)
	}

	if s.OperationPhase != "" && s.OperationStart != "" {
		op := mapAt(status, "operationState")
		if _, ok := op["operation"].(map[string]any); !ok {
			op["operation"] = map[string]any{} // required by the CRD; the spoke has the details
		}
		startedChanged := op["startedAt"] != s.OperationStart
		// A hub user terminated the operation (argocd-server set Terminating): the hub
		// shows Terminating until the spoke Argo CD, which the agent asks to terminate it
		// (propagation's AnnotationOperationTerminate), ends it, as Argo CD shows a
		// pushed app's.
		if !(op["phase"] == argoapp.OperationTerminating && s.OperationPhase == argoapp.OperationRunning && !startedChanged) {
			op["phase"] = s.OperationPhase
		}
		op["startedAt"] = s.OperationStart
		setOrDelete(op, "message", s.OperationMsg)
		// finishedAt: the spoke's, from the agent's entry of this operation; else, as the
		// status feedback does not carry it, a final phase gets the time the hub learnt
		// it, once per operation. Argo CD's CLI (app wait, app sync) takes an operation
		// without finishedAt for one still running.
		switch {
		case !argoapp.OperationCompleted(s.OperationPhase):
			delete(op, "finishedAt")
		case s.OperationFinish != "":
			op["finishedAt"] = s.OperationFinish
		case startedChanged || op["finishedAt"] == nil:
			op["finishedAt"] = now.UTC().Format(time.RFC3339)
		}
		// syncResult: the spoke's, from the agent's entry of this operation. A finished
		// one without it (no agent's entry yet) gets one with the synced revision as the
		// feedback has it: Argo CD's CLI reads the result of every finished sync.
		switch {
		case s.OperationResult != nil:
			op["syncResult"] = syncResultOf(s.OperationResult)
		case argoapp.OperationCompleted(s.OperationPhase):
			op["syncResult"] = syncResultOf(&argoapp.SyncResult{Revision: s.SyncRevision, Revisions: s.SyncRevisions})
		default:
			delete(op, "syncResult")
		}
	}

	if !s.Reported {
		// Nothing from the agent: none of what only it carries.
		deleteNested(status, "sync", "revisions")
		deleteNested(status, "health", "message")
		deleteNested(status, "operationState", "message")
		setList(status, "resources", nil)
	} else {
		setList(status, "resources", resourceList(s.Resources))
	}
	setList(status, "history", historyList(s.History))

	wanted := d.conditions()
	if !equalConditions(ownedConditions(status), wanted) {
		setConditions(status, wanted, now)
	}

	if len(status) > 0 {
		app.Object["status"] = status
	}
	pending := comparisonPending(s)
	if equalStatus(before, app) && comparedBeforeFinish(before) == pending {
		return false, false
	}
	status["reconciledAt"] = reconciledAt(status, pending, now)
	return true, holding
}

// comparisonPending reports whether the state's operation is finished and the status the
// hub shows is not yet one the spoke compared after it finished: the agent reports the
// app, but not yet that operation in that phase (the feedback's phase comes first), or
// reports that the spoke compared before it finished (ComparedBeforeFinish).
func comparisonPending(s observed.State) bool {
	return s.Reported && argoapp.OperationCompleted(s.OperationPhase) && (!s.OperationReported || s.OperationComparedBeforeFinish)
}

// comparedBeforeFinish reports whether app's status.reconciledAt is before its
// operationState.finishedAt.
func comparedBeforeFinish(app *unstructured.Unstructured) bool {
	reconciled, _, _ := unstructured.NestedString(app.Object, "status", "reconciledAt")
	finished, _, _ := unstructured.NestedString(app.Object, "status", "operationState", "finishedAt")
	return argoapp.ComparedBefore(reconciled, finished)
}

// reconciledAt returns status.reconciledAt as Argo CD's CLI reads it (argocd app sync and
// app wait wait while it is before operationState.finishedAt): a second before finishedAt
// while the comparison after the operation is pending; else now, or finishedAt when the
// spoke's clock is ahead of the hub's.
func reconciledAt(status map[string]any, pending bool, now time.Time) string {
	finishedAt, _, _ := unstructured.NestedString(status, "operationState", "finishedAt")
	finished, err := time.Parse(time.RFC3339, finishedAt)
	switch {
	case err != nil:
		return now.UTC().Format(time.RFC3339)
	case pending:
		return finished.Add(-time.Second).UTC().Format(time.RFC3339)
	case now.Before(finished):
		return finishedAt
	}
	return now.UTC().Format(time.RFC3339)
}

// syncResultOf returns status.operationState.syncResult of r, with the fields Argo CD's
// CRD requires (revision; each resource's group, version, kind, namespace and name), empty
// or not. Argo CD's CLI counts in it the resources whose prune was skipped (argocd app
// sync: "N resources require pruning").
func syncResultOf(r *argoapp.SyncResult) map[string]any {
	out := map[string]any{"revision": r.Revision}
	if len(r.Revisions) > 0 {
		out["revisions"] = anyList(r.Revisions)
	}
	if len(r.Resources) > 0 {
		resources := make([]any, 0, len(r.Resources))
		for _, res := range r.Resources {
			row := map[string]any{"group": res.Group, "kind": res.Kind, "name": res.Name, "version": res.Version, "namespace": res.Namespace}
			setOrDelete(row, "status", res.Status)
			setOrDelete(row, "message", res.Message)
			setOrDelete(row, "hookType", res.HookType)
			setOrDelete(row, "hookPhase", res.HookPhase)
			setOrDelete(row, "syncPhase", res.SyncPhase)
			resources = append(resources, row)
		}
		out["resources"] = resources
	}
	return out
}

// resourceList returns status.resources of the resources.
func resourceList(rs []argoapp.ResourceStatus) []any {
	if len(rs) == 0 {
		return nil
	}
	resources := make([]any, 0, len(rs))
	for _, r := range rs {
		row := map[string]any{"kind": r.Kind, "name": r.Name, "version": r.Version}
		setOrDelete(row, "group", r.Group)
		setOrDelete(row, "namespace", r.Namespace)
		setOrDelete(row, "status", r.Status)
		if r.Health.Status != "" {
			health := map[string]any{"status": r.Health.Status}
			setOrDelete(health, "message", r.Health.Message)
			row["health"] = health
		}
		resources = append(resources, row)
	}
	return resources
}

// setList sets status[field] (resources or history) to list, or removes it when the list
// is empty. An Application from the manager's cache holds a digest of those lists instead
// (hubcache.ResourcesDigest): a list equal to it stays the digest, so that neither the
// comparison nor the merge patch sees a change; another replaces it.
func setList(status map[string]any, field string, list []any) {
	if hubcache.SameResources(status[field], list) {
		return
	}
	if len(list) == 0 {
		delete(status, field)
		return
	}
	status[field] = list
}

// equalStatus compares the statuses of two versions of an app, reconciledAt aside.
func equalStatus(a, b *unstructured.Unstructured) bool {
	sa, _, _ := unstructured.NestedMap(a.Object, "status")
	sb, _, _ := unstructured.NestedMap(b.Object, "status")
	delete(sa, "reconciledAt")
	delete(sb, "reconciledAt")
	if len(sa) == 0 && len(sb) == 0 {
		return true
	}
	return equalJSON(sa, sb)
}

// setConditions replaces the owned conditions of status with wanted, keeping the
// others (OCMPropagationError, another writer's) first and in place, and the
// lastTransitionTime of every condition whose type and message did not change.
func setConditions(status map[string]any, wanted []argoapp.Condition, now time.Time) {
	existing, _ := status["conditions"].([]any)
	// A wanted type that Argo CD's naming does not tell as owned is still replaced, not
	// doubled.
	wantedTypes := map[string]bool{}
	for _, c := range wanted {
		wantedTypes[c.Type] = true
	}
	var out []any
	times := map[argoapp.Condition][]any{}
	for _, item := range existing {
		c, ok := item.(map[string]any)
		if !ok {
			continue
		}
		t, _ := c["type"].(string)
		if !isOwned(t) && !wantedTypes[t] {
			out = append(out, item)
			continue
		}
		m, _ := c["message"].(string)
		key := argoapp.Condition{Type: t, Message: m}
		times[key] = append(times[key], c["lastTransitionTime"])
	}
	stamp := now.UTC().Format(time.RFC3339)
	for _, c := range wanted {
		entry := map[string]any{"type": c.Type, "message": c.Message, "lastTransitionTime": stamp}
		if prior := times[c]; len(prior) > 0 {
			if prior[0] != nil {
				entry["lastTransitionTime"] = prior[0]
			}
			times[c] = prior[1:]
		}
		out = append(out, entry)
	}
	if len(out) == 0 {
		delete(status, "conditions")
		return
	}
	status["conditions"] = out
}

// ownedConditions returns the conditions of status this controller owns.
func ownedConditions(status map[string]any) []argoapp.Condition {
	existing, _ := status["conditions"].([]any)
	var out []argoapp.Condition
	for _, item := range existing {
		c, _ := item.(map[string]any)
		t, _ := c["type"].(string)
		m, _ := c["message"].(string)
		if isOwned(t) {
			out = append(out, argoapp.Condition{Type: t, Message: m})
		}
	}
	return out
}

// isOwned reports whether this controller owns a condition type: Argo CD's, which end
// in Error or Warning (Argo CD tells its errors by the suffix too), as do the hub's
// notes; not the propagation controller's OCMPropagationError, nor a type that another
// writer put on the Application.
func isOwned(conditionType string) bool {
	return conditionType != argoapp.ConditionOCMPropagationError &&
		(strings.HasSuffix(conditionType, "Error") || strings.HasSuffix(conditionType, "Warning"))
}

// equalConditions compares conditions by type and message, in order.
func equalConditions(a, b []argoapp.Condition) bool {
	return slices.Equal(a, b)
}

// deleteNested deletes m[key][field], and m[key] when that leaves it empty.
func deleteNested(m map[string]any, key, field string) {
	child, ok := m[key].(map[string]any)
	if !ok {
		return
	}
	delete(child, field)
	if len(child) == 0 {
		delete(m, key)
	}
}

func mapAt(m map[string]any, key string) map[string]any {
	child, ok := m[key].(map[string]any)
	if !ok {
		child = map[string]any{}
		m[key] = child
	}
	return child
}

func setOrDelete(m map[string]any, key, value string) {
	if value == "" {
		delete(m, key)
		return
	}
	m[key] = value
}

// healthOf returns status.health.status of app.
func healthOf(app *unstructured.Unstructured) string {
	h, _, _ := unstructured.NestedString(app.Object, "status", "health", "status")
	return cmp.Or(h, "")
}

// anyList returns strs as the list of an unstructured object.
func anyList(strs []string) []any {
	out := make([]any, len(strs))
	for i, s := range strs {
		out[i] = s
	}
	return out
}
