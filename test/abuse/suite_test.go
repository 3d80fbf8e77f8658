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
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/propagation"
	"github.com/ocm-gitops/argocd-pull-addon/test/testenv"
)

var shared testenv.Shared

func TestMain(m *testing.M) { os.Exit(testenv.RunTests(m, &shared)) }

const (
	eventually   = 20 * time.Second
	consistently = 2 * time.Second
	poll         = 50 * time.Millisecond

	// appsNamespace holds the hub Applications and their ApplicationSet.
	appsNamespace = "abuse-apps"
	// argoCDNamespace is the hub Argo CD's namespace.
	argoCDNamespace = "argocd"
	// spokeNamespace is where the Applications land on the managed clusters.
	spokeNamespace = "argocd"
	addonName      = propagation.DefaultAddonName
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
	t   *testing.T
	g   *gomega.WithT
	ctx context.Context
	env *testenv.Env
	c   client.Client // the administrator, uncached
	// appSetUID owns the Applications of the ApplicationSet.
	appSetUID types.UID
	// cma is the ClusterManagementAddOn of the addon.
	cma *addonv1beta1.ClusterManagementAddOn
}

func newGomega(t *testing.T) *gomega.WithT {
	g := gomega.NewWithT(t)
	g.SetDefaultEventuallyTimeout(eventually)
	g.SetDefaultEventuallyPollingInterval(poll)
	g.SetDefaultConsistentlyDuration(consistently)
	g.SetDefaultConsistentlyPollingInterval(poll)
	return g
}

// startHub creates the fleet's hub objects and runs hub.Run, as cmd/manager would, until
// the test ends.
func startHub(t *testing.T) *suite {
	t.Helper()
	env := shared.Get(t)
	s := &suite{t: t, g: newGomega(t), ctx: context.Background(), env: env, c: env.Client}
	s.createNamespace(appsNamespace)
	s.createNamespace(argoCDNamespace)
	s.cma = &addonv1beta1.ClusterManagementAddOn{
		ObjectMeta: metav1.ObjectMeta{Name: addonName},
		Spec: addonv1beta1.ClusterManagementAddOnSpec{
			InstallStrategy: addonv1beta1.InstallStrategy{Type: addonv1beta1.AddonInstallStrategyManual},
		},
	}
	s.create(s.cma)
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
	s.create(appSet)
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
	sub.t, sub.g = t, newGomega(t)
	return &sub
}

func (s *suite) create(obj client.Object) {
	s.t.Helper()
	s.g.Expect(s.c.Create(s.ctx, obj)).To(gomega.Succeed())
}

func (s *suite) createNamespace(name string) {
	s.t.Helper()
	err := s.c.Create(s.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if !apierrors.IsAlreadyExists(err) {
		s.g.Expect(err).NotTo(gomega.HaveOccurred())
	}
}

// createCluster creates a ManagedCluster and its namespace, in the cluster set when
// inSet, and enables the addon on it when enabled.
func (s *suite) createCluster(name string, inSet, enabled bool) {
	s.t.Helper()
	cluster := &clusterv1.ManagedCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: clusterv1.ManagedClusterSpec{HubAcceptsClient: true,
			ManagedClusterClientConfigs: []clusterv1.ClientConfig{{URL: "https://" + name + ".example.com:6443"}}},
	}
	if inSet {
		cluster.Labels = map[string]string{clusterv1beta2.ClusterSetLabel: clusterSetName}
	}
	s.create(cluster)
	s.createNamespace(name)
	if enabled {
		// Owned by the ClusterManagementAddOn, as OCM's addon-manager makes it: the addon
		// framework registers the agent (and grants its hub Role) only then.
		s.create(&addonv1beta1.ManagedClusterAddOn{ObjectMeta: metav1.ObjectMeta{
			Name: addonName, Namespace: name,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(s.cma,
				addonv1beta1.SchemeGroupVersion.WithKind("ClusterManagementAddOn"))},
		}})
	}
}

