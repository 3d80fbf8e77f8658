package spoke

// The harness of the envtest suites: two real apiservers, a hub and a managed cluster
// (the "spoke"), shared by the tests of the package. Each test runs its own agent with its
// own cluster namespace on the hub and its own namespaces on the spoke, so that tests run
// in parallel without seeing each other. The agent talks to the hub as a restricted
// identity, granted exactly what the addon's registration grants it, and through an
// optional TCP proxy that a test can cut.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	"github.com/onsi/gomega"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
	addonv1beta1 "open-cluster-management.io/api/addon/v1beta1"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	statusv1alpha1 "github.com/ocm-gitops/argocd-pull-addon/pkg/apis/argocdpull/v1alpha1"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/clusterreport"
	hubaddon "github.com/ocm-gitops/argocd-pull-addon/pkg/hub/addon"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/statusslices"
	"github.com/ocm-gitops/argocd-pull-addon/test/fleet"
	"github.com/ocm-gitops/argocd-pull-addon/test/testenv"
)

// The apiservers start on the first envtest test, so that the unit tests of the package
// run without them.
var (
	envOnce  sync.Once
	hubEnv   *testenv.Env
	spokeEnv *testenv.Env
	envError error
)

func TestMain(m *testing.M) {
	if os.Getenv("TEST_LOG") == "" {
		klog.SetLogger(logr.Discard()) // client-go and the lease updater log through klog
	}
	code := m.Run()
	for _, env := range []*testenv.Env{hubEnv, spokeEnv} {
		if env != nil {
			if err := env.Stop(); err != nil {
				fmt.Fprintln(os.Stderr, "stop envtest:", err)
			}
		}
	}
	os.Exit(code)
}

// startEnvs returns the hub and spoke apiservers, starting both, in parallel, on first
// use.
func startEnvs(t *testing.T) (*testenv.Env, *testenv.Env) {
	t.Helper()
	if testing.Short() {
		t.Skip("envtest: skipped in -short mode")
	}
	envOnce.Do(func() {
		var wg sync.WaitGroup
		var hubErr, spokeErr error
		wg.Add(2)
		go func() { defer wg.Done(); hubEnv, hubErr = testenv.New() }()
		go func() { defer wg.Done(); spokeEnv, spokeErr = testenv.New() }()
		wg.Wait()
		envError = errors.Join(hubErr, spokeErr)
	})
	if envError != nil {
		t.Fatalf("start envtest: %v", envError)
	}
	return hubEnv, spokeEnv
}

const (
	eventually   = 30 * time.Second
	consistently = 2 * time.Second
	poll         = 25 * time.Millisecond
	// testAddonName is the ManagedClusterAddOn of every test, in its own namespace.
	testAddonName = clusterreport.DefaultAddonName
	// frameworkManager writes the framework's condition in the tests.
	frameworkManager = "registration-agent"
)

// fixture is one test's hub namespace, spoke namespaces and agent.
type fixture struct {
	t   *testing.T
	g   *gomega.WithT
	ctx context.Context
	id  string

	// hub and spoke are administrator clients; spokeConfig connects to the spoke the
	// agent watches.
	hub         client.Client
	spoke       client.Client
	hubConfig   *rest.Config
	spokeConfig *rest.Config

	// cluster is the cluster name: the agent's namespace on the hub.
	cluster string
	// appNS holds the test's Applications on the spoke; addonNS the agent's Lease.
	appNS   string
	addonNS string

	opts   Options
	tuning tuning

	// hubProxy and spokeProxy sit between the agent and the apiservers when asked for.
	hubProxy   *tcpProxy
	spokeProxy *tcpProxy
	// publishAttempts counts the agent's attempts to publish: the attempts to write its
	// status slices when it reports its apps there (inSlices), each publish's first
	// request, else the patches of the ManagedClusterAddOn's status.
	// statusWrites counts the patches of the status that the hub accepted.
	publishAttempts atomic.Int64
	statusWrites    atomic.Int64
	// sliceWrites counts the agent's accepted writes (apply, delete) of its
	// ApplicationStatusSlices.
	sliceWrites atomic.Int64
	// redis plays Argo CD's application-controller cache.
	redis *miniredis.Miniredis
	// inSlices is true when the agent may read and write its ApplicationStatusSlices,
	// and so reports its apps there (fixtureOptions.hubWithoutSlices).
	inSlices atomic.Bool

	stopAgent func()
}

