package addon

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/labels"
	addonclient "open-cluster-management.io/api/client/addon/clientset/versioned"
	addoninformers "open-cluster-management.io/api/client/addon/informers/externalversions"

	"github.com/ocm-gitops/argocd-pull-addon/test/testenv"
)

// TestFrameworkAddonInformersHoldTheAddonsOwn: against a real apiserver, the framework's
// informers of ManagedClusterAddOns and ClusterManagementAddOns, narrowed by namedAddons
// as StartFramework narrows them and built through the factory it hands the framework,
// hold the addon's own and not another addon's; with two
// addons served, they hold both.
func TestFrameworkAddonInformersHoldTheAddonsOwn(t *testing.T) {
	env := testenv.Start(t)
	ctx := t.Context()
	addons := addonclient.NewForConfigOrDie(env.Config)
	createNamespaces(ctx, t, env, "c1")
	for _, name := range []string{"argocd-pull", "other"} {
		createMCA(ctx, t, env, "c1", name)
		createCMA(ctx, t, env, name)
	}
	for _, served := range [][]string{{"argocd-pull"}, {"argocd-pull", "other"}} {
		// As StartFramework builds them, and as the framework's controllers get them:
		// through the factory it hands them.
		factory := addoninformers.NewSharedInformerFactoryWithOptions(addons, 0, addoninformers.WithTweakListOptions(namedAddons(served)))
		handed := addonFactory{SharedInformerFactory: factory, tweak: namedAddons(served)}
		mcas, cmas := handed.Addon().V1beta1().ManagedClusterAddOns(), handed.Addon().V1beta1().ClusterManagementAddOns()
		mcas.Informer()
		cmas.Informer()
		stop := make(chan struct{})
		factory.Start(stop)
		factory.WaitForCacheSync(stop)
		var cachedMCAs, cachedCMAs []string
		mcaList, err := mcas.Lister().List(labels.Everything())
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range mcaList {
			cachedMCAs = append(cachedMCAs, a.Name)
		}
		cmaList, err := cmas.Lister().List(labels.Everything())
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range cmaList {
			cachedCMAs = append(cachedCMAs, a.Name)
		}
		slices.Sort(cachedMCAs)
		slices.Sort(cachedCMAs)
		if !slices.Equal(cachedMCAs, served) || !slices.Equal(cachedCMAs, served) {
			t.Errorf("serving %v: the informers hold ManagedClusterAddOns %v and ClusterManagementAddOns %v", served, cachedMCAs, cachedCMAs)
		}
		close(stop)
		factory.Shutdown()
	}
}
