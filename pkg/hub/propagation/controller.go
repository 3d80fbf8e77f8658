package propagation

// This file wires the propagation controller: its options, the watches that enqueue hub
// Applications, and the cache indexes the watches and the reconcile read through.

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	addonv1beta1 "open-cluster-management.io/api/addon/v1beta1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	workv1 "open-cluster-management.io/api/work/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/clusterreport"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/observed"
)

// Defaults of Options.
const (
	DefaultAddonName       = clusterreport.DefaultAddonName
	DefaultArgoCDNamespace = "argocd"
	DefaultConcurrency     = 4
	// DefaultHubClusterName is the name of the hub's own ManagedCluster on ACM hubs.
	DefaultHubClusterName = "local-cluster"
	// DefaultOptOutGracePeriod is how long the works of an Application are kept after
	// its cluster stopped being a target (see Options.OptOutGracePeriod).
	DefaultOptOutGracePeriod = time.Hour
)

// Names under which this package writes, and reports.
const (
	// ControllerName names the propagation controller: its logs, metrics and Events.
	ControllerName = "argocd-pull-propagation"
	// FieldManager is the server-side apply field manager of the ManifestWorks, and of
	// the writes to hub Applications.
	FieldManager = ControllerName
	// PauseControllerName names the controller that reports the pause switch.
	PauseControllerName = "argocd-pull-propagation-pause"
	// PauseFieldManager is the field manager of the PropagationPaused condition on each
	// ManagedClusterAddOn's status.
	PauseFieldManager = PauseControllerName
)

// Options configure the propagation controllers. Start from DefaultOptions: the zero
// value of RequirePlacementBinding turns the tenant gate off.
type Options struct {
	// AddonName names the ClusterManagementAddOn and every ManagedClusterAddOn of the
	// addon. A cluster is opted in when its namespace holds a ManagedClusterAddOn of this
	// name. Empty means DefaultAddonName.
	AddonName string
	// ArgoCDNamespace is the hub Argo CD's namespace, where the AppProjects are. Empty
	// means DefaultArgoCDNamespace.
	ArgoCDNamespace string
	// WatchNamespaces limits propagation to the hub Applications of these namespaces;
	// empty means all namespaces.
	WatchNamespaces []string
	// RequirePlacementBinding propagates an Application only when a PlacementDecision in
	// its namespace selects the target cluster.
	RequirePlacementBinding bool
	// Concurrency is the number of parallel reconciles of each controller; 0 means
	// DefaultConcurrency.
	Concurrency int
	// HubClusterName names the hub's own ManagedCluster, which is never a pull target
	// (a ManagedCluster labelled LabelLocalCluster "true" is not either). Empty means
	// DefaultHubClusterName.
	HubClusterName string
	// OptOutGracePeriod is how long the works of an Application are kept once its
	// cluster is no longer a target: the cluster left the Application's placement, its
	// ManagedClusterAddOn is gone, or the ManagedCluster is gone. Placements, clusters
	// and opt-ins flicker (a decision page rewritten, a cluster unreachable, an addon
	// re-created by its install strategy), and deleting a work prunes the managed
	// cluster, so only a loss that lasts this long deletes them. 0 deletes them at once;
	// a negative value never deletes them for this reason.
	OptOutGracePeriod time.Duration
	// TakeOverForeignWorks makes the manager treat the pulled works that another
	// controller made for an Application (Red Hat ACM's pull controller) as its own:
	// it updates them, labels them as its own, and deletes them when they are stale.
	// Without it, an Application with such a work is left to that controller. Turn it
	// on only once the other controller no longer serves these Applications.
	TakeOverForeignWorks bool
}

// DefaultOptions returns the defaults: all namespaces, the tenant gate on.
func DefaultOptions() Options {
	return Options{
		AddonName:               DefaultAddonName,
		ArgoCDNamespace:         DefaultArgoCDNamespace,
		RequirePlacementBinding: true,
		Concurrency:             DefaultConcurrency,
		HubClusterName:          DefaultHubClusterName,
		OptOutGracePeriod:       DefaultOptOutGracePeriod,
	}
}