// bindClusterSet binds the cluster set to appsNamespace, with a Placement there and the
// PlacementDecision that the placement controller would write for it.
func (s *suite) bindClusterSet(clusters []string) {
	s.t.Helper()
	s.create(&clusterv1beta2.ManagedClusterSet{ObjectMeta: metav1.ObjectMeta{Name: clusterSetName}})
	s.create(&clusterv1beta2.ManagedClusterSetBinding{
		ObjectMeta: metav1.ObjectMeta{Name: clusterSetName, Namespace: appsNamespace},
		Spec:       clusterv1beta2.ManagedClusterSetBindingSpec{ClusterSet: clusterSetName},
	})
	s.create(&clusterv1beta1.Placement{
		ObjectMeta: metav1.ObjectMeta{Name: placementName, Namespace: appsNamespace},
		Spec:       clusterv1beta1.PlacementSpec{ClusterSets: []string{clusterSetName}},
	})
	_, err := testenv.CreatePlacementDecision(s.ctx, s.c, appsNamespace, placementName, 1, clusters...)
	s.g.Expect(err).NotTo(gomega.HaveOccurred())
}

// application returns a pulled Application of the ApplicationSet that targets cluster,
// as the documented ApplicationSet template writes it.
func (s *suite) application(name, cluster string) *unstructured.Unstructured {
	app := argoapp.NewApplication()
	app.SetNamespace(appsNamespace)
	app.SetName(name)
	app.SetLabels(map[string]string{argoapp.LabelPullToOCMManagedCluster: "true"})
	app.SetAnnotations(map[string]string{
		argoapp.AnnotationOCMManagedCluster:             cluster,
		argoapp.AnnotationOCMManagedClusterAppNamespace: spokeNamespace,
		argoapp.AnnotationSkipReconcile:                 "true",
	})
	app.SetOwnerReferences([]metav1.OwnerReference{{
		APIVersion: argoapp.GroupVersion.String(), Kind: argoapp.KindApplicationSet,
		Name: appSetName, UID: s.appSetUID, Controller: ptr.To(true),
	}})
	app.Object["spec"] = map[string]any{
		"project":     "default",
		"source":      map[string]any{"repoURL": "https://git.example.com/apps.git", "path": "guestbook", "targetRevision": "main"},
		"destination": map[string]any{"server": argoapp.InClusterServer, "namespace": "guestbook"},
	}
	return app
}

// getApp reads a hub Application; nil when it does not exist.
func (s *suite) getApp(name string) *unstructured.Unstructured {
	s.t.Helper()
	app := argoapp.NewApplication()
	err := s.c.Get(s.ctx, types.NamespacedName{Namespace: appsNamespace, Name: name}, app)
	if apierrors.IsNotFound(err) {
		return nil
	}
	s.g.Expect(err).NotTo(gomega.HaveOccurred())
	return app
}

// updateApp changes a hub Application, retrying on conflict.
func (s *suite) updateApp(name string, change func(app *unstructured.Unstructured)) {
	s.t.Helper()
	s.g.Eventually(func() error {
		app := s.getApp(name)
		if app == nil {
			return fmt.Errorf("application %s is gone", name)
		}
		change(app)
		return s.c.Update(s.ctx, app)
	}).Should(gomega.Succeed())
}

func setAnnotation(app *unstructured.Unstructured, key, value string) {
	annotations := app.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[key] = value
	app.SetAnnotations(annotations)
}

// worksOf returns the works, in every namespace, that point back to a hub Application.
func (s *suite) worksOf(name string) []workv1.ManifestWork {
	s.t.Helper()
	works := &workv1.ManifestWorkList{}
	s.g.Expect(s.c.List(s.ctx, works)).To(gomega.Succeed())
	return slices.DeleteFunc(works.Items, func(w workv1.ManifestWork) bool {
		return w.Annotations[argoapp.AnnotationHubApplicationNamespace] != appsNamespace ||
			w.Annotations[argoapp.AnnotationHubApplicationName] != name
	})
}

