package addon

import (
	"context"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/informers/certificates"
	kubeinternal "k8s.io/client-go/informers/internalinterfaces"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"open-cluster-management.io/addon-framework/pkg/addonmanager"
	"open-cluster-management.io/addon-framework/pkg/addonmanager/constants"
	"open-cluster-management.io/addon-framework/pkg/index"
	addonv1beta1 "open-cluster-management.io/api/addon/v1beta1"
	addonclient "open-cluster-management.io/api/client/addon/clientset/versioned"
	addoninformers "open-cluster-management.io/api/client/addon/informers/externalversions"
	addongroup "open-cluster-management.io/api/client/addon/informers/externalversions/addon"
	addoninternal "open-cluster-management.io/api/client/addon/informers/externalversions/internalinterfaces"
	clusterclient "open-cluster-management.io/api/client/cluster/clientset/versioned"
	clusterinformers "open-cluster-management.io/api/client/cluster/informers/externalversions"
	clustergroup "open-cluster-management.io/api/client/cluster/informers/externalversions/cluster"
	clusterinternal "open-cluster-management.io/api/client/cluster/informers/externalversions/internalinterfaces"
	workclient "open-cluster-management.io/api/client/work/clientset/versioned"
	workinformers "open-cluster-management.io/api/client/work/informers/externalversions"
	workinformersv1 "open-cluster-management.io/api/client/work/informers/externalversions/work/v1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	workv1 "open-cluster-management.io/api/work/v1"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/hubcache"
)

// namedAddons narrows the framework's informers of ManagedClusterAddOns and
// ClusterManagementAddOns to the addon's own, when it serves one (a field selector names
// one object): its controllers (v1.3.0: deploy, registration, configuration, CSR) act on
// the addons of its agents only, and look each up by name. Unnarrowed, they cached every
// addon of every cluster: a dozen per cluster on an ACM hub.
func namedAddons(addonNames []string) func(*metav1.ListOptions) {
	return func(options *metav1.ListOptions) {
		if len(addonNames) == 1 {
			options.FieldSelector = fields.OneTermEqualSelector("metadata.name", addonNames[0]).String()
		}
	}
}

// stripManagedFields is the transform of the informers of the framework and of the
// agents' hub RBAC that keep objects whole but their managed fields.
var stripManagedFields = crcache.TransformStripManagedFields()

// frameworkResync is the resync period of the framework's informers, as its own Start
// sets it.
const frameworkResync = 10 * time.Minute

