package sim

// This file is the stand-in work agent: the states it writes of each ManifestWork, one
// after the other, as OCM's work agent writes them while the cluster's Argo CD rolls the
// work's Application out.

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
)

// WorkStep is one state that the work agent writes of a work: a PATCH of its status, or,
// for Finalizer, of its finalizers.
type WorkStep struct {
	// After is how long after the step before (or the work's creation) it is written.
	After time.Duration
	// Finalizer adds the work agent's finalizer; the step writes nothing else.
	Finalizer bool
	// Applied and Available are the work's conditions and each manifest's.
	Applied, Available bool
	// App is the state of the work's Application on the cluster, as its status feedback
	// shows it; nil before the cluster's Argo CD has looked at it.
	App *AppState
	// Together says that the cluster's Argo CD takes this step for all its apps at about
	// the same time (its first look at new apps): the step's spread is the cluster's,
	// not each app's (StandIns.after).
	Together bool
	// Conflicts is how many patches of this step the apiserver refuses first, for a
	// resourceVersion that is not the work's any more, as it refuses the real work
	// agent's controllers that write a work's status each from its own cache.
	Conflicts int
}

// AppState is the state of an Application on its managed cluster, as the five values of
// the work's status feedback show it (docs/pull-model.md, section 2): what the agents
// report of it too.
type AppState struct {
	Sync, Health, Phase string
}

// AtOnce is the rollout of a work that the work agent applies and Argo CD syncs at once:
// one status write, Synced and Healthy. The fault suite runs with it.
var AtOnce = []WorkStep{
	{Applied: true, Available: true, App: &AppState{argoapp.SyncSynced, argoapp.HealthHealthy, argoapp.OperationSucceeded}},
}

// FleetRollout is the rollout of a guestbook app (a Deployment and a Service, synced
// automatically) as the local fleet's OCM work agent (v1.2.1) wrote it, from the watch
// of one ApplicationSet of 20 apps on 2 clusters (2026-12-07, commit 3ab1fc5): its
// finalizer, then 8 states of the status, about 16 s from the work's creation to
// Healthy. Each step's After is the median of the 20 works'; the stand-in spreads it
// (StandIns.after), as the works spread: a cluster's Argo CD first looked at all its
// new apps within a second or two (Together), 2 to 6.4 s after their works were
// available, and each app's sync then took 5 to 11.6 s. The hub's
// audit log counted 10.8 status patches a work, 3.25 of them refused with a conflict,
// and one finalizer patch.
var FleetRollout = []WorkStep{
	{After: 170 * time.Millisecond, Finalizer: true},
	{After: 770 * time.Millisecond, Applied: true},
	{After: 110 * time.Millisecond, Applied: true, Available: true, Conflicts: 1},
	{After: 4900 * time.Millisecond, Together: true, Applied: true, Available: true, App: &AppState{}},
	{After: 800 * time.Millisecond, Together: true, Applied: true, Available: true, App: &AppState{"", "", argoapp.OperationRunning}, Conflicts: 1},
	{After: 700 * time.Millisecond, Together: true, Applied: true, Available: true, App: &AppState{argoapp.SyncOutOfSync, "Missing", argoapp.OperationRunning}},
	{After: 6 * time.Second, Applied: true, Available: true, App: &AppState{argoapp.SyncOutOfSync, "Missing", argoapp.OperationSucceeded}, Conflicts: 1},
	{After: 700 * time.Millisecond, Applied: true, Available: true, App: &AppState{argoapp.SyncSynced, argoapp.HealthProgressing, argoapp.OperationSucceeded}},
	{After: 1300 * time.Millisecond, Applied: true, Available: true, App: &AppState{argoapp.SyncSynced, argoapp.HealthHealthy, argoapp.OperationSucceeded}},
}

// workProgress is where the stand-in work agent is in a work's rollout.
type workProgress struct {
	// generation is the work's generation that the rollout applies: a new one starts
	// the rollout again, after its finalizer.
	generation int64
	// next is the step to write, at due; the rollout ends before end.
	next, end int
	due       time.Time
}

// after is how long after the step before the work agent writes step i of work: the
// step's After, spread from half of it to one and a half times it, the same for the same
// work and step (for the same cluster and step, of a step taken Together), as the
// fleet's clusters take each step sooner or later for each app.
func (s *StandIns) after(work *workv1.ManifestWork, i int) time.Duration {
	spreadBy := string(work.UID)
	if s.rollout[i].Together {
		spreadBy = work.Namespace
	}
	h := fnv.New64a()
	_, _ = fmt.Fprintf(h, "%s/%d", spreadBy, i)
	spread := float64(h.Sum64()%1000) / 1000
	return time.Duration(float64(s.rollout[i].After) * (0.5 + spread))
}

