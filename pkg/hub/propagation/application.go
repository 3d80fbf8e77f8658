package propagation

// This file holds the writes to hub Applications: the clean-up finalizer, the
// OCMPropagationError condition, and the removal of a refresh or an operation once the
// managed cluster has it.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	workv1 "open-cluster-management.io/api/work/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/apppatch"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/hubcache"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/observed"
)

// recordProblem records a problem on the Application: a Warning Event, a log line and the
// OCMPropagationError condition. Without a problem, it removes the condition. Other
// condition types are kept as they are. also, when not nil, changes the Application in
// the same patch: one write instead of two.
func (r *reconciler) recordProblem(ctx context.Context, app *unstructured.Unstructured, p *problem, also apppatch.Mutation) error {
	if p == nil {
		err := r.patchApplication(ctx, app, apppatch.All(func(app *unstructured.Unstructured) (bool, error) {
			return argoapp.RemoveCondition(app, argoapp.ConditionOCMPropagationError)
		}, also))
		if err != nil {
			return fmt.Errorf("remove condition %s from application %s/%s: %w",
				argoapp.ConditionOCMPropagationError, app.GetNamespace(), app.GetName(), err)
		}
		return nil
	}
	ctrl.LoggerFrom(ctx).Info("not propagating the application", "reason", p.reason, "message", p.message)
	r.recorder.Eventf(app, nil, corev1.EventTypeWarning, p.reason, eventAction, "%s", p.message)
	message := p.reason + ": " + p.message
	err := r.patchApplication(ctx, app, apppatch.All(func(app *unstructured.Unstructured) (bool, error) {
		return argoapp.SetCondition(app, argoapp.ConditionOCMPropagationError, message, time.Now())
	}, also))
	if err != nil {
		return fmt.Errorf("set condition %s on application %s/%s: %w",
			argoapp.ConditionOCMPropagationError, app.GetNamespace(), app.GetName(), err)
	}
	return nil
}

// patchApplication applies mutate to app and patches the change (see apppatch).
func (r *reconciler) patchApplication(ctx context.Context, app *unstructured.Unstructured, mutate apppatch.Mutation) error {
	_, err := apppatch.MergePatch(ctx, r.client, r.apiReader, app, mutate, client.FieldOwner(FieldManager))
	return err
}

// addCleanupFinalizer adds the clean-up finalizer to an Application that no
// ApplicationSet owns.
//
// The ApplicationSet controller sets the finalizers of every Application it generates
// to its template's on each reconcile (keeping only post-delete finalizers), and
// reconciles again when they change: a finalizer of ours there is removed at once and
// would be added back, a write loop. A generated Application is cleaned up through the
// not-found path instead: once it is gone, its works are deleted (cleanUpAfterDeletion).
func addCleanupFinalizer(app *unstructured.Unstructured) (bool, error) {
	if _, generated := argoapp.OwningApplicationSet(app.GetOwnerReferences()); generated {
		return false, nil
	}
	if slices.Contains(app.GetFinalizers(), argoapp.FinalizerManifestWorkCleanup) {
		return false, nil
	}
	app.SetFinalizers(append(app.GetFinalizers(), argoapp.FinalizerManifestWorkCleanup))
	return true, nil
}

// removeFinalizer removes the clean-up finalizer.
func removeFinalizer(app *unstructured.Unstructured) (bool, error) {
	finalizers := app.GetFinalizers()
	kept := slices.DeleteFunc(slices.Clone(finalizers), func(f string) bool { return f == argoapp.FinalizerManifestWorkCleanup })
	if len(kept) == len(finalizers) {
		return false, nil
	}
	app.SetFinalizers(kept)
	return true, nil
}

// acknowledgeDelivery removes the operation from the hub Application once the spoke
// Argo CD has run it, so that the next one goes through: the spoke Application's
// operationState (the work's status feedback) is of the operation's id
// (AnnotationOperationID) and has completed. Until then the operation stays on the hub
// Application, as Argo CD keeps .operation on an Application while it runs: a second
// sync is refused there with Argo CD's own message, and the work keeps asking the
// cluster's agent to run it. The removal is a JSON patch that first tests the value, so
// that a newer request made meanwhile is never lost; the next render drops it from the
// work. (A refresh leaves in the status mirror's write of the refreshed status.)
func (r *reconciler) acknowledgeDelivery(ctx context.Context, app *unstructured.Unstructured, work *workv1.ManifestWork) error {
	if !appliedAtGeneration(work) {
		return nil
	}
	log := ctrl.LoggerFrom(ctx)
	operation, ok := app.Object["operation"]
	if !ok || operation == nil {
		return nil
	}
	ran, state := operationRan(work)
	if !ran || !hubShowsOperation(app, state) {
		// Not run yet, or run but the status mirror has not written its result on the
		// hub Application yet: its write is an event that reconciles again.
		return nil
	}
	removed, err := r.testAndRemove(ctx, app, "/operation", operation)
	if err != nil {
		return fmt.Errorf("remove the completed operation from application %s/%s: %w", app.GetNamespace(), app.GetName(), err)
	}
	if removed {
		log.Info("the spoke Argo CD ran the operation; removed it from the hub application",
			"work", client.ObjectKeyFromObject(work), "operationID", state.OperationStateID, "phase", state.OperationStatePhase, "startedAt", state.OperationStateStartedAt)
		r.recorder.Eventf(app, nil, corev1.EventTypeNormal, ReasonOperationCompleted, eventAction,
			"The operation %s ran on cluster %s (phase %s, started at %s); removed it from the hub application",
			state.OperationStateID, work.Namespace, state.OperationStatePhase, state.OperationStateStartedAt)
	}
	return nil
}

