package e2e

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	workclient "open-cluster-management.io/api/client/work/clientset/versioned"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/clusterreport"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/addon"
	"github.com/ocm-gitops/argocd-pull-addon/test/fleet"
)

// The addon as a user enables it: `clusteradm addon enable` on one cluster; the framework
// delivers the agent through a ManifestWork, the klusterlet registers it, the fleet runs it
// as a kubelet would, and its report arrives on the hub.
var _ = Describe("The argocd-pull addon", Ordered, func() {
	var (
		hub     hubClients
		enabled *fleet.ManagedCluster
		other   *fleet.ManagedCluster
	)
	BeforeAll(func() {
		hub = newHubClients()
		enabled, other = theFleet.Clusters[0], theFleet.Clusters[2] // the pull suite uses the second
	})

	// On a stock OCM spoke the work agent applies with the admin ClusterRole plus the
	// ClusterRoles labelled aggregate-to-work; admin covers no Argo CD kind. The fleet's
	// klusterlet runs with exactly that RBAC, so a work carrying an Application is
	// forbidden until the addon's agent ships the work agent's Role in the namespaces it
	// watches (the fleet's: argocd).
	const forbiddenWork = "addon-before-enable"
	It("cannot apply an Application on a cluster before the addon is enabled there", func(ctx SpecContext) {
		// Another suite may have left the addon enabled on the cluster.
		err := hub.addons.AddonV1beta1().ManagedClusterAddOns(enabled.Name).Delete(ctx, addonName, metav1.DeleteOptions{})
		Expect(err == nil || apierrors.IsNotFound(err)).To(BeTrue(), "disable the addon on %s: %v", enabled.Name, err)
		eventually(ctx, func(ctx context.Context) bool {
			_, err := enabled.Kube.RbacV1().Roles(fleet.ArgoCDNamespace).Get(ctx, addon.WorkAgentRoleName(addonName), metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}).Should(BeTrue(), "the work agent's Role before enabling")
		mw := fleet.ManifestWork(forbiddenWork, enabled.Name, fleet.GuestbookApplication(forbiddenWork, theFleet.Git.URL()))
		_, err = hub.works.WorkV1().ManifestWorks(enabled.Name).Create(ctx, mw, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		eventually(ctx, func(ctx context.Context) (string, error) {
			return manifestApplied(ctx, hub.works, enabled.Name, forbiddenWork)
		}).Should(And(HavePrefix("False:"), ContainSubstring("forbidden"),
			ContainSubstring(`"system:serviceaccount:open-cluster-management-agent:`+fleet.KlusterletServiceAccount+`"`),
			ContainSubstring(`"applications" in API group "argoproj.io"`)))
	})

	It("is enabled on one cluster with clusteradm", func(ctx SpecContext) {
		clusteradmEnable(ctx, enabled.Name)
	})

	It("ships the work agent's Role, so the forbidden work applies", func(ctx SpecContext) {
		DeferCleanup(func(ctx SpecContext) {
			Expect(hub.works.WorkV1().ManifestWorks(enabled.Name).Delete(ctx, forbiddenWork, metav1.DeleteOptions{})).To(Succeed())
		})
		eventually(ctx, func(ctx context.Context) ([]rbacv1.Subject, error) {
			binding, err := enabled.Kube.RbacV1().RoleBindings(fleet.ArgoCDNamespace).Get(ctx, addon.WorkAgentRoleName(addonName), metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			return binding.Subjects, nil
		}).Should(ContainElement(HaveField("Name", fleet.KlusterletServiceAccount)))
		eventually(ctx, func(ctx context.Context) (string, error) {
			return manifestApplied(ctx, hub.works, enabled.Name, forbiddenWork)
		}).Should(HavePrefix("True:"))
		spokeDyn, err := dynamic.NewForConfig(enabled.Config)
		Expect(err).NotTo(HaveOccurred())
		_, err = spokeDyn.Resource(fleet.ApplicationGVR).Namespace(fleet.ArgoCDNamespace).Get(ctx, forbiddenWork, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred(), "the work agent created the Application")
	})

	It("installs the agent through a ManifestWork, and the agent's lease makes the addon Available", func(ctx SpecContext) {
		eventually(ctx, func(ctx context.Context) (metav1.ConditionStatus, error) {
			mca, err := hub.addons.AddonV1beta1().ManagedClusterAddOns(enabled.Name).Get(ctx, addonName, metav1.GetOptions{})
			if err != nil {
				return "", err
			}
			return conditionStatus(mca.Status.Conditions, "Available"), nil
		}).Should(Equal(metav1.ConditionTrue))

		list, err := hub.works.WorkV1().ManifestWorks(enabled.Name).List(ctx, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(list.Items).To(ContainElement(HaveField("Name", "addon-"+addonName+"-deploy-0")))
		_, err = enabled.Kube.AppsV1().Deployments(addon.DefaultInstallNamespace).Get(ctx, addonName+"-agent", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = enabled.Kube.CoreV1().Secrets(addon.DefaultInstallNamespace).Get(ctx, addon.HubKubeconfigSecret(addonName), metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred(), "the klusterlet wrote the agent's hub kubeconfig")
	})

	It("installs nothing on a cluster that did not opt in", func(ctx SpecContext) {
		_, err := other.Kube.AppsV1().Deployments(addon.DefaultInstallNamespace).Get(ctx, addonName+"-agent", metav1.GetOptions{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "agent Deployment on %s: %v", other.Name, err)
		_, err = hub.addons.AddonV1beta1().ManagedClusterAddOns(other.Name).Get(ctx, addonName, metav1.GetOptions{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue())
	})

	It("reports a pulled Application's sync, revision, health and resources on the hub", func(ctx SpecContext) {
		app := fleet.GuestbookApplication("addon-guestbook", theFleet.Git.URL())
		app.SetAnnotations(map[string]string{
			argoapp.AnnotationHubApplicationNamespace: fleet.ArgoCDNamespace,
			argoapp.AnnotationHubApplicationName:      enabled.Name + "-addon-guestbook",
		})
		mw := fleet.ManifestWork("addon-guestbook", enabled.Name, app)
		_, err := hub.works.WorkV1().ManifestWorks(enabled.Name).Create(ctx, mw, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) {
			Expect(hub.works.WorkV1().ManifestWorks(enabled.Name).Delete(ctx, mw.Name, metav1.DeleteOptions{})).To(Succeed())
		})
		head, err := theFleet.Git.Head()
		Expect(err).NotTo(HaveOccurred())

		var report clusterreport.App
		eventually(ctx, func(ctx context.Context) (string, error) {
			app, found, err := reportedApp(ctx, enabled.Name, "addon-guestbook")
			if !found || err != nil {
				return "not reported", err
			}
			report = app
			return app.Sync.Status + "/" + app.Sync.Revision + "/" + app.Health.Status, nil
		}).Should(Equal("Synced/" + head + "/Healthy"))
		Expect(report.HubName).To(Equal(enabled.Name + "-addon-guestbook"))
		Expect(report.ManifestWork).To(Equal("addon-guestbook"))
		var kinds []string
		for _, r := range report.Resources {
			kinds = append(kinds, r.Kind+"/"+r.Namespace+"/"+r.Name)
		}
		Expect(kinds).To(ConsistOf("Deployment/guestbook/guestbook-ui", "Service/guestbook/guestbook-ui"))
	})

	It("keeps the framework's and the klusterlet's conditions beside the agent's", func(ctx SpecContext) {
		mca, err := hub.addons.AddonV1beta1().ManagedClusterAddOns(enabled.Name).Get(ctx, addonName, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		for _, t := range []string{"Available", "ManifestApplied", "RegistrationApplied"} {
			Expect(conditionStatus(mca.Status.Conditions, t)).To(Equal(metav1.ConditionTrue), t)
		}
		Expect(conditionStatus(mca.Status.Conditions, clusterreport.ConditionApplicationCRD)).To(Equal(metav1.ConditionTrue))
	})

	It("removes the agent when the addon is disabled", func(ctx SpecContext) {
		Expect(hub.addons.AddonV1beta1().ManagedClusterAddOns(enabled.Name).Delete(ctx, addonName, metav1.DeleteOptions{})).To(Succeed())
		eventually(ctx, agentGone(enabled)).Should(BeTrue())
		eventually(ctx, func(ctx context.Context) ([]workv1.ManifestWork, error) {
			list, err := hub.works.WorkV1().ManifestWorks(enabled.Name).List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, err
			}
			return list.Items, nil
		}).ShouldNot(ContainElement(HaveField("Name", "addon-"+addonName+"-deploy-0")))
		eventually(ctx, func(ctx context.Context) bool {
			_, err := enabled.Kube.RbacV1().Roles(fleet.ArgoCDNamespace).Get(ctx, addon.WorkAgentRoleName(addonName), metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}).Should(BeTrue(), "the work agent's Role leaves with the agent")
	})
})

// manifestApplied is "<status>: <message>" of the Applied condition of the work's first
// manifest, where the work agent says why it could not apply it; "" until it tried.
func manifestApplied(ctx context.Context, works workclient.Interface, cluster, name string) (string, error) {
	mw, err := works.WorkV1().ManifestWorks(cluster).Get(ctx, name, metav1.GetOptions{})
	if err != nil || len(mw.Status.ResourceStatus.Manifests) == 0 {
		return "", err
	}
	for _, c := range mw.Status.ResourceStatus.Manifests[0].Conditions {
		if c.Type == workv1.WorkApplied {
			return string(c.Status) + ": " + c.Message, nil
		}
	}
	return "", nil
}
