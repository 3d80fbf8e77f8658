package propagation

// The harness of the envtest suites: one apiserver for the package, and per test a
// manager running Setup, with its own addon name, Argo CD namespace, Application
// namespace and clusters, so that the tests run in parallel without seeing each other.
// envtest runs no work agent, no garbage collector and no namespace deletion: the tests
// play the work agent by writing the works' status themselves (test/testenv's Hub).

import (
	"os"
	"slices"
	"testing"

	"github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	addonv1beta1 "open-cluster-management.io/api/addon/v1beta1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	workv1 "open-cluster-management.io/api/work/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/hubcache"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/statusslices"
	"github.com/ocm-gitops/argocd-pull-addon/test/testenv"
)

// shared is the package's apiserver, started by the first envtest test.
var shared testenv.Shared

func TestMain(m *testing.M) { os.Exit(testenv.RunTests(m, &shared)) }

// fixture is one test's manager and the names it owns.
type fixture struct {
	*testenv.Hub
	opts Options
	// id makes the names of the test unique in the shared apiserver.
	id string
	// writes counts the controllers' writes.
	writes *testenv.WriteLog
	// cached is the controllers' own client, which reads the manager's cache.
	cached client.Client
}

// sub returns the fixture for a subtest of its test: the same manager and names,
// failing the subtest.
func (f *fixture) sub(t *testing.T) *fixture {
	sub := *f
	sub.Hub = f.Sub(t)
	return &sub
}

// workWrites returns how many times the controllers applied or deleted any work of the
// test.
func (f *fixture) workWrites() int {
	return f.writes.Matching("apply ManifestWork ", "delete ManifestWork ")
}

// testOptions returns the options of a test's controllers: the default settings, with
// the test's own names.
func testOptions(id, appsNamespace string) Options {
	return Options{
		AddonName: "addon-" + id, ArgoCDNamespace: "argocd-" + id, WatchNamespaces: []string{appsNamespace},
		Concurrency: 2, HubClusterName: "local-cluster", Settings: DefaultSettings(),
	}
}

// newFixture starts a manager with Setup for a parallel test. adjust may change the
// options (all namespaces, tenant gate) before the manager starts.
func newFixture(t *testing.T, adjust func(*Options)) *fixture {
	t.Helper()
	env := shared.Get(t)
	id := testenv.RandomID()
	f := &fixture{Hub: testenv.NewHub(t, env, "apps-"+id), id: id, writes: &testenv.WriteLog{}}
	f.opts = testOptions(id, f.Namespace)
	if adjust != nil {
		adjust(&f.opts)
	}
	f.CreateNamespace(f.Namespace)
	f.CreateNamespace(f.opts.ArgoCDNamespace)
	// The hub Argo CD's default project, which Applications outside its namespace may
	// use once it lists theirs (every namespace here).
	f.Create(testenv.AppProject(f.opts.ArgoCDNamespace, argoapp.DefaultProject, "*"))
	scope := hubcache.Scope{AddonName: f.opts.AddonName, ArgoCDNamespace: f.opts.ArgoCDNamespace, WatchNamespaces: f.opts.WatchNamespaces}
	testenv.StartManager(t, env, scope, f.writes, func(mgr ctrl.Manager, c client.Client) error {
		f.cached = c
		return Setup(mgr, c, statusslices.NewReader(c, f.opts.AddonName), f.opts)
	})
	return f
}

// clusterName returns the name of the test's cluster called short.
func (f *fixture) clusterName(short string) string { return short + "-" + f.id }

// createCluster creates the ManagedCluster short, its namespace, and, when enabled,
// the addon's ManagedClusterAddOn. It returns the cluster name.
func (f *fixture) createCluster(short string, enabled bool) string {
	f.T.Helper()
	name := f.clusterName(short)
	f.CreateCluster(name, nil)
	if enabled {
		f.enableAddon(name)
	}
	return name
}

func (f *fixture) enableAddon(cluster string) {
	f.T.Helper()
	f.EnableAddon(cluster, f.opts.AddonName)
}

func (f *fixture) disableAddon(cluster string) {
	f.T.Helper()
	f.DisableAddon(cluster, f.opts.AddonName)
}