// withDefaults fills the empty fields of o with their defaults.
func (o Options) withDefaults() Options {
	if o.AddonName == "" {
		o.AddonName = DefaultAddonName
	}
	if o.ArgoCDNamespace == "" {
		o.ArgoCDNamespace = DefaultArgoCDNamespace
	}
	if o.Concurrency == 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.HubClusterName == "" {
		o.HubClusterName = DefaultHubClusterName
	}
	return o
}

// validate reports options that cannot work.
func (o Options) validate() error {
	var errs []error
	if o.Concurrency < 1 {
		errs = append(errs, fmt.Errorf("concurrency is %d; it must be at least 1", o.Concurrency))
	}
	if slices.Contains(o.WatchNamespaces, "") {
		errs = append(errs, errors.New("the watched namespaces include an empty name"))
	}
	return errors.Join(errs...)
}

// watches reports whether the Applications of namespace are propagated.
func (o Options) watches(namespace string) bool {
	return len(o.WatchNamespaces) == 0 || slices.Contains(o.WatchNamespaces, namespace)
}

// AddToScheme adds the types the controllers of this package read and write to scheme:
// OCM's cluster (v1, v1beta1), work (v1) and addon (v1beta1) types. Applications and
// AppProjects are handled as unstructured objects and need no registration.
func AddToScheme(scheme *runtime.Scheme) error {
	for _, install := range []func(*runtime.Scheme) error{
		clusterv1.Install, clusterv1beta1.Install, workv1.Install, addonv1beta1.Install,
	} {
		if err := install(scheme); err != nil {
			return err
		}
	}
	return nil
}

// CacheByObject returns the cache options that keep the manager's cache to what these
// controllers need; merge them into cache.Options.ByObject of the manager:
//   - Applications of the watched namespaces only;
//   - AppProjects of the Argo CD namespace only;
//   - the ManagedClusterAddOns and the ClusterManagementAddOn named AddonName only;
//   - the ManifestWorks that carry the pull label only, which every work this package
//     renders has.
//
// The controllers behave the same without them (they filter every event and read), but
// then cache every object of those kinds. With them, a read through the manager's
// cached client of an object outside these selections finds nothing.
func CacheByObject(opts Options) map[client.Object]cache.ByObject {
	opts = opts.withDefaults()
	applications := cache.ByObject{}
	if len(opts.WatchNamespaces) > 0 {
		applications.Namespaces = map[string]cache.Config{}
		for _, ns := range opts.WatchNamespaces {
			applications.Namespaces[ns] = cache.Config{}
		}
	}
	byName := fields.OneTermEqualSelector("metadata.name", opts.AddonName)
	pulled, _ := labels.NewRequirement(argoapp.LabelPullToOCMManagedCluster, selection.Exists, nil)
	return map[client.Object]cache.ByObject{
		argoapp.NewApplication():               applications,
		argoapp.NewAppProject():                {Namespaces: map[string]cache.Config{opts.ArgoCDNamespace: {}}},
		&addonv1beta1.ManagedClusterAddOn{}:    {Field: byName},
		&addonv1beta1.ClusterManagementAddOn{}: {Field: byName},
		&workv1.ManifestWork{}:                 {Label: labels.NewSelector().Add(*pulled)},
	}
}

// Setup registers the propagation controller and the pause controller with mgr, and the
// periodic sweep for leftover ManifestWorks. Run the scheme through AddToScheme first.
func Setup(mgr ctrl.Manager, opts Options) error {
	return setup(mgr, opts, nil)
}

