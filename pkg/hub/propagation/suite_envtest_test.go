package propagation

// The harness of the envtest suites: one apiserver for the package, and per test a
// manager running Setup, with its own addon name, Argo CD namespace, Application
// namespace and clusters, so that the tests run in parallel without seeing each other.
// envtest runs no work agent, no garbage collector and no namespace deletion: the tests
// play the work agent by writing the works' status themselves.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	addonv1beta1 "open-cluster-management.io/api/addon/v1beta1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	workv1 "open-cluster-management.io/api/work/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/test/testenv"
)

// shared is the package's apiserver, started by the first envtest test.
var shared testenv.Shared

func TestMain(m *testing.M) { os.Exit(testenv.RunTests(m, &shared)) }

// startEnv returns the package's apiserver.
func startEnv(t *testing.T) *testenv.Env { return shared.Get(t) }

const (
	eventually   = 20 * time.Second
	consistently = 2 * time.Second
	poll         = 50 * time.Millisecond
)

// fixture is one test's manager and the names it owns.
type fixture struct {
	t    *testing.T
	g    *gomega.WithT
	ctx  context.Context
	c    client.Client // uncached
	opts Options
	// id makes the names of the test unique in the shared apiserver.
	id string
	// ns is the namespace of the test's Applications.
	ns string

	// writes counts the controllers' writes.
	writes *writeLog
}

// writeLog counts writes by "<verb> <kind> <namespace>/<name>".
type writeLog struct {
	mu     sync.Mutex
	counts map[string]int
}

// sub returns the fixture for a subtest of its test: the same manager and names,
// failing the subtest.
func (f *fixture) sub(t *testing.T) *fixture {
	sub := *f
	sub.t, sub.g = t, newGomega(t)
	return &sub
}

// newGomega returns assertions for t with the suite's timeouts.
func newGomega(t *testing.T) *gomega.WithT {
	g := gomega.NewWithT(t)
	g.SetDefaultEventuallyTimeout(eventually)
	g.SetDefaultEventuallyPollingInterval(poll)
	g.SetDefaultConsistentlyDuration(consistently)
	g.SetDefaultConsistentlyPollingInterval(poll)
	return g
}