// reconcileWork plays the work agent: it writes the next step of the work's rollout when
// it is due, and removes its finalizer from a work being deleted.
func (s *StandIns) reconcileWork(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	work := &workv1.ManifestWork{}
	if err := s.mgr.GetCache().Get(ctx, req.NamespacedName, work); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if work.DeletionTimestamp != nil {
		s.forgetWork(work.UID)
		if !slices.Contains(work.Finalizers, workv1.ManifestWorkFinalizer) {
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, s.patchWork(ctx, work, finalizersPatch(slices.DeleteFunc(slices.Clone(work.Finalizers), isWorkFinalizer)))
	}
	now := time.Now()
	s.mu.Lock()
	p, ok := s.progress[work.UID]
	if !ok || p.generation != work.Generation {
		p = s.startRollout(work, now)
	}
	s.progress[work.UID] = p
	s.mu.Unlock()
	if p.next >= p.end {
		return reconcile.Result{}, nil
	}
	if wait := p.due.Sub(now); wait > 0 {
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	step := s.rollout[p.next]
	patch, err := stepPatch(work, step)
	if err != nil {
		return reconcile.Result{}, err
	}
	for range step.Conflicts {
		if err := s.patchWork(ctx, work, patch.at(staleResourceVersion)); err == nil {
			return reconcile.Result{}, fmt.Errorf("work %s: a patch of a stale resourceVersion was not refused", req)
		}
	}
	if err := s.patchWork(ctx, work, patch); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	s.mu.Lock()
	p.next++
	var wait time.Duration
	if p.next < p.end {
		wait = s.after(work, p.next)
		p.due = now.Add(wait)
	}
	s.progress[work.UID] = p
	if p.next == 1 || step.app() != s.rollout[p.next-2].app() {
		s.stepAt[work.UID] = now
	}
	s.mu.Unlock()
	return reconcile.Result{RequeueAfter: wait}, nil
}

// app is the state of the Application that the step shows, the empty one before Argo CD
// looked at it, as the agents read it.
func (step WorkStep) app() AppState {
	if step.App == nil {
		return AppState{}
	}
	return *step.App
}

// startRollout is the progress of a work that the stand-in has not seen at its
// generation: from its start, without the finalizer steps once the work has the
// finalizer, and done when the work is already applied at its generation (the stand-ins
// started again). A work that carries no Application (the addon framework's) ends
// before the first step with an App, after one step at least.
func (s *StandIns) startRollout(work *workv1.ManifestWork, now time.Time) workProgress {
	p := workProgress{generation: work.Generation, end: len(s.rollout)}
	if first := slices.IndexFunc(s.rollout, func(step WorkStep) bool { return step.App != nil }); !IsPulledWork(work) && first >= 0 {
		p.end = max(first, 1)
	}
	if applied := meta.FindStatusCondition(work.Status.Conditions, workv1.WorkApplied); applied != nil && applied.ObservedGeneration == work.Generation {
		p.next = p.end
		return p
	}
	for p.next < p.end && s.rollout[p.next].Finalizer && slices.Contains(work.Finalizers, workv1.ManifestWorkFinalizer) {
		p.next++
	}
	if p.next < p.end {
		p.due = now.Add(s.after(work, p.next))
	}
	return p
}

func (s *StandIns) forgetWork(uid types.UID) {
	s.mu.Lock()
	delete(s.progress, uid)
	delete(s.stepAt, uid)
	s.mu.Unlock()
}

// workPatch is a JSON merge patch of a work: of its finalizers, or of its status.
type workPatch struct {
	Metadata *patchMetadata             `json:"metadata,omitempty"`
	Status   *workv1.ManifestWorkStatus `json:"status,omitempty"`
}

type patchMetadata struct {
	ResourceVersion string `json:"resourceVersion,omitempty"`
	// Finalizers is a pointer, so that an empty list removes the last one.
	Finalizers *[]string `json:"finalizers,omitempty"`
}

// staleResourceVersion is a resourceVersion that no object has any more.
const staleResourceVersion = "1"

// at is the patch, sent only if the work is at resourceVersion.
func (p workPatch) at(resourceVersion string) workPatch {
	metadata := patchMetadata{}
	if p.Metadata != nil {
		metadata = *p.Metadata
	}
	metadata.ResourceVersion = resourceVersion
	p.Metadata = &metadata
	return p
}

func finalizersPatch(finalizers []string) workPatch {
	return workPatch{Metadata: &patchMetadata{Finalizers: &finalizers}}
}

// patchWork sends patch: to the work's status subresource when it patches the status.
func (s *StandIns) patchWork(ctx context.Context, work *workv1.ManifestWork, patch workPatch) error {
	body, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	target := &workv1.ManifestWork{ObjectMeta: metav1.ObjectMeta{Namespace: work.Namespace, Name: work.Name}}
	if patch.Status != nil {
		return s.workAgent.Status().Patch(ctx, target, client.RawPatch(types.MergePatchType, body))
	}
	return s.workAgent.Patch(ctx, target, client.RawPatch(types.MergePatchType, body))
}

func isWorkFinalizer(f string) bool { return f == workv1.ManifestWorkFinalizer }

// stepPatch is the patch that writes step of work: its finalizer, or its status as the
// step says. It names no resourceVersion: a step declares the whole status, and the
// refusals of the real work agent's patches are the step's Conflicts, not the lag of the
// stand-in's cache.
func stepPatch(work *workv1.ManifestWork, step WorkStep) (workPatch, error) {
	if step.Finalizer {
		return finalizersPatch(append(slices.Clone(work.Finalizers), workv1.ManifestWorkFinalizer)), nil
	}
	// The work's conditions as they are, so that each keeps its transition time.
	status := workv1.ManifestWorkStatus{Conditions: slices.Clone(work.Status.Conditions)}
	for i, m := range work.Spec.Workload.Manifests {
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(m.Raw); err != nil {
			return workPatch{}, fmt.Errorf("decode manifest %d of work %s/%s: %w", i, work.Namespace, work.Name, err)
		}
		gvk := obj.GroupVersionKind()
		mc := workv1.ManifestCondition{ResourceMeta: workv1.ManifestResourceMeta{
			Ordinal: int32(i), Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind,
			Resource: strings.ToLower(gvk.Kind) + "s", Name: obj.GetName(), Namespace: obj.GetNamespace(),
		}}
		if step.Applied {
			meta.SetStatusCondition(&mc.Conditions, metav1.Condition{Type: workv1.ManifestApplied, Status: metav1.ConditionTrue, Reason: "AppliedManifestComplete", Message: "Apply manifest complete"})
		}
		if step.Available {
			meta.SetStatusCondition(&mc.Conditions, metav1.Condition{Type: workv1.ManifestAvailable, Status: metav1.ConditionTrue, Reason: "ResourceAvailable", Message: "Resource is available"})
			meta.SetStatusCondition(&mc.Conditions, metav1.Condition{Type: "StatusFeedbackSynced", Status: metav1.ConditionTrue, Reason: "StatusFeedbackSynced"})
		}
		if gvk.GroupKind() == argoapp.ApplicationGVK.GroupKind() && step.App != nil {
			mc.StatusFeedbacks.Values = feedbackValues(*step.App, work.CreationTimestamp.Time)
		}
		status.ResourceStatus.Manifests = append(status.ResourceStatus.Manifests, mc)
	}
	for t, set := range map[string]bool{workv1.WorkApplied: step.Applied, workv1.WorkAvailable: step.Available} {
		if set {
			meta.SetStatusCondition(&status.Conditions, metav1.Condition{
				Type: t, Status: metav1.ConditionTrue, Reason: "AppliedManifestWorkComplete",
				Message: "Apply manifest work complete", ObservedGeneration: work.Generation,
			})
		}
	}
	return workPatch{Status: &status}, nil
}

// feedbackValues are the status feedback of an Application in state: the values that it has,
// and the sync status always (Argo CD's first look leaves it empty); the revision once
// Synced, and the operation's start, the work's creation, once an operation ran.
func feedbackValues(state AppState, created time.Time) []workv1.FeedbackValue {
	values := []workv1.FeedbackValue{feedback(argoapp.FeedbackSyncStatus, state.Sync)}
	if state.Health != "" {
		values = append(values, feedback(argoapp.FeedbackHealthStatus, state.Health))
	}
	if state.Sync == argoapp.SyncSynced {
		values = append(values, feedback(argoapp.FeedbackSyncRevision, SyncRevision))
	}
	if state.Phase != "" {
		values = append(values,
			feedback(argoapp.FeedbackOperationStatePhase, state.Phase),
			feedback(argoapp.FeedbackOperationStateStartedAt, created.UTC().Format(time.RFC3339)))
	}
	return values
}

func feedback(name, value string) workv1.FeedbackValue {
	return workv1.FeedbackValue{Name: name, Value: workv1.FieldValue{Type: workv1.String, String: ptr.To(value)}}
}
