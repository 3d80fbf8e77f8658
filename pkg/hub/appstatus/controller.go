package appstatus

// This file wires the status mirror: its options, the watches that enqueue hub
// Applications, and the reconcile that writes one Application's status.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	addonv1beta1 "open-cluster-management.io/api/addon/v1beta1"
	workv1 "open-cluster-management.io/api/work/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	statusv1alpha1 "github.com/ocm-gitops/argocd-pull-addon/pkg/apis/argocdpull/v1alpha1"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/clusterreport"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/apppatch"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/hubcache"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/hubevents"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/observed"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/sharedsettings"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/statusslices"
)

// ControllerName names the status mirror: its logs and metrics.
const ControllerName = "argocd-pull-appstatus"

// Options configure the status mirror: the hub's settings that it shares with the other
// hub controllers (AddonName and Concurrency, required, and WatchNamespaces), which
// pkg/hub passes to each, and its own Settings.
type Options struct {
	// AddonName names every ManagedClusterAddOn of the addon.
	AddonName string
	// WatchNamespaces limits the mirror to the Applications of these namespaces; empty
	// means all namespaces.
	WatchNamespaces []string
	// Concurrency is the number of parallel reconciles.
	Concurrency int
	Settings
}

// validate reports options that cannot work.
func (o Options) validate() error {
	return errors.Join(
		sharedsettings.ValidateAddonName(o.AddonName),
		sharedsettings.ValidateConcurrency(o.Concurrency),
		o.Validate(), // Settings.Validate
	)
}

// Setup registers the status mirror with mgr. c reads through the manager's cache
// (hubcache.NewClient), which hubcache.Options scopes; decoder decodes the agents'
// reports, shared with the ApplicationSet report controller, which records the Events
// of invalid ones.
func Setup(mgr ctrl.Manager, c client.Client, decoder *observed.Decoder, opts Options) error {
	if err := opts.validate(); err != nil {
		return fmt.Errorf("invalid status mirror options: %w", err)
	}
	opts.SettleWait = cmp.Or(opts.SettleWait, argoapp.DefaultSettleWait)
	r := &reconciler{client: c, decoder: decoder, apiReader: mgr.GetAPIReader(), recorder: hubevents.Recorder(mgr, ControllerName), opts: opts,
		progressingSince: map[types.NamespacedName]time.Time{}}
	agent := observed.ApplicationHandler(c, opts.AddonName)
	// Every watch enqueues the app's request after the window (coalescing): the hub
	// Application's own, the work's feedback, and the agent's report and status slices,
	// which enqueue the same requests. The Application's own events are delayed too, so
	// that the event of the mirror's write does not write at once what arrived meanwhile.
	window := cmp.Or(opts.CoalesceWindow, DefaultCoalesceWindow)
	err := ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		Watches(argoapp.NewApplication(), coalescing(&handler.EnqueueRequestForObject{}, window),
			builder.WithPredicates(predicate.NewPredicateFuncs(r.isCandidate))).
		Watches(&workv1.ManifestWork{}, coalescing(handler.EnqueueRequestsFromMapFunc(observed.MapApplicationOfWork), window),
			builder.WithPredicates(observed.WorkObservationChangedPredicate)).
		Watches(&addonv1beta1.ManagedClusterAddOn{}, coalescing(agent, window)).
		Watches(&statusv1alpha1.ApplicationStatusSlice{}, coalescing(statusslices.Handler(agent.EnqueueApp), window)).
		WithOptions(controller.Options{MaxConcurrentReconciles: opts.Concurrency}).
		Complete(r)
	if err != nil {
		return fmt.Errorf("set up the status mirror: %w", err)
	}
	return nil
}

type reconciler struct {
	client client.Client
	// decoder decodes the agents' reports.
	decoder *observed.Decoder
	// apiReader reads from the apiserver, past the cache, to retry a conflict.
	apiReader client.Reader
	// recorder records, on the hub Application, that the agent does not report it.
	recorder events.EventRecorder
	opts     Options

	mu sync.Mutex
	// progressingSince is when this controller wrote a Progressing before Healthy.
	progressingSince map[types.NamespacedName]time.Time
	// held are the apps whose passing states are not written yet (settleWait).
	held argoapp.SettleHolds[types.NamespacedName]
}

