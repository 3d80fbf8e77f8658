package propagation

// This file holds the reconcile of one hub Application: from the Application, the
// cluster's opt-in, the tenant gate and the pause switch, to the one ManifestWork that
// should exist for it, or none.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	addonv1beta1 "open-cluster-management.io/api/addon/v1beta1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	workv1 "open-cluster-management.io/api/work/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
)

// Reasons of the Events and of the OCMPropagationError condition that report why a hub
// Application is not propagated, besides the RenderError reasons of render.go.
const (
	// ReasonMalformedLabel: the pull label does not parse as a boolean. The existing
	// work, if any, is left as it is until the label says true or false.
	ReasonMalformedLabel = "MalformedLabel"
	// ReasonMissingSkipReconcile (a warning Event only): the pulled Application lacks
	// skip-reconcile, so the hub Argo CD deploys it too. It is still pulled.
	ReasonMissingSkipReconcile = "MissingSkipReconcile"
	// ReasonClusterNotFound: the target ManagedCluster does not exist, or is being
	// deleted.
	ReasonClusterNotFound = "ClusterNotFound"
	// ReasonAddonNotEnabled: the target cluster has no ManagedClusterAddOn of the addon.
	ReasonAddonNotEnabled = "AddonNotEnabled"
	// ReasonClusterNotBoundToNamespace: the tenant gate is on, and no PlacementDecision
	// in the Application's namespace selects the target cluster.
	ReasonClusterNotBoundToNamespace = "ClusterNotBoundToNamespace"
)

// Reasons of the Normal Events that record what the controller did.
const (
	ReasonManifestWorkApplied = "ManifestWorkApplied"
	ReasonManifestWorkDeleted = "ManifestWorkDeleted"
	ReasonRefreshDelivered    = "RefreshDelivered"
	ReasonOperationDelivered  = "OperationDelivered"
	// ReasonPropagationPaused: a change waits because propagation is paused.
	ReasonPropagationPaused  = "PropagationPaused"
	ReasonPropagationResumed = "PropagationResumed"
)

// eventAction is the action of the Events this controller records.
const eventAction = "Propagate"

// reconciler reconciles one hub Application with its ManifestWork.
type reconciler struct {
	// client reads from the manager's cache and writes to the apiserver.
	client client.Client
	// apiReader reads from the apiserver: to confirm before deleting on a cache miss,
	// and to retry a conflicting write.
	apiReader client.Reader
	recorder  events.EventRecorder
	opts      Options
}

// problem is bad input that keeps an Application from propagating: it is recorded on the
// Application, not retried.
type problem struct {
	reason  string
	message string
}

// outcome is what a live hub Application asks for.
type outcome struct {
	// work is the ManifestWork to keep applied; nil when the Application must have none.
	work *workv1.ManifestWork
	// freeze leaves the existing works as they are: the input is broken, and the last
	// good work is kept rather than deleted (which would prune the managed cluster).
	freeze bool
	// problem, when set, is reported on the Application.
	problem *problem
}

// Reconcile makes the ManifestWorks of one hub Application match it: at most one work,
// in the namespace of its target cluster, rendered from its current content; none when
// the Application is not pulled, is gone, or may not reach its cluster.
func (r *reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if !r.opts.watches(req.Namespace) {
		return ctrl.Result{}, nil
	}
	works, err := r.worksOf(ctx, req.NamespacedName)
	if err != nil {
		return ctrl.Result{}, err
	}
	paused, err := r.paused(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	app := argoapp.NewApplication()
	if err := r.client.Get(ctx, req.NamespacedName, app); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, r.cleanUpAfterDeletion(ctx, req.NamespacedName, works, paused)
		}
		return ctrl.Result{}, fmt.Errorf("get application %s: %w", req.NamespacedName, err)
	}
	if app.GetDeletionTimestamp() != nil {
		return ctrl.Result{}, r.finalize(ctx, app, works, paused)
	}
	return ctrl.Result{}, r.propagate(ctx, app, works, paused)
}

