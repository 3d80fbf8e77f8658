// Package hubcache is the one cache of the hub manager, which every hub controller reads
// through: the types it knows (NewScheme), the objects it keeps (Options) and the client
// that reads through it (NewClient). pkg/hub builds each of them once and hands them to
// every controller's Setup; no controller builds its own.
package hubcache

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	toolscache "k8s.io/client-go/tools/cache"
	addonv1beta1 "open-cluster-management.io/api/addon/v1beta1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	workv1 "open-cluster-management.io/api/work/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/ocm-gitops/argocd-pull-addon/pkg/apis/apps/v1alpha1"
	statusv1alpha1 "github.com/ocm-gitops/argocd-pull-addon/pkg/apis/argocdpull/v1alpha1"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
)

// Scope is what the hub's cache keeps of the kinds it would otherwise keep whole.
type Scope struct {
	// AddonName is the name of the ClusterManagementAddOn and of every ManagedClusterAddOn
	// of the addon: the only ones cached.
	AddonName string
	// ArgoCDNamespace is the hub Argo CD's namespace: the only one whose AppProjects are
	// cached.
	ArgoCDNamespace string
	// WatchNamespaces are the only namespaces whose Applications and ApplicationSets are
	// cached; empty means all namespaces.
	WatchNamespaces []string
}

// NewScheme returns the scheme of every type the hub controllers read or write:
// client-go's, OCM's cluster (v1, v1beta1), work (v1) and addon (v1beta1) types, the
// CRD type (the ApplicationSet report controller reads the served schema of its CRD), the
// MulticlusterApplicationSetReport and the agents' ApplicationStatusSlice. Applications, ApplicationSets and AppProjects are
// handled as unstructured objects and need no registration.
func NewScheme() (*runtime.Scheme, error) {
	scheme := runtime.NewScheme()
	for _, install := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme, clusterv1.Install, clusterv1beta1.Install, workv1.Install, addonv1beta1.Install,
		apiextensionsv1.AddToScheme, appsv1alpha1.AddToScheme, statusv1alpha1.AddToScheme,
	} {
		if err := install(scheme); err != nil {
			return nil, err
		}
	}
	return scheme, nil
}

// Options returns the options of the manager's cache, which keep it to what the hub
// controllers need:
//   - Applications and ApplicationSets of the watched namespaces only, and of each
//     Application a digest of status.resources instead of the list (ResourcesDigest):
//     the status mirror, its only reader, compares it and writes it, and the list is
//     most of a pulled app's size;
//   - AppProjects of the Argo CD namespace only;
//   - the ManagedClusterAddOns and the ClusterManagementAddOn named AddonName only;
//   - the ManifestWorks that carry the pull label only, which every work the addon
//     renders has, without the work agent's conditions of each manifest, which no
//     controller reads (they read the work's conditions, and of each manifest its
//     identity and status feedback);
//   - the ApplicationStatusSlices of the addon's agents only (their addon label), without
//     what the hub does not show: the tree's nodes and the resources' images
//     (docs/design.md, 8a), so that the cache grows with the resources of the apps and
//     not with their trees;
//   - no object's managedFields, which no controller reads: without them the cache of
//     10,000 Applications and their works is a fraction of the size.
//
// The controllers behave the same without them (they filter every event and read), but
// then cache every object of those kinds. With them, a read through the client of
// NewClient of an object outside these selections finds nothing.
func Options(scope Scope) cache.Options {
	var byNamespace cache.ByObject
	if len(scope.WatchNamespaces) > 0 {
		byNamespace.Namespaces = map[string]cache.Config{}
		for _, ns := range scope.WatchNamespaces {
			byNamespace.Namespaces[ns] = cache.Config{}
		}
	}
	byName := fields.OneTermEqualSelector("metadata.name", scope.AddonName)
	pulled, _ := labels.NewRequirement(argoapp.LabelPullToOCMManagedCluster, selection.Exists, nil)
	ownSlices := labels.SelectorFromSet(labels.Set{statusv1alpha1.LabelAddon: scope.AddonName})
	return cache.Options{
		ByObject: map[client.Object]cache.ByObject{
			argoapp.NewApplication():                 withTransform(byNamespace, TransformApplication),
			argoapp.NewApplicationSet():              byNamespace,
			argoapp.NewAppProject():                  {Namespaces: map[string]cache.Config{scope.ArgoCDNamespace: {}}},
			&addonv1beta1.ManagedClusterAddOn{}:      {Field: byName},
			&addonv1beta1.ClusterManagementAddOn{}:   {Field: byName},
			&workv1.ManifestWork{}:                   {Label: labels.NewSelector().Add(*pulled), Transform: stripWork},
			&statusv1alpha1.ApplicationStatusSlice{}: {Label: ownSlices, Transform: stripSlice},
		},
		DefaultTransform: cache.TransformStripManagedFields(),
	}
}