// fixtureOptions adjust a fixture before its agent starts.
type fixtureOptions struct {
	proxyHub   bool
	proxySpoke bool
	// spoke replaces the shared spoke apiserver.
	spoke *rest.Config
	// hubWithoutSlices plays a hub older than the status slices: the agent's identity is
	// not granted them (grantSlices grants them later), so the agent reports every app
	// in a condition of the ManagedClusterAddOn.
	hubWithoutSlices bool
	// adjust may change the options and periods.
	adjust func(*Options, *tuning)
}

// newFixture prepares the namespaces and identity of a parallel test and starts its
// agent.
func newFixture(t *testing.T, fo fixtureOptions) *fixture {
	t.Helper()
	hub, spoke := startEnvs(t)
	t.Parallel()
	id := testenv.RandomID()
	f := &fixture{
		t: t, g: gomega.NewWithT(t), ctx: context.Background(), id: id,
		hub: hub.Client, spoke: spoke.Client, hubConfig: hub.Config, spokeConfig: spoke.Config,
		cluster: "cluster-" + id, appNS: "apps-" + id, addonNS: "agent-" + id,
	}
	f.g.SetDefaultEventuallyTimeout(eventually)
	f.g.SetDefaultEventuallyPollingInterval(poll)
	f.g.SetDefaultConsistentlyDuration(consistently)
	f.g.SetDefaultConsistentlyPollingInterval(poll)
	if fo.spoke != nil {
		f.spokeConfig = fo.spoke
		c, err := client.New(fo.spoke, client.Options{Scheme: spoke.Scheme})
		f.g.Expect(err).NotTo(gomega.HaveOccurred())
		f.spoke = c
	}

	f.redis = miniredis.RunT(t)
	f.opts = DefaultOptions()
	f.opts.ArgoCDRedis.Addr = f.redis.Addr()
	f.opts.ClusterName = f.cluster
	f.opts.AddonNamespace = f.addonNS
	f.opts.WatchNamespaces = []string{f.appNS}
	f.tuning = tuning{
		crdCheckInterval:     300 * time.Millisecond,
		diagnosticsInterval:  300 * time.Millisecond,
		controllerStaleAfter: time.Hour,
		retryInitial:         100 * time.Millisecond,
		retryMax:             time.Second,
		reconnectInterval:    200 * time.Millisecond,
		requestTimeout:       5 * time.Second,
		summaryInterval:      time.Second,
		settleWait:           time.Second,
	}
	if fo.adjust != nil {
		fo.adjust(&f.opts, &f.tuning)
	}

	f.g.Expect(testenv.CreateNamespace(f.ctx, f.hub, f.cluster)).To(gomega.Succeed())
	f.g.Expect(testenv.CreateNamespace(f.ctx, f.spoke, f.appNS)).To(gomega.Succeed())
	f.g.Expect(testenv.CreateNamespace(f.ctx, f.spoke, f.addonNS)).To(gomega.Succeed())
	f.createAddon()
	f.inSlices.Store(!fo.hubWithoutSlices)
	f.grantAgentIdentity()

	if fo.proxyHub {
		f.hubProxy = startProxy(t, hostOf(t, f.hubConfig))
	}
	if fo.proxySpoke {
		f.spokeProxy = startProxy(t, hostOf(t, f.spokeConfig))
	}
	f.startAgent()
	return f
}

// createAddon creates the ManagedClusterAddOn with an Available condition written by
// the framework's field manager, which the agent must never touch.
func (f *fixture) createAddon() {
	f.t.Helper()
	addon := &addonv1beta1.ManagedClusterAddOn{ObjectMeta: metav1.ObjectMeta{Name: testAddonName, Namespace: f.cluster}}
	f.g.Expect(f.hub.Create(f.ctx, addon)).To(gomega.Succeed())
	addon.Status.Conditions = []metav1.Condition{{
		Type: "Available", Status: metav1.ConditionTrue, Reason: "ManagedClusterAddOnLeaseUpdated",
		Message: "addon is available", LastTransitionTime: metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)),
	}}
	f.g.Expect(f.hub.Status().Update(f.ctx, addon, client.FieldOwner(frameworkManager))).To(gomega.Succeed())
}

// agentUser is the user name of the agent's hub identity.
func (f *fixture) agentUser() string {
	return "system:open-cluster-management:cluster:" + f.cluster + ":addon:" + testAddonName + ":agent:" + FieldManager
}