// operationRan reports whether the spoke Argo CD has run the operation that work
// delivers: the spoke Application's operationState, from the work's status feedback, is
// of the operation's id and has completed. It also returns the feedback it read.
func operationRan(work *workv1.ManifestWork) (bool, observed.Feedback) {
	id := work.Annotations[argoapp.AnnotationOperationID]
	if id == "" {
		return false, observed.Feedback{}
	}
	state := observed.FeedbackOf(work)
	return state.OperationStateID == id && argoapp.OperationCompleted(state.OperationStatePhase), state
}

// hubShowsOperation reports whether the hub Application's status.operationState, which
// the status mirror writes from the same feedback, already shows the operation state:
// the operation leaves the hub Application only with its result there, as Argo CD clears
// .operation in the same write that records the final phase. A reader of the hub
// Application (a RollingSync step, argocd app wait) never sees it gone while the status
// still says Running.
func hubShowsOperation(app *unstructured.Unstructured, state observed.Feedback) bool {
	phase, _, _ := unstructured.NestedString(app.Object, "status", "operationState", "phase")
	startedAt, _, _ := unstructured.NestedString(app.Object, "status", "operationState", "startedAt")
	return phase == state.OperationStatePhase && startedAt == state.OperationStateStartedAt
}

// setRequests puts in desired, a rendered work, what the hub Application asks the
// cluster's agent for: its operation (setOperationRequest) and the id of its refresh
// (setRefreshID). refreshed is the id of the last refresh the cluster's agent reports
// done for the app. It starts from the render each time, so calling it again with a
// fresher existing work is safe.
func setRequests(desired, existing *workv1.ManifestWork, app *unstructured.Unstructured, refreshed string) error {
	_, refresh := app.GetAnnotations()[argoapp.AnnotationRefresh]
	if app.Object["operation"] == nil && !refresh {
		// Nothing to ask, now or in an earlier call for the same app: the render, which
		// carries none of the requests, stays as it is (no decoding of its payload on
		// every reconcile).
		delete(desired.Annotations, argoapp.AnnotationOperationID)
		return nil
	}
	existingPayload := hubcache.PayloadAnnotations(existing)
	annotations := map[string]string{}
	if err := setOperationRequest(desired, existing, existingPayload, app, annotations); err != nil {
		return err
	}
	setRefreshID(existingPayload, app, refreshed, annotations)
	return setPayloadAnnotations(desired, annotations)
}

// setOperationRequest sets, in annotations of the payload, app's .operation for the
// cluster's agent to run (argoapp.AnnotationOperationRequest), and its id in
// AnnotationOperationID on desired: the id it has in existing (the current work, whose
// payload's annotations are existingPayload) when that work delivers the same
// operation, else a new one. When a hub user terminated the
// operation (its status.operationState.phase is Terminating, as argocd-server sets it),
// the payload asks the agent to terminate it too (AnnotationOperationTerminate). Without
// an operation, the payload asks for none.
func setOperationRequest(desired, existing *workv1.ManifestWork, existingPayload map[string]string, app *unstructured.Unstructured, annotations map[string]string) error {
	delete(desired.Annotations, argoapp.AnnotationOperationID)
	annotations[argoapp.AnnotationOperationRequest], annotations[argoapp.AnnotationOperationTerminate] = "", ""
	operation, _ := app.Object["operation"].(map[string]any)
	if operation == nil {
		return nil
	}
	operation = argoapp.WithoutOperationID(operation)
	id, terminated := argoapp.NewOperationID(), false
	if kept := workAnnotation(existing, argoapp.AnnotationOperationID); kept != "" {
		terminate := existingPayload[argoapp.AnnotationOperationTerminate]
		if delivered, deliveredID, err := argoapp.DecodeOperationRequest(existingPayload[argoapp.AnnotationOperationRequest]); err == nil &&
			deliveredID == kept && sameJSON(argoapp.WithoutOperationID(delivered), operation) {
			id, terminated = kept, terminate == kept
		}
	}
	value, err := json.Marshal(argoapp.WithOperationID(operation, id))
	if err != nil {
		return fmt.Errorf("encode the operation of application %s/%s: %w", app.GetNamespace(), app.GetName(), err)
	}
	annotations[argoapp.AnnotationOperationRequest] = string(value)
	// Once asked, the termination stays asked until the operation leaves: the hub's
	// phase moves on (the spoke's Failed) before the operation leaves the hub.
	if phase, _, _ := unstructured.NestedString(app.Object, "status", "operationState", "phase"); phase == argoapp.OperationTerminating || terminated {
		annotations[argoapp.AnnotationOperationTerminate] = id
	}
	desired.Annotations = withEntry(desired.Annotations, argoapp.AnnotationOperationID, id)
	return nil
}