// setup is Setup; intercept, when set, wraps the client of the controllers (the tests
// count the writes through it).
func setup(mgr ctrl.Manager, opts Options, intercept func(client.WithWatch) client.WithWatch) error {
	opts = opts.withDefaults()
	if err := opts.validate(); err != nil {
		return fmt.Errorf("invalid propagation options: %w", err)
	}
	if err := registerIndexes(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return err
	}
	c, err := CachedClient(mgr)
	if err != nil {
		return err
	}
	if intercept != nil {
		c = intercept(c)
	}
	r := &reconciler{
		client:    c,
		apiReader: mgr.GetAPIReader(),
		recorder:  mgr.GetEventRecorder(ControllerName),
		opts:      opts,
		problems:  sharedProblems,
	}
	sweeps := make(chan event.TypedGenericEvent[types.NamespacedName])
	b := ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(argoapp.NewApplication(), builder.WithPredicates(inNamespaces(opts), applicationChanged)).
		Watches(&workv1.ManifestWork{}, handler.EnqueueRequestsFromMapFunc(r.mapWorkToApplications),
			builder.WithPredicates(workChanged)).
		Watches(&clusterv1.ManagedCluster{}, handler.EnqueueRequestsFromMapFunc(r.mapClusterToApplications),
			builder.WithPredicates(existenceChanged)).
		Watches(&addonv1beta1.ManagedClusterAddOn{}, handler.EnqueueRequestsFromMapFunc(r.mapAddonToApplications),
			builder.WithPredicates(named(opts.AddonName), existenceChanged)).
		Watches(&addonv1beta1.ClusterManagementAddOn{}, handler.EnqueueRequestsFromMapFunc(r.mapPauseToApplications),
			builder.WithPredicates(named(opts.AddonName), pauseChanged)).
		Watches(argoapp.NewAppProject(), handler.EnqueueRequestsFromMapFunc(r.mapProjectToApplications),
			builder.WithPredicates(inNamespace(opts.ArgoCDNamespace), contentChanged)).
		WatchesRawSource(source.Channel(sweeps, handler.TypedEnqueueRequestsFromMapFunc(
			func(_ context.Context, key types.NamespacedName) []reconcile.Request {
				return []reconcile.Request{{NamespacedName: key}}
			}))).
		WithOptions(controller.Options{MaxConcurrentReconciles: opts.Concurrency})
	if opts.RequirePlacementBinding {
		b = b.Watches(&clusterv1beta1.PlacementDecision{}, handler.EnqueueRequestsFromMapFunc(r.mapDecisionToApplications),
			builder.WithPredicates(decisionsChanged))
	}
	if err = b.Complete(r); err != nil {
		return fmt.Errorf("set up the propagation controller: %w", err)
	}
	if err := mgr.Add(&sweeper{reconciler: r, interval: sweepInterval, found: sweeps}); err != nil {
		return fmt.Errorf("set up the leftover ManifestWork sweep: %w", err)
	}
	return setupPauseController(mgr, c, opts)
}

// CachedClient returns a client that reads every object, Applications included, from
// the manager's cache, and writes to the apiserver. The manager's own client reads
// unstructured objects from the apiserver unless the manager is told otherwise. Every
// hub controller that reads Applications uses one.
func CachedClient(mgr ctrl.Manager) (client.WithWatch, error) {
	c, err := client.NewWithWatch(mgr.GetConfig(), client.Options{
		Scheme: mgr.GetScheme(),
		Mapper: mgr.GetRESTMapper(),
		Cache:  &client.CacheOptions{Reader: mgr.GetCache(), Unstructured: true},
	})
	if err != nil {
		return nil, fmt.Errorf("create the cached client: %w", err)
	}
	return c, nil
}

// Cache indexes.
const (
	// indexWorkByApplication indexes the pulled ManifestWorks by "<namespace>/<name>" of
	// their hub Application.
	indexWorkByApplication = "argocd-pull.hubApplication"
	// indexApplicationByCluster indexes the hub Applications by their target cluster.
	indexApplicationByCluster = "argocd-pull.targetCluster"
	// indexApplicationByProject indexes the hub Applications by their AppProject.
	indexApplicationByProject = "argocd-pull.project"
	// indexBySpokeApplication indexes the pulled ManifestWorks by the spokeApplicationKey
	// of the Application they apply on their managed cluster, and the hub Applications
	// by the one their work would have.
	indexBySpokeApplication = "argocd-pull.spokeApplication"
)