// grantAgentIdentity grants the agent's hub identity what the addon's registration
// grants it (hubaddon.HubRole), and nothing else: in its cluster namespace, get, list and
// watch on its own ManagedClusterAddOn, patch on its status, its ApplicationStatusSlices,
// and create and patch on Events.
func (f *fixture) grantAgentIdentity() {
	f.t.Helper()
	role := f.agentRole()
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "argocd-pull-agent", Namespace: f.cluster},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: f.agentUser()}},
	}
	f.g.Expect(f.hub.Create(f.ctx, role)).To(gomega.Succeed())
	f.g.Expect(f.hub.Create(f.ctx, binding)).To(gomega.Succeed())
	// The apiserver's authorizer sees a new Role a moment after it is written; the addon
	// framework grants it long before the agent runs. An agent that starts before would
	// find its slices refused and report in conditions at first, as it must.
	f.waitUntilAllowed("patch", addonv1beta1.GroupName, "managedclusteraddons", testAddonName, "status")
	if f.inSlices.Load() {
		f.waitUntilAllowed("list", statusv1alpha1.GroupVersion.Group, statusv1alpha1.Resource, "", "")
	}
}

// waitUntilAllowed waits until the hub's authorizer allows the agent's identity verb on
// the resource (the object name, when not empty) in its cluster namespace.
func (f *fixture) waitUntilAllowed(verb, group, resource, name, subresource string) {
	f.t.Helper()
	f.g.Eventually(func() (bool, error) {
		review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: f.agentUser(), Groups: []string{"system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: f.cluster, Verb: verb, Group: group, Resource: resource, Name: name, Subresource: subresource,
			},
		}}
		if err := f.hub.Create(f.ctx, review); err != nil {
			return false, err
		}
		return review.Status.Allowed, nil
	}).Should(gomega.BeTrue(), "%s %s/%s for the agent", verb, resource, subresource)
}

// agentRole is the agent's hub Role, without the status slices unless f.inSlices.
func (f *fixture) agentRole() *rbacv1.Role {
	role := hubaddon.HubRole(testAddonName)
	role.Name, role.Namespace = "argocd-pull-agent", f.cluster
	if !f.inSlices.Load() {
		role.Rules = slices.DeleteFunc(role.Rules, func(r rbacv1.PolicyRule) bool {
			return slices.Contains(r.Resources, statusv1alpha1.Resource)
		})
	}
	return role
}

// grantSlices grants the agent its status slices: the hub is upgraded.
func (f *fixture) grantSlices() {
	f.t.Helper()
	f.inSlices.Store(true)
	role := &rbacv1.Role{}
	f.g.Expect(f.hub.Get(f.ctx, types.NamespacedName{Namespace: f.cluster, Name: "argocd-pull-agent"}, role)).To(gomega.Succeed())
	role.Rules = f.agentRole().Rules
	f.g.Expect(f.hub.Update(f.ctx, role)).To(gomega.Succeed())
}

// agentHubConfig returns the agent's hub connection: the agent's identity, through the
// proxy when there is one, counting the status patches.
func (f *fixture) agentHubConfig() *rest.Config {
	cfg := rest.CopyConfig(f.hubConfig)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: f.agentUser(), Groups: []string{"system:authenticated"}}
	if f.hubProxy != nil {
		cfg.Host = "https://" + f.hubProxy.addr()
	}
	statusPath := "/namespaces/" + f.cluster + "/managedclusteraddons/" + testAddonName + "/status"
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			counted := req.Method == http.MethodPatch && strings.HasSuffix(req.URL.Path, statusPath)
			slice := req.Method != http.MethodGet && strings.Contains(req.URL.Path, "/"+statusv1alpha1.Resource)
			if f.inSlices.Load() && slice || !f.inSlices.Load() && counted {
				f.publishAttempts.Add(1)
			}
			resp, err := rt.RoundTrip(req)
			if counted && err == nil && resp.StatusCode < 300 {
				f.statusWrites.Add(1)
			}
			if slice && err == nil && resp.StatusCode < 300 {
				f.sliceWrites.Add(1)
			}
			return resp, err
		})
	})
	return cfg
}

// agentSpokeConfig returns the agent's spoke connection, through the proxy when there
// is one.
func (f *fixture) agentSpokeConfig() *rest.Config {
	cfg := rest.CopyConfig(f.spokeConfig)
	if f.spokeProxy != nil {
		cfg.Host = "https://" + f.spokeProxy.addr()
	}
	return cfg
}