// workKeys returns "<namespace>/<name>" of the works of a hub Application, sorted.
func (s *suite) workKeys(name string) []string {
	var keys []string
	for _, w := range s.worksOf(name) {
		keys = append(keys, w.Namespace+"/"+w.Name)
	}
	slices.Sort(keys)
	return keys
}

// waitForWork waits until the only work of a hub Application is its work in cluster,
// and returns it.
func (s *suite) waitForWork(name, cluster string) *workv1.ManifestWork {
	s.t.Helper()
	app := s.getApp(name)
	s.g.Expect(app).NotTo(gomega.BeNil())
	want := cluster + "/" + propagation.ManifestWorkName(name, app.GetUID())
	s.g.Eventually(func() []string { return s.workKeys(name) }).Should(gomega.Equal([]string{want}))
	return &s.worksOf(name)[0]
}

// payload returns the Application that a work carries.
func (s *suite) payload(work *workv1.ManifestWork) *unstructured.Unstructured {
	s.t.Helper()
	for _, m := range work.Spec.Workload.Manifests {
		obj := &unstructured.Unstructured{}
		s.g.Expect(obj.UnmarshalJSON(m.Raw)).To(gomega.Succeed())
		if obj.GroupVersionKind() == argoapp.ApplicationGVK {
			return obj
		}
	}
	s.t.Fatalf("work %s/%s carries no Application", work.Namespace, work.Name)
	return nil
}

// condition returns the message of a condition of a hub Application, "" without it.
func (s *suite) condition(name, conditionType string) string {
	s.t.Helper()
	app := s.getApp(name)
	if app == nil {
		return ""
	}
	message, _, err := argoapp.FindCondition(app, conditionType)
	s.g.Expect(err).NotTo(gomega.HaveOccurred())
	return message
}

// event is what the suite reads of an Event.
type event struct {
	Type, Reason, Message string
}

// eventsOn returns the Events recorded on the object kind namespace/name.
func (s *suite) eventsOn(kind, namespace, name string) []event {
	s.t.Helper()
	list := &corev1.EventList{}
	s.g.Expect(s.c.List(s.ctx, list, client.InNamespace(namespace))).To(gomega.Succeed())
	var out []event
	for _, e := range list.Items {
		if e.InvolvedObject.Kind == kind && e.InvolvedObject.Name == name {
			out = append(out, event{Type: e.Type, Reason: e.Reason, Message: e.Message})
		}
	}
	return out
}

// expectEvent waits for an Event of type and reason on an object whose message holds
// every one of words.
func (s *suite) expectEvent(kind, namespace, name, eventType, reason string, words ...string) {
	s.t.Helper()
	s.g.Eventually(func() []event { return s.eventsOn(kind, namespace, name) }).Should(gomega.ContainElement(gomega.SatisfyAll(
		gomega.HaveField("Type", eventType), gomega.HaveField("Reason", reason),
		gomega.HaveField("Message", gomega.SatisfyAll(containsAll(words)...)),
	)), "%s Event %s on %s %s/%s naming %q", eventType, reason, kind, namespace, name, words)
}

func containsAll(words []string) []gomega.OmegaMatcher {
	matchers := []gomega.OmegaMatcher{gomega.Not(gomega.BeEmpty())}
	for _, w := range words {
		matchers = append(matchers, gomega.ContainSubstring(w))
	}
	return matchers
}

// expectPropagationError waits for a hub Application to report reason: a Warning
// Event with the reason whose message names the problem, and the OCMPropagationError
// condition whose message starts with the reason and names it too.
func (s *suite) expectPropagationError(name, reason string, words ...string) {
	s.t.Helper()
	s.g.Eventually(func() string { return s.condition(name, argoapp.ConditionOCMPropagationError) }).Should(
		gomega.SatisfyAll(append(containsAll(words), gomega.HavePrefix(reason+": "))...),
		"condition %s of application %s", argoapp.ConditionOCMPropagationError, name)
	s.expectEvent(argoapp.KindApplication, appsNamespace, name, corev1.EventTypeWarning, reason, words...)
}

