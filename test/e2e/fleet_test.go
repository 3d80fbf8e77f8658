package e2e

import (
	"context"
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/ocm-gitops/argocd-pull-addon/test/fleet"
)

// The fleet itself is the ground truth of every other suite, so it is proven first: the
// clusters are joined, works are delivered, Argo CD syncs, the addon API converts, and the
// controllers a real control plane has (garbage collection) run.
var _ = Describe("The local fleet", Ordered, func() {
	var hub hubClients
	BeforeAll(func() {
		hub = newHubClients()
	})

	It("joins every managed cluster to the hub, accepted and Available", func(ctx SpecContext) {
		for _, name := range managedClusters {
			mc, err := hub.clusters.ClusterV1().ManagedClusters().Get(ctx, name, metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			Expect(mc.Spec.HubAcceptsClient).To(BeTrue())
			Expect(conditionStatus(mc.Status.Conditions, clusterv1.ManagedClusterConditionAvailable)).To(Equal(metav1.ConditionTrue))
			Expect(conditionStatus(mc.Status.Conditions, clusterv1.ManagedClusterConditionJoined)).To(Equal(metav1.ConditionTrue))
		}
	})

	It("delivers a ManifestWork's ConfigMap to each managed cluster and reports it Applied", func(ctx SpecContext) {
		for _, mc := range theFleet.Clusters {
			mw := fleet.ManifestWork("smoke-configmap", mc.Name, fleet.DemoConfigMap("smoke-configmap", "default"))
			_, err := hub.works.WorkV1().ManifestWorks(mc.Name).Create(ctx, mw, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
		}
		for _, mc := range theFleet.Clusters {
			eventually(ctx, func(ctx context.Context) (map[string]string, error) {
				cm, err := mc.Kube.CoreV1().ConfigMaps("default").Get(ctx, "smoke-configmap", metav1.GetOptions{})
				if err != nil {
					return nil, err
				}
				return cm.Data, nil
			}).Should(HaveKeyWithValue("delivered-by", "ManifestWork"), "ConfigMap on %s", mc.Name)
			eventually(ctx, func(ctx context.Context) (metav1.ConditionStatus, error) {
				got, err := hub.works.WorkV1().ManifestWorks(mc.Name).Get(ctx, "smoke-configmap", metav1.GetOptions{})
				if err != nil {
					return "", err
				}
				return conditionStatus(got.Status.Conditions, workv1.WorkApplied), nil
			}).Should(Equal(metav1.ConditionTrue), "work Applied on %s", mc.Name)
		}

		By("deleting the work, the ConfigMap is removed from the spoke")
		mc := theFleet.Clusters[0]
		Expect(hub.works.WorkV1().ManifestWorks(mc.Name).Delete(ctx, "smoke-configmap", metav1.DeleteOptions{})).To(Succeed())
		eventually(ctx, func(ctx context.Context) bool {
			_, err := mc.Kube.CoreV1().ConfigMaps("default").Get(ctx, "smoke-configmap", metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}).Should(BeTrue())
	})

	It("syncs an Argo CD Application that a ManifestWork delivers, and feeds its status back to the hub", func(ctx SpecContext) {
		app := fleet.GuestbookApplication("smoke-guestbook", theFleet.Git.URL())
		for _, mc := range theFleet.Clusters {
			// The klusterlet's work agent may apply Applications only once a ClusterRole
			// labelled aggregate-to-work allows it, as on a stock OCM spoke: without the
			// addon, the platform engineer grants it.
			role := &rbacv1.ClusterRole{
				ObjectMeta: metav1.ObjectMeta{Name: "e2e-smoke-work-applications", Labels: map[string]string{fleet.AggregateToWorkLabel: "true"}},
				Rules:      []rbacv1.PolicyRule{{APIGroups: []string{fleet.ApplicationGVR.Group}, Resources: []string{fleet.ApplicationGVR.Resource}, Verbs: []string{"*"}}},
			}
			_, err := mc.Kube.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(func(ctx SpecContext) {
				Expect(mc.Kube.RbacV1().ClusterRoles().Delete(ctx, role.Name, metav1.DeleteOptions{})).To(Succeed())
			})
		}
		for _, mc := range theFleet.Clusters {
			mw := fleet.ManifestWork("smoke-guestbook", mc.Name, app)
			mw.Spec.ManifestConfigs = []workv1.ManifestConfigOption{fleet.ApplicationStatusFeedback(app)}
			_, err := hub.works.WorkV1().ManifestWorks(mc.Name).Create(ctx, mw, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
			// Before the ClusterRole goes: the work agent deletes the Application.
			DeferCleanup(func(ctx SpecContext) {
				Expect(hub.works.WorkV1().ManifestWorks(mc.Name).Delete(ctx, mw.Name, metav1.DeleteOptions{})).To(Succeed())
				eventually(ctx, func(ctx context.Context) bool {
					_, err := hub.works.WorkV1().ManifestWorks(mc.Name).Get(ctx, mw.Name, metav1.GetOptions{})
					return apierrors.IsNotFound(err)
				}).Should(BeTrue(), "the smoke work on %s removed", mc.Name)
			})
		}
		head, err := theFleet.Git.Head()
		Expect(err).NotTo(HaveOccurred())
		for _, mc := range theFleet.Clusters {
			spoke, err := dynamic.NewForConfig(mc.Config)
			Expect(err).NotTo(HaveOccurred())
			eventually(ctx, func(ctx context.Context) (string, error) {
				got, err := spoke.Resource(fleet.ApplicationGVR).Namespace(fleet.ArgoCDNamespace).Get(ctx, "smoke-guestbook", metav1.GetOptions{})
				if err != nil {
					return "", err
				}
				sync, _, _ := unstructured.NestedString(got.Object, "status", "sync", "status")
				rev, _, _ := unstructured.NestedString(got.Object, "status", "sync", "revision")
				health, _, _ := unstructured.NestedString(got.Object, "status", "health", "status")
				return fmt.Sprintf("%s/%s/%s", sync, rev, health), nil
			}).Should(Equal("Synced/"+head+"/Healthy"), "Application on %s (its Pods scheduled onto KWOK Nodes and Ready)", mc.Name)

			_, err = mc.Kube.AppsV1().Deployments(fleet.GuestbookNamespace).Get(ctx, "guestbook-ui", metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred(), "Argo CD deployed the guestbook Deployment on %s", mc.Name)
			_, err = mc.Kube.CoreV1().Services(fleet.GuestbookNamespace).Get(ctx, "guestbook-ui", metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred(), "Argo CD deployed the guestbook Service on %s", mc.Name)

			eventually(ctx, func(ctx context.Context) (string, error) {
				got, err := hub.works.WorkV1().ManifestWorks(mc.Name).Get(ctx, "smoke-guestbook", metav1.GetOptions{})
				if err != nil {
					return "", err
				}
				sync, _ := fleet.FeedbackValue(got, 0, "syncStatus")
				health, _ := fleet.FeedbackValue(got, 0, "healthStatus")
				return sync + "/" + health, nil
			}).Should(Equal("Synced/Healthy"), "work feedback on the hub for %s", mc.Name)
		}
	})

	It("serves the addon API in v1alpha1 and v1beta1 through the conversion webhook", func(ctx SpecContext) {
		v1alpha1 := schema.GroupVersionResource{Group: "addon.open-cluster-management.io", Version: "v1alpha1", Resource: "managedclusteraddons"}
		v1beta1 := v1alpha1
		v1beta1.Version = "v1beta1"
		ns := theFleet.Clusters[0].Name
		addon := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "addon.open-cluster-management.io/v1alpha1", "kind": "ManagedClusterAddOn",
			"metadata": map[string]any{"name": "smoke-conversion", "namespace": ns},
			"spec":     map[string]any{"installNamespace": "smoke-install-ns"},
		}}
		_, err := hub.dyn.Resource(v1alpha1).Namespace(ns).Create(ctx, addon, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) {
			Expect(hub.dyn.Resource(v1alpha1).Namespace(ns).Delete(ctx, "smoke-conversion", metav1.DeleteOptions{})).To(Succeed())
		})
		got, err := hub.dyn.Resource(v1beta1).Namespace(ns).Get(ctx, "smoke-conversion", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(got.GetAnnotations()).To(HaveKeyWithValue("addon.open-cluster-management.io/v1alpha1-install-namespace", "smoke-install-ns"))
	})

	It("generates hub Applications from an OCM Placement through the ApplicationSet controller", func(ctx SpecContext) {
		applier, err := fleet.NewApplier(theFleet.Hub.Config)
		Expect(err).NotTo(HaveOccurred())
		// The generator matches decisions to Argo CD cluster secrets by name. The addon keeps
		// them for opted-in clusters; here no cluster opted in, so they are made by hand. The
		// apps carry no pull label: this proves the hub's Argo CD, not the addon.
		for _, name := range managedClusters {
			Expect(applier.ApplyYAML(ctx, fleet.ArgoCDNamespace, []byte(`
apiVersion: v1
kind: Secret
metadata:
  name: smoke-cluster-`+name+`
  labels: {argocd.argoproj.io/secret-type: cluster}
stringData: {name: `+name+`, server: https://`+name+`.invalid}
`))).To(Succeed())
		}
		Expect(applier.ApplyYAML(ctx, fleet.ArgoCDNamespace, fleet.PlacementYAML("smoke-placement", nil))).To(Succeed())
		// The ApplicationSet comes once the placement controller has decided: made before,
		// it would wait 3 minutes to retry (fleet.Applier.DecidedClusters).
		eventually(ctx, func(ctx context.Context) ([]string, error) {
			return applier.DecidedClusters(ctx, fleet.ArgoCDNamespace, "smoke-placement")
		}).Should(ContainElements(managedClusters), "the PlacementDecisions of smoke-placement")
		Expect(applier.ApplyYAML(ctx, fleet.ArgoCDNamespace, []byte(`
apiVersion: argoproj.io/v1alpha1
kind: ApplicationSet
metadata: {name: smoke-appset}
spec:
  generators:
  - clusterDecisionResource:
      configMapRef: ocm-placement-generator
      labelSelector:
        matchLabels: {cluster.open-cluster-management.io/placement: smoke-placement}
      requeueAfterSeconds: 30
  template:
    metadata:
      name: '{{name}}-smoke-app'
      annotations:
        apps.open-cluster-management.io/ocm-managed-cluster: '{{name}}'
        argocd.argoproj.io/skip-reconcile: "true"
    spec:
      project: default
      source: {repoURL: `+theFleet.Git.URL()+`, targetRevision: main, path: guestbook}
      destination: {server: https://kubernetes.default.svc, namespace: guestbook}
`))).To(Succeed())
		DeferCleanup(func(ctx SpecContext) {
			Expect(hub.dyn.Resource(appSetsGVR).Namespace(fleet.ArgoCDNamespace).Delete(ctx, "smoke-appset", metav1.DeleteOptions{})).To(Succeed())
			for _, name := range managedClusters {
				Expect(theFleet.Hub.Kube.CoreV1().Secrets(fleet.ArgoCDNamespace).Delete(ctx, "smoke-cluster-"+name, metav1.DeleteOptions{})).To(Succeed())
			}
		})
		for _, name := range managedClusters {
			eventually(ctx, func(ctx context.Context) (map[string]string, error) {
				app, err := hub.dyn.Resource(fleet.ApplicationGVR).Namespace(fleet.ArgoCDNamespace).Get(ctx, name+"-smoke-app", metav1.GetOptions{})
				if err != nil {
					return nil, err
				}
				return app.GetAnnotations(), nil
			}).Should(HaveKeyWithValue("apps.open-cluster-management.io/ocm-managed-cluster", name))
		}
	})

	It("collects garbage through ownerReferences, as a real control plane does", func(ctx SpecContext) {
		kube := theFleet.Clusters[0].Kube
		owner, err := kube.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "smoke-owner"}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = kube.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Name: "smoke-owned", OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}},
		}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(kube.CoreV1().ConfigMaps("default").Delete(ctx, owner.Name, metav1.DeleteOptions{})).To(Succeed())
		eventually(ctx, func(ctx context.Context) bool {
			_, err := kube.CoreV1().ConfigMaps("default").Get(ctx, "smoke-owned", metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}).Should(BeTrue())
	})

	It("keeps every fleet process running", func() {
		Expect(theFleet.Healthy()).To(Succeed())
	})
})

func conditionStatus(conds []metav1.Condition, condType string) metav1.ConditionStatus {
	for _, c := range conds {
		if c.Type == condType {
			return c.Status
		}
	}
	return ""
}