func (r *reconciler) isCandidate(o client.Object) bool {
	_, labelled := o.GetLabels()[argoapp.LabelPullToOCMManagedCluster]
	return labelled && (len(r.opts.WatchNamespaces) == 0 || slices.Contains(r.opts.WatchNamespaces, o.GetNamespace()))
}

// Reconcile mirrors the status of one pulled hub Application.
func (r *reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	app := argoapp.NewApplication()
	if err := r.client.Get(ctx, req.NamespacedName, app); err != nil {
		r.forget(req.NamespacedName)
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !r.isCandidate(app) || app.GetDeletionTimestamp() != nil {
		return ctrl.Result{}, nil
	}
	if !argoapp.IsPulledAndSkipped(app.GetLabels(), app.GetAnnotations()) {
		// Not pulled, or the hub Argo CD reconciles it too and writes its status
		// (propagation refuses it, MissingSkipReconcile): no second writer.
		return ctrl.Result{}, nil
	}
	cluster := app.GetAnnotations()[argoapp.AnnotationOCMManagedCluster]
	workName := argoapp.ManifestWorkName(app.GetName(), app.GetUID())
	work := &workv1.ManifestWork{}
	if err := r.client.Get(ctx, types.NamespacedName{Namespace: cluster, Name: workName}, work); err != nil {
		// Not propagated (yet): nothing to mirror; the status stays as it is.
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if work.Labels[argoapp.LabelAddon] != r.opts.AddonName {
		// Another controller's work (Red Hat ACM's pull controller), which also writes
		// the status; or one of an earlier release that propagation labels on its next
		// apply, which is another event. Mirror only what this addon delivers.
		return ctrl.Result{}, nil
	}
	addon := &addonv1beta1.ManagedClusterAddOn{}
	if err := r.client.Get(ctx, types.NamespacedName{Namespace: cluster, Name: r.opts.AddonName}, addon); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		addon = nil
	}
	// The ApplicationSet report controller records the Event of a rejected report.
	obs := r.decoder.Observe(addon, work, req.NamespacedName, time.Now())
	desired := Desired{State: observed.Merge(observed.FeedbackOf(work), obs.App)}
	if _, asked := app.GetAnnotations()[argoapp.AnnotationRefresh]; asked {
		desired.RefreshID = hubcache.PayloadAnnotations(work)[argoapp.AnnotationRefreshID]
	}
	if stale := observed.StalenessOf(addon); stale != nil {
		c := stale.Condition(cluster)
		desired.Stale = &c
	}
	if obs.Rejection != nil {
		c := obs.Rejection.Condition(cluster)
		desired.InvalidReport = &c
	}
	if obs.Absence != nil {
		c := obs.Absence.Condition()
		desired.NotReported = &c
	}
	if !desired.State.Known() && len(desired.hubNotes()) == 0 {
		return ctrl.Result{RequeueAfter: obs.RecheckAfter}, nil
	}
	// Only a RollingSync step waits on Progressing then Healthy: only its apps get it.
	if desired.State.HealthStatus == argoapp.HealthHealthy && healthOf(app) != argoapp.HealthHealthy {
		first, err := r.syncsByRollingSync(ctx, app)
		if err != nil {
			return ctrl.Result{}, err
		}
		desired.ProgressingFirst = first
	}

	// Healthy after a Progressing this controller wrote waits for the hold, and so does
	// whatever else changed meanwhile (the agent's report usually comes a moment after
	// the work's feedback): one write at the end of the hold instead of one per change.
	if desired.State.HealthStatus == argoapp.HealthHealthy && healthOf(app) == argoapp.HealthProgressing {
		if since, ok := r.since(req.NamespacedName); ok {
			if wait := r.opts.ProgressingHold - time.Since(since); wait > 0 {
				return ctrl.Result{RequeueAfter: wait}, nil
			}
		}
	}
	// A state the managed cluster passes through on its own waits for the next, up to
	// SettleWait: a rollout is one write, when the app settles.
	if wait := r.settleWait(req.NamespacedName, app, desired, time.Now()); wait > 0 {
		if obs.RecheckAfter > 0 {
			wait = min(wait, obs.RecheckAfter)
		}
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	result, err := r.write(ctx, app, desired, obs.RecheckAfter)
	if err == nil {
		r.recordAbsence(ctx, app, obs.Absence, desired.NotReported)
	}
	return result, err
}

// syncsByRollingSync reports whether the ApplicationSet that owns app, if any, syncs it
// by RollingSync steps. The owner reference is namespace-local: the ApplicationSet is in
// the app's namespace, which the manager's cache holds when it holds the app.
func (r *reconciler) syncsByRollingSync(ctx context.Context, app *unstructured.Unstructured) (bool, error) {
	name, ok := argoapp.OwningApplicationSet(app.GetOwnerReferences())
	if !ok {
		return false, nil
	}
	appSet := argoapp.NewApplicationSet()
	if err := r.client.Get(ctx, types.NamespacedName{Namespace: app.GetNamespace(), Name: name}, appSet); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("read the ApplicationSet %s/%s of application %s: %w", app.GetNamespace(), name, app.GetName(), err)
	}
	return argoapp.SyncsByRollingSync(appSet), nil
}

// recordAbsence records, when the not-reported condition of app appears or changes, a
// Warning Event on the hub Application and a log line; and a log line when it goes.
// app is the version read before the write.
func (r *reconciler) recordAbsence(ctx context.Context, app *unstructured.Unstructured, absence *observed.Absence, wanted *argoapp.Condition) {
	before, had, _ := argoapp.FindCondition(app, observed.ConditionNotReported)
	key := client.ObjectKeyFromObject(app)
	log := ctrl.LoggerFrom(ctx)
	switch {
	case wanted != nil && (!had || before != wanted.Message):
		log.Info("the agent does not report the application", "app", key, "cluster", absence.Cluster,
			"reason", absence.Reason, "spokeNamespace", absence.Namespace, "watchNamespaces", absence.WatchNamespaces)
		r.recorder.Eventf(app, nil, corev1.EventTypeWarning, absence.Reason, "MirrorStatus", "%s", wanted.Message)
	case wanted == nil && had:
		log.Info("the agent reports the application again, or no longer needs to", "app", key)
	}
}

// write applies desired and patches the app when something changed. requeue > 0 asks
// for another pass then.
func (r *reconciler) write(ctx context.Context, app *unstructured.Unstructured, desired Desired, requeue time.Duration) (ctrl.Result, error) {
	key := client.ObjectKeyFromObject(app)
	updated := app.DeepCopy()
	holding, refreshed := false, false
	// The status goes through the main resource: the Application CRD has no status
	// subresource. The propagation controller ignores status-only changes.
	mutate := func(a *unstructured.Unstructured) (bool, error) {
		changed, hold := ApplyStatus(a, desired, time.Now())
		holding = hold
		if AcknowledgeRefresh(a, desired) {
			refreshed, changed = true, true
		}
		return changed, nil
	}
	wrote, err := apppatch.MergePatch(ctx, r.client, r.apiReader, updated, mutate)
	if apierrors.IsInvalid(err) && len(desired.State.History) > 0 {
		// The agent's history holds what Argo CD's schema refuses (a source field of
		// another type, in its details): the rest of the status is written without it.
		ctrl.LoggerFrom(ctx).Info("the hub Application refuses the agent's history; the status is written without it", "app", key, "error", err.Error())
		r.recorder.Eventf(app, nil, corev1.EventTypeWarning, "InvalidAgentHistory", "MirrorStatus",
			"The history that the managed cluster's agent reports is not valid for this application, and is not shown: %s", clusterreport.TruncateMessage(err.Error(), 512))
		desired.State.History = nil
		updated = app.DeepCopy()
		wrote, err = apppatch.MergePatch(ctx, r.client, r.apiReader, updated, mutate)
	}
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("patch the status of application %s: %w", key, err)
	}
	if holding {
		requeue = r.opts.ProgressingHold
	}
	if wrote && refreshed {
		ctrl.LoggerFrom(ctx).Info("the managed cluster refreshed the application; removed the refresh from the hub application", "app", key, "refreshID", desired.RefreshID)
	}
	if wrote {
		if holding {
			r.mu.Lock()
			r.progressingSince[key] = time.Now()
			r.mu.Unlock()
		}
		ctrl.LoggerFrom(ctx).V(1).Info("mirrored status", "app", key, "health", healthOf(updated))
	}
	if !holding && requeue == 0 && healthOf(updated) != argoapp.HealthProgressing {
		r.forget(key)
	}
	return ctrl.Result{RequeueAfter: requeue}, nil
}

func (r *reconciler) since(key types.NamespacedName) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.progressingSince[key]
	return t, ok
}

func (r *reconciler) forget(key types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.progressingSince, key)
	r.held.Forget(key)
}