func registerIndexes(ctx context.Context, indexer client.FieldIndexer) error {
	indexes := []struct {
		obj     client.Object
		field   string
		extract client.IndexerFunc
	}{
		{&workv1.ManifestWork{}, indexWorkByApplication, func(obj client.Object) []string {
			if key, ok := applicationOfWork(obj); ok {
				return []string{key.String()}
			}
			return nil
		}},
		{argoapp.NewApplication(), indexApplicationByCluster, func(obj client.Object) []string {
			if cluster := obj.GetAnnotations()[argoapp.AnnotationOCMManagedCluster]; cluster != "" {
				return []string{cluster}
			}
			return nil
		}},
		{&workv1.ManifestWork{}, indexBySpokeApplication, func(obj client.Object) []string {
			work, ok := obj.(*workv1.ManifestWork)
			if !ok {
				return nil
			}
			if _, pulled := applicationOfWork(work); !pulled {
				return nil
			}
			if key, ok := spokeApplicationKey(work); ok {
				return []string{key}
			}
			return nil
		}},
		{argoapp.NewApplication(), indexBySpokeApplication, func(obj client.Object) []string {
			if key, ok := spokeApplicationKeyOf(obj); ok {
				return []string{key}
			}
			return nil
		}},
		{argoapp.NewApplication(), indexApplicationByProject, func(obj client.Object) []string {
			app, ok := obj.(*unstructured.Unstructured)
			if !ok {
				return nil
			}
			if project, _, _ := unstructured.NestedString(app.Object, "spec", "project"); project != "" {
				return []string{project}
			}
			return nil
		}},
	}
	for _, index := range indexes {
		if err := indexer.IndexField(ctx, index.obj, index.field, index.extract); err != nil {
			return fmt.Errorf("index %s: %w", index.field, err)
		}
	}
	return nil
}

// applicationOfWork returns the hub Application a ManifestWork was rendered from: the
// one its back-pointer annotations name, when it carries the pull label.
func applicationOfWork(work client.Object) (types.NamespacedName, bool) {
	if _, ok := work.GetLabels()[argoapp.LabelPullToOCMManagedCluster]; !ok {
		return types.NamespacedName{}, false
	}
	key := types.NamespacedName{
		Namespace: work.GetAnnotations()[argoapp.AnnotationHubApplicationNamespace],
		Name:      work.GetAnnotations()[argoapp.AnnotationHubApplicationName],
	}
	return key, key.Namespace != "" && key.Name != ""
}

// Event mapping: every watch enqueues the hub Applications whose outcome the event may
// change. The reconcile ignores the namespaces outside Options.WatchNamespaces.

// mapWorkToApplications enqueues the hub Application of a work, and the other hub
// Applications that would apply the same spoke Application: a change of the work that
// owns it may settle their conflict.
func (r *reconciler) mapWorkToApplications(ctx context.Context, obj client.Object) []reconcile.Request {
	key, ok := applicationOfWork(obj)
	if !ok {
		return nil
	}
	var requests requestSet
	requests.add(key)
	work, ok := obj.(*workv1.ManifestWork)
	if !ok {
		return requests.list()
	}
	spoke, ok := spokeApplicationKey(work)
	if !ok {
		return requests.list()
	}
	apps := argoapp.NewApplicationList()
	if err := r.client.List(ctx, apps, client.MatchingFields{indexBySpokeApplication: spoke}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "list the Applications of a spoke application", "spokeApplication", spoke)
	}
	for i := range apps.Items {
		requests.add(client.ObjectKeyFromObject(&apps.Items[i]))
	}
	return requests.list()
}

// mapClusterToApplications enqueues the Applications that target the ManagedCluster or
// have a work in its namespace.
func (r *reconciler) mapClusterToApplications(ctx context.Context, cluster client.Object) []reconcile.Request {
	return r.applicationsOfCluster(ctx, cluster.GetName())
}