// StartFramework starts the addon framework's controllers for the agents added to mgr,
// addonNames, as mgr.Start does (the same selectors, indexes and 10-minute syncs), except
// that no informer hands its event handlers a cache.DeletedFinalStateUnknown, and that
// the informers of ManagedClusters and ManagedClusterAddOns may be shared (below).
//
// An informer hands OnDelete such a tombstone for each object deleted while its watch
// was down, when it learns of the deletion by relisting: after every restart of the hub's
// apiserver, whose new watch cache answers the informer's old resourceVersion with
// 410 Gone. The framework's controllers (v1.3.0) read each event's object with
// meta.Accessor and no check, so a tombstone panics the manager: a ManagedClusterAddOn or
// ClusterManagementAddOn of any addon, or one of the addon's CertificateSigningRequests,
// deleted during a restart of the apiserver took the manager down, and its successor waited
// for the leader Lease to expire. The handlers only compute queue keys, which the
// tombstone's last known object gives as well.
//
// The framework's informers of ManagedClusters and, when it serves one addon, of its
// ManagedClusterAddOns are those of shared (the manager's cache, which holds the same
// objects of those kinds: hubcache.Options), not copies of them: a thousand clusters'
// addons and clusters, each held once. Those informers resync every ten hours, so the
// addons are synced every frameworkResync by resyncAddons instead. A nil shared gives
// the framework its own.
func StartFramework(ctx context.Context, cfg *rest.Config, mgr addonmanager.AddonManager, addonNames []string, shared crcache.Informers) error {
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	works, err := workclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	addons, err := addonclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	clusters, err := clusterclient.NewForConfig(cfg)
	if err != nil {
		return err
	}

	// The addons' own objects: the framework's CSRs and ManifestWorks carry the label.
	ofAddons := func(options *metav1.ListOptions) {
		options.LabelSelector = metav1.FormatLabelSelector(&metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{{
				Key: addonv1beta1.AddonLabelKey, Operator: metav1.LabelSelectorOpIn, Values: addonNames,
			}},
		})
	}
	// No informer keeps managed fields, which no controller of the framework (v1.3.0)
	// reads: they are a third or more of a ManagedCluster or a ManagedClusterAddOn that
	// several managers write (every addon's, on an ACM hub), and an update of an object
	// without them keeps the stored ones.
	kubeInformers := kubeinformers.NewSharedInformerFactoryWithOptions(kube, frameworkResync,
		kubeinformers.WithTweakListOptions(ofAddons), kubeinformers.WithTransform(stripManagedFields))
	workInformers := workinformers.NewSharedInformerFactoryWithOptions(works, frameworkResync,
		workinformers.WithTweakListOptions(ofAddons), workinformers.WithTransform(stripAgentWork))
	addonInformers := addoninformers.NewSharedInformerFactoryWithOptions(addons, frameworkResync,
		addoninformers.WithTweakListOptions(namedAddons(addonNames)), addoninformers.WithTransform(stripManagedFields))
	clusterInformers := clusterinformers.NewSharedInformerFactoryWithOptions(clusters, frameworkResync, clusterinformers.WithTransform(stripManagedFields))
	dynamicInformers := dynamicinformer.NewDynamicSharedInformerFactory(dyn, frameworkResync)

	addonsHanded := addonFactory{SharedInformerFactory: addonInformers, tweak: namedAddons(addonNames)}
	clustersHanded := clusterFactory{SharedInformerFactory: clusterInformers}
	if shared != nil {
		var err error
		if clustersHanded.clusters, err = sharedInformer(ctx, shared, &clusterv1.ManagedCluster{}); err != nil {
			return err
		}
		if len(addonNames) == 1 {
			if addonsHanded.addons, err = sharedInformer(ctx, shared, &addonv1beta1.ManagedClusterAddOn{}); err != nil {
				return err
			}
		}
	}

	manifestWorks := workInformers.Work().V1().ManifestWorks()
	if err := manifestWorks.Informer().AddIndexers(cache.Indexers{
		index.ManifestWorkByAddon:           index.IndexManifestWorkByAddon,
		index.ManifestWorkByHostedAddon:     index.IndexManifestWorkByHostedAddon,
		index.ManifestWorkHookByHostedAddon: index.IndexManifestWorkHookByHostedAddon,
	}); err != nil {
		return err
	}
	if err := addonsHanded.Addon().V1beta1().ManagedClusterAddOns().Informer().AddIndexers(cache.Indexers{
		index.ManagedClusterAddonByNamespace: index.IndexManagedClusterAddonByNamespace,
		index.AddonByConfig:                  index.IndexAddonByConfig,
	}); err != nil {
		return err
	}
	if err := addonsHanded.Addon().V1beta1().ClusterManagementAddOns().Informer().AddIndexers(cache.Indexers{
		index.ClusterManagementAddonByConfig: index.IndexClusterManagementAddonByConfig,
	}); err != nil {
		return err
	}

	if err := mgr.StartWithInformers(ctx, works,
		manifestWorkInformer{manifestWorks},
		kubeFactory{kubeInformers, ofAddons},
		addonsHanded,
		clustersHanded,
		dynamicFactory{dynamicInformers},
	); err != nil {
		return err
	}
	kubeInformers.Start(ctx.Done())
	workInformers.Start(ctx.Done())
	addonInformers.Start(ctx.Done())
	clusterInformers.Start(ctx.Done())
	dynamicInformers.Start(ctx.Done())
	if addonsHanded.addons != nil {
		go func() {
			_ = wait.PollUntilContextCancel(ctx, frameworkResync, false, func(context.Context) (bool, error) {
				resyncAddons(mgr, addonsHanded.addons.GetStore())
				return false, nil
			})
		}()
	}
	return nil
}

