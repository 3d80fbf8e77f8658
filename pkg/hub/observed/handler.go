package observed

// This file is the one event handler of the ManagedClusterAddOns for the controllers that
// show what the agents report: it enqueues what a change of a cluster's report concerns.

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	addonv1beta1 "open-cluster-management.io/api/addon/v1beta1"
	workv1 "open-cluster-management.io/api/work/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/clusterreport"
)

type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]

// AddonHandler enqueues, on a change of a cluster's ManagedClusterAddOn named AddonName,
// the requests of a controller that reads the agent's report: those of every
// ManifestWork of the cluster when the addon appears, goes, or changes in a way that
// concerns all its apps (ClusterWideChange); else those of the apps whose entries in
// the agent's report changed.
type AddonHandler struct {
	// Reader lists and reads the ManifestWorks.
	Reader client.Reader
	// AddonName names the ManagedClusterAddOns of the addon; the others are ignored.
	AddonName string
	// MapWork maps a ManifestWork to the controller's requests.
	MapWork handler.MapFunc
	// MapApp maps an entry of the agent's report to the controller's request, when the
	// entry names it; else the work the entry names is mapped with MapWork.
	MapApp func(app clusterreport.App) (types.NamespacedName, bool)
	// Changed, when set, is called with each created or updated addon before its
	// requests are enqueued.
	Changed func(ctx context.Context, addon *addonv1beta1.ManagedClusterAddOn)
	// Deleted, when set, is called with each deleted addon before its requests are
	// enqueued.
	Deleted func(addon *addonv1beta1.ManagedClusterAddOn)
}

var _ handler.EventHandler = AddonHandler{}

// ApplicationHandler is the AddonHandler of a controller whose requests are hub
// Applications: an entry that names its hub Application maps to it, any other to the
// Application of the work it names (MapApplicationOfWork).
func ApplicationHandler(reader client.Reader, addonName string) AddonHandler {
	return AddonHandler{
		Reader: reader, AddonName: addonName, MapWork: MapApplicationOfWork,
		MapApp: func(app clusterreport.App) (types.NamespacedName, bool) {
			return types.NamespacedName{Namespace: app.HubNamespace, Name: app.HubName}, app.HubName != ""
		},
	}
}

// MapApplicationOfWork maps a pulled ManifestWork to its hub Application.
func MapApplicationOfWork(_ context.Context, work client.Object) []reconcile.Request {
	if key, ok := argoapp.ApplicationOfWork(work); ok {
		return []reconcile.Request{{NamespacedName: key}}
	}
	return nil
}

// Create enqueues every work of the cluster.
func (h AddonHandler) Create(ctx context.Context, e event.CreateEvent, q queue) {
	if addon, ok := h.addon(e.Object); ok {
		if h.Changed != nil {
			h.Changed(ctx, addon)
		}
		h.enqueueClusterWorks(ctx, addon.Namespace, q)
	}
}

// Delete enqueues every work of the cluster.
func (h AddonHandler) Delete(ctx context.Context, e event.DeleteEvent, q queue) {
	if addon, ok := h.addon(e.Object); ok {
		if h.Deleted != nil {
			h.Deleted(addon)
		}
		h.enqueueClusterWorks(ctx, addon.Namespace, q)
	}
}

// Update enqueues every work of the cluster on a cluster-wide change, else the apps
// whose entries changed.
func (h AddonHandler) Update(ctx context.Context, e event.UpdateEvent, q queue) {
	old, ok1 := h.addon(e.ObjectOld)
	addon, ok2 := h.addon(e.ObjectNew)
	if !ok1 || !ok2 {
		return
	}
	if h.Changed != nil {
		h.Changed(ctx, addon)
	}
	if ClusterWideChange(old.Status.Conditions, addon.Status.Conditions) {
		h.enqueueClusterWorks(ctx, addon.Namespace, q)
		return
	}
	for _, c := range ChangedAppConditions(old.Status.Conditions, addon.Status.Conditions) {
		app, err := clusterreport.DecodeApp(c)
		if err != nil {
			h.enqueueClusterWorks(ctx, addon.Namespace, q) // cannot tell whose: all of them
			return
		}
		h.EnqueueApp(ctx, addon.Namespace, app, q)
	}
}

// Generic does nothing: no generic events of addons are sent.
func (h AddonHandler) Generic(context.Context, event.GenericEvent, queue) {}

func (h AddonHandler) addon(o client.Object) (*addonv1beta1.ManagedClusterAddOn, bool) {
	addon, ok := o.(*addonv1beta1.ManagedClusterAddOn)
	return addon, ok && addon.Name == h.AddonName
}

// EnqueueApp enqueues the request of one entry of the agent's report, or of its status
// slices: the one it names, else that of the work it names.
func (h AddonHandler) EnqueueApp(ctx context.Context, cluster string, app clusterreport.App, q queue) {
	if key, ok := h.MapApp(app); ok {
		q.Add(reconcile.Request{NamespacedName: key})
		return
	}
	if app.ManifestWork == "" {
		return
	}
	work := &workv1.ManifestWork{}
	if err := h.Reader.Get(ctx, types.NamespacedName{Namespace: cluster, Name: app.ManifestWork}, work); err != nil {
		return
	}
	for _, req := range h.MapWork(ctx, work) {
		q.Add(req)
	}
}

// enqueueClusterWorks adds to q what MapWork maps each ManifestWork of a cluster's
// namespace to: what a controller must recompute when the cluster's agent report or
// availability changes in a way it cannot narrow down.
func (h AddonHandler) enqueueClusterWorks(ctx context.Context, cluster string, q queue) {
	works := &workv1.ManifestWorkList{}
	if err := h.Reader.List(ctx, works, client.InNamespace(cluster)); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "list the ManifestWorks of a cluster", "cluster", cluster)
		return
	}
	for i := range works.Items {
		for _, req := range h.MapWork(ctx, &works.Items[i]) {
			q.Add(req)
		}
	}
}