// propagate reconciles a live Application.
func (r *reconciler) propagate(ctx context.Context, app *unstructured.Unstructured, works []workv1.ManifestWork, paused bool) error {
	log := ctrl.LoggerFrom(ctx)
	out, err := r.decide(ctx, app)
	if err != nil {
		return err
	}
	if err := r.report(ctx, app, out.problem); err != nil {
		return err
	}
	if out.freeze {
		return nil
	}

	var current *workv1.ManifestWork
	var stale []workv1.ManifestWork
	for i := range works {
		if out.work != nil && works[i].Namespace == out.work.Namespace && works[i].Name == out.work.Name {
			current = &works[i]
		} else {
			stale = append(stale, works[i])
		}
	}
	// A current work on its way out (the Application came back to a cluster it had just
	// left) is recreated once it is gone: its deletion event reconciles again.
	recreating := current != nil && current.DeletionTimestamp != nil
	needsApply := out.work != nil && !recreating && (current == nil || !workUpToDate(current, out.work))
	if needsApply {
		// The cache may not have caught up with our last write yet: confirm with the
		// apiserver, so that the same content is never applied twice.
		live, err := r.liveWork(ctx, client.ObjectKeyFromObject(out.work))
		if err != nil {
			return err
		}
		if live != nil && live.DeletionTimestamp == nil && workUpToDate(live, out.work) {
			current, needsApply = live, false
		}
	}
	if paused {
		if needsApply || len(stale) > 0 {
			log.Info("propagation is paused; the ManifestWorks are left as they are", "staleWorks", len(stale), "pendingApply", needsApply)
			r.recorder.Eventf(app, nil, corev1.EventTypeNormal, ReasonPropagationPaused, eventAction,
				"Propagation is paused by the annotation %s on ClusterManagementAddOn %q; this change waits until it is resumed",
				AnnotationPausePropagation, r.opts.AddonName)
		}
		return nil
	}
	if recreating {
		log.Info("waiting for the ManifestWork to be deleted before creating it again", "work", client.ObjectKeyFromObject(current))
	}

	if out.work != nil {
		if err := r.patchApplication(ctx, app, addFinalizer); err != nil {
			return fmt.Errorf("add finalizer to application %s/%s: %w", app.GetNamespace(), app.GetName(), err)
		}
		if needsApply {
			if err := r.applyWork(ctx, out.work); err != nil {
				return err
			}
			log.Info("applied ManifestWork", "work", client.ObjectKeyFromObject(out.work), "created", current == nil)
			r.recorder.Eventf(app, nil, corev1.EventTypeNormal, ReasonManifestWorkApplied, eventAction,
				"Applied ManifestWork %s/%s", out.work.Namespace, out.work.Name)
		}
	}
	// The new work first, then the stale ones: a work left by an earlier UID of the
	// Application (deleted without our finalizer) carries the same spoke Application in
	// the same cluster, and deleting it first would delete, and prune, that Application.
	if err := r.deleteWorks(ctx, app, stale); err != nil {
		return err
	}
	if out.work == nil && len(works) == 0 {
		if err := r.patchApplication(ctx, app, removeFinalizer); err != nil {
			return fmt.Errorf("remove finalizer from application %s/%s: %w", app.GetNamespace(), app.GetName(), err)
		}
	}
	if out.work != nil && !needsApply && !recreating {
		return r.acknowledgeDelivery(ctx, app, current)
	}
	return nil
}