// mapAddonToApplications enqueues the Applications that target the cluster of the
// ManagedClusterAddOn or have a work there.
func (r *reconciler) mapAddonToApplications(ctx context.Context, addon client.Object) []reconcile.Request {
	return r.applicationsOfCluster(ctx, addon.GetNamespace())
}

func (r *reconciler) applicationsOfCluster(ctx context.Context, cluster string) []reconcile.Request {
	log := ctrl.LoggerFrom(ctx)
	var requests requestSet
	apps := &unstructured.UnstructuredList{}
	apps.SetGroupVersionKind(argoapp.ApplicationGVK.GroupVersion().WithKind(argoapp.KindApplication + "List"))
	if err := r.client.List(ctx, apps, client.MatchingFields{indexApplicationByCluster: cluster}); err != nil {
		log.Error(err, "list the Applications of a cluster", "cluster", cluster)
	}
	for i := range apps.Items {
		requests.add(client.ObjectKeyFromObject(&apps.Items[i]))
	}
	works := &workv1.ManifestWorkList{}
	if err := r.client.List(ctx, works, client.InNamespace(cluster)); err != nil {
		log.Error(err, "list the ManifestWorks of a cluster", "cluster", cluster)
	}
	for i := range works.Items {
		if key, ok := applicationOfWork(&works.Items[i]); ok {
			requests.add(key)
		}
	}
	return requests.list()
}

// mapPauseToApplications enqueues every Application that is or was pulled, when the
// pause switch flips: resuming catches up on everything that waited.
func (r *reconciler) mapPauseToApplications(ctx context.Context, _ client.Object) []reconcile.Request {
	log := ctrl.LoggerFrom(ctx)
	var requests requestSet
	apps := &unstructured.UnstructuredList{}
	apps.SetGroupVersionKind(argoapp.ApplicationGVK.GroupVersion().WithKind(argoapp.KindApplication + "List"))
	if err := r.client.List(ctx, apps); err != nil {
		log.Error(err, "list the Applications")
	}
	for i := range apps.Items {
		if isOfInterest(&apps.Items[i]) {
			requests.add(client.ObjectKeyFromObject(&apps.Items[i]))
		}
	}
	works := &workv1.ManifestWorkList{}
	if err := r.client.List(ctx, works); err != nil {
		log.Error(err, "list the ManifestWorks")
	}
	for i := range works.Items {
		if key, ok := applicationOfWork(&works.Items[i]); ok {
			requests.add(key)
		}
	}
	return requests.list()
}

// mapDecisionToApplications enqueues the pulled Applications of the PlacementDecision's
// namespace: the decision may bind or unbind their clusters.
func (r *reconciler) mapDecisionToApplications(ctx context.Context, decision client.Object) []reconcile.Request {
	apps := &unstructured.UnstructuredList{}
	apps.SetGroupVersionKind(argoapp.ApplicationGVK.GroupVersion().WithKind(argoapp.KindApplication + "List"))
	if err := r.client.List(ctx, apps, client.InNamespace(decision.GetNamespace())); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "list the Applications of a namespace", "namespace", decision.GetNamespace())
		return nil
	}
	var requests requestSet
	for i := range apps.Items {
		if isOfInterest(&apps.Items[i]) {
			requests.add(client.ObjectKeyFromObject(&apps.Items[i]))
		}
	}
	return requests.list()
}

// mapProjectToApplications enqueues the Applications of the AppProject.
func (r *reconciler) mapProjectToApplications(ctx context.Context, project client.Object) []reconcile.Request {
	if project.GetName() == argoapp.DefaultProject {
		return nil // never shipped
	}
	apps := &unstructured.UnstructuredList{}
	apps.SetGroupVersionKind(argoapp.ApplicationGVK.GroupVersion().WithKind(argoapp.KindApplication + "List"))
	if err := r.client.List(ctx, apps, client.MatchingFields{indexApplicationByProject: project.GetName()}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "list the Applications of a project", "project", project.GetName())
		return nil
	}
	var requests requestSet
	for i := range apps.Items {
		if isOfInterest(&apps.Items[i]) {
			requests.add(client.ObjectKeyFromObject(&apps.Items[i]))
		}
	}
	return requests.list()
}

