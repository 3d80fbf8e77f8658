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
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	addonv1beta1 "open-cluster-management.io/api/addon/v1beta1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	workv1 "open-cluster-management.io/api/work/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/apppatch"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/statusslices"
)

// Reasons of the Events and of the OCMPropagationError condition that report why a hub
// Application is not propagated, besides the RenderError reasons of render.go.
const (
	// ReasonMalformedLabel: the pull label does not parse as a boolean. The existing
	// work, if any, is left as it is until the label says true or false.
	ReasonMalformedLabel = "MalformedLabel"
	// ReasonMissingSkipReconcile: the Application asks to be pulled but lacks
	// skip-reconcile, so the hub Argo CD would deploy it too, and fight the status
	// mirror. It is not pulled; an existing work is left as it is.
	ReasonMissingSkipReconcile = "MissingSkipReconcile"
	// ReasonLocalClusterNotSupported: the target is the hub's own ManagedCluster, which
	// the pull model excludes. No work; an existing one is left as it is.
	ReasonLocalClusterNotSupported = "LocalClusterNotSupported"
	// ReasonSpokeApplicationConflict: another hub Application already owns the
	// Application this one would create on the managed cluster (same cluster, namespace
	// and name). No work.
	ReasonSpokeApplicationConflict = "SpokeApplicationConflict"
	// ReasonAppProjectNotPermitted: the Application is outside the hub Argo CD's
	// namespace, and its hub AppProject does not permit its namespace
	// (spec.sourceNamespaces), its source repositories or its destination, as the hub
	// Argo CD itself would refuse. No work; an existing one is left as it is.
	ReasonAppProjectNotPermitted = "AppProjectNotPermitted"
	// ReasonAppProjectNotFound: the Application is outside the hub Argo CD's namespace,
	// and its AppProject does not exist on the hub. No work; an existing one is left as
	// it is.
	ReasonAppProjectNotFound = "AppProjectNotFound"
	// ReasonSpokeApplicationNotPulled: the managed cluster already has an Application of
	// the name and namespace the work would apply, which its agent reports as another hub
	// Application's (or as no hub Application's), and the hub Application does not opt
	// in to adopt it (argoapp.AnnotationAdoptSpokeApplication). No work; the check is
	// repeated every spokeApplicationRecheck.
	ReasonSpokeApplicationNotPulled = "SpokeApplicationNotPulled"
	// ReasonOverrideNotPermitted: the Application's .operation carries what argocd-server
	// accepts only from a user with the applications' override permission (inline
	// manifests in .operation.sync.manifests), which a ManifestWork cannot check. No
	// work; an existing one is left as it is.
	ReasonOverrideNotPermitted = "OverrideNotPermitted"

	// The reasons below say that the cluster is not a target of the Application (any
	// more). No new work is created; an existing work is kept for
	// Settings.OptOutGracePeriod, and deleted once the loss lasted that long.

	// ReasonClusterNotFound: the target ManagedCluster does not exist, or is being
	// deleted.
	ReasonClusterNotFound = "ClusterNotFound"
	// ReasonAddonNotEnabled: the target cluster has no ManagedClusterAddOn of the addon.
	ReasonAddonNotEnabled = "AddonNotEnabled"
	// ReasonClusterNotBoundToNamespace: the tenant gate is on, and no PlacementDecision
	// of a Placement in the Application's namespace selects the target cluster.
	ReasonClusterNotBoundToNamespace = "ClusterNotBoundToNamespace"
)

// LabelLocalCluster, set to "true" on a ManagedCluster, marks the hub's own cluster, as
// ACM labels its local-cluster.
const LabelLocalCluster = "local-cluster"

