package propagation

// This file wires the propagation controller: its options and its watches. What each
// watch enqueues is in mapping.go, what it lets through in predicates.go, the cache
// indexes they read through in indexes.go.

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/types"
	addonv1beta1 "open-cluster-management.io/api/addon/v1beta1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	workv1 "open-cluster-management.io/api/work/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/hubevents"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/predicates"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/sharedsettings"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/statusslices"
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

// Options configure the propagation controllers: the hub's settings that they share
// with the other hub controllers (AddonName, ArgoCDNamespace, WatchNamespaces,
// Concurrency, HubClusterName, all required), which pkg/hub passes to each, and their
// own Settings.
type Options struct {
	// AddonName names the ClusterManagementAddOn and every ManagedClusterAddOn of the
	// addon. A cluster is opted in when its namespace holds a ManagedClusterAddOn of this
	// name.
	AddonName string
	// ArgoCDNamespace is the hub Argo CD's namespace, where the AppProjects are.
	ArgoCDNamespace string
	// WatchNamespaces limits propagation to the hub Applications of these namespaces;
	// empty means all namespaces.
	WatchNamespaces []string
	// Concurrency is the number of parallel reconciles of each controller.
	Concurrency int
	// HubClusterName names the hub's own ManagedCluster, which is never a pull target
	// (a ManagedCluster labelled LabelLocalCluster "true" is not either).
	HubClusterName string
	Settings
}

// validate reports options that cannot work.
func (o Options) validate() error {
	return errors.Join(
		sharedsettings.ValidateAddonName(o.AddonName),
		sharedsettings.ValidateArgoCDNamespace(o.ArgoCDNamespace),
		sharedsettings.ValidateHubClusterName(o.HubClusterName),
		sharedsettings.ValidateConcurrency(o.Concurrency),
		sharedsettings.ValidateWatchNamespaces(o.WatchNamespaces),
	)
}

// watches reports whether the Applications of namespace are propagated.
func (o Options) watches(namespace string) bool {
	return len(o.WatchNamespaces) == 0 || slices.Contains(o.WatchNamespaces, namespace)
}

// Setup registers the propagation controller and the pause controller with mgr, and the
// periodic sweep for leftover ManifestWorks. c reads through the manager's cache
// (hubcache.NewClient), which hubcache.Options scopes; reports reads the agents' status
// slices through it.
func Setup(mgr ctrl.Manager, c client.Client, reports *statusslices.Reader, opts Options) error {
	if err := opts.validate(); err != nil {
		return fmt.Errorf("invalid propagation options: %w", err)
	}
	if err := registerIndexes(context.Background(), mgr.GetCache()); err != nil {
		return err
	}
	r := &reconciler{
		client:    c,
		apiReader: mgr.GetAPIReader(),
		recorder:  hubevents.Recorder(mgr, ControllerName),
		opts:      opts,
		problems:  sharedProblems,
		reports:   reports,
	}
	sweeps := make(chan event.TypedGenericEvent[types.NamespacedName])
	b := ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(argoapp.NewApplication(), builder.WithPredicates(inNamespaces(opts), renderInputsChanged)).
		Watches(&workv1.ManifestWork{}, handler.EnqueueRequestsFromMapFunc(r.mapWorkToApplications),
			builder.WithPredicates(workChangedBeyondFeedback)).
		Watches(&clusterv1.ManagedCluster{}, handler.EnqueueRequestsFromMapFunc(r.mapClusterToApplications),
			builder.WithPredicates(predicates.ExistenceChanged)).
		Watches(&addonv1beta1.ManagedClusterAddOn{}, handler.EnqueueRequestsFromMapFunc(r.mapAddonToApplications),
			builder.WithPredicates(named(opts.AddonName), predicates.ExistenceChanged)).
		Watches(&addonv1beta1.ClusterManagementAddOn{}, handler.EnqueueRequestsFromMapFunc(r.mapPauseToApplications),
			builder.WithPredicates(named(opts.AddonName), pauseChanged)).
		Watches(argoapp.NewAppProject(), handler.EnqueueRequestsFromMapFunc(r.mapProjectToApplications),
			builder.WithPredicates(inNamespace(opts.ArgoCDNamespace), specOrMetadataChanged)).
		WatchesRawSource(source.Channel(sweeps, handler.TypedEnqueueRequestsFromMapFunc(
			func(_ context.Context, key types.NamespacedName) []reconcile.Request {
				return []reconcile.Request{{NamespacedName: key}}
			}))).
		WithOptions(controller.Options{MaxConcurrentReconciles: opts.Concurrency})
	if opts.RequirePlacementBinding {
		b = b.Watches(&clusterv1beta1.PlacementDecision{}, handler.EnqueueRequestsFromMapFunc(r.mapDecisionToApplications),
			builder.WithPredicates(decisionsChanged)).
			// The tenant gate matches a decision's owner with the Placement of its name by
			// UID: the Placements' metadata only, and a Placement that comes or goes
			// re-checks the Applications of its namespace.
			Watches(&clusterv1beta1.Placement{}, handler.EnqueueRequestsFromMapFunc(r.mapDecisionToApplications),
				builder.OnlyMetadata, builder.WithPredicates(predicates.ExistenceChanged))
	}
	if err := b.Complete(r); err != nil {
		return fmt.Errorf("set up the propagation controller: %w", err)
	}
	if err := mgr.Add(&sweeper{reconciler: r, interval: sweepInterval, found: sweeps}); err != nil {
		return fmt.Errorf("set up the leftover ManifestWork sweep: %w", err)
	}
	return setupPauseController(mgr, c, opts)
}