// isOfInterest reports whether an Application is pulled, or was: it has the pull label
// or still holds the clean-up finalizer.
func isOfInterest(app client.Object) bool {
	_, labelled := app.GetLabels()[argoapp.LabelPullToOCMManagedCluster]
	return labelled || slices.Contains(app.GetFinalizers(), argoapp.FinalizerManifestWorkCleanup)
}

// requestSet collects reconcile requests without duplicates.
type requestSet struct {
	seen     map[types.NamespacedName]bool
	requests []reconcile.Request
}

func (s *requestSet) add(key types.NamespacedName) {
	if s.seen[key] {
		return
	}
	if s.seen == nil {
		s.seen = map[types.NamespacedName]bool{}
	}
	s.seen[key] = true
	s.requests = append(s.requests, reconcile.Request{NamespacedName: key})
}

func (s *requestSet) list() []reconcile.Request { return s.requests }

// Predicates: they drop the events that cannot change any outcome.

// inNamespaces keeps the objects of the watched namespaces.
func inNamespaces(opts Options) predicate.Predicate {
	return predicate.NewPredicateFuncs(func(obj client.Object) bool { return opts.watches(obj.GetNamespace()) })
}

// inNamespace keeps the objects of one namespace.
func inNamespace(namespace string) predicate.Predicate {
	return predicate.NewPredicateFuncs(func(obj client.Object) bool { return obj.GetNamespace() == namespace })
}

// named keeps the objects of one name.
func named(name string) predicate.Predicate {
	return predicate.NewPredicateFuncs(func(obj client.Object) bool { return obj.GetName() == name })
}

// applicationChanged drops the updates of an Application that change neither what is
// rendered nor how it is selected: a status-only update, above all. The Application CRD
// has no status subresource, so a status update bumps metadata.generation too, and the
// generation cannot tell.
var applicationChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		oldApp, okOld := e.ObjectOld.(*unstructured.Unstructured)
		newApp, okNew := e.ObjectNew.(*unstructured.Unstructured)
		if !okOld || !okNew {
			return true
		}
		return applicationInputsChanged(oldApp, newApp)
	},
}

// applicationInputsChanged reports whether anything that propagation reads differs
// between two versions of an Application: everything but the status and the
// server-maintained metadata.
func applicationInputsChanged(oldApp, newApp *unstructured.Unstructured) bool {
	return !equality.Semantic.DeepEqual(oldApp.GetLabels(), newApp.GetLabels()) ||
		!equality.Semantic.DeepEqual(oldApp.GetAnnotations(), newApp.GetAnnotations()) ||
		!slices.Equal(oldApp.GetFinalizers(), newApp.GetFinalizers()) ||
		!equality.Semantic.DeepEqual(oldApp.GetOwnerReferences(), newApp.GetOwnerReferences()) ||
		!equality.Semantic.DeepEqual(oldApp.GetDeletionTimestamp(), newApp.GetDeletionTimestamp()) ||
		oldApp.GetUID() != newApp.GetUID() ||
		!reflect.DeepEqual(oldApp.Object["spec"], newApp.Object["spec"]) ||
		!reflect.DeepEqual(oldApp.Object["operation"], newApp.Object["operation"]) ||
		operationResultMirrored(oldApp, newApp)
}

// operationResultMirrored reports whether the status mirror changed the operation state
// of an Application that holds an operation: the operation may now leave it (see
// hubShowsOperation).
func operationResultMirrored(oldApp, newApp *unstructured.Unstructured) bool {
	if newApp.Object["operation"] == nil {
		return false
	}
	oldState, _, _ := unstructured.NestedMap(oldApp.Object, "status", "operationState")
	newState, _, _ := unstructured.NestedMap(newApp.Object, "status", "operationState")
	return oldState["phase"] != newState["phase"] || oldState["startedAt"] != newState["startedAt"]
}