// bind creates a Placement in namespace and its PlacementDecision, as OCM's placement
// controller writes it, that selects clusters; it returns the name of the decision.
func (f *fixture) bind(namespace string, clusters ...string) string {
	f.T.Helper()
	decision, err := testenv.CreatePlacementDecision(f.Ctx, f.C, namespace, "placement-"+testenv.RandomID(), 1, clusters...)
	f.G.Expect(err).NotTo(gomega.HaveOccurred())
	return decision.Name
}

func (f *fixture) setDecisions(decision *clusterv1beta1.PlacementDecision, clusters ...string) {
	f.T.Helper()
	decision.Status.Decisions = nil
	for _, cluster := range clusters {
		decision.Status.Decisions = append(decision.Status.Decisions, clusterv1beta1.ClusterDecision{ClusterName: cluster, Reason: "test"})
	}
	f.G.Expect(f.C.Status().Update(f.Ctx, decision)).To(gomega.Succeed())
}

// readyCluster creates an opted-in cluster bound to the test's namespace.
func (f *fixture) readyCluster(short string) string {
	f.T.Helper()
	cluster := f.createCluster(short, true)
	f.bind(f.Namespace, cluster)
	return cluster
}

// startEast starts a parallel test: its fixture (newFixture, with adjust) and the cluster
// east, opted in and bound to the test's namespace (readyCluster).
func startEast(t *testing.T, adjust func(*Options)) (*fixture, string) {
	t.Helper()
	t.Parallel()
	f := newFixture(t, adjust)
	return f, f.readyCluster("east")
}

// startUnboundEast starts a parallel test of the tenant gate: its fixture (newFixture,
// with adjust) and the cluster east, opted in but bound to no namespace.
func startUnboundEast(t *testing.T, adjust func(*Options)) (*fixture, string) {
	t.Helper()
	t.Parallel()
	f := newFixture(t, adjust)
	return f, f.createCluster("east", true)
}

// propagate creates the test's Application name that targets cluster, with finalizers,
// and returns its work once the controller has applied it.
func (f *fixture) propagate(name, cluster string, finalizers ...string) *workv1.ManifestWork {
	f.T.Helper()
	app := f.Application(name, cluster)
	if len(finalizers) > 0 {
		app.SetFinalizers(finalizers)
	}
	f.Create(app)
	return f.WaitForWork(name, cluster)
}

// deleteApp deletes the test's Application name.
func (f *fixture) deleteApp(name string) {
	f.T.Helper()
	f.G.Expect(f.C.Delete(f.Ctx, f.GetApp(name))).To(gomega.Succeed())
}

// expectAppGone waits until the test's Application name is gone: its finalizers released.
func (f *fixture) expectAppGone(name string) {
	f.T.Helper()
	f.G.Eventually(func() *unstructured.Unstructured { return f.GetApp(name) }).Should(gomega.BeNil())
}

// setOperationFeedback plays the work agent: the work is applied, and its feedback
// holds the operation state of the spoke Application.
func (f *fixture) setOperationFeedback(key types.NamespacedName, phase, startedAt, id string) {
	f.T.Helper()
	values := map[string]string{argoapp.FeedbackOperationStatePhase: phase, argoapp.FeedbackOperationStateStartedAt: startedAt}
	if id != "" {
		values[argoapp.FeedbackOperationStateID] = id
	}
	f.SetFeedback(key, testenv.Feedback{Values: values})
}

// setPause sets or removes the pause annotation on the test's ClusterManagementAddOn,
// creating it when needed.
func (f *fixture) setPause(value string) {
	f.T.Helper()
	f.G.Eventually(func() error {
		cma := &addonv1beta1.ClusterManagementAddOn{}
		err := f.C.Get(f.Ctx, types.NamespacedName{Name: f.opts.AddonName}, cma)
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
			return f.C.Create(f.Ctx, cma)
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
		return f.C.Update(f.Ctx, cma)
	}).Should(gomega.Succeed())
}

// hasFinalizer reports whether the Application holds the finalizer.
func hasFinalizer(app *unstructured.Unstructured, finalizer string) bool {
	return app != nil && slices.Contains(app.GetFinalizers(), finalizer)
}