// setRefreshID sets, in annotations of the payload, the id of app's refresh request
// (argoapp.AnnotationRefreshID) beside Argo CD's refresh annotation, which the render
// copied: the id in the current work's payload (existingPayload) while that refresh is
// pending, a new one once
// the cluster's agent reports it done (refreshed) or when none was asked. Without a
// refresh, the payload asks for none.
func setRefreshID(existingPayload map[string]string, app *unstructured.Unstructured, refreshed string, annotations map[string]string) {
	annotations[argoapp.AnnotationRefreshID] = ""
	if _, ok := app.GetAnnotations()[argoapp.AnnotationRefresh]; !ok {
		return
	}
	id := argoapp.NewOperationID()
	if kept := existingPayload[argoapp.AnnotationRefreshID]; kept != "" && kept != refreshed {
		id = kept
	}
	annotations[argoapp.AnnotationRefreshID] = id
}

// sameJSON reports whether a and b encode to the same JSON: an operation decoded from
// the payload holds its numbers (a retry limit) as float64, the hub Application's as
// int64.
func sameJSON(a, b any) bool {
	x, errX := json.Marshal(a)
	y, errY := json.Marshal(b)
	return errX == nil && errY == nil && bytes.Equal(x, y)
}

// workAnnotation returns the annotation key of work, "" when work is nil.
func workAnnotation(work *workv1.ManifestWork, key string) string {
	if work == nil {
		return ""
	}
	return work.Annotations[key]
}

// setPayloadAnnotations sets the annotations of the Application in the payload of
// desired, a rendered work (with its manifests whole): each to its value, or removed
// when the value is empty.
func setPayloadAnnotations(desired *workv1.ManifestWork, annotations map[string]string) error {
	for i, manifest := range desired.Spec.Workload.Manifests {
		object := &unstructured.Unstructured{}
		if err := object.UnmarshalJSON(manifest.Raw); err != nil || object.GetKind() != argoapp.KindApplication {
			continue
		}
		current := object.GetAnnotations()
		changed := false
		for key, value := range annotations {
			if current[key] == value {
				continue
			}
			if value == "" {
				if _, ok := current[key]; !ok {
					continue
				}
				delete(current, key)
			} else {
				current = withEntry(current, key, value)
			}
			changed = true
		}
		if !changed {
			return nil
		}
		object.SetAnnotations(current)
		raw, err := object.MarshalJSON()
		if err != nil {
			return fmt.Errorf("encode the payload of work %s/%s: %w", desired.Namespace, desired.Name, err)
		}
		desired.Spec.Workload.Manifests[i].Raw = raw
		return nil
	}
	return nil
}

// testAndRemove removes the field at the JSON pointer path from app if it still holds
// value. It reports false, and no error, when the field changed or went meanwhile.
func (r *reconciler) testAndRemove(ctx context.Context, app *unstructured.Unstructured, path string, value any) (bool, error) {
	patch, err := json.Marshal([]map[string]any{
		{"op": "test", "path": path, "value": value},
		{"op": "remove", "path": path},
	})
	if err != nil {
		return false, err
	}
	err = r.client.Patch(ctx, app, client.RawPatch(types.JSONPatchType, patch), client.FieldOwner(FieldManager))
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsInvalid(err), apierrors.IsNotFound(err):
		// The test failed (the field changed, and its event reconciles again) or the
		// Application is gone.
		ctrl.LoggerFrom(ctx).V(1).Info("the field changed before its removal; keeping it", "path", path, "error", err.Error())
		return false, nil
	default:
		return false, err
	}
}

// appliedAtGeneration reports whether the work agent has applied the current spec of a
// work: its Applied condition is true and observed the work's generation.
func appliedAtGeneration(work *workv1.ManifestWork) bool {
	applied := meta.FindStatusCondition(work.Status.Conditions, workv1.WorkApplied)
	return applied != nil && applied.Status == metav1.ConditionTrue && applied.ObservedGeneration == work.Generation
}