func withTransform(b cache.ByObject, transform toolscache.TransformFunc) cache.ByObject {
	b.Transform = transform
	return b
}

// resourcesDigestPrefix starts a ResourcesDigest.
const resourcesDigestPrefix = "sha256:"

// ResourcesDigest is what the manager's cache holds at status.resources of a hub
// Application, in place of the list: a digest of its JSON encoding. The status mirror
// compares the list it would write with it (SameResources) and writes the list only when
// it differs; every other reader of the cache leaves status.resources alone, and a merge
// patch computed from a cached Application carries the field only when a writer set it.
func ResourcesDigest(resources []any) string {
	raw, err := json.Marshal(resources)
	if err != nil {
		return "" // never equal to a digest
	}
	sum := sha256.Sum256(raw)
	return resourcesDigestPrefix + hex.EncodeToString(sum[:])
}

// SameResources reports whether status.resources of an Application, as the cache holds
// it (a ResourcesDigest) or as the apiserver returns it (a list), is resources.
func SameResources(current any, resources []any) bool {
	if digest, ok := current.(string); ok && strings.HasPrefix(digest, resourcesDigestPrefix) {
		return digest == ResourcesDigest(resources)
	}
	return false
}

// TransformApplication is the cache's transform of a hub Application: it drops its
// managed fields and replaces its status.resources with their ResourcesDigest. (The
// manager's DefaultTransform does not apply to a kind with its own Transform.)
func TransformApplication(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	u.SetManagedFields(nil)
	if status, ok := u.Object["status"].(map[string]any); ok {
		if resources, ok := status["resources"].([]any); ok {
			status["resources"] = ResourcesDigest(resources)
		}
	}
	return u, nil
}

// stripWork drops a work's managed fields and the conditions of each of its manifests.
func stripWork(obj any) (any, error) {
	w, ok := obj.(*workv1.ManifestWork)
	if !ok {
		return obj, nil
	}
	w.ManagedFields = nil
	for i := range w.Status.ResourceStatus.Manifests {
		w.Status.ResourceStatus.Manifests[i].Conditions = nil
	}
	return w, nil
}

// stripSlice keeps of a slice what the hub shows, compactly: no tree nodes, resource
// images or managed fields (the manager's DefaultTransform does not apply to a kind with
// its own Transform); the strings that the resources repeat (groups, versions, kinds,
// namespaces, statuses) and their message-less health held once; each list exactly as
// long as it is. The hub holds the resources of every app of every cluster, and these
// took half of their size.
func stripSlice(obj any) (any, error) {
	s, ok := obj.(*statusv1alpha1.ApplicationStatusSlice)
	if !ok {
		return obj, nil
	}
	s.ManagedFields = nil
	intern := argoapp.Intern
	for i := range s.Apps {
		app := &s.Apps[i]
		app.Nodes = nil
		resources := make([]statusv1alpha1.ResourceStatus, len(app.Resources))
		for j, r := range app.Resources {
			resources[j] = statusv1alpha1.ResourceStatus{
				Group: intern(r.Group), Version: intern(r.Version), Kind: intern(r.Kind), Namespace: intern(r.Namespace),
				Name: r.Name, Status: intern(r.Status), Health: sharedHealth(r.Health),
			}
		}
		if len(resources) == 0 {
			resources = nil
		}
		app.Resources = resources
	}
	return s, nil
}

// healths holds one *Health of each of Argo CD's health statuses without a message,
// which the resources of every slice share: the cache never changes a cached object.
var healths = func() map[string]*statusv1alpha1.Health {
	m := map[string]*statusv1alpha1.Health{}
	for _, status := range []string{"Healthy", "Progressing", "Degraded", "Suspended", "Missing", "Unknown"} {
		m[status] = &statusv1alpha1.Health{Status: status}
	}
	return m
}()

func sharedHealth(h *statusv1alpha1.Health) *statusv1alpha1.Health {
	if h == nil || h.Message != "" || healths[h.Status] == nil {
		return h
	}
	return healths[h.Status]
}

// NewClient returns a client that reads every object, Applications included, from the
// manager's cache, and writes to the apiserver. The manager's own client reads
// unstructured objects from the apiserver unless it is told otherwise. Every hub
// controller that reads Applications reads through one.
func NewClient(mgr ctrl.Manager) (client.WithWatch, error) {
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