// intercept counts the writes of the controllers.
func (f *fixture) intercept(c client.WithWatch) client.WithWatch {
	count := func(verb, kind, namespace, name string) {
		f.writes.mu.Lock()
		defer f.writes.mu.Unlock()
		f.writes.counts[verb+" "+kind+" "+namespace+"/"+name]++
	}
	kindOf := func(obj runtime.Object) string {
		gvk, err := apiutil.GVKForObject(obj, c.Scheme())
		if err != nil {
			return fmt.Sprintf("%T", obj)
		}
		return gvk.Kind
	}
	return interceptor.NewClient(c, interceptor.Funcs{
		Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			if u, ok := obj.(interface {
				GetKind() string
				GetNamespace() string
				GetName() string
			}); ok {
				count("apply", u.GetKind(), u.GetNamespace(), u.GetName())
			}
			return c.Apply(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			count("patch", kindOf(obj), obj.GetNamespace(), obj.GetName())
			return c.Patch(ctx, obj, patch, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			count("delete", kindOf(obj), obj.GetNamespace(), obj.GetName())
			return c.Delete(ctx, obj, opts...)
		},
	})
}

// writeCount returns how many writes of verb to the object the controllers made.
func (f *fixture) writeCount(verb, kind, namespace, name string) int {
	f.writes.mu.Lock()
	defer f.writes.mu.Unlock()
	return f.writes.counts[verb+" "+kind+" "+namespace+"/"+name]
}

// workWrites returns how many times the controllers applied or deleted any work of the
// test.
func (f *fixture) workWrites() int {
	f.writes.mu.Lock()
	defer f.writes.mu.Unlock()
	n := 0
	for key, count := range f.writes.counts {
		if strings.HasPrefix(key, "apply ManifestWork ") || strings.HasPrefix(key, "delete ManifestWork ") {
			n += count
		}
	}
	return n
}

// newFixture starts a manager with Setup for a parallel test. adjust may change the
// options (all namespaces, tenant gate) before the manager starts.
func newFixture(t *testing.T, adjust func(*Options)) *fixture {
	t.Helper()
	e := startEnv(t)
	id := randomID()
	f := &fixture{
		t: t, g: newGomega(t), ctx: context.Background(), c: e.Client, id: id,
		ns: "apps-" + id, writes: &writeLog{counts: map[string]int{}},
	}
	f.opts = DefaultOptions()
	f.opts.AddonName = "addon-" + id
	f.opts.ArgoCDNamespace = "argocd-" + id
	f.opts.WatchNamespaces = []string{f.ns}
	f.opts.Concurrency = 2
	if adjust != nil {
		adjust(&f.opts)
	}
	f.createNamespace(f.ns)
	f.createNamespace(f.opts.ArgoCDNamespace)

	scheme, err := testenv.NewScheme()
	f.g.Expect(err).NotTo(gomega.HaveOccurred())
	f.g.Expect(AddToScheme(scheme)).To(gomega.Succeed())
	mgr, err := ctrl.NewManager(e.Config, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cache.Options{ByObject: CacheByObject(f.opts)},
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	f.g.Expect(err).NotTo(gomega.HaveOccurred())
	f.g.Expect(setup(mgr, f.opts, f.intercept)).To(gomega.Succeed())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	return f
}

func randomID() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (f *fixture) createNamespace(name string) {
	f.t.Helper()
	err := f.c.Create(f.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if !apierrors.IsAlreadyExists(err) {
		f.g.Expect(err).NotTo(gomega.HaveOccurred())
	}
}

// clusterName returns the name of the test's cluster called short.
func (f *fixture) clusterName(short string) string { return short + "-" + f.id }

// createCluster creates the ManagedCluster short, its namespace, and, when enabled,
// the addon's ManagedClusterAddOn. It returns the cluster name.
func (f *fixture) createCluster(short string, enabled bool) string {
	f.t.Helper()
	name := f.clusterName(short)
	f.g.Expect(f.c.Create(f.ctx, &clusterv1.ManagedCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       clusterv1.ManagedClusterSpec{HubAcceptsClient: true},
	})).To(gomega.Succeed())
	f.createNamespace(name)
	if enabled {
		f.enableAddon(name)
	}
	return name
}

func (f *fixture) enableAddon(cluster string) {
	f.t.Helper()
	f.g.Expect(f.c.Create(f.ctx, &addonv1beta1.ManagedClusterAddOn{
		ObjectMeta: metav1.ObjectMeta{Name: f.opts.AddonName, Namespace: cluster},
	})).To(gomega.Succeed())
}

func (f *fixture) disableAddon(cluster string) {
	f.t.Helper()
	f.g.Expect(f.c.Delete(f.ctx, &addonv1beta1.ManagedClusterAddOn{
		ObjectMeta: metav1.ObjectMeta{Name: f.opts.AddonName, Namespace: cluster},
	})).To(gomega.Succeed())
}

// bind creates a Placement in namespace and its PlacementDecision, as OCM's placement
// controller writes it, that selects clusters; it returns the name of the decision.
func (f *fixture) bind(namespace string, clusters ...string) string {
	f.t.Helper()
	decision, err := testenv.CreatePlacementDecision(f.ctx, f.c, namespace, "placement-"+randomID(), 1, clusters...)
	f.g.Expect(err).NotTo(gomega.HaveOccurred())
	return decision.Name
}

func (f *fixture) setDecisions(decision *clusterv1beta1.PlacementDecision, clusters ...string) {
	f.t.Helper()
	decision.Status.Decisions = nil
	for _, cluster := range clusters {
		decision.Status.Decisions = append(decision.Status.Decisions, clusterv1beta1.ClusterDecision{ClusterName: cluster, Reason: "test"})
	}
	f.g.Expect(f.c.Status().Update(f.ctx, decision)).To(gomega.Succeed())
}

// readyCluster creates an opted-in cluster bound to the test's namespace.
func (f *fixture) readyCluster(short string) string {
	f.t.Helper()
	cluster := f.createCluster(short, true)
	f.bind(f.ns, cluster)
	return cluster
}

// application returns a pulled Application of the test's namespace that targets
// cluster, the way the documented ApplicationSet template writes it.
func (f *fixture) application(name, cluster string) *unstructured.Unstructured {
	app := argoapp.NewApplication()
	app.SetNamespace(f.ns)
	app.SetName(name)
	app.SetLabels(map[string]string{argoapp.LabelPullToOCMManagedCluster: "true"})
	app.SetAnnotations(map[string]string{
		argoapp.AnnotationOCMManagedCluster: cluster,
		argoapp.AnnotationSkipReconcile:     "true",
	})
	app.Object["spec"] = map[string]any{
		"project":     "default",
		"source":      map[string]any{"repoURL": "https://git.example.com/apps.git", "path": "guestbook", "targetRevision": "main"},
		"destination": map[string]any{"server": "https://kubernetes.default.svc", "namespace": "guestbook"},
	}
	return app
}

func (f *fixture) create(obj client.Object) {
	f.t.Helper()
	f.g.Expect(f.c.Create(f.ctx, obj)).To(gomega.Succeed())
}

// getApp reads an Application of the test's namespace from the apiserver; nil when it
// does not exist.
func (f *fixture) getApp(name string) *unstructured.Unstructured {
	f.t.Helper()
	app := argoapp.NewApplication()
	err := f.c.Get(f.ctx, types.NamespacedName{Namespace: f.ns, Name: name}, app)
	if apierrors.IsNotFound(err) {
		return nil
	}
	f.g.Expect(err).NotTo(gomega.HaveOccurred())
	return app
}

// updateApp reads an Application, changes it and writes it back, retrying on conflict.
func (f *fixture) updateApp(name string, change func(app *unstructured.Unstructured)) {
	f.t.Helper()
	f.g.Eventually(func() error {
		app := f.getApp(name)
		if app == nil {
			return fmt.Errorf("application %s is gone", name)
		}
		change(app)
		return f.c.Update(f.ctx, app)
	}).Should(gomega.Succeed())
}

// worksOf returns the works, in every namespace, that point back to an Application of
// the test's namespace.
func (f *fixture) worksOf(name string) []workv1.ManifestWork {
	f.t.Helper()
	works := &workv1.ManifestWorkList{}
	f.g.Expect(f.c.List(f.ctx, works)).To(gomega.Succeed())
	var out []workv1.ManifestWork
	for _, work := range works.Items {
		if work.Annotations[argoapp.AnnotationHubApplicationNamespace] == f.ns &&
			work.Annotations[argoapp.AnnotationHubApplicationName] == name {
			out = append(out, work)
		}
	}
	return out
}

// workKeys returns "<namespace>/<name>" of the works of an Application.
func (f *fixture) workKeys(name string) []string {
	var keys []string
	for _, work := range f.worksOf(name) {
		keys = append(keys, work.Namespace+"/"+work.Name)
	}
	slices.Sort(keys)
	return keys
}

// expectedWorkKey returns the key of the work of an Application in cluster.
func (f *fixture) expectedWorkKey(app *unstructured.Unstructured, cluster string) string {
	return cluster + "/" + ManifestWorkName(app.GetName(), app.GetUID())
}

// waitForWork waits until the Application's only work is the expected one in cluster
// and returns it.
func (f *fixture) waitForWork(name, cluster string) *workv1.ManifestWork {
	f.t.Helper()
	app := f.getApp(name)
	f.g.Expect(app).NotTo(gomega.BeNil())
	want := f.expectedWorkKey(app, cluster)
	f.g.Eventually(func() []string { return f.workKeys(name) }).Should(gomega.Equal([]string{want}))
	work := f.worksOf(name)[0]
	return &work
}

// payload returns the Application that a work carries.
func payload(t *testing.T, work *workv1.ManifestWork) *unstructured.Unstructured {
	t.Helper()
	for _, manifest := range work.Spec.Workload.Manifests {
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(manifest.Raw); err != nil {
			t.Fatalf("decode manifest of work %s/%s: %v", work.Namespace, work.Name, err)
		}
		if obj.GroupVersionKind() == argoapp.ApplicationGVK {
			return obj
		}
	}
	t.Fatalf("work %s/%s carries no Application", work.Namespace, work.Name)
	return nil
}

// condition returns the message of the Application's OCMPropagationError condition,
// or "" when it has none.
func (f *fixture) condition(name string) string {
	f.t.Helper()
	app := f.getApp(name)
	if app == nil {
		return ""
	}
	message, _, err := argoapp.FindCondition(app, argoapp.ConditionOCMPropagationError)
	f.g.Expect(err).NotTo(gomega.HaveOccurred())
	return message
}

// eventReasons returns the reasons of the Events of the given type recorded on an
// object.
func (f *fixture) eventReasons(namespace, name, eventType string) []string {
	f.t.Helper()
	list := &corev1.EventList{}
	f.g.Expect(f.c.List(f.ctx, list, client.InNamespace(namespace))).To(gomega.Succeed())
	var reasons []string
	for _, e := range list.Items {
		if e.InvolvedObject.Name == name && e.Type == eventType {
			reasons = append(reasons, e.Reason)
		}
	}
	return reasons
}

// expectProblem waits for an Application to report reason: a Warning Event with the
// reason, and the OCMPropagationError condition whose message starts with it.
func (f *fixture) expectProblem(name, reason string) {
	f.t.Helper()
	f.g.Eventually(func() string { return f.condition(name) }).Should(gomega.HavePrefix(reason+": "),
		"condition %s of application %s", argoapp.ConditionOCMPropagationError, name)
	f.g.Eventually(func() []string { return f.eventReasons(f.ns, name, corev1.EventTypeWarning) }).Should(gomega.ContainElement(reason),
		"warning events of application %s", name)
}

// markApplied plays the work agent: it sets the work's Applied condition for its
// current generation.
func (f *fixture) markApplied(key types.NamespacedName) {
	f.t.Helper()
	f.g.Eventually(func() error {
		work := &workv1.ManifestWork{}
		if err := f.c.Get(f.ctx, key, work); err != nil {
			return err
		}
		setApplied(work)
		return f.c.Status().Update(f.ctx, work)
	}).Should(gomega.Succeed())
}

// setApplied sets the Applied condition of work for its current generation, as the
// work agent does once it applied the work.
func setApplied(work *workv1.ManifestWork) {
	meta.SetStatusCondition(&work.Status.Conditions, metav1.Condition{
		Type: workv1.WorkApplied, Status: metav1.ConditionTrue, Reason: "AppliedManifestWorkComplete",
		Message: "Apply manifest work complete", ObservedGeneration: work.Generation,
	})
}

// setOperationFeedback sets the operation state of the spoke Application in the status
// feedback of a work, as the work agent reports it, and marks the work applied.
func (f *fixture) setOperationFeedback(key types.NamespacedName, phase, startedAt string) {
	f.t.Helper()
	f.g.Eventually(func() error {
		work := &workv1.ManifestWork{}
		if err := f.c.Get(f.ctx, key, work); err != nil {
			return err
		}
		setApplied(work)
		value := func(name, s string) workv1.FeedbackValue {
			return workv1.FeedbackValue{Name: name, Value: workv1.FieldValue{Type: workv1.String, String: ptr.To(s)}}
		}
		work.Status.ResourceStatus.Manifests = []workv1.ManifestCondition{{
			ResourceMeta: workv1.ManifestResourceMeta{
				Group: argoapp.Group, Version: argoapp.ApplicationGVK.Version, Kind: argoapp.KindApplication,
				Resource: argoapp.ResourceApplications, Name: work.Annotations[argoapp.AnnotationHubApplicationName],
			},
			StatusFeedbacks: workv1.StatusFeedbackResult{Values: []workv1.FeedbackValue{
				value(argoapp.FeedbackOperationStatePhase, phase), value(argoapp.FeedbackOperationStateStartedAt, startedAt),
			}},
			Conditions: []metav1.Condition{},
		}}
		return f.c.Status().Update(f.ctx, work)
	}).Should(gomega.Succeed())
}

// setPause sets or removes the pause annotation on the test's ClusterManagementAddOn,
// creating it when needed.
func (f *fixture) setPause(value string) {
	f.t.Helper()
	f.g.Eventually(func() error {
		cma := &addonv1beta1.ClusterManagementAddOn{}
		err := f.c.Get(f.ctx, types.NamespacedName{Name: f.opts.AddonName}, cma)
		if apierrors.IsNotFound(err) {
			cma = &addonv1beta1.ClusterManagementAddOn{
				ObjectMeta: metav1.ObjectMeta{Name: f.opts.AddonName},
				Spec: addonv1beta1.ClusterManagementAddOnSpec{
					InstallStrategy: addonv1beta1.InstallStrategy{Type: addonv1beta1.AddonInstallStrategyManual},
				},
			}
			if value != "" {
				cma.Annotations = map[string]string{AnnotationPausePropagation: value}
			}
			return f.c.Create(f.ctx, cma)
		}
		if err != nil {
			return err
		}
		if value == "" {
			delete(cma.Annotations, AnnotationPausePropagation)
		} else {
			if cma.Annotations == nil {
				cma.Annotations = map[string]string{}
			}
			cma.Annotations[AnnotationPausePropagation] = value
		}
		return f.c.Update(f.ctx, cma)
	}).Should(gomega.Succeed())
}

// hasFinalizer reports whether the Application holds the finalizer.
func hasFinalizer(app *unstructured.Unstructured, finalizer string) bool {
	return app != nil && slices.Contains(app.GetFinalizers(), finalizer)
}

// describeWorks is a failure message helper.
func describeWorks(works []workv1.ManifestWork) string {
	var names []string
	for _, w := range works {
		names = append(names, w.Namespace+"/"+w.Name)
	}
	return strings.Join(names, ", ")
}
