// Package abuse feeds the real hub manager (pkg/hub.Run, every controller and the addon
// framework in one process) bad input, and checks that each piece of it is reported where
// a user looks (a Kubernetes Event and a condition on the object that caused it) and that
// nothing else is harmed: a healthy bystander Application on a good cluster keeps its
// ManifestWork and its status, the other clusters keep their reports, and the last good
// work or report is kept where docs/propagation.md and docs/design.md say so.
//
// One envtest apiserver, one manager, a few simulated clusters: a namespace, a
// ManagedCluster in a ManagedClusterSet bound to the Applications' namespace, a
// ManagedClusterAddOn "argocd-pull", and the PlacementDecision the placement controller
// would write. envtest runs no work agent, no spoke agent and no garbage collector: the
// suite writes the works' feedback and the agents' reports itself.
package abuse

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	addonv1beta1 "open-cluster-management.io/api/addon/v1beta1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	clusterv1beta2 "open-cluster-management.io/api/cluster/v1beta2"
	workv1 "open-cluster-management.io/api/work/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/ocm-gitops/argocd-pull-addon/pkg/apis/apps/v1alpha1"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/clusterreport"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub"
	"github.com/ocm-gitops/argocd-pull-addon/test/testenv"
)

var shared testenv.Shared

func TestMain(m *testing.M) { os.Exit(testenv.RunTests(m, &shared)) }

const (
	// appsNamespace holds the hub Applications and their ApplicationSet.
	appsNamespace = "abuse-apps"
	// argoCDNamespace is the hub Argo CD's namespace.
	argoCDNamespace = "argocd"
	// spokeNamespace is where the Applications land on the managed clusters.
	spokeNamespace = "argocd"
	addonName      = clusterreport.DefaultAddonName
	appSetName     = "fleet"
	clusterSetName = "abuse-set"
	placementName  = "fleet-placement"
)

// The simulated clusters.
const (
	// clusterGood runs only the bystander.
	clusterGood = "good"
	// clusterA and clusterB are healthy clusters where the bad input goes.
	clusterA = "cluster-a"
	clusterB = "cluster-b"
	// clusterNoAddon has not opted in: no ManagedClusterAddOn.
	clusterNoAddon = "no-addon"
	// clusterUnbound is opted in, but not in the set bound to appsNamespace.
	clusterUnbound = "unbound"
)

// observedAt is the agents' observation time: fixed, so that a report encodes the same
// every time.
var observedAt = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// suite is the running hub and what the tests read and write through.
type suite struct {
	*testenv.Hub
	env *testenv.Env
	// appSetUID owns the Applications of the ApplicationSet.
	appSetUID types.UID
	// cma is the ClusterManagementAddOn of the addon.
	cma *addonv1beta1.ClusterManagementAddOn
}

// startHub creates the fleet's hub objects and runs hub.Run, as cmd/manager would, until
// the test ends.
func startHub(t *testing.T) *suite {
	t.Helper()
	env := shared.Get(t)
	s := &suite{Hub: testenv.NewHub(t, env, appsNamespace), env: env}
	s.CreateNamespace(appsNamespace)
	s.CreateNamespace(argoCDNamespace)
	s.Create(testenv.AppProject(argoCDNamespace, argoapp.DefaultProject, appsNamespace))
	s.cma = &addonv1beta1.ClusterManagementAddOn{
		ObjectMeta: metav1.ObjectMeta{Name: addonName},
		Spec: addonv1beta1.ClusterManagementAddOnSpec{
			InstallStrategy: addonv1beta1.InstallStrategy{Type: addonv1beta1.AddonInstallStrategyManual},
		},
	}
	s.Create(s.cma)
	bound := []string{clusterGood, clusterA, clusterB, clusterNoAddon}
	for _, cluster := range append(slices.Clone(bound), clusterUnbound) {
		s.createCluster(cluster, slices.Contains(bound, cluster), cluster != clusterNoAddon)
	}
	s.bindClusterSet(bound)

	appSet := argoapp.NewApplicationSet()
	appSet.SetNamespace(appsNamespace)
	appSet.SetName(appSetName)
	appSet.Object["spec"] = map[string]any{"generators": []any{}, "template": map[string]any{
		"metadata": map[string]any{}, "spec": map[string]any{
			"project": "default", "destination": map[string]any{}, "source": map[string]any{"repoURL": "https://git.example.com/apps.git"},
		},
	}}
	s.Create(appSet)
	s.appSetUID = appSet.GetUID()

	opts := hub.DefaultOptions()
	opts.LeaderElect = false
	opts.MetricsAddr, opts.ProbeAddr = "0", "0"
	opts.ArgoCDNamespace = argoCDNamespace
	opts.WatchNamespaces = []string{appsNamespace}
	opts.Concurrency = 2
	opts.GracefulShutdown = 5 * time.Second
	ctx, cancel := context.WithCancel(ctrl.LoggerInto(context.Background(), ctrl.Log.WithName("hub")))
	done := make(chan error, 1)
	go func() { done <- hub.Run(ctx, env.Config, opts) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("hub.Run: %v", err)
		}
	})
	return s
}

