package e2e

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	workclient "open-cluster-management.io/api/client/work/clientset/versioned"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/test/fleet"
)

// Beside Red Hat ACM's pull controller: it selects the same hub Applications and puts the
// same pull label and back-pointer annotations on its works. A work that another
// controller made is never the manager's to update or delete, not even where the addon
// is not enabled (where the manager deletes its own works once the grace period passed).
var _ = Describe("A ManifestWork that another pull controller made", Ordered, func() {
	const (
		tenant = "e2e-foreign"
		key    = "e2e-foreign"
		app    = "foreign-guestbook"
	)
	var (
		hub    hubClients
		target *fleet.ManagedCluster
	)
	BeforeAll(func(ctx SpecContext) {
		hub = newHubClients()
		target = theFleet.Clusters[2]
		// The addon is not enabled on the target: another suite may have left it enabled.
		Expect(ignoreNotFound(hub.addons.AddonV1beta1().ManagedClusterAddOns(target.Name).Delete(ctx, addonName, metav1.DeleteOptions{}))).To(Succeed())
		hub.labelClusters(ctx, key, target)
		hub.tenantNamespace(ctx, tenant, key, target)
	})

	It("is left alone: the manager refuses the Application and never writes the work", func(ctx SpecContext) {
		// As ACM's pull controller shapes it: the pull label, the back-pointer annotations,
		// no label of this addon. Its payload is a ConfigMap, which the work agent may apply.
		cm := &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: metav1.ObjectMeta{Name: "foreign-payload", Namespace: "default"}, Data: map[string]string{"from": "another controller"}}
		mw := fleet.ManifestWork(tenant+"-"+app, target.Name, cm)
		mw.Labels = map[string]string{argoapp.LabelPullToOCMManagedCluster: "true"}
		mw.Annotations = map[string]string{
			argoapp.AnnotationHubApplicationNamespace: tenant,
			argoapp.AnnotationHubApplicationName:      app,
		}
		created, err := hub.works.WorkV1().ManifestWorks(target.Name).Create(ctx, mw, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) {
			Expect(ignoreNotFound(hub.works.WorkV1().ManifestWorks(target.Name).Delete(ctx, mw.Name, metav1.DeleteOptions{}))).To(Succeed())
		})
		eventually(ctx, func(ctx context.Context) (string, error) {
			return workConditionStatus(ctx, hub.works, target.Name, mw.Name, workv1.WorkApplied)
		}).Should(Equal("True"), "the work agent applied the other controller's work")
		applied, err := hub.works.WorkV1().ManifestWorks(target.Name).Get(ctx, mw.Name, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())

		// Without finalizers: the other controller, which would release them, does not run
		// here, and the manager leaves an Application it does not serve alone.
		pulled := pulledApp(tenant, app, target.Name, "foreign-guestbook", true)
		pulled.SetFinalizers(nil)
		hub.createApp(ctx, pulled)
		const reason = "ServedByAnotherController"
		eventually(ctx, func(ctx context.Context) (string, error) {
			return hub.propagationError(ctx, tenant, app)
		}).Should(And(HavePrefix(reason+": "), ContainSubstring(target.Name+"/"+mw.Name)),
			"the condition names the other controller's work")
		eventually(ctx, func(ctx context.Context) ([]string, error) {
			return warningReasons(ctx, tenant, app)
		}).Should(ContainElement(reason))
		works, err := hub.worksOf(ctx, tenant, app)
		Expect(err).NotTo(HaveOccurred())
		Expect(works).To(ConsistOf(HaveField("Name", mw.Name)), "only the other controller's work points to the app")

		// The manager reconciled (the condition above); the work stays as the other
		// controller and the work agent left it: no write of the manager, no deletion.
		Consistently(ctx, func(ctx context.Context) (string, error) {
			got, err := hub.works.WorkV1().ManifestWorks(target.Name).Get(ctx, mw.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return "deleted", nil
			}
			if err != nil {
				return "", err
			}
			if got.Generation != created.Generation || got.Labels[argoapp.LabelAddon] != "" {
				return "written by the manager", nil
			}
			return "kept", nil
		}).WithTimeout(20 * time.Second).WithPolling(time.Second).Should(Equal("kept"))
		Expect(applied.Generation).To(Equal(created.Generation))
		_, err = target.Kube.CoreV1().ConfigMaps("default").Get(ctx, cm.Name, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred(), "the other controller's payload still runs on %s", target.Name)
	})
})

// workConditionStatus is the status of the work's condition of type t, "" without it.
func workConditionStatus(ctx context.Context, works workclient.Interface, cluster, name, t string) (string, error) {
	mw, err := works.WorkV1().ManifestWorks(cluster).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	return string(conditionStatus(mw.Status.Conditions, t)), nil
}