// workChanged drops the updates of a ManifestWork that only refresh its status feedback:
// its spec, metadata or Applied condition must change, or, while it delivers an
// operation, the spoke's operation state.
var workChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		oldWork, okOld := e.ObjectOld.(*workv1.ManifestWork)
		newWork, okNew := e.ObjectNew.(*workv1.ManifestWork)
		if !okOld || !okNew {
			return true
		}
		return oldWork.Generation != newWork.Generation ||
			!equality.Semantic.DeepEqual(oldWork.Labels, newWork.Labels) ||
			!equality.Semantic.DeepEqual(oldWork.Annotations, newWork.Annotations) ||
			!equality.Semantic.DeepEqual(oldWork.DeletionTimestamp, newWork.DeletionTimestamp) ||
			!equality.Semantic.DeepEqual(appliedState(oldWork), appliedState(newWork)) ||
			operationStateChanged(oldWork, newWork)
	},
}

// operationStateChanged reports whether the spoke's operation state changed in the
// feedback of a work that delivers an operation: the change may complete it.
func operationStateChanged(oldWork, newWork *workv1.ManifestWork) bool {
	if _, delivering := newWork.Annotations[argoapp.AnnotationOperationBaseline]; !delivering {
		return false
	}
	o, n := observed.FeedbackOf(oldWork), observed.FeedbackOf(newWork)
	return o.OperationStatePhase != n.OperationStatePhase || o.OperationStateStartedAt != n.OperationStateStartedAt
}

// appliedState is what propagation reads of a work's Applied condition.
func appliedState(work *workv1.ManifestWork) [2]string {
	applied := meta.FindStatusCondition(work.Status.Conditions, workv1.WorkApplied)
	if applied == nil {
		return [2]string{}
	}
	return [2]string{string(applied.Status), strconv.FormatInt(applied.ObservedGeneration, 10)}
}

// existenceChanged keeps the creations and deletions of an object, and the update that
// starts its deletion.
var existenceChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		return (e.ObjectOld.GetDeletionTimestamp() == nil) != (e.ObjectNew.GetDeletionTimestamp() == nil)
	},
}

// pauseChanged keeps the updates of the ClusterManagementAddOn that change the pause
// annotation.
var pauseChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		oldValue, oldSet := e.ObjectOld.GetAnnotations()[AnnotationPausePropagation]
		newValue, newSet := e.ObjectNew.GetAnnotations()[AnnotationPausePropagation]
		return oldSet != newSet || oldValue != newValue
	},
}

// contentChanged drops status-only updates of an object without a status subresource.
var contentChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		oldObj, okOld := e.ObjectOld.(*unstructured.Unstructured)
		newObj, okNew := e.ObjectNew.(*unstructured.Unstructured)
		if !okOld || !okNew {
			return true
		}
		return !equality.Semantic.DeepEqual(oldObj.GetLabels(), newObj.GetLabels()) ||
			!equality.Semantic.DeepEqual(oldObj.GetAnnotations(), newObj.GetAnnotations()) ||
			!reflect.DeepEqual(oldObj.Object["spec"], newObj.Object["spec"])
	},
}

// decisionsChanged keeps the updates of a PlacementDecision that change the clusters it
// selects.
var decisionsChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		oldDecision, okOld := e.ObjectOld.(*clusterv1beta1.PlacementDecision)
		newDecision, okNew := e.ObjectNew.(*clusterv1beta1.PlacementDecision)
		if !okOld || !okNew {
			return true
		}
		return !slices.Equal(selectedClusters(oldDecision), selectedClusters(newDecision))
	},
}

// selectedClusters returns the sorted cluster names a PlacementDecision selects.
func selectedClusters(decision *clusterv1beta1.PlacementDecision) []string {
	clusters := make([]string, 0, len(decision.Status.Decisions))
	for _, d := range decision.Status.Decisions {
		clusters = append(clusters, d.ClusterName)
	}
	slices.Sort(clusters)
	return clusters
}

// sweepInterval is how often the sweep looks for leftover ManifestWorks.
const sweepInterval = 10 * time.Minute
