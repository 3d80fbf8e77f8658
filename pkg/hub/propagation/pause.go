package propagation

// This file holds the pause switch: one annotation on the ClusterManagementAddOn stops
// every write to ManifestWorks fleet-wide, and a condition on each ManagedClusterAddOn
// of the addon says so.

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	addonv1beta1 "open-cluster-management.io/api/addon/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/hubevents"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/predicates"
)

const (
	// AnnotationPausePropagation, set to "true" on the ClusterManagementAddOn of the
	// addon, pauses propagation fleet-wide: no ManifestWork is created, updated or
	// deleted, and nothing already deployed is touched. Removing it, or setting it to
	// "false", resumes. A value that is not a boolean also pauses.
	AnnotationPausePropagation = "apps.open-cluster-management.io/pause-propagation"

	// ConditionPropagationPaused is the type of the condition on each
	// ManagedClusterAddOn of the addon that says whether propagation is paused.
	ConditionPropagationPaused = "PropagationPaused"
)

// Reasons of the PropagationPaused condition.
const (
	ReasonPauseAnnotationSet     = "PauseAnnotationSet"
	ReasonPauseAnnotationInvalid = "PauseAnnotationInvalid"
	ReasonPauseAnnotationNotSet  = "PauseAnnotationNotSet"
)

// pauseReconciler keeps the PropagationPaused condition of one ManagedClusterAddOn.
type pauseReconciler struct {
	client   client.Client
	recorder events.EventRecorder
	opts     Options
}

func setupPauseController(mgr ctrl.Manager, c client.Client, opts Options) error {
	r := &pauseReconciler{client: c, recorder: hubevents.Recorder(mgr, PauseControllerName), opts: opts}
	err := ctrl.NewControllerManagedBy(mgr).
		Named(PauseControllerName).
		For(&addonv1beta1.ManagedClusterAddOn{}, builder.WithPredicates(named(opts.AddonName), pauseConditionChanged)).
		Watches(&addonv1beta1.ClusterManagementAddOn{}, handler.EnqueueRequestsFromMapFunc(r.mapToAddons),
			builder.WithPredicates(named(opts.AddonName), pauseChanged)).
		WithOptions(controller.Options{MaxConcurrentReconciles: opts.Concurrency}).
		Complete(r)
	if err != nil {
		return fmt.Errorf("set up the pause controller: %w", err)
	}
	return nil
}

// Reconcile sets the PropagationPaused condition of a ManagedClusterAddOn, with
// server-side apply on its status: the conditions are a list keyed by type, so the
// addon framework's conditions stay as they are.
func (r *pauseReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	addon := &addonv1beta1.ManagedClusterAddOn{}
	if err := r.client.Get(ctx, req.NamespacedName, addon); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if addon.DeletionTimestamp != nil {
		return ctrl.Result{}, nil
	}
	cma := &addonv1beta1.ClusterManagementAddOn{}
	if err := r.client.Get(ctx, types.NamespacedName{Name: r.opts.AddonName}, cma); client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, fmt.Errorf("get cluster management addon %s: %w", r.opts.AddonName, err)
	}
	desired := r.pauseCondition(cma.Annotations, addon.Generation)
	existing := meta.FindStatusCondition(addon.Status.Conditions, ConditionPropagationPaused)
	if existing != nil && existing.Status == desired.Status && existing.Reason == desired.Reason &&
		existing.Message == desired.Message && existing.ObservedGeneration == desired.ObservedGeneration {
		return ctrl.Result{}, nil
	}
	desired.LastTransitionTime = metav1.NewTime(time.Now().Truncate(time.Second))
	if existing != nil && existing.Status == desired.Status {
		desired.LastTransitionTime = existing.LastTransitionTime
	}
	condition, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&desired)
	if err != nil {
		return ctrl.Result{}, err
	}
	status := &unstructured.Unstructured{Object: map[string]any{
		"status": map[string]any{"conditions": []any{condition}},
	}}
	status.SetGroupVersionKind(schema.GroupVersion(addonv1beta1.GroupVersion).WithKind("ManagedClusterAddOn"))
	status.SetNamespace(addon.Namespace)
	status.SetName(addon.Name)
	err = r.client.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(status),
		client.FieldOwner(PauseFieldManager), client.ForceOwnership)
	if apierrors.IsNotFound(err) {
		return ctrl.Result{}, nil
	}
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("apply condition %s to managed cluster addon %s: %w", ConditionPropagationPaused, req.NamespacedName, err)
	}
	log.Info("set the pause condition", "status", desired.Status, "reason", desired.Reason)
	if existing == nil && desired.Status == metav1.ConditionFalse {
		return ctrl.Result{}, nil // nothing happened: propagation runs, as before
	}
	if existing == nil || existing.Status != desired.Status {
		reason := ReasonPropagationResumed
		if desired.Status == metav1.ConditionTrue {
			reason = ReasonPropagationPaused
		}
		r.recorder.Eventf(addon, nil, corev1.EventTypeNormal, reason, eventAction, "%s", desired.Message)
	}
	return ctrl.Result{}, nil
}

// pauseCondition returns the PropagationPaused condition for the annotations of the
// ClusterManagementAddOn, without its transition time.
func (r *pauseReconciler) pauseCondition(annotations map[string]string, generation int64) metav1.Condition {
	paused, invalid := pauseState(annotations)
	condition := metav1.Condition{
		Type:               ConditionPropagationPaused,
		Status:             metav1.ConditionFalse,
		Reason:             ReasonPauseAnnotationNotSet,
		Message:            "Hub Applications are propagated to ManifestWorks",
		ObservedGeneration: generation,
	}
	switch {
	case paused && invalid != "":
		condition.Status, condition.Reason = metav1.ConditionTrue, ReasonPauseAnnotationInvalid
		condition.Message = "Propagation is paused fleet-wide: " + invalid
	case paused:
		condition.Status, condition.Reason = metav1.ConditionTrue, ReasonPauseAnnotationSet
		condition.Message = fmt.Sprintf("Propagation is paused fleet-wide by the annotation %s on ClusterManagementAddOn %q: "+
			"no ManifestWork is created, updated or deleted until it is removed", AnnotationPausePropagation, r.opts.AddonName)
	}
	return condition
}

// mapToAddons enqueues every ManagedClusterAddOn of the addon.
func (r *pauseReconciler) mapToAddons(ctx context.Context, _ client.Object) []reconcile.Request {
	addons := &addonv1beta1.ManagedClusterAddOnList{}
	if err := r.client.List(ctx, addons); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "list the managed cluster addons")
		return nil
	}
	var requests []reconcile.Request
	for i := range addons.Items {
		if addons.Items[i].Name == r.opts.AddonName {
			requests = append(requests, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&addons.Items[i])})
		}
	}
	return requests
}

// pauseConditionChanged keeps the updates of a ManagedClusterAddOn that change its
// generation or the PropagationPaused condition, for example when another writer drops
// it.
var pauseConditionChanged = predicates.OnUpdate(func(oldAddon, newAddon *addonv1beta1.ManagedClusterAddOn) bool {
	oldCondition := meta.FindStatusCondition(oldAddon.Status.Conditions, ConditionPropagationPaused)
	newCondition := meta.FindStatusCondition(newAddon.Status.Conditions, ConditionPropagationPaused)
	return oldAddon.Generation != newAddon.Generation || (oldCondition == nil) != (newCondition == nil) ||
		(oldCondition != nil && (*oldCondition != *newCondition))
})
