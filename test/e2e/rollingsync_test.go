package e2e

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/test/fleet"
)

// Progressive sync from the hub: the ApplicationSet controller's RollingSync reads the
// status of the hub Applications and syncs them step by step through .operation, which
// the pull model carries to the spokes and back.
var _ = Describe("A RollingSync ApplicationSet of pulled apps", Ordered, func() {
	const (
		appSet        = "overtime-rollout"
		label         = "e2e.argocd-pull/overtime-rollout"
		stepLabel     = "e2e.argocd-pull/rollout-step"
		destNamespace = "overtime-rollout"
	)
	var (
		hub          hubClients
		first, other *fleet.ManagedCluster
	)
	hubApp := func(mc *fleet.ManagedCluster) string { return mc.Name + "-" + appSet }

	BeforeAll(func(ctx SpecContext) {
		if !appSetControllerFlag("--enable-progressive-syncs") {
			Skip("the hub's ApplicationSet controller runs without --enable-progressive-syncs")
		}
		if settledHealth(ctx) != "Healthy" {
			Skip("the fleet's managed clusters run no Pods: a step never becomes Healthy")
		}
		hub = newHubClients()
		first, other = theFleet.Clusters[0], theFleet.Clusters[1]
		hub.optIn(ctx, first, other)
		hub.labelClusters(ctx, label, first, other)
		hub.placeByLabel(ctx, fleet.ArgoCDNamespace, appSet, label, first, other)
	})

	It("syncs the clusters step by step, each step once the previous one is Healthy", func(ctx SpecContext) {
		appSets := hub.dyn.Resource(appSetsGVR).Namespace(fleet.ArgoCDNamespace)
		history := recordHistory(ctx, appSets, metav1.ListOptions{FieldSelector: "metadata.name=" + appSet})
		DeferCleanup(history.Stop)
		Expect(hub.applier.ApplyYAML(ctx, fleet.ArgoCDNamespace, fmt.Appendf(nil, `
apiVersion: argoproj.io/v1alpha1
kind: ApplicationSet
metadata: {name: %[1]s}
spec:
  generators:
  - clusterDecisionResource:
      configMapRef: ocm-placement-generator
      labelSelector:
        matchLabels: {cluster.open-cluster-management.io/placement: %[1]s}
      requeueAfterSeconds: 30
  strategy:
    type: RollingSync
    rollingSync:
      steps:
      - matchExpressions: [{key: %[2]s, operator: In, values: [%[3]s]}]
      - matchExpressions: [{key: %[2]s, operator: In, values: [%[4]s]}]
  template:
    metadata:
      name: '{{name}}-%[1]s'
      labels:
        apps.open-cluster-management.io/pull-to-ocm-managed-cluster: "true"
        %[2]s: '{{name}}'
      annotations:
        apps.open-cluster-management.io/ocm-managed-cluster: '{{name}}'
        apps.open-cluster-management.io/ocm-managed-cluster-app-namespace: argocd
        argocd.argoproj.io/skip-reconcile: "true"
      finalizers: [resources-finalizer.argocd.argoproj.io]
    spec:
      project: default
      sources:
      - {repoURL: '%[5]s', targetRevision: main, path: guestbook}
      destination: {server: https://kubernetes.default.svc, namespace: %[6]s}
      syncPolicy:
        syncOptions: [CreateNamespace=true]
`, appSet, stepLabel, first.Name, other.Name, theFleet.Git.URL(), destNamespace))).To(Succeed())
		DeferCleanup(func(ctx SpecContext) {
			hub.deleteAndWait(ctx, appSets, appSet)
			for _, mc := range []*fleet.ManagedCluster{first, other} {
				hub.deleteAndWait(ctx, hub.apps(fleet.ArgoCDNamespace), hubApp(mc))
			}
		})

		eventually(ctx, func(ctx context.Context) (map[string]string, error) {
			u, err := appSets.Get(ctx, appSet, metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			return rolloutStatus(u), nil
		}).WithTimeout(5*time.Minute).Should(Equal(map[string]string{hubApp(first): "Healthy", hubApp(other): "Healthy"}),
			"both steps done")

		head, err := theFleet.Git.Head()
		Expect(err).NotTo(HaveOccurred())
		for _, mc := range []*fleet.ManagedCluster{first, other} {
			u, err := spokeApps(mc).Get(ctx, hubApp(mc), metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			Expect(appState(u)).To(Equal("Synced/"+head+"/Healthy"), "the spoke Application on %s", mc.Name)
			by, _, _ := unstructured.NestedString(u.Object, "status", "operationState", "operation", "initiatedBy", "username")
			phase, _, _ := unstructured.NestedString(u.Object, "status", "operationState", "phase")
			Expect(by+"/"+phase).To(Equal("applicationset-controller/Succeeded"), "the RollingSync's sync ran on %s", mc.Name)
		}

		By("the second step started only once the first was Healthy")
		versions := history.Versions(nil)
		describe := func(u *unstructured.Unstructured) string { return fmt.Sprint(rolloutStatus(u)) }
		firstAlone := false
		for _, v := range versions {
			s := rolloutStatus(v.Object)
			if s[hubApp(other)] != "" && s[hubApp(other)] != "Waiting" {
				Expect(s[hubApp(first)]).To(Equal("Healthy"), "the second step began before the first was Healthy: %s",
					describeVersions(versions, describe))
			}
			if (s[hubApp(first)] == "Pending" || s[hubApp(first)] == "Progressing") && s[hubApp(other)] == "Waiting" {
				firstAlone = true
			}
		}
		Expect(firstAlone).To(BeTrue(), "the first step ran while the second waited: %s", describeVersions(versions, describe))
		for _, mc := range []*fleet.ManagedCluster{first, other} {
			msg, err := hub.propagationError(ctx, fleet.ArgoCDNamespace, hubApp(mc))
			Expect(err).NotTo(HaveOccurred())
			Expect(msg).To(BeEmpty(), "%s of %s", argoapp.ConditionOCMPropagationError, hubApp(mc))
		}
	})
})

// rolloutStatus is an ApplicationSet's status.applicationStatus: each Application's
// progressive sync status (Waiting, Pending, Progressing, Healthy).
func rolloutStatus(appSet *unstructured.Unstructured) map[string]string {
	out := map[string]string{}
	entries, _, _ := unstructured.NestedSlice(appSet.Object, "status", "applicationStatus")
	for _, e := range entries {
		m, _ := e.(map[string]any)
		app, _ := m["application"].(string)
		status, _ := m["status"].(string)
		out[app] = status
	}
	return out
}