// sub returns the suite for a subtest.
func (s *suite) sub(t *testing.T) *suite {
	sub := *s
	sub.Hub = s.Sub(t)
	return &sub
}

// createCluster creates a ManagedCluster and its namespace, in the cluster set when
// inSet, and enables the addon on it when enabled.
func (s *suite) createCluster(name string, inSet, enabled bool) {
	s.T.Helper()
	cluster := &clusterv1.ManagedCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: clusterv1.ManagedClusterSpec{HubAcceptsClient: true,
			ManagedClusterClientConfigs: []clusterv1.ClientConfig{{URL: "https://" + name + ".example.com:6443"}}},
	}
	if inSet {
		cluster.Labels = map[string]string{clusterv1beta2.ClusterSetLabel: clusterSetName}
	}
	s.Create(cluster)
	s.CreateNamespace(name)
	if enabled {
		// Owned by the ClusterManagementAddOn, as OCM's addon-manager makes it: the addon
		// framework registers the agent (and grants its hub Role) only then.
		s.Create(&addonv1beta1.ManagedClusterAddOn{ObjectMeta: metav1.ObjectMeta{
			Name: addonName, Namespace: name,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(s.cma,
				schema.GroupVersion(addonv1beta1.GroupVersion).WithKind("ClusterManagementAddOn"))},
		}})
	}
}

// bindClusterSet binds the cluster set to appsNamespace, with a Placement there and the
// PlacementDecision that the placement controller would write for it.
func (s *suite) bindClusterSet(clusters []string) {
	s.T.Helper()
	s.Create(&clusterv1beta2.ManagedClusterSet{ObjectMeta: metav1.ObjectMeta{Name: clusterSetName}})
	s.Create(&clusterv1beta2.ManagedClusterSetBinding{
		ObjectMeta: metav1.ObjectMeta{Name: clusterSetName, Namespace: appsNamespace},
		Spec:       clusterv1beta2.ManagedClusterSetBindingSpec{ClusterSet: clusterSetName},
	})
	s.Create(&clusterv1beta1.Placement{
		ObjectMeta: metav1.ObjectMeta{Name: placementName, Namespace: appsNamespace},
		Spec:       clusterv1beta1.PlacementSpec{ClusterSets: []string{clusterSetName}},
	})
	_, err := testenv.CreatePlacementDecision(s.Ctx, s.C, appsNamespace, placementName, 1, clusters...)
	s.G.Expect(err).NotTo(gomega.HaveOccurred())
}

// application returns a pulled Application of the ApplicationSet that targets cluster,
// as the documented ApplicationSet template writes it.
func (s *suite) application(name, cluster string) *unstructured.Unstructured {
	app := s.Application(name, cluster)
	testenv.SetAnnotation(app, argoapp.AnnotationOCMManagedClusterAppNamespace, spokeNamespace)
	app.SetOwnerReferences([]metav1.OwnerReference{{
		APIVersion: argoapp.GroupVersion.String(), Kind: argoapp.KindApplicationSet,
		Name: appSetName, UID: s.appSetUID, Controller: ptr.To(true),
	}})
	return app
}

// deleteApp deletes a hub Application and waits until it and its works are gone.
func (s *suite) deleteApp(name string) {
	s.T.Helper()
	app := s.GetApp(name)
	if app == nil {
		return
	}
	s.G.Expect(client.IgnoreNotFound(s.C.Delete(s.Ctx, app))).To(gomega.Succeed())
	s.G.Eventually(func() bool { return s.GetApp(name) == nil }).Should(gomega.BeTrue(), "application %s is still there", name)
	s.ExpectNoWorks(name)
}

// The work agent and the spoke agent.

// setFeedback plays the work agent: the work is applied, and its Application reports
// sync and health.
func (s *suite) setFeedback(key types.NamespacedName, sync, health string) {
	s.T.Helper()
	s.SetFeedback(key, testenv.Feedback{AppliedAt: observedAt, Namespace: spokeNamespace, Name: key.Name, Values: map[string]string{
		argoapp.FeedbackHealthStatus: health, argoapp.FeedbackSyncStatus: sync, argoapp.FeedbackSyncRevision: "8f2c1e5",
	}})
}