// resyncAddons has the framework sync each ManagedClusterAddOn of addons, as the resync of
// its own informer did every frameworkResync: the manager's informer, which it reads
// instead, resyncs every ten hours, and the registration controller learns of its addons
// from that informer only. Its sync grants each agent its hub permissions again
// (AgentAddon.grantHubPermissions), which puts back a Role or RoleBinding that someone
// else changed or deleted.
func resyncAddons(mgr addonmanager.AddonManager, addons cache.Store) {
	for _, obj := range addons.List() {
		if addon, ok := obj.(*addonv1beta1.ManagedClusterAddOn); ok {
			mgr.Trigger(addon.Namespace, addon.Name)
		}
	}
}

// stripAgentWork is the transform of the framework's informer of the addons'
// ManifestWorks: it drops their managed fields, the work agent's conditions of each
// manifest, and the status of each manifest without status feedback, and shares the
// manifests that every cluster's work holds alike (hubcache.SharedManifest): of a work of
// 12 manifests, 10 KB in memory before, 4 KB after. The framework's controllers (v1.3.0)
// read of a work its metadata and spec (the work applier of sdk-go compares a deep copy
// and patches them), the work's own conditions, and of each manifest its identity and
// status feedback. This addon's health prober is the lease (addon.go), for which
// agentdeploy's health check reads no work; with a work prober it reads only the deploy
// works (DeployWorkNamePrefix), and skips a manifest without feedback
// (findResultsByIdentifier). Every other work keeps the status of each manifest
// (FindManifestValue reads the hook work's, and stops at the first manifest without
// feedback). They write no work's status.
func stripAgentWork(obj any) (any, error) {
	w, ok := obj.(*workv1.ManifestWork)
	if !ok {
		return obj, nil
	}
	w.ManagedFields = nil
	deploy := strings.HasPrefix(w.Name, constants.DeployWorkNamePrefix(w.Labels[addonv1beta1.AddonLabelKey]))
	manifests := w.Status.ResourceStatus.Manifests[:0]
	for _, m := range w.Status.ResourceStatus.Manifests {
		if len(m.StatusFeedbacks.Values) == 0 && deploy {
			continue
		}
		m.Conditions = nil
		manifests = append(manifests, m)
	}
	w.Status.ResourceStatus.Manifests = manifests
	for i := range w.Spec.Workload.Manifests {
		if raw := w.Spec.Workload.Manifests[i].Raw; raw != nil {
			w.Spec.Workload.Manifests[i].Raw = hubcache.SharedManifest(raw)
		}
	}
	return w, nil
}

// withoutTombstones is a shared informer whose event handlers never get a
// cache.DeletedFinalStateUnknown: withoutTombstoneHandler hands them its object.
type withoutTombstones struct{ cache.SharedIndexInformer }

func (i withoutTombstones) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	return i.SharedIndexInformer.AddEventHandler(withoutTombstoneHandler{h})
}

func (i withoutTombstones) AddEventHandlerWithResyncPeriod(h cache.ResourceEventHandler, resync time.Duration) (cache.ResourceEventHandlerRegistration, error) {
	return i.SharedIndexInformer.AddEventHandlerWithResyncPeriod(withoutTombstoneHandler{h}, resync)
}

func (i withoutTombstones) AddEventHandlerWithOptions(h cache.ResourceEventHandler, options cache.HandlerOptions) (cache.ResourceEventHandlerRegistration, error) {
	return i.SharedIndexInformer.AddEventHandlerWithOptions(withoutTombstoneHandler{h}, options)
}

// withoutTombstoneHandler hands the object of a deletion that its informer learnt of by a
// relist, the tombstone's last known state, to the handler it wraps.
type withoutTombstoneHandler struct{ cache.ResourceEventHandler }