// deleteApp deletes a hub Application and waits until it and its works are gone.
func (s *suite) deleteApp(name string) {
	s.t.Helper()
	app := s.getApp(name)
	if app == nil {
		return
	}
	s.g.Expect(client.IgnoreNotFound(s.c.Delete(s.ctx, app))).To(gomega.Succeed())
	s.g.Eventually(func() bool { return s.getApp(name) == nil }).Should(gomega.BeTrue(), "application %s is still there", name)
	s.g.Eventually(func() []string { return s.workKeys(name) }).Should(gomega.BeEmpty())
}

// The work agent and the spoke agent.

// setFeedback plays the work agent: the work is applied, and its Application reports
// sync and health.
func (s *suite) setFeedback(key types.NamespacedName, sync, health string) {
	s.t.Helper()
	val := func(name, v string) workv1.FeedbackValue {
		return workv1.FeedbackValue{Name: name, Value: workv1.FieldValue{Type: workv1.String, String: ptr.To(v)}}
	}
	s.g.Eventually(func() error {
		work := &workv1.ManifestWork{}
		if err := s.c.Get(s.ctx, key, work); err != nil {
			return err
		}
		work.Status.Conditions = []metav1.Condition{{
			Type: workv1.WorkApplied, Status: metav1.ConditionTrue, Reason: "AppliedManifestWorkComplete",
			Message: "Apply manifest work complete", ObservedGeneration: work.Generation, LastTransitionTime: metav1.NewTime(observedAt),
		}}
		work.Status.ResourceStatus.Manifests = []workv1.ManifestCondition{{
			ResourceMeta: workv1.ManifestResourceMeta{Group: argoapp.Group, Version: "v1alpha1", Kind: argoapp.KindApplication,
				Resource: "applications", Name: key.Name, Namespace: spokeNamespace},
			StatusFeedbacks: workv1.StatusFeedbackResult{Values: []workv1.FeedbackValue{
				val(argoapp.FeedbackHealthStatus, health), val(argoapp.FeedbackSyncStatus, sync), val(argoapp.FeedbackSyncRevision, "8f2c1e5"),
			}},
			Conditions: []metav1.Condition{},
		}}
		return s.c.Status().Update(s.ctx, work)
	}).Should(gomega.Succeed())
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
	s.t.Helper()
	enc, err := clusterreport.Encode(clusterreport.Report{Apps: apps})
	s.g.Expect(err).NotTo(gomega.HaveOccurred())
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
	s.t.Helper()
	s.g.Eventually(func() error {
		addon := &addonv1beta1.ManagedClusterAddOn{}
		if err := s.c.Get(s.ctx, types.NamespacedName{Namespace: cluster, Name: addonName}, addon); err != nil {
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
		return s.c.Status().Patch(s.ctx, addon, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
	}).Should(gomega.Succeed())
}

// agentConditions returns the agent's conditions on a cluster's ManagedClusterAddOn:
// the report as the hub stores it.
func (s *suite) agentConditions(cluster string) []metav1.Condition {
	s.t.Helper()
	addon := &addonv1beta1.ManagedClusterAddOn{}
	s.g.Expect(s.c.Get(s.ctx, types.NamespacedName{Namespace: cluster, Name: addonName}, addon)).To(gomega.Succeed())
	return slices.DeleteFunc(slices.Clone(addon.Status.Conditions), func(c metav1.Condition) bool {
		return !clusterreport.IsAgentCondition(c.Type)
	})
}

// appSetReport returns the ApplicationSet's report; nil until it exists.
func (s *suite) appSetReport() *appsv1alpha1.MulticlusterApplicationSetReport {
	s.t.Helper()
	report := &appsv1alpha1.MulticlusterApplicationSetReport{}
	err := s.c.Get(s.ctx, types.NamespacedName{Namespace: appsNamespace, Name: appSetName}, report)
	if apierrors.IsNotFound(err) {
		return nil
	}
	s.g.Expect(err).NotTo(gomega.HaveOccurred())
	return report
}

// reportEntry returns the report's entry of a hub Application; nil without one.
func (s *suite) reportEntry(name string) *appsv1alpha1.ClusterCondition {
	s.t.Helper()
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