// roundTripperFunc is an http.RoundTripper of a function.
type roundTripperFunc func(*http.Request) (*http.Response, error)

func (fn roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return fn(req) }

// startAgent runs the agent until the test ends or stopAgent is called, and fails the
// test if it does not return nil promptly once stopped.
func (f *fixture) startAgent() {
	f.t.Helper()
	ctx, cancel := context.WithCancel(f.ctx)
	if os.Getenv("TEST_LOG") != "" {
		ctx = klog.NewContext(ctx, testr.NewWithOptions(f.t, testr.Options{Verbosity: 4}))
	}
	done := make(chan error, 1)
	go func() { done <- run(ctx, f.opts, f.agentHubConfig(), f.agentSpokeConfig(), f.tuning) }()
	var once sync.Once
	f.stopAgent = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					f.t.Errorf("agent returned %v", err)
				}
			case <-time.After(15 * time.Second):
				f.t.Error("agent did not stop within 15s of its context")
			}
		})
	}
	f.t.Cleanup(f.stopAgent)
}

// addon returns the ManagedClusterAddOn as the hub has it.
func (f *fixture) addon() *addonv1beta1.ManagedClusterAddOn {
	f.t.Helper()
	addon := &addonv1beta1.ManagedClusterAddOn{}
	f.g.Expect(f.hub.Get(f.ctx, types.NamespacedName{Namespace: f.cluster, Name: testAddonName}, addon)).To(gomega.Succeed())
	return addon
}

// report decodes the report on the hub, with the apps from the channel the agent
// reports them in: its status slices (f.inSlices), where the report on the
// ManagedClusterAddOn carries none, or that report. Decoding errors fail the test.
func (f *fixture) report() clusterreport.Report {
	f.t.Helper()
	report, err := clusterreport.Decode(f.addon().Status.Conditions)
	f.g.Expect(err).NotTo(gomega.HaveOccurred())
	if f.inSlices.Load() {
		f.g.Expect(report.Apps).To(gomega.BeEmpty(), "an agent that reports in slices wrote a condition per app")
		report.Apps = f.sliceApps()
	}
	return report
}

// sliceApps returns the apps from the hub of the agent's status slices on the hub, as
// the hub reads them (statusslices.AppOf), sorted; decoding errors fail the test.
func (f *fixture) sliceApps() []clusterreport.App {
	f.t.Helper()
	entries, err := clusterreport.DecodeSlices(f.slicesOnHub())
	f.g.Expect(err).NotTo(gomega.HaveOccurred())
	var apps []clusterreport.App
	for _, e := range entries {
		if clusterreport.IsSpokeLocalEntry(e) {
			continue
		}
		apps = append(apps, statusslices.AppOf(e))
	}
	slices.SortFunc(apps, func(a, b clusterreport.App) int { return strings.Compare(a.Key(), b.Key()) })
	return apps
}

// reportedApp returns the reported app of the given name in appNS, if any.
func (f *fixture) reportedApp(name string) (clusterreport.App, bool) {
	for _, app := range f.report().Apps {
		if app.Namespace == f.appNS && app.Name == name {
			return app, true
		}
	}
	return clusterreport.App{}, false
}

// condition returns the condition of a type on the hub, or nil.
func (f *fixture) condition(conditionType string) *metav1.Condition {
	return findCondition(f.addon().Status.Conditions, conditionType)
}

// eventually waits until the reported app of the given name passes check.
func (f *fixture) eventuallyApp(name string, check func(g gomega.Gomega, app clusterreport.App)) {
	f.t.Helper()
	f.g.Eventually(func(g gomega.Gomega) {
		app, ok := f.reportedApp(name)
		g.Expect(ok).To(gomega.BeTrue(), "app %s is not reported", name)
		check(g, app)
	}).Should(gomega.Succeed())
}

// settle waits until the agent has published and then stays quiet for a while, and
// returns the number of writes so far.
func (f *fixture) settle() int64 {
	f.t.Helper()
	var last int64 = -1
	var lastSlices int64 = -1
	f.g.Eventually(func() bool {
		n, slices := f.statusWrites.Load(), f.sliceWrites.Load()
		stable := n == last && n > 0 && slices == lastSlices
		last, lastSlices = n, slices
		return stable
	}).WithPolling(3 * f.opts.PublishDelay).Should(gomega.BeTrue())
	return f.statusWrites.Load()
}

// appOption changes an Application before it is created.
type appOption func(*unstructured.Unstructured)