func (h withoutTombstoneHandler) OnDelete(obj any) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		if tombstone.Obj == nil {
			return
		}
		obj = tombstone.Obj
	}
	h.ResourceEventHandler.OnDelete(obj)
}

// The factories below hand the framework's controllers the informers of the factories
// they wrap, withoutTombstones. The generated group constructors build each typed
// informer through the factory they are given (InformerFor), so the informers stay those
// of the wrapped factory: shared, started and synced by it.

type kubeFactory struct {
	kubeinformers.SharedInformerFactory
	tweak kubeinternal.TweakListOptionsFunc
}

func (f kubeFactory) InformerFor(obj runtime.Object, newFunc kubeinternal.NewInformerFunc) cache.SharedIndexInformer {
	return withoutTombstones{f.SharedInformerFactory.InformerFor(obj, newFunc)}
}

func (f kubeFactory) Certificates() certificates.Interface {
	return certificates.New(f, metav1.NamespaceAll, f.tweak)
}

type addonFactory struct {
	addoninformers.SharedInformerFactory
	tweak addoninternal.TweakListOptionsFunc
	// addons, when set, is the informer of ManagedClusterAddOns to hand instead of the
	// factory's.
	addons cache.SharedIndexInformer
}

func (f addonFactory) InformerFor(obj runtime.Object, newFunc addoninternal.NewInformerFunc) cache.SharedIndexInformer {
	if _, ok := obj.(*addonv1beta1.ManagedClusterAddOn); ok && f.addons != nil {
		return withoutTombstones{f.addons}
	}
	return withoutTombstones{f.SharedInformerFactory.InformerFor(obj, newFunc)}
}

func (f addonFactory) Addon() addongroup.Interface {
	return addongroup.New(f, metav1.NamespaceAll, f.tweak)
}

type clusterFactory struct {
	clusterinformers.SharedInformerFactory
	// clusters, when set, is the informer of ManagedClusters to hand instead of the
	// factory's.
	clusters cache.SharedIndexInformer
}

func (f clusterFactory) InformerFor(obj runtime.Object, newFunc clusterinternal.NewInformerFunc) cache.SharedIndexInformer {
	if _, ok := obj.(*clusterv1.ManagedCluster); ok && f.clusters != nil {
		return withoutTombstones{f.clusters}
	}
	return withoutTombstones{f.SharedInformerFactory.InformerFor(obj, newFunc)}
}

// sharedInformer returns the informer of obj's kind of the manager's cache, started and
// synced, for the framework's controllers. Its objects are the cache's own: they read
// them through listers and change copies, as they do the objects of their own informers.
func sharedInformer(ctx context.Context, shared crcache.Informers, obj client.Object) (cache.SharedIndexInformer, error) {
	informer, err := shared.GetInformer(ctx, obj)
	if err != nil {
		return nil, fmt.Errorf("the manager's informer of %T: %w", obj, err)
	}
	i, ok := informer.(cache.SharedIndexInformer)
	if !ok {
		return nil, fmt.Errorf("the manager's informer of %T is a %T, not a SharedIndexInformer", obj, informer)
	}
	return i, nil
}

func (f clusterFactory) Cluster() clustergroup.Interface {
	return clustergroup.New(f, metav1.NamespaceAll, nil)
}

type dynamicFactory struct {
	dynamicinformer.DynamicSharedInformerFactory
}

func (f dynamicFactory) ForResource(gvr schema.GroupVersionResource) kubeinformers.GenericInformer {
	return genericInformer{f.DynamicSharedInformerFactory.ForResource(gvr)}
}

type genericInformer struct{ kubeinformers.GenericInformer }

func (i genericInformer) Informer() cache.SharedIndexInformer {
	return withoutTombstones{i.GenericInformer.Informer()}
}

type manifestWorkInformer struct {
	workinformersv1.ManifestWorkInformer
}

func (i manifestWorkInformer) Informer() cache.SharedIndexInformer {
	return withoutTombstones{i.ManifestWorkInformer.Informer()}
}
