package propagation

// This file maps the events of every watch to the hub Applications they may concern.

import (
	"context"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	workv1 "open-cluster-management.io/api/work/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/hubcache"
)

// Event mapping: every watch enqueues the hub Applications whose outcome the event may
// change. The reconcile ignores the namespaces outside Options.WatchNamespaces.

// mapWorkToApplications enqueues the hub Application of a work, and the other hub
// Applications that would apply the same spoke Application: a change of the work that
// owns it may settle their conflict.
func (r *reconciler) mapWorkToApplications(ctx context.Context, obj client.Object) []reconcile.Request {
	key, ok := argoapp.ApplicationOfWork(obj)
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
	// An Application with that spoke key targets the work's cluster: the cluster index
	// narrows them to the Applications of one cluster, of which only the metadata is
	// read (as the cache holds them: neither copied nor thawed).
	apps := argoapp.NewApplicationList()
	if err := r.client.List(ctx, apps, client.MatchingFields{indexApplicationByCluster: work.Namespace},
		client.UnsafeDisableDeepCopy, hubcache.KeepFrozen); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "list the Applications of a spoke application", "spokeApplication", spoke)
	}
	for i := range apps.Items {
		if key, ok := spokeApplicationKeyOf(&apps.Items[i]); ok && key == spoke {
			requests.add(client.ObjectKeyFromObject(&apps.Items[i]))
		}
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
	// Of the Applications and works only the keys are read.
	if err := r.client.List(ctx, apps, client.MatchingFields{indexApplicationByCluster: cluster},
		client.UnsafeDisableDeepCopy, hubcache.KeepFrozen); err != nil {
		log.Error(err, "list the Applications of a cluster", "cluster", cluster)
	}
	for i := range apps.Items {
		requests.add(client.ObjectKeyFromObject(&apps.Items[i]))
	}
	works := &workv1.ManifestWorkList{}
	if err := r.client.List(ctx, works, client.InNamespace(cluster), client.UnsafeDisableDeepCopy); err != nil {
		log.Error(err, "list the ManifestWorks of a cluster", "cluster", cluster)
	}
	for i := range works.Items {
		if key, ok := argoapp.ApplicationOfWork(&works.Items[i]); ok {
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
	if err := r.addApplicationsOfInterest(ctx, &requests); err != nil {
		log.Error(err, "list the Applications")
	}
	works := &workv1.ManifestWorkList{}
	if err := r.client.List(ctx, works, client.UnsafeDisableDeepCopy); err != nil {
		log.Error(err, "list the ManifestWorks")
	}
	for i := range works.Items {
		if key, ok := argoapp.ApplicationOfWork(&works.Items[i]); ok {
			requests.add(key)
		}
	}
	return requests.list()
}

// mapDecisionToApplications enqueues the pulled Applications of the PlacementDecision's
// namespace: the decision may bind or unbind their clusters.
func (r *reconciler) mapDecisionToApplications(ctx context.Context, decision client.Object) []reconcile.Request {
	var requests requestSet
	if err := r.addApplicationsOfInterest(ctx, &requests, client.InNamespace(decision.GetNamespace())); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "list the Applications of a namespace", "namespace", decision.GetNamespace())
		return nil
	}
	return requests.list()
}

// mapProjectToApplications enqueues the Applications of the AppProject.
func (r *reconciler) mapProjectToApplications(ctx context.Context, project client.Object) []reconcile.Request {
	var requests requestSet
	if err := r.addApplicationsOfInterest(ctx, &requests, client.MatchingFields{indexApplicationByProject: project.GetName()}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "list the Applications of a project", "project", project.GetName())
		return nil
	}
	all := requests.list()
	if project.GetName() != argoapp.DefaultProject {
		return all
	}
	// The default project is never shipped: only the tenants' Applications, which its
	// rules govern on the hub (appProjectOf), read it.
	tenants := all[:0]
	for _, req := range all {
		if req.Namespace != r.opts.ArgoCDNamespace {
			tenants = append(tenants, req)
		}
	}
	return tenants
}

// addApplicationsOfInterest adds to requests the Applications that opts select and that
// are or were pulled (isOfInterest), which reads their metadata only: they are listed as
// the cache holds them, neither copied nor thawed.
func (r *reconciler) addApplicationsOfInterest(ctx context.Context, requests *requestSet, opts ...client.ListOption) error {
	apps := argoapp.NewApplicationList()
	if err := r.client.List(ctx, apps, append(opts, client.UnsafeDisableDeepCopy, hubcache.KeepFrozen)...); err != nil {
		return err
	}
	for i := range apps.Items {
		if isOfInterest(&apps.Items[i]) {
			requests.add(client.ObjectKeyFromObject(&apps.Items[i]))
		}
	}
	return nil
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
