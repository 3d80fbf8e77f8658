package e2e

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/clustersecret"
	"github.com/ocm-gitops/argocd-pull-addon/test/fleet"
)

// `helm uninstall` by the documented path, in both modes, on the fleet: the chart's
// pre-delete hook Job runs `manager uninstall` as the manager's service account (the
// fleet runs the Job as the job controller and a kubelet would). Between the two, and at
// the end, the chart is installed again, as the suites around expect it.
var _ = Describe("Uninstalling the addon with helm", Ordered, func() {
	const (
		tenant   = "e2e-uninstall"
		key      = "e2e-uninstall"
		app      = "uninstall-guestbook"
		destNS   = "uninstall-guestbook"
		guestbox = "guestbook-ui" // the guestbook's Deployment
	)
	var (
		hub    hubClients
		target *fleet.ManagedCluster
	)
	BeforeAll(func(ctx SpecContext) {
		hub = newHubClients()
		target = theFleet.Clusters[2]
		hub.labelClusters(ctx, key, target)
		hub.tenantNamespace(ctx, tenant, key, target)
		DeferCleanup(func(ctx SpecContext) {
			// The hook leaves the spoke app in leave-running mode; the suites around expect
			// a clean cluster.
			Expect(ignoreNotFound(spokeApps(target).Delete(ctx, app, metav1.DeleteOptions{}))).To(Succeed())
		})
	})

	// pulled enables the addon on the target, pulls the app there and waits until it runs:
	// the hub app shows it Synced and Healthy, with the manager's finalizer, and the
	// cluster has its Argo CD cluster Secret.
	pulled := func(ctx context.Context) {
		clusteradmEnable(ctx, target.Name)
		_, err := hub.apps(tenant).Get(ctx, app, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, err = hub.apps(tenant).Create(ctx, pulledApp(tenant, app, target.Name, destNS, true), metav1.CreateOptions{})
		}
		Expect(err).NotTo(HaveOccurred())
		want := settledHealth(ctx)
		eventually(ctx, func(ctx context.Context) (string, error) {
			st, err := applicationStatus(ctx, hub.apps(tenant), app)
			return st.Sync.Status + "/" + st.Health.Status, err
		}).Should(Equal("Synced/" + want))
		u, err := hub.apps(tenant).Get(ctx, app, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(u.GetFinalizers()).To(ContainElements(argoapp.FinalizerManifestWorkCleanup, argoapp.ResourcesFinalizer))
		eventually(ctx, clusterSecrets).ShouldNot(BeEmpty())
		_, err = target.Kube.AppsV1().Deployments(destNS).Get(ctx, guestbox, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
	}

	// uninstalled runs helm uninstall and checks what every mode leaves on the hub: no
	// work of the addon, no cluster Secret of the manager, no finalizer that only the
	// manager would remove, and the agent gone from the cluster.
	uninstalled := func(ctx context.Context) {
		out, err := theFleet.UninstallAddon(ctx)
		Expect(err).NotTo(HaveOccurred())
		GinkgoWriter.Println(out)
		list, err := hub.works.WorkV1().ManifestWorks("").List(ctx, metav1.ListOptions{LabelSelector: argoapp.LabelAddon + "=" + addonName})
		Expect(err).NotTo(HaveOccurred())
		Expect(list.Items).To(BeEmpty(), "the addon's works after helm uninstall")
		Expect(clusterSecrets(ctx)).To(BeEmpty())
		u, err := hub.apps(tenant).Get(ctx, app, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(u.GetFinalizers()).To(BeEmpty(), "the hub Argo CD skips the pulled app: nobody would remove them")
		eventually(ctx, agentGone(target)).Should(BeTrue(), "the agent leaves the cluster with the ClusterManagementAddOn")
	}

	It("pulls an app to a cluster", func(ctx SpecContext) {
		pulled(ctx)
	})

	It("by default leaves the app and its workload running on the cluster", func(ctx SpecContext) {
		uninstalled(ctx)
		spoke, err := spokeApps(target).Get(ctx, app, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred(), "the spoke Application stays")
		Expect(spoke.GetOwnerReferences()).To(BeEmpty(), "the work agent dropped its owner reference before the work went")
		Consistently(ctx, func(ctx context.Context) error {
			if _, err := spokeApps(target).Get(ctx, app, metav1.GetOptions{}); err != nil {
				return err
			}
			_, err := target.Kube.AppsV1().Deployments(destNS).Get(ctx, guestbox, metav1.GetOptions{})
			return err
		}).WithTimeout(15*time.Second).WithPolling(time.Second).Should(Succeed(), "the app and its Deployment keep running")
		// Nothing holds the hub app any more.
		hub.deleteAndWait(ctx, hub.apps(tenant), app)
	})

	It("installed again, adopts the running app", func(ctx SpecContext) {
		Expect(theFleet.InstallAddon(ctx, "uninstall.mode=remove-apps")).To(Succeed())
		pulled(ctx)
	})

	It("with uninstall.mode=remove-apps removes the app from the cluster, and Argo CD prunes its workload", func(ctx SpecContext) {
		uninstalled(ctx)
		eventually(ctx, objectGone(spokeApps(target), app)).Should(BeTrue(), "the spoke Application is deleted")
		_, err := target.Kube.AppsV1().Deployments(destNS).Get(ctx, guestbox, metav1.GetOptions{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the resources finalizer pruned the Deployment first: %v", err)
		hub.deleteAndWait(ctx, hub.apps(tenant), app)
	})

	AfterAll(func(ctx SpecContext) {
		if _, err := theFleet.Helm(ctx, "status", "argocd-pull-addon", "--namespace", fleet.AddonReleaseNamespace); err == nil {
			return // a spec failed before it uninstalled
		}
		Expect(theFleet.InstallAddon(ctx)).To(Succeed(), "the chart as the suite installed it")
	})
})

// clusterSecrets are the names of the Argo CD cluster Secrets the manager made.
func clusterSecrets(ctx context.Context) ([]string, error) {
	list, err := theFleet.Hub.Kube.CoreV1().Secrets(fleet.ArgoCDNamespace).List(ctx, metav1.ListOptions{
		LabelSelector: argoapp.LabelSecretType + "=" + argoapp.SecretTypeCluster + "," + clustersecret.LabelManagedBy + "=" + addonName})
	if err != nil {
		return nil, err
	}
	var names []string
	for _, s := range list.Items {
		names = append(names, s.Name)
	}
	return names, nil
}