// fromApplicationSet marks an app the way the hub renders an ApplicationSet's app.
func fromApplicationSet(appSet string) appOption {
	return func(u *unstructured.Unstructured) {
		u.SetLabels(map[string]string{argoapp.LabelApplicationSet: "true"})
		u.SetAnnotations(map[string]string{argoapp.AnnotationHostingApplicationSet: appSet})
	}
}

// syncsAutomatically gives an app an automated sync policy.
func syncsAutomatically(u *unstructured.Unstructured) {
	u.Object["spec"].(map[string]any)["syncPolicy"] = map[string]any{"automated": map[string]any{}}
}

// notFromHub leaves an app without any sign of the hub: an app created on the managed
// cluster.
func notFromHub(u *unstructured.Unstructured) {
	u.SetOwnerReferences(nil)
}

// multiSource gives an app spec.sources.
func multiSource(u *unstructured.Unstructured) {
	spec := u.Object["spec"].(map[string]any)
	delete(spec, "source")
	spec["sources"] = []any{
		map[string]any{"repoURL": "https://charts.example.com", "chart": "web", "targetRevision": "1.2.3"},
		map[string]any{"repoURL": "https://git.example.com/values.git", "ref": "values"},
	}
}

// workName returns the name of the test ManifestWork of an app.
func workName(app string) string {
	return app + "-1a2b3"
}

// createApp creates an Application on the spoke, owned by an AppliedManifestWork as the
// work agent leaves it, with the given status.
func (f *fixture) createApp(name string, status map[string]any, opts ...appOption) {
	f.t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{
			"project":     "default",
			"destination": map[string]any{"server": argoapp.InClusterServer, "namespace": "guestbook"},
			"source":      map[string]any{"repoURL": "https://git.example.com/apps.git", "path": "guestbook", "targetRevision": "main"},
		},
	}}
	u.SetGroupVersionKind(argoapp.ApplicationGVK)
	u.SetNamespace(f.appNS)
	u.SetName(name)
	u.SetOwnerReferences([]metav1.OwnerReference{{
		APIVersion: workv1.GroupVersion.String(), Kind: kindAppliedManifestWork,
		Name: strings.Repeat("0f", 32) + "-" + workName(name), UID: "3f0e5d9c-1b2a-4c3d-8e7f-6a5b4c3d2e1f",
	}})
	for _, opt := range opts {
		opt(u)
	}
	if status != nil {
		u.Object["status"] = status
	}
	f.g.Expect(f.spoke.Create(f.ctx, u)).To(gomega.Succeed())
}

// setStatus replaces the status of an app on the spoke, as Argo CD would.
func (f *fixture) setStatus(name string, status map[string]any) {
	f.t.Helper()
	f.updateApp(name, func(u *unstructured.Unstructured) { u.Object["status"] = status })
}

// updateApp changes an app on the spoke, retrying on conflicts.
func (f *fixture) updateApp(name string, change func(*unstructured.Unstructured)) {
	f.t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(argoapp.ApplicationGVK)
		if err := f.spoke.Get(f.ctx, types.NamespacedName{Namespace: f.appNS, Name: name}, u); err != nil {
			return err
		}
		change(u)
		return f.spoke.Update(f.ctx, u)
	})
	f.g.Expect(err).NotTo(gomega.HaveOccurred())
}

// deleteApp deletes an app on the spoke.
func (f *fixture) deleteApp(name string) {
	f.t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(argoapp.ApplicationGVK)
	u.SetNamespace(f.appNS)
	u.SetName(name)
	f.g.Expect(client.IgnoreNotFound(f.spoke.Delete(f.ctx, u))).To(gomega.Succeed())
}