// Reasons of the Normal Events that record what the controller changed. A routine apply
// of a work records none (a log line only): it is the everyday success of every
// Application, and an Event each would double the requests of propagation.
const (
	ReasonManifestWorkDeleted = "ManifestWorkDeleted"
	// ReasonOperationCompleted: the spoke Argo CD ran the operation of the hub
	// Application, and the controller removed it from the hub Application.
	ReasonOperationCompleted = "OperationCompleted"
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
	// problems counts the Applications that are not propagated, by reason.
	problems *problemTracker
	// applied is what this process applied last to the works its cache does not show
	// yet.
	applied appliedWorks
	// reports reads what the agents report of the Applications on their clusters.
	reports *statusslices.Reader
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
	// recheckAfter, when set, reconciles the Application again after that long: the
	// end of a grace period.
	recheckAfter time.Duration
}

// Reconcile makes the ManifestWorks of one hub Application match it: at most one work,
// in the namespace of its target cluster, rendered from its current content; none when
// the Application is not pulled, is gone, or may not reach its cluster.
func (r *reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if !r.opts.watches(req.Namespace) {
		return ctrl.Result{}, nil
	}
	works, foreign, err := r.worksOf(ctx, req.NamespacedName)
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
			r.problems.set(req.NamespacedName, "")
			return ctrl.Result{}, r.cleanUpAfterDeletion(ctx, req.NamespacedName, works, paused)
		}
		return ctrl.Result{}, fmt.Errorf("get application %s: %w", req.NamespacedName, err)
	}
	if app.GetDeletionTimestamp() != nil {
		r.problems.set(req.NamespacedName, "")
		return ctrl.Result{}, r.finalize(ctx, app, works, len(foreign) > 0, paused)
	}
	return r.propagate(ctx, app, works, foreign, paused)
}

// propagate reconciles a live Application.
func (r *reconciler) propagate(ctx context.Context, app *unstructured.Unstructured, works, foreign []workv1.ManifestWork, paused bool) (ctrl.Result, error) {
	out, err := r.decide(ctx, app, works, foreign)
	if err != nil {
		return ctrl.Result{}, err
	}
	// The clean-up finalizer that converge adds before it applies the work goes in the
	// same patch as the condition.
	var finalizer apppatch.Mutation
	if out.work != nil && !out.freeze && !paused {
		finalizer = addCleanupFinalizer
	}
	if err := r.recordProblem(ctx, app, out.problem, finalizer); err != nil {
		return ctrl.Result{}, err
	}
	reason := ""
	if out.problem != nil {
		reason = out.problem.reason
	}
	r.problems.set(client.ObjectKeyFromObject(app), reason)
	result := ctrl.Result{RequeueAfter: out.recheckAfter}
	if out.freeze {
		return result, nil
	}
	return result, r.converge(ctx, app, works, out, paused)
}