// decide works out what a live Application asks for.
func (r *reconciler) decide(ctx context.Context, app *unstructured.Unstructured) (outcome, error) {
	pull, err := argoapp.PullLabelValue(app.GetLabels())
	if err != nil {
		return outcome{freeze: true, problem: &problem{ReasonMalformedLabel,
			err.Error() + "; the ManifestWorks of this application are left as they are until it is true or false"}}, nil
	}
	if !pull {
		return outcome{}, nil
	}
	if app.GetAnnotations()[argoapp.AnnotationOCMManagedCluster] != "" && !argoapp.IsReconcileSkipped(app.GetAnnotations()) {
		ctrl.LoggerFrom(ctx).Info("pulled application lacks skip-reconcile; the hub Argo CD also deploys it")
		r.recorder.Eventf(app, nil, corev1.EventTypeWarning, ReasonMissingSkipReconcile, eventAction,
			"The application is pulled, but its annotation %s is not \"true\": the hub Argo CD deploys it as well (push model). Set it to pull only",
			argoapp.AnnotationSkipReconcile)
	}

	project, err := r.appProjectOf(ctx, app)
	if err != nil {
		return outcome{}, err
	}
	work, err := RenderManifestWork(app, RenderOptions{AppProject: project})
	if err != nil {
		var renderErr *RenderError
		if errors.As(err, &renderErr) {
			return outcome{freeze: true, problem: &problem{renderErr.Reason, renderErr.Error()}}, nil
		}
		return outcome{}, err
	}

	cluster := work.Namespace
	managedCluster := &clusterv1.ManagedCluster{}
	if err := r.client.Get(ctx, types.NamespacedName{Name: cluster}, managedCluster); client.IgnoreNotFound(err) != nil {
		return outcome{}, fmt.Errorf("get managed cluster %s: %w", cluster, err)
	} else if err != nil || managedCluster.DeletionTimestamp != nil {
		return outcome{problem: &problem{ReasonClusterNotFound,
			fmt.Sprintf("ManagedCluster %q does not exist or is being deleted", cluster)}}, nil
	}
	addon := &addonv1beta1.ManagedClusterAddOn{}
	if err := r.client.Get(ctx, types.NamespacedName{Namespace: cluster, Name: r.opts.AddonName}, addon); client.IgnoreNotFound(err) != nil {
		return outcome{}, fmt.Errorf("get managed cluster addon %s/%s: %w", cluster, r.opts.AddonName, err)
	} else if err != nil || addon.DeletionTimestamp != nil {
		return outcome{problem: &problem{ReasonAddonNotEnabled,
			fmt.Sprintf("cluster %q has no ManagedClusterAddOn %q; enable the addon on the cluster", cluster, r.opts.AddonName)}}, nil
	}
	if r.opts.RequirePlacementBinding {
		bound, err := r.boundToNamespace(ctx, app.GetNamespace(), cluster)
		if err != nil {
			return outcome{}, err
		}
		if !bound {
			return outcome{problem: &problem{ReasonClusterNotBoundToNamespace,
				fmt.Sprintf("no PlacementDecision in namespace %q selects cluster %q", app.GetNamespace(), cluster)}}, nil
		}
	}
	return outcome{work: work}, nil
}

// finalize deletes the works of an Application being deleted, and then releases it.
//
// The Application is held by our finalizer until all its works are gone, that is until
// the work agent has deleted the Application on the managed cluster, which itself waits
// for the spoke Argo CD to prune when it carries the resources finalizer. Then our
// finalizer goes, and so do the Argo CD finalizers of a pulled Application that the hub
// Argo CD skips: they were meant for the spoke, and nobody else would remove them on
// the hub. An Application that is not skipped keeps them for the hub Argo CD.
func (r *reconciler) finalize(ctx context.Context, app *unstructured.Unstructured, works []workv1.ManifestWork, paused bool) error {
	log := ctrl.LoggerFrom(ctx)
	ours := slices.Contains(app.GetFinalizers(), argoapp.FinalizerManifestWorkCleanup)
	pulled, _ := argoapp.PullLabelValue(app.GetLabels())
	if !ours && !pulled && len(works) == 0 {
		return nil // not ours
	}
	if len(works) > 0 {
		if paused {
			log.Info("propagation is paused; the deleted application waits for its ManifestWorks to be deleted", "works", len(works))
			r.recorder.Eventf(app, nil, corev1.EventTypeNormal, ReasonPropagationPaused, eventAction,
				"Propagation is paused by the annotation %s on ClusterManagementAddOn %q; the ManifestWorks of this application are deleted when it is resumed",
				AnnotationPausePropagation, r.opts.AddonName)
			return nil
		}
		// Wait for the deletions to complete: each one is an event that reconciles again.
		return r.deleteWorks(ctx, app, works)
	}
	releaseArgoCD := (ours || pulled) && argoapp.IsReconcileSkipped(app.GetAnnotations())
	var removed []string
	err := r.patchApplication(ctx, app, func(app *unstructured.Unstructured) (bool, error) {
		removed = nil
		kept := slices.DeleteFunc(slices.Clone(app.GetFinalizers()), func(f string) bool {
			if f == argoapp.FinalizerManifestWorkCleanup || (releaseArgoCD && isArgoCDFinalizer(f)) {
				removed = append(removed, f)
				return true
			}
			return false
		})
		if len(removed) == 0 {
			return false, nil
		}
		app.SetFinalizers(kept)
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("release deleted application %s/%s: %w", app.GetNamespace(), app.GetName(), err)
	}
	if len(removed) > 0 {
		log.Info("released the deleted application: it has no ManifestWork left", "removedFinalizers", removed)
	}
	return nil
}

// cleanUpAfterDeletion deletes the works of an Application that no longer exists: one
// deleted without our finalizer, or before the controller ran.
func (r *reconciler) cleanUpAfterDeletion(ctx context.Context, key types.NamespacedName, works []workv1.ManifestWork, paused bool) error {
	if len(works) == 0 {
		return nil
	}
	log := ctrl.LoggerFrom(ctx)
	// Never delete on a cache miss alone.
	if err := r.apiReader.Get(ctx, key, argoapp.NewApplication()); err == nil {
		return nil // the cache lags; its event will come
	} else if !apierrors.IsNotFound(err) {
		return fmt.Errorf("confirm that application %s is gone: %w", key, err)
	}
	if paused {
		log.Info("propagation is paused; the ManifestWorks of a deleted application wait", "works", len(works))
		return nil
	}
	log.Info("deleting the ManifestWorks of an application that no longer exists", "works", len(works))
	return r.deleteWorks(ctx, nil, works)
}

// liveWork reads a work from the apiserver; nil when it does not exist.
func (r *reconciler) liveWork(ctx context.Context, key types.NamespacedName) (*workv1.ManifestWork, error) {
	work := &workv1.ManifestWork{}
	if err := r.apiReader.Get(ctx, key, work); apierrors.IsNotFound(err) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("get manifestwork %s: %w", key, err)
	}
	return work, nil
}