// events returns the Events of the cluster namespace on the hub with the given reason.
func (f *fixture) events(reason string) []corev1.Event {
	f.t.Helper()
	list := &corev1.EventList{}
	f.g.Expect(f.hub.List(f.ctx, list, client.InNamespace(f.cluster))).To(gomega.Succeed())
	var out []corev1.Event
	for _, e := range list.Items {
		if e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

// status is an Application status as Argo CD writes it.
type status struct {
	sync, health, revision string
	revisions              []string
	phase, opMessage       string
	// autoSync: the operation was started by the app's automated sync policy; otherwise
	// by no one the status says.
	autoSync     bool
	conditions   [][2]string // type, message
	resources    int
	reconciledAt time.Time
}

// object returns the status as the content of an Application.
func (s status) object() map[string]any {
	sync := map[string]any{"status": s.sync}
	if s.revision != "" {
		sync["revision"] = s.revision
	}
	if len(s.revisions) > 0 {
		var revisions []any
		for _, r := range s.revisions {
			revisions = append(revisions, r)
		}
		sync["revisions"] = revisions
	}
	out := map[string]any{"sync": sync, "health": map[string]any{"status": s.health}}
	if s.phase != "" {
		operation := map[string]any{"sync": map[string]any{"revision": s.revision}}
		if s.autoSync {
			operation["initiatedBy"] = map[string]any{"automated": true}
		}
		out["operationState"] = map[string]any{
			"operation": operation,
			"phase":     s.phase, "startedAt": "2026-01-01T00:00:00Z", "message": s.opMessage,
		}
	}
	var conditions []any
	for _, c := range s.conditions {
		conditions = append(conditions, map[string]any{"type": c[0], "message": c[1], "lastTransitionTime": "2026-01-01T00:00:00Z"})
	}
	if conditions != nil {
		out["conditions"] = conditions
	}
	var resources []any
	for i := range s.resources {
		resources = append(resources, map[string]any{
			"group": "apps", "version": "v1", "kind": "Deployment", "namespace": "guestbook",
			"name": fmt.Sprintf("web-%03d", i), "status": s.sync, "health": map[string]any{"status": s.health},
		})
	}
	if resources != nil {
		out["resources"] = resources
	}
	if !s.reconciledAt.IsZero() {
		out["reconciledAt"] = s.reconciledAt.UTC().Format(time.RFC3339)
	}
	return out
}

// hostOf returns the host:port of a rest config.
func hostOf(t *testing.T, cfg *rest.Config) string {
	t.Helper()
	host := strings.TrimPrefix(strings.TrimPrefix(cfg.Host, "https://"), "http://")
	return strings.TrimSuffix(host, "/")
}

// tcpProxy forwards TCP connections to an apiserver until cut: then it drops every
// connection, and refuses new ones until restored.
type tcpProxy struct {
	target   string
	listener net.Listener

	mu    sync.Mutex
	up    bool
	conns map[net.Conn]struct{}
}

// startProxy starts a proxy to target on a loopback port, stopped when the test ends.
func startProxy(t *testing.T, target string) *tcpProxy {
	t.Helper()
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	p := &tcpProxy{target: target, listener: listener, up: true, conns: map[net.Conn]struct{}{}}
	go p.serve()
	t.Cleanup(func() {
		_ = listener.Close()
		p.cut()
	})
	return p
}

// addr returns the proxy's address.
func (p *tcpProxy) addr() string { return p.listener.Addr().String() }

// serve accepts connections until the listener closes.
func (p *tcpProxy) serve() {
	for {
		conn, err := p.listener.Accept()
		if err != nil {
			return
		}
		go p.forward(conn)
	}
}

// forward pipes a connection to the target, or drops it while the proxy is cut.
func (p *tcpProxy) forward(conn net.Conn) {
	p.mu.Lock()
	if !p.up {
		p.mu.Unlock()
		_ = conn.Close()
		return
	}
	p.mu.Unlock()
	upstream, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		_ = conn.Close()
		return
	}
	p.mu.Lock()
	if !p.up {
		p.mu.Unlock()
		_ = conn.Close()
		_ = upstream.Close()
		return
	}
	p.conns[conn], p.conns[upstream] = struct{}{}, struct{}{}
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go pipe(upstream, conn)
	go pipe(conn, upstream)
	<-done
	_ = conn.Close()
	_ = upstream.Close()
	p.mu.Lock()
	delete(p.conns, conn)
	delete(p.conns, upstream)
	p.mu.Unlock()
}

// cut drops every connection and refuses new ones.
func (p *tcpProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.up = false
	for c := range p.conns {
		_ = c.Close()
	}
}

// restore lets connections through again.
func (p *tcpProxy) restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.up = true
}

// startBareSpoke starts a third apiserver without any CRD, stopped when the test ends,
// and returns its config and the Application CRD manifest to install later.
func startBareSpoke(t *testing.T) (*rest.Config, string) {
	t.Helper()
	cfg := testenv.StartBare(t)
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	modules, err := fleet.ResolveModuleDirs(root)
	if err != nil {
		t.Fatal(err)
	}
	return cfg, filepath.Join(modules.ArgoCD, "manifests/crds/application-crd.yaml")
}
