package propagation

// This file holds the writes to hub Applications: the clean-up finalizer, the
// OCMPropagationError condition, and the removal of a refresh or an operation once the
// managed cluster has it.

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
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
	"github.com/ocm-gitops/argocd-pull-addon/pkg/clusterreport"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/apppatch"
)

// maxEventNoteLength bounds the note of an Event; the events API refuses longer ones.
const maxEventNoteLength = 1000

// report records a problem on the Application: a Warning Event, a log line and the
// OCMPropagationError condition. Without a problem, it removes the condition. Other
// condition types are kept as they are.
func (r *reconciler) report(ctx context.Context, app *unstructured.Unstructured, p *problem) error {
	if p == nil {
		err := r.patchApplication(ctx, app, func(app *unstructured.Unstructured) (bool, error) {
			return argoapp.RemoveCondition(app, argoapp.ConditionOCMPropagationError)
		})
		if err != nil {
			return fmt.Errorf("remove condition %s from application %s/%s: %w",
				argoapp.ConditionOCMPropagationError, app.GetNamespace(), app.GetName(), err)
		}
		return nil
	}
	ctrl.LoggerFrom(ctx).Info("not propagating the application", "reason", p.reason, "message", p.message)
	r.recorder.Eventf(app, nil, corev1.EventTypeWarning, p.reason, eventAction, "%s", truncate(p.message, maxEventNoteLength))
	message := p.reason + ": " + p.message
	err := r.patchApplication(ctx, app, func(app *unstructured.Unstructured) (bool, error) {
		return argoapp.SetCondition(app, argoapp.ConditionOCMPropagationError, message, time.Now())
	})
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

// addFinalizer adds the clean-up finalizer.
func addFinalizer(app *unstructured.Unstructured) (bool, error) {
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

// acknowledgeDelivery removes the refresh annotation and the operation from the hub
// Application once the work that carries them is applied on the managed cluster: the
// work is up to date with the Application, and its Applied condition is true for its
// current generation. The spoke Argo CD acts on them there; on the hub they would only
// block the next request (Argo CD refuses a sync while an operation is set).
//
// Each removal is a JSON patch that first tests the value, so that a newer request
// made meanwhile is never lost. Once removed, the next render drops them from the work,
// and the work agent, which ignores these fields when the spoke changes them, has
// nothing more to apply.
func (r *reconciler) acknowledgeDelivery(ctx context.Context, app *unstructured.Unstructured, work *workv1.ManifestWork) error {
	if !appliedAtGeneration(work) {
		return nil
	}
	log := ctrl.LoggerFrom(ctx)
	if refresh, ok := app.GetAnnotations()[argoapp.AnnotationRefresh]; ok {
		path := "/metadata/annotations/" + escapeJSONPointer(argoapp.AnnotationRefresh)
		removed, err := r.testAndRemove(ctx, app, path, refresh)
		if err != nil {
			return fmt.Errorf("remove the delivered refresh from application %s/%s: %w", app.GetNamespace(), app.GetName(), err)
		}
		if removed {
			log.Info("the refresh reached the managed cluster; removed it from the hub application", "refresh", refresh, "work", client.ObjectKeyFromObject(work))
			r.recorder.Eventf(app, nil, corev1.EventTypeNormal, ReasonRefreshDelivered, eventAction,
				"The %s refresh was applied to cluster %s by ManifestWork %s; removed the annotation %s",
				refresh, work.Namespace, work.Name, argoapp.AnnotationRefresh)
		}
	}
	if operation, ok := app.Object["operation"]; ok && operation != nil {
		removed, err := r.testAndRemove(ctx, app, "/operation", operation)
		if err != nil {
			return fmt.Errorf("remove the delivered operation from application %s/%s: %w", app.GetNamespace(), app.GetName(), err)
		}
		if removed {
			log.Info("the operation reached the managed cluster; removed it from the hub application", "work", client.ObjectKeyFromObject(work))
			r.recorder.Eventf(app, nil, corev1.EventTypeNormal, ReasonOperationDelivered, eventAction,
				"The operation was applied to cluster %s by ManifestWork %s; removed it from the hub application", work.Namespace, work.Name)
		}
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

// escapeJSONPointer escapes a key for a JSON pointer (RFC 6901).
func escapeJSONPointer(key string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(key)
}

// truncate cuts s to at most n bytes, ending with "..." when cut, and never inside a
// UTF-8 sequence: clusterreport.TruncateMessage, the one cut of the hub's messages.
func truncate(s string, n int) string {
	return clusterreport.TruncateMessage(s, n)
}
