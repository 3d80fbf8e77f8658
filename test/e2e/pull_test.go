package e2e

import (
	"context"
	"fmt"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	appsv1alpha1 "github.com/ocm-gitops/argocd-pull-addon/pkg/apis/apps/v1alpha1"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/test/fleet"
)

// The pull model end to end, with the real manager: a hub Application is wrapped in a
// ManifestWork for an opted-in cluster bound to its namespace, the cluster's Argo CD syncs
// it, the agent reports it, and deleting the hub Application cleans the cluster.
var _ = Describe("Pulling a hub Application", Ordered, func() {
	const (
		appName = "pull-guestbook"
		appNS   = "guestbook-pull"
	)
	var (
		hub     hubClients
		target  *fleet.ManagedCluster
		spokeCl dynamic.Interface
	)
	BeforeAll(func(ctx SpecContext) {
		var err error
		hub = newHubClients()
		target = theFleet.Clusters[1] // the addon suite uses the first and the last
		spokeCl, err = dynamic.NewForConfig(target.Config)
		Expect(err).NotTo(HaveOccurred())

		clusteradmEnable(ctx, target.Name)
		DeferCleanup(func(ctx SpecContext) {
			err := hub.addons.AddonV1beta1().ManagedClusterAddOns(target.Name).Delete(ctx, addonName, metav1.DeleteOptions{})
			Expect(ignoreNotFound(err)).To(Succeed())
		})

		// The tenant gate: the app's namespace places onto clusters where the addon is available.
		applier, err := fleet.NewApplier(theFleet.Hub.Config)
		Expect(err).NotTo(HaveOccurred())
		Expect(applier.ApplyYAML(ctx, fleet.ArgoCDNamespace, fleet.AddonPlacementYAML("pull-placement"))).To(Succeed())
	})

	It("wraps the hub Application in a ManifestWork that the cluster's Argo CD syncs", func(ctx SpecContext) {
		app := fleet.GuestbookApplication(appName, theFleet.Git.URL())
		app.SetLabels(map[string]string{argoapp.LabelPullToOCMManagedCluster: "true"})
		app.SetAnnotations(map[string]string{
			argoapp.AnnotationOCMManagedCluster: target.Name,
			argoapp.AnnotationSkipReconcile:     "true",
		})
		app.SetFinalizers([]string{argoapp.ResourcesFinalizer})
		Expect(unstructured.SetNestedField(app.Object, appNS, "spec", "destination", "namespace")).To(Succeed())
		_, err := hub.dyn.Resource(fleet.ApplicationGVR).Namespace(fleet.ArgoCDNamespace).Create(ctx, app, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())

		eventually(ctx, func(ctx context.Context) (int, error) {
			list, err := hub.works.WorkV1().ManifestWorks(target.Name).List(ctx, metav1.ListOptions{LabelSelector: argoapp.LabelPullToOCMManagedCluster})
			if err != nil {
				return 0, err
			}
			n := 0
			for _, w := range list.Items {
				if w.Annotations[argoapp.AnnotationHubApplicationName] == appName {
					n++
				}
			}
			return n, nil
		}).Should(Equal(1), "exactly one work for the app")

		head, err := theFleet.Git.Head()
		Expect(err).NotTo(HaveOccurred())
		eventually(ctx, func(ctx context.Context) (string, error) {
			got, err := spokeCl.Resource(fleet.ApplicationGVR).Namespace(fleet.ArgoCDNamespace).Get(ctx, appName, metav1.GetOptions{})
			if err != nil {
				return "", err
			}
			st, err := argoapp.DecodeStatus(got)
			if err != nil {
				return "", err
			}
			return st.Sync.Status + "/" + st.Sync.Revision, nil
		}).Should(Equal("Synced/" + head))
		_, err = target.Kube.AppsV1().Deployments(appNS).Get(ctx, "guestbook-ui", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
	})

	It("reports the spoke Application on the hub through the agent", func(ctx SpecContext) {
		// A standalone app's report names its ManifestWork, whose annotations lead back to
		// the hub Application.
		var workName string
		eventually(ctx, func(ctx context.Context) (string, error) {
			app, found, err := reportedApp(ctx, target.Name, appName)
			if !found || err != nil {
				return "not reported", err
			}
			workName = app.ManifestWork
			return app.Sync.Status, nil
		}).Should(Equal("Synced"))
		work, err := hub.works.WorkV1().ManifestWorks(target.Name).Get(ctx, workName, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred(), "the reported ManifestWork %q", workName)
		Expect(work.Annotations).To(HaveKeyWithValue(argoapp.AnnotationHubApplicationNamespace, fleet.ArgoCDNamespace))
		Expect(work.Annotations).To(HaveKeyWithValue(argoapp.AnnotationHubApplicationName, appName))
	})

	It("brings a new git revision to the spoke and back to the hub when the hub asks for a refresh", func(ctx SpecContext) {
		newRev, err := theFleet.Git.Commit("guestbook: two replicas", map[string]string{
			"guestbook/deployment.yaml": strings.Replace(fleet.GuestbookDeployment, "replicas: 1", "replicas: 2", 1),
		})
		Expect(err).NotTo(HaveOccurred())
		// The other specs deploy the guestbook as first committed.
		DeferCleanup(func() {
			_, err := theFleet.Git.Commit("guestbook: one replica, as it was", map[string]string{"guestbook/deployment.yaml": fleet.GuestbookDeployment})
			Expect(err).NotTo(HaveOccurred())
		})
		refresh := fmt.Sprintf(`{"metadata":{"annotations":{%q:"hard"}}}`, argoapp.AnnotationRefresh)
		_, err = hub.dyn.Resource(fleet.ApplicationGVR).Namespace(fleet.ArgoCDNamespace).Patch(ctx, appName, types.MergePatchType, []byte(refresh), metav1.PatchOptions{})
		Expect(err).NotTo(HaveOccurred())

		eventually(ctx, func(ctx context.Context) (string, error) {
			u, err := hub.dyn.Resource(fleet.ApplicationGVR).Namespace(fleet.ArgoCDNamespace).Get(ctx, appName, metav1.GetOptions{})
			if err != nil {
				return "", err
			}
			st, err := argoapp.DecodeStatus(u)
			if err != nil {
				return "", err
			}
			_, pending := u.GetAnnotations()[argoapp.AnnotationRefresh]
			return fmt.Sprintf("%s/%s refresh pending=%v", st.Sync.Status, st.Sync.Revision, pending), nil
		}).Should(Equal("Synced/"+newRev+" refresh pending=false"), "the hub app shows the new revision, and the delivered refresh is cleared")
		eventually(ctx, func(ctx context.Context) (int32, error) {
			d, err := target.Kube.AppsV1().Deployments(appNS).Get(ctx, "guestbook-ui", metav1.GetOptions{})
			if err != nil {
				return 0, err
			}
			return *d.Spec.Replicas, nil
		}).Should(BeEquivalentTo(2))
		app, found, err := reportedApp(ctx, target.Name, appName)
		Expect(err).NotTo(HaveOccurred())
		Expect(found).To(BeTrue())
		Expect(app.Sync.Revision).To(Equal(newRev))
	})

	It("shows a forbidden sync's error on the hub Application and in the agent's report", func(ctx SpecContext) {
		const forbidden = "pull-forbidden"
		// The spoke's Argo CD may write only where it runs apps; a namespace without a grant
		// fails to sync, as on clusters set up with namespaced RBAC.
		rbac := target.Kube.RbacV1()
		crb, err := rbac.ClusterRoleBindings().Get(ctx, "argocd-application-controller", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(rbac.ClusterRoleBindings().Delete(ctx, crb.Name, metav1.DeleteOptions{})).To(Succeed())
		DeferCleanup(func(ctx SpecContext) {
			crb.ResourceVersion = ""
			_, err := rbac.ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
		})
		applier, err := fleet.NewApplier(target.Config)
		Expect(err).NotTo(HaveOccurred())
		Expect(applier.ApplyYAML(ctx, "", []byte(`
apiVersion: v1
kind: Namespace
metadata: {name: `+forbidden+`}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: e2e-argocd-read-only}
rules:
- {apiGroups: ['*'], resources: ['*'], verbs: [get, list, watch]}
- {nonResourceURLs: ['*'], verbs: [get]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: e2e-argocd-read-only}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: e2e-argocd-read-only}
subjects: [{kind: ServiceAccount, name: argocd-application-controller, namespace: argocd}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: e2e-argocd-admin, namespace: argocd}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: argocd-application-controller}
subjects: [{kind: ServiceAccount, name: argocd-application-controller, namespace: argocd}]
`))).To(Succeed())

		app := pulledApp(fleet.ArgoCDNamespace, forbidden, target.Name, forbidden, true)
		app.SetFinalizers(nil)
		// Fail fast: Argo CD records SyncError once the automated sync gave up retrying.
		Expect(unstructured.SetNestedMap(app.Object, map[string]any{"limit": int64(1),
			"backoff": map[string]any{"duration": "1s", "factor": int64(1), "maxDuration": "1s"}}, "spec", "syncPolicy", "retry")).To(Succeed())
		_, err = hub.dyn.Resource(fleet.ApplicationGVR).Namespace(fleet.ArgoCDNamespace).Create(ctx, app, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) {
			Expect(hub.dyn.Resource(fleet.ApplicationGVR).Namespace(fleet.ArgoCDNamespace).Delete(ctx, forbidden, metav1.DeleteOptions{})).To(Succeed())
		})

		wantError := ContainSubstring(`is forbidden: User "system:serviceaccount:argocd:argocd-application-controller" cannot`)
		eventually(ctx, func(ctx context.Context) ([]argoapp.Condition, error) {
			st, err := applicationStatus(ctx, hub.dyn.Resource(fleet.ApplicationGVR).Namespace(fleet.ArgoCDNamespace), forbidden)
			return st.Conditions, err
		}).Should(ContainElement(And(HaveField("Type", "SyncError"), HaveField("Message", wantError))), "the hub app shows the spoke's SyncError")
		reported, found, err := reportedApp(ctx, target.Name, forbidden)
		Expect(err).NotTo(HaveOccurred())
		Expect(found).To(BeTrue())
		Expect(reported.Conditions).To(ContainElement(And(HaveField("Type", "SyncError"), HaveField("Message", wantError))))
	})

	It("removes the work, the spoke Application and its resources when the hub Application is deleted", func(ctx SpecContext) {
		Expect(hub.dyn.Resource(fleet.ApplicationGVR).Namespace(fleet.ArgoCDNamespace).Delete(ctx, appName, metav1.DeleteOptions{})).To(Succeed())
		eventually(ctx, objectGone(spokeCl.Resource(fleet.ApplicationGVR).Namespace(fleet.ArgoCDNamespace), appName)).Should(BeTrue(), "spoke Application deleted")
		eventually(ctx, func(ctx context.Context) bool {
			_, err := target.Kube.AppsV1().Deployments(appNS).Get(ctx, "guestbook-ui", metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}).Should(BeTrue(), "the resources finalizer made the spoke Argo CD prune the Deployment")
		eventually(ctx, objectGone(hub.dyn.Resource(fleet.ApplicationGVR).Namespace(fleet.ArgoCDNamespace), appName)).Should(BeTrue(), "hub Application gone once the cluster is clean")
		list, err := hub.works.WorkV1().ManifestWorks(target.Name).List(ctx, metav1.ListOptions{LabelSelector: argoapp.LabelPullToOCMManagedCluster})
		Expect(err).NotTo(HaveOccurred())
		for _, w := range list.Items {
			Expect(w.Annotations[argoapp.AnnotationHubApplicationName]).NotTo(Equal(appName), "orphaned work %s", w.Name)
		}
	})

	It("reports an ApplicationSet's pulled apps in its MulticlusterApplicationSetReport and on the hub Applications", func(ctx SpecContext) {
		applier, err := fleet.NewApplier(theFleet.Hub.Config)
		Expect(err).NotTo(HaveOccurred())
		// The documented ApplicationSet (reference section 7), multi-source, on the fleet's git.
		Expect(applier.ApplyYAML(ctx, fleet.ArgoCDNamespace,
			fleet.GuestbookApplicationSetYAML("pull-appset", "pull-appset", "pull-placement", theFleet.Git.URL(), "pull-appset"))).To(Succeed())
		head, err := theFleet.Git.Head()
		Expect(err).NotTo(HaveOccurred())
		hubApp := target.Name + "-pull-appset"

		var report appsv1alpha1.MulticlusterApplicationSetReport
		eventually(ctx, func(ctx context.Context) (string, error) {
			u, err := hub.dyn.Resource(reportsGVR).Namespace(fleet.ArgoCDNamespace).Get(ctx, "pull-appset", metav1.GetOptions{})
			if err != nil {
				return "", err
			}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &report); err != nil {
				return "", err
			}
			for _, c := range report.Statuses.ClusterConditions {
				if c.Cluster == target.Name {
					return c.SyncStatus + "/" + c.HealthStatus + "/" + strings.Join(c.SyncRevisions, ","), nil
				}
			}
			return "no entry for " + target.Name, nil
		}).Should(Equal("Synced/Healthy/" + head))
		Expect(report.Labels).To(HaveKeyWithValue("apps.open-cluster-management.io/hosting-applicationset", fleet.ArgoCDNamespace+".pull-appset"))
		Expect(report.OwnerReferences).To(ContainElement(HaveField("Kind", "ApplicationSet")))
		Expect(report.Statuses.ClusterConditions).To(ContainElement(HaveField("App",
			HavePrefix(fleet.ArgoCDNamespace+"/"+hubApp+"/"+target.Name+"/"))))
		Expect(report.Statuses.Resources).To(ContainElements(
			appsv1alpha1.ResourceRef{APIVersion: "apps/v1", Kind: "Deployment", Name: "guestbook-ui", Namespace: "pull-appset"},
			appsv1alpha1.ResourceRef{APIVersion: "v1", Kind: "Service", Name: "guestbook-ui", Namespace: "pull-appset"}))
		Expect(report.Statuses.Summary.Clusters).NotTo(BeEmpty())

		By("the hub Application shows the spoke's status and resource tree")
		eventually(ctx, func(ctx context.Context) (string, error) {
			st, err := applicationStatus(ctx, hub.dyn.Resource(fleet.ApplicationGVR).Namespace(fleet.ArgoCDNamespace), hubApp)
			if err != nil {
				return "", err
			}
			return fmt.Sprintf("%s/%s/%s/%d resources", st.Sync.Status, strings.Join(st.Sync.Revisions, ","), st.Health.Status, len(st.Resources)), nil
		}).Should(Equal("Synced/" + head + "/Healthy/2 resources"))

		By("deleting the ApplicationSet removes its apps, works and deployed resources, and the report")
		Expect(hub.dyn.Resource(appSetsGVR).Namespace(fleet.ArgoCDNamespace).Delete(ctx, "pull-appset", metav1.DeleteOptions{})).To(Succeed())
		eventually(ctx, func(ctx context.Context) bool {
			_, err := target.Kube.AppsV1().Deployments("pull-appset").Get(ctx, "guestbook-ui", metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}).Should(BeTrue(), "deployed resources pruned on the spoke")
		eventually(ctx, objectGone(hub.dyn.Resource(fleet.ApplicationGVR).Namespace(fleet.ArgoCDNamespace), hubApp)).Should(BeTrue(), "hub Application gone")
		eventually(ctx, objectGone(hub.dyn.Resource(reportsGVR).Namespace(fleet.ArgoCDNamespace), "pull-appset")).Should(BeTrue(), "report collected with its ApplicationSet")
	})
})

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