// worksOf returns the pulled ManifestWorks that point back to the Application key.
func (r *reconciler) worksOf(ctx context.Context, key types.NamespacedName) ([]workv1.ManifestWork, error) {
	works := &workv1.ManifestWorkList{}
	if err := r.client.List(ctx, works, client.MatchingFields{indexWorkByApplication: key.String()}); err != nil {
		return nil, fmt.Errorf("list the ManifestWorks of application %s: %w", key, err)
	}
	return works.Items, nil
}

// paused reports whether the pause switch is on: the annotation
// AnnotationPausePropagation on the ClusterManagementAddOn. See pauseState.
func (r *reconciler) paused(ctx context.Context) (bool, error) {
	cma := &addonv1beta1.ClusterManagementAddOn{}
	if err := r.client.Get(ctx, types.NamespacedName{Name: r.opts.AddonName}, cma); client.IgnoreNotFound(err) != nil {
		return false, fmt.Errorf("get cluster management addon %s: %w", r.opts.AddonName, err)
	} else if err != nil {
		return false, nil
	}
	paused, _ := pauseState(cma.Annotations)
	return paused, nil
}

// appProjectOf returns the hub AppProject of an Application that uses another project
// than "default", from the Argo CD namespace, or nil: then the work carries the
// Application alone and the managed cluster must have the project.
func (r *reconciler) appProjectOf(ctx context.Context, app *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	project, _, _ := unstructured.NestedString(app.Object, "spec", "project")
	if project == "" || project == argoapp.DefaultProject {
		return nil, nil
	}
	appProject := argoapp.NewAppProject()
	err := r.client.Get(ctx, types.NamespacedName{Namespace: r.opts.ArgoCDNamespace, Name: project}, appProject)
	if apierrors.IsNotFound(err) {
		ctrl.LoggerFrom(ctx).V(1).Info("the hub has no AppProject of the application; the managed cluster must have it",
			"project", project, "namespace", r.opts.ArgoCDNamespace)
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get app project %s/%s: %w", r.opts.ArgoCDNamespace, project, err)
	}
	return appProject, nil
}

// boundToNamespace reports whether a PlacementDecision in namespace selects cluster.
func (r *reconciler) boundToNamespace(ctx context.Context, namespace, cluster string) (bool, error) {
	decisions := &clusterv1beta1.PlacementDecisionList{}
	if err := r.client.List(ctx, decisions, client.InNamespace(namespace)); err != nil {
		return false, fmt.Errorf("list the placement decisions of namespace %s: %w", namespace, err)
	}
	for i := range decisions.Items {
		if slices.Contains(selectedClusters(&decisions.Items[i]), cluster) {
			return true, nil
		}
	}
	return false, nil
}

// pauseState reads the pause annotation: paused when it parses as true. A value that
// does not parse as a boolean also pauses, since pausing is the safe side of a typo;
// the second result says why, for the PropagationPaused condition.
func pauseState(annotations map[string]string) (bool, string) {
	value, ok := annotations[AnnotationPausePropagation]
	if !ok {
		return false, ""
	}
	paused, err := strconv.ParseBool(value)
	if err != nil {
		return true, fmt.Sprintf("the annotation %s=%q is not a boolean; propagation stays paused until it is \"false\" or removed",
			AnnotationPausePropagation, value)
	}
	return paused, ""
}