// converge makes the works of a live Application match out: the work applied, the
// others deleted.
func (r *reconciler) converge(ctx context.Context, app *unstructured.Unstructured, works []workv1.ManifestWork, out outcome, paused bool) error {
	log := ctrl.LoggerFrom(ctx)

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
	var key types.NamespacedName
	var last appliedWork
	var lagging, unsure bool
	refreshed := ""
	if out.work != nil {
		// What the agent reports is read only for an app that asks for a refresh: Find
		// scans the entries of the cluster's slices.
		if _, asked := app.GetAnnotations()[argoapp.AnnotationRefresh]; asked && r.reports != nil {
			if reported := r.reports.Find(out.work.Namespace, out.work.Name, client.ObjectKeyFromObject(app)); reported != nil {
				refreshed = reported.Refreshed
			}
		}
		if err := setRequests(out.work, current, app, refreshed); err != nil {
			return err
		}
		key = client.ObjectKeyFromObject(out.work)
		last, lagging, unsure = r.applied.lookup(key, current)
	}
	needsApply := out.work != nil && !recreating && (current == nil || !workUpToDate(current, out.work))
	if needsApply && (unsure || out.work.Annotations[argoapp.AnnotationOperationID] != "") {
		// The cache cannot tell: it does not show a work this process applied (not yet,
		// or it was deleted since), or the work delivers an operation, whose id must come
		// from the freshest work (a cache that lags behind this process's own write of
		// the work would make a second id for the same operation, and the agent would
		// run it again). Confirm with the apiserver, so that the same content is never
		// applied twice.
		live, err := r.liveWork(ctx, key)
		if err != nil {
			return err
		}
		if live != nil && live.DeletionTimestamp == nil {
			if err := setRequests(out.work, live, app, refreshed); err != nil {
				return err
			}
			if workUpToDate(live, out.work) {
				current, needsApply = live, false
			}
		}
	}
	var applied *appliedConfiguration
	if needsApply {
		var err error
		if applied, err = newAppliedConfiguration(out.work); err != nil {
			return err
		}
		if lagging && applied.fingerprint == last.fingerprint {
			// The cache has not caught up with this process's last apply, which already
			// holds this content: the event of that write reconciles again.
			log.V(1).Info("the cache has not shown the last apply of the ManifestWork yet; not applying it again", "work", key)
			needsApply = false
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
		if err := r.patchApplication(ctx, app, addCleanupFinalizer); err != nil {
			return fmt.Errorf("add finalizer to application %s/%s: %w", app.GetNamespace(), app.GetName(), err)
		}
		if needsApply {
			if err := r.applyWork(ctx, applied); err != nil {
				return err
			}
			log.Info("applied ManifestWork", "work", key, "created", current == nil)
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

// decide works out what a live Application asks for, given its current works.
//
// Input that is wrong (a malformed label, a missing skip-reconcile, an unrenderable
// spec, the hub's own cluster, a project the namespace may not use, a collision with
// another Application) freezes the works: the last good work stays, since deleting it
// would prune the managed cluster over a typo. A cluster that stops being a target is
// given OptOutGracePeriod before its works go (see lostTarget). Only a deliberate
// opt-out of the Application itself (its pull label false or removed) deletes at once.
func (r *reconciler) decide(ctx context.Context, app *unstructured.Unstructured, works, foreign []workv1.ManifestWork) (outcome, error) {
	pull, err := argoapp.PullLabelValue(app.GetLabels())
	if err != nil {
		return refuse(ReasonMalformedLabel, err.Error()+"; the ManifestWorks of this application are left as they are until it is true or false"), nil
	}
	if !pull {
		return outcome{}, nil
	}
	if len(foreign) > 0 {
		return r.servedByAnother(foreign), nil
	}
	if app.GetAnnotations()[argoapp.AnnotationOCMManagedCluster] != "" && !argoapp.IsReconcileSkipped(app.GetAnnotations()) {
		return refuse(ReasonMissingSkipReconcile, fmt.Sprintf(
			"the application asks to be pulled but its annotation %s is not \"true\": the hub Argo CD would deploy it as well (push model); set it to pull the application",
			argoapp.AnnotationSkipReconcile)), nil
	}

	if argoapp.HasInlineManifests(app) {
		return refuse(ReasonOverrideNotPermitted,
			"the application's .operation.sync.manifests holds inline manifests, which the hub Argo CD accepts only from a user with the override permission; they are not pulled. Sync from the application's sources (argocd app sync without --local), or remove .operation"), nil
	}
	project, p, err := r.appProjectOf(ctx, app)
	if err != nil || p != nil {
		return outcome{freeze: p != nil, problem: p}, err
	}
	if p, err := r.operationSourcesProblem(ctx, app, project); err != nil || p != nil {
		return outcome{freeze: p != nil, problem: p}, err
	}
	work, err := RenderManifestWork(app, RenderOptions{AppProject: project})
	if err != nil {
		var renderErr *RenderError
		if errors.As(err, &renderErr) {
			return refuse(renderErr.Reason, renderErr.Error()), nil
		}
		return outcome{}, err
	}
	work.Labels = withEntry(work.Labels, argoapp.LabelAddon, r.opts.AddonName)

	cluster := work.Namespace
	managedCluster := &clusterv1.ManagedCluster{}
	if err := r.client.Get(ctx, types.NamespacedName{Name: cluster}, managedCluster); client.IgnoreNotFound(err) != nil {
		return outcome{}, fmt.Errorf("get managed cluster %s: %w", cluster, err)
	} else if err == nil && r.isHubCluster(managedCluster) || cluster == r.opts.HubClusterName {
		return refuse(ReasonLocalClusterNotSupported, fmt.Sprintf(
			"cluster %q is the hub's own cluster, which the pull model does not target; the hub Argo CD deploys to it directly (push model)", cluster)), nil
	} else if err != nil || managedCluster.DeletionTimestamp != nil {
		return r.lostTarget(app, cluster, works, ReasonClusterNotFound,
			fmt.Sprintf("ManagedCluster %q does not exist or is being deleted", cluster)), nil
	}
	addon := &addonv1beta1.ManagedClusterAddOn{}
	if err := r.client.Get(ctx, types.NamespacedName{Namespace: cluster, Name: r.opts.AddonName}, addon); client.IgnoreNotFound(err) != nil {
		return outcome{}, fmt.Errorf("get managed cluster addon %s/%s: %w", cluster, r.opts.AddonName, err)
	} else if err != nil || addon.DeletionTimestamp != nil {
		return r.lostTarget(app, cluster, works, ReasonAddonNotEnabled,
			fmt.Sprintf("cluster %q has no ManagedClusterAddOn %q; enable the addon on the cluster", cluster, r.opts.AddonName)), nil
	}
	if r.opts.RequirePlacementBinding {
		bound, err := r.boundToNamespace(ctx, app.GetNamespace(), cluster)
		if err != nil {
			return outcome{}, err
		}
		if !bound {
			return r.lostTarget(app, cluster, works, ReasonClusterNotBoundToNamespace,
				fmt.Sprintf("no PlacementDecision of a Placement in namespace %q selects cluster %q", app.GetNamespace(), cluster)), nil
		}
	}
	if owner, err := r.spokeApplicationOwner(ctx, app, work); err != nil {
		return outcome{}, err
	} else if owner != nil {
		return conflict(works, work, owner), nil
	}
	if p := r.notPulledSpokeApplication(app, cluster, works); p != nil {
		return outcome{freeze: true, problem: p, recheckAfter: spokeApplicationRecheck}, nil
	}
	return outcome{work: work}, nil
}

// spokeApplicationRecheck is how often an Application refused for a spoke-local
// Application of its name checks again whether that one is gone.
const spokeApplicationRecheck = 30 * time.Second

// notPulledSpokeApplication returns the problem of an Application whose first work on
// cluster would take over an Application there that this one did not pull: the work
// agent's forced server-side apply would replace it silently, and the work's deletion
// would delete it. The cluster's agent reports the Applications that came from a hub,
// with the hub Application each points back to, and those made on the cluster by
// identity alone (clusterreport.SpokeLocalEntry). An Application that already has a work
// on the cluster, or opts in with AnnotationAdoptSpokeApplication, is not checked.
func (r *reconciler) notPulledSpokeApplication(app *unstructured.Unstructured, cluster string, works []workv1.ManifestWork) *problem {
	if r.reports == nil || slices.ContainsFunc(works, func(w workv1.ManifestWork) bool { return w.Namespace == cluster }) {
		return nil
	}
	if adopt, _ := strconv.ParseBool(app.GetAnnotations()[argoapp.AnnotationAdoptSpokeApplication]); adopt {
		return nil
	}
	namespace := appNamespaceOf(app)
	spoke, found := r.reports.FindSpokeApplication(cluster, namespace, app.GetName())
	self := client.ObjectKeyFromObject(app)
	if !found || (spoke.Hub != nil && *spoke.Hub == self) {
		return nil
	}
	pulledBy := "no hub Application pulled it"
	if spoke.Hub != nil {
		pulledBy = fmt.Sprintf("hub Application %s pulled it", spoke.Hub)
	}
	return &problem{ReasonSpokeApplicationNotPulled, fmt.Sprintf(
		"cluster %q already has an Application %s/%s, and %s; it is not replaced. Delete it on the cluster, or set the annotation %s: \"true\" on this application to adopt it (its spec is then this application's, and it is deleted with it)",
		cluster, namespace, app.GetName(), pulledBy, argoapp.AnnotationAdoptSpokeApplication)}
}

// refuse is the outcome of input that cannot be pulled: reported, with the works left as
// they are.
func refuse(reason, message string) outcome {
	return outcome{freeze: true, problem: &problem{reason, message}}
}

// isHubCluster reports whether a ManagedCluster is the hub's own: named HubClusterName,
// or labelled LabelLocalCluster "true".
func (r *reconciler) isHubCluster(cluster *clusterv1.ManagedCluster) bool {
	if cluster.Name == r.opts.HubClusterName {
		return true
	}
	local, err := strconv.ParseBool(cluster.Labels[LabelLocalCluster])
	return err == nil && local
}

// lostTarget is the outcome when the Application's cluster is not a target any more
// (reason and message say why). Works it no longer has are not created; when it has a
// work on that cluster, its works are kept until the loss has lasted OptOutGracePeriod, counted from the
// lastTransitionTime of the OCMPropagationError condition that reports this reason, and
// then deleted. The condition's message says until when.
func (r *reconciler) lostTarget(app *unstructured.Unstructured, cluster string, works []workv1.ManifestWork, reason, message string) outcome {
	grace := r.opts.OptOutGracePeriod
	onTarget := slices.ContainsFunc(works, func(w workv1.ManifestWork) bool { return w.Namespace == cluster })
	if !onTarget || grace == 0 {
		// Nothing runs there to protect: works left on other clusters are stale by the
		// user's own change of target, and go.
		return outcome{problem: &problem{reason, message}}
	}
	if grace < 0 {
		return refuse(reason, message+"; its ManifestWorks are kept until the cluster is a target again, or the application is deleted")
	}
	now := time.Now()
	since := now
	if current, at, found := argoapp.ConditionSince(app, argoapp.ConditionOCMPropagationError); found &&
		strings.HasPrefix(current, reason+": ") && !at.IsZero() && !at.After(now) {
		since = at
	}
	deadline := since.Add(grace)
	if !now.Before(deadline) {
		return outcome{problem: &problem{reason, fmt.Sprintf("%s since %s, longer than the opt-out grace period of %s; deleting its ManifestWorks",
			message, since.UTC().Format(time.RFC3339), grace)}}
	}
	return outcome{
		freeze: true,
		problem: &problem{reason, fmt.Sprintf("%s; its ManifestWorks are kept until %s (opt-out grace period %s) and deleted then, unless the cluster is a target again",
			message, deadline.UTC().Truncate(time.Second).Format(time.RFC3339), grace)},
		recheckAfter: deadline.Sub(now) + time.Second,
	}
}

// finalize deletes the works of an Application being deleted, and then releases it.
//
// The Application is held by our finalizer until all its works are gone, that is until
// the work agent has deleted the Application on the managed cluster, which itself waits
// for the spoke Argo CD to prune when it carries the resources finalizer. Then our
// finalizer goes, and so do the Argo CD finalizers of a pulled Application that the hub
// Argo CD skips: they were meant for the spoke, and nobody else would remove them on
// the hub. An Application that is not skipped keeps them for the hub Argo CD.
//
// When another controller also serves the Application (servedElsewhere), only the
// manager's own works and finalizer go; the Argo CD finalizers are that controller's
// business.
func (r *reconciler) finalize(ctx context.Context, app *unstructured.Unstructured, works []workv1.ManifestWork, servedElsewhere, paused bool) error {
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
	releaseArgoCD := argoapp.HandlesArgoCDFinalizers(app, servedElsewhere)
	var removed []string
	err := r.patchApplication(ctx, app, func(app *unstructured.Unstructured) (bool, error) {
		removed = argoapp.ReleaseFinalizers(app, releaseArgoCD)
		return len(removed) > 0, nil
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

// appProjectOf returns the hub AppProject to ship with an Application, or nil; or the
// problem that keeps the Application from propagating.
//
// An Application outside the hub Argo CD's namespace is a tenant's, and gets Argo CD's own
// rules for apps in any namespace, as the hub Argo CD would apply them before it deployed
// the app: its project exists on the hub and lists the app's namespace in
// spec.sourceNamespaces, the default project included, and permits its source
// repositories and its destination. On the managed cluster the app lands in the spoke
// Argo CD's namespace, where every project is permitted, so the hub is where these rules
// hold. An Application in the Argo CD namespace is the hub admin's: a project missing on
// the hub must then exist on the managed cluster.
//
// A project other than "default" is shipped with the work, so that the same rules
// (destinations, cluster-scoped resources, source repositories) govern the app on the
// managed cluster; the default project, which every Argo CD has, is the managed
// cluster's own.
func (r *reconciler) appProjectOf(ctx context.Context, app *unstructured.Unstructured) (*unstructured.Unstructured, *problem, error) {
	spec, err := argoapp.DecodeSpec(app)
	if err != nil {
		return nil, nil, nil // the render reports it
	}
	project := spec.ProjectName()
	tenant := app.GetNamespace() != r.opts.ArgoCDNamespace
	if !tenant && project == argoapp.DefaultProject {
		return nil, nil, nil
	}
	appProject := argoapp.NewAppProject()
	err = r.client.Get(ctx, types.NamespacedName{Namespace: r.opts.ArgoCDNamespace, Name: project}, appProject)
	if apierrors.IsNotFound(err) {
		if tenant {
			return nil, &problem{ReasonAppProjectNotFound, fmt.Sprintf(
				"AppProject %s/%s does not exist on the hub; an application outside namespace %q must use a project of the hub Argo CD that lists its namespace in spec.sourceNamespaces",
				r.opts.ArgoCDNamespace, project, r.opts.ArgoCDNamespace)}, nil
		}
		ctrl.LoggerFrom(ctx).V(1).Info("the hub has no AppProject of the application; the managed cluster must have it",
			"project", project, "namespace", r.opts.ArgoCDNamespace)
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("get app project %s/%s: %w", r.opts.ArgoCDNamespace, project, err)
	}
	if tenant {
		if p := tenancyProblem(appProject, app.GetNamespace(), spec); p != nil {
			return nil, p, nil
		}
	}
	if project == argoapp.DefaultProject {
		return nil, nil, nil
	}
	return appProject, nil, nil
}

// tenancyProblem checks a tenant's Application against its hub AppProject as the hub Argo
// CD would: the namespace in spec.sourceNamespaces, the source repositories in
// spec.sourceRepos, the destination in spec.destinations.
func tenancyProblem(appProject *unstructured.Unstructured, namespace string, spec argoapp.Spec) *problem {
	name := appProject.GetNamespace() + "/" + appProject.GetName()
	if !argoapp.ProjectPermitsNamespace(appProject, namespace, appProject.GetNamespace()) {
		return &problem{ReasonAppProjectNotPermitted, fmt.Sprintf(
			"AppProject %s does not list namespace %q in spec.sourceNamespaces; the hub Argo CD would refuse the application",
			name, namespace)}
	}
	if denied := argoapp.ProjectPermitsSources(appProject, spec); len(denied) > 0 {
		return &problem{ReasonAppProjectNotPermitted, fmt.Sprintf(
			"AppProject %s does not permit the source repositories %q (spec.sourceRepos); the hub Argo CD would refuse the application",
			name, denied)}
	}
	if !argoapp.ProjectPermitsDestination(appProject, spec.Destination) {
		return &problem{ReasonAppProjectNotPermitted, fmt.Sprintf(
			"AppProject %s does not permit the destination %s (spec.destinations); the hub Argo CD would refuse the application",
			name, argoapp.DestinationString(spec.Destination))}
	}
	return nil
}

// boundToNamespace reports whether a PlacementDecision in namespace selects cluster.
func (r *reconciler) boundToNamespace(ctx context.Context, namespace, cluster string) (bool, error) {
	decisions := &clusterv1beta1.PlacementDecisionList{}
	// Read-only: the cache's decisions, not copies of every decision per propagation.
	if err := r.client.List(ctx, decisions, client.InNamespace(namespace), client.UnsafeDisableDeepCopy); err != nil {
		return false, fmt.Errorf("list the placement decisions of namespace %s: %w", namespace, err)
	}
	for i := range decisions.Items {
		d := &decisions.Items[i]
		if !slices.ContainsFunc(d.Status.Decisions, func(c clusterv1beta1.ClusterDecision) bool { return c.ClusterName == cluster }) {
			continue
		}
		owner := placementOf(d)
		if owner == nil {
			continue
		}
		// The Placement the decision names, from the cache (its metadata only).
		placement := &metav1.PartialObjectMetadata{}
		placement.SetGroupVersionKind(schema.GroupVersionKind{Group: clusterv1beta1.GroupName, Version: "v1beta1", Kind: "Placement"})
		err := r.client.Get(ctx, types.NamespacedName{Namespace: namespace, Name: owner.Name}, placement)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return false, fmt.Errorf("get the placement %s/%s: %w", namespace, owner.Name, err)
		}
		if placement.UID == owner.UID {
			return true, nil
		}
	}
	return false, nil
}

// placementOf returns the controller owner of a PlacementDecision when the decision is
// one that OCM's placement controller writes for a Placement: its controller owner is a
// Placement, and its placement label names it; else nil. The caller matches the owner's
// UID with the Placement of that name: a decision that someone wrote by hand, its owner
// reference made up, binds nothing, since the Placement, not its decision, is what a
// ManagedClusterSetBinding allows in the namespace.
func placementOf(decision *clusterv1beta1.PlacementDecision) *metav1.OwnerReference {
	owner := metav1.GetControllerOf(decision)
	if owner == nil || owner.Kind != "Placement" {
		return nil
	}
	gv, err := schema.ParseGroupVersion(owner.APIVersion)
	if err != nil || gv.Group != clusterv1beta1.GroupName {
		return nil
	}
	if decision.Labels[clusterv1beta1.PlacementLabel] != owner.Name {
		return nil
	}
	return owner
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

// operationSourcesProblem refuses an .operation whose sync names source repositories
// (a rollback's, from status.history) that the Application's hub AppProject does not
// permit, or, when the hub has no such AppProject, that its spec does not name
// (argoapp.OperationSourcesNotPermitted). project is what appProjectOf returned.
func (r *reconciler) operationSourcesProblem(ctx context.Context, app, project *unstructured.Unstructured) (*problem, error) {
	if _, found, _ := unstructured.NestedFieldNoCopy(app.Object, "operation", "sync"); !found {
		return nil, nil
	}
	if project == nil {
		spec, _ := argoapp.DecodeSpec(app)
		project = argoapp.NewAppProject()
		err := r.client.Get(ctx, types.NamespacedName{Namespace: r.opts.ArgoCDNamespace, Name: spec.ProjectName()}, project)
		if apierrors.IsNotFound(err) {
			project = nil
		} else if err != nil {
			return nil, fmt.Errorf("get app project %s/%s: %w", r.opts.ArgoCDNamespace, spec.ProjectName(), err)
		}
	}
	denied := argoapp.OperationSourcesNotPermitted(app, project)
	if len(denied) == 0 {
		return nil, nil
	}
	return &problem{ReasonOverrideNotPermitted, fmt.Sprintf(
		"the application's .operation.sync names the source repositories %q, which its AppProject does not permit (or, without one on the hub, its spec does not name); it is not pulled. Roll back to a history entry of a permitted repository, or remove .operation",
		denied)}, nil
}