// reportedApp is the agent's entry of a hub Application of the suite, carried by work.
func reportedApp(name string, work *workv1.ManifestWork, resource string) clusterreport.App {
	return clusterreport.App{
		Namespace: spokeNamespace, Name: name, HubNamespace: appsNamespace, HubName: name,
		ApplicationSet: argoapp.ApplicationSetKey(appsNamespace, appSetName), ManifestWork: work.Name,
		Sync:   argoapp.SyncStatus{Status: "Synced", Revision: "8f2c1e5"},
		Health: argoapp.HealthStatus{Status: "Healthy"},
		Resources: []argoapp.ResourceStatus{{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "guestbook", Name: resource,
			Status: "Synced", Health: argoapp.HealthStatus{Status: "Healthy"}}},
		ObservedAt: observedAt,
	}
}

// encodeReport returns the agent's conditions for apps, with the extra raw conditions.
func (s *suite) encodeReport(apps []clusterreport.App, extra ...metav1.Condition) []metav1.Condition {
	s.T.Helper()
	enc, err := clusterreport.Encode(clusterreport.Report{Apps: apps})
	s.G.Expect(err).NotTo(gomega.HaveOccurred())
	conditions := append(enc.Conditions, extra...)
	for i := range conditions {
		conditions[i].LastTransitionTime = metav1.NewTime(observedAt)
		if conditions[i].Reason == "" {
			conditions[i].Reason = "Reported"
		}
		if conditions[i].Status == "" {
			conditions[i].Status = metav1.ConditionTrue
		}
	}
	return conditions
}

// setAgentConditions plays a cluster's agent: its conditions replace the agent's
// conditions of the cluster's ManagedClusterAddOn, next to the framework's, and the
// addon is Available.
func (s *suite) setAgentConditions(cluster string, agent []metav1.Condition) {
	s.T.Helper()
	s.G.Eventually(func() error {
		addon := &addonv1beta1.ManagedClusterAddOn{}
		if err := s.C.Get(s.Ctx, types.NamespacedName{Namespace: cluster, Name: addonName}, addon); err != nil {
			return err
		}
		before := addon.DeepCopy()
		kept := slices.DeleteFunc(slices.Clone(addon.Status.Conditions), func(c metav1.Condition) bool {
			return clusterreport.IsAgentCondition(c.Type) || c.Type == addonv1beta1.ManagedClusterAddOnConditionAvailable
		})
		addon.Status.Conditions = append(append(kept, agent...), metav1.Condition{
			Type: addonv1beta1.ManagedClusterAddOnConditionAvailable, Status: metav1.ConditionTrue,
			Reason: "ManagedClusterAddOnLeaseUpdated", Message: "the agent's lease is renewed", LastTransitionTime: metav1.NewTime(observedAt),
		})
		// A patch of the conditions only: the framework owns the rest of the status.
		return s.C.Status().Patch(s.Ctx, addon, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
	}).Should(gomega.Succeed())
}

// agentConditions returns the agent's conditions on a cluster's ManagedClusterAddOn:
// the report as the hub stores it.
func (s *suite) agentConditions(cluster string) []metav1.Condition {
	s.T.Helper()
	addon := &addonv1beta1.ManagedClusterAddOn{}
	s.G.Expect(s.C.Get(s.Ctx, types.NamespacedName{Namespace: cluster, Name: addonName}, addon)).To(gomega.Succeed())
	return slices.DeleteFunc(slices.Clone(addon.Status.Conditions), func(c metav1.Condition) bool {
		return !clusterreport.IsAgentCondition(c.Type)
	})
}

// appSetReport returns the ApplicationSet's report; nil until it exists.
func (s *suite) appSetReport() *appsv1alpha1.MulticlusterApplicationSetReport {
	s.T.Helper()
	report := &appsv1alpha1.MulticlusterApplicationSetReport{}
	err := s.C.Get(s.Ctx, types.NamespacedName{Namespace: appsNamespace, Name: appSetName}, report)
	if apierrors.IsNotFound(err) {
		return nil
	}
	s.G.Expect(err).NotTo(gomega.HaveOccurred())
	return report
}

// reportEntry returns the report's entry of a hub Application; nil without one.
func (s *suite) reportEntry(name string) *appsv1alpha1.ClusterCondition {
	s.T.Helper()
	report := s.appSetReport()
	if report == nil {
		return nil
	}
	for i, c := range report.Statuses.ClusterConditions {
		if strings.HasPrefix(c.App, appsNamespace+"/"+name+"/") {
			return &report.Statuses.ClusterConditions[i]
		}
	}
	return nil
}

// conditionTypes returns the types of the conditions of a report entry.
func conditionTypes(entry *appsv1alpha1.ClusterCondition) []string {
	if entry == nil {
		return nil
	}
	var types []string
	for _, c := range entry.Conditions {
		types = append(types, c.Type)
	}
	return types
}
