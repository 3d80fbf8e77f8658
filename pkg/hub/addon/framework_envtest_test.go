package addon

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	addonv1beta1 "open-cluster-management.io/api/addon/v1beta1"
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
	if _, err := kubernetes.NewForConfigOrDie(env.Config).CoreV1().Namespaces().Create(ctx,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "c1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"argocd-pull", "other"} {
		if _, err := addons.AddonV1beta1().ManagedClusterAddOns("c1").Create(ctx,
			&addonv1beta1.ManagedClusterAddOn{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := addons.AddonV1beta1().ClusterManagementAddOns().Create(ctx,
			&addonv1beta1.ClusterManagementAddOn{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: addonv1beta1.ClusterManagementAddOnSpec{
				InstallStrategy: addonv1beta1.InstallStrategy{Type: addonv1beta1.AddonInstallStrategyManual}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
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
