package testenv

// The hub fixture of the envtest suites (the hub controllers' own, test/abuse): a test's
// view of a hub on the shared apiserver, what the suites play in place of the components
// envtest does not run (the ApplicationSet controller's Applications, the work agent's
// status), and what they read back (works, conditions, Events).

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	addonv1beta1 "open-cluster-management.io/api/addon/v1beta1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	workv1 "open-cluster-management.io/api/work/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	statusv1alpha1 "github.com/ocm-gitops/argocd-pull-addon/pkg/apis/argocdpull/v1alpha1"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/hubcache"
)

// Timeouts of the suites' assertions.
const (
	EventuallyTimeout   = 20 * time.Second
	ConsistentlyTimeout = 2 * time.Second
	PollInterval        = 50 * time.Millisecond
)

// NewGomega returns assertions for t with the suites' timeouts.
func NewGomega(t testing.TB) *gomega.WithT {
	g := gomega.NewWithT(t)
	g.SetDefaultEventuallyTimeout(EventuallyTimeout)
	g.SetDefaultEventuallyPollingInterval(PollInterval)
	g.SetDefaultConsistentlyDuration(ConsistentlyTimeout)
	g.SetDefaultConsistentlyPollingInterval(PollInterval)
	return g
}

// RandomID returns 6 random hex characters, to make a test's names unique on a shared
// apiserver.
func RandomID() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Begin starts a test on env: it creates the namespaces, unless they exist, and returns
// a context that ends with the test and assertions with the suites' timeouts.
func Begin(t *testing.T, env *Env, namespaces ...string) (context.Context, *gomega.WithT) {
	t.Helper()
	ctx, g := t.Context(), NewGomega(t)
	for _, ns := range namespaces {
		g.Expect(CreateNamespace(ctx, env.Client, ns)).To(gomega.Succeed())
	}
	return ctx, g
}

// CreateNamespace creates the namespace name, unless it exists.
func CreateNamespace(ctx context.Context, c client.Client, name string) error {
	err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", name, err)
	}
	return nil
}

// StartManager starts, until the test ends, a controller-runtime manager built as
// pkg/hub.Run builds it: the hub's scheme, its cache scoped to scope, and a client that
// reads through it. register sets up the controllers under test with that client, which
// writes counts. Use it for a parallel test: each manager's controller names may repeat.
func StartManager(t *testing.T, env *Env, scope hubcache.Scope, writes *WriteLog, register func(mgr ctrl.Manager, c client.Client) error) {
	t.Helper()
	scheme, err := hubcache.NewScheme()
	if err != nil {
		t.Fatalf("hub scheme: %v", err)
	}
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:                 scheme,
		Cache:                  hubcache.Options(scope),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatalf("create the manager: %v", err)
	}
	c, err := hubcache.NewClient(mgr)
	if err != nil {
		t.Fatalf("create the cached client: %v", err)
	}
	if err := register(mgr, writes.Wrap(c)); err != nil {
		t.Fatalf("set up the controllers: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
}

// Hub is a test's view of the hub: an uncached administrator client, the namespace of the
// test's hub Applications, and assertions that fail the test.
type Hub struct {
	T   *testing.T
	G   *gomega.WithT
	Ctx context.Context
	// C is the administrator's client, uncached.
	C client.Client
	// Namespace holds the test's hub Applications.
	Namespace string
}

// NewHub returns the view of env's hub for t, whose Applications live in namespace.
func NewHub(t *testing.T, env *Env, namespace string) *Hub {
	return &Hub{T: t, G: NewGomega(t), Ctx: context.Background(), C: env.Client, Namespace: namespace}
}

// Sub returns the view for a subtest of its test: the same names, failing the subtest.
func (h *Hub) Sub(t *testing.T) *Hub {
	sub := *h
	sub.T, sub.G = t, NewGomega(t)
	return &sub
}

// Create creates obj.
func (h *Hub) Create(obj client.Object) {
	h.T.Helper()
	h.G.Expect(h.C.Create(h.Ctx, obj)).To(gomega.Succeed())
}

// CreateNamespace creates the namespace name, unless it exists.
func (h *Hub) CreateNamespace(name string) {
	h.T.Helper()
	h.G.Expect(CreateNamespace(h.Ctx, h.C, name)).To(gomega.Succeed())
}

// CreateCluster creates the ManagedCluster name, accepted by the hub, with labels, and
// its namespace.
func (h *Hub) CreateCluster(name string, labels map[string]string) {
	h.T.Helper()
	h.Create(&clusterv1.ManagedCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       clusterv1.ManagedClusterSpec{HubAcceptsClient: true},
	})
	h.CreateNamespace(name)
}

// EnableAddon enables the addon addonName on cluster: it creates its
// ManagedClusterAddOn, which the agent reports on and which owns the agent's slices.
func (h *Hub) EnableAddon(cluster, addonName string) *addonv1beta1.ManagedClusterAddOn {
	h.T.Helper()
	addon := &addonv1beta1.ManagedClusterAddOn{ObjectMeta: metav1.ObjectMeta{Name: addonName, Namespace: cluster}}
	h.Create(addon)
	return addon
}

// DisableAddon disables the addon addonName on cluster: it deletes its
// ManagedClusterAddOn.
func (h *Hub) DisableAddon(cluster, addonName string) {
	h.T.Helper()
	h.G.Expect(h.C.Delete(h.Ctx, &addonv1beta1.ManagedClusterAddOn{ObjectMeta: metav1.ObjectMeta{Name: addonName, Namespace: cluster}})).
		To(gomega.Succeed())
}

// CreateFedWork creates the work of app in cluster, as the propagation controller of the
// addon addonName writes it (PropagatedWork), and plays the work agent: the work's
// feedback holds values, those of the spoke Application argocd/<app's name>.
func (h *Hub) CreateFedWork(app *unstructured.Unstructured, cluster, addonName string, values map[string]string) *workv1.ManifestWork {
	h.T.Helper()
	work := PropagatedWork(app, cluster, addonName)
	h.Create(work)
	work.Status.ResourceStatus.Manifests = []workv1.ManifestCondition{ApplicationFeedback("argocd", app.GetName(), values)}
	h.G.Expect(h.C.Status().Update(h.Ctx, work)).To(gomega.Succeed())
	return work
}

// Application returns a pulled Application of the test's namespace that targets cluster,
// the way the documented ApplicationSet template writes it.
func (h *Hub) Application(name, cluster string) *unstructured.Unstructured {
	return PulledApplication(h.Namespace, name, cluster)
}

// PulledApplication returns the pulled hub Application namespace/name that targets
// cluster, the way the documented ApplicationSet template writes it.
func PulledApplication(namespace, name, cluster string) *unstructured.Unstructured {
	app := argoapp.NewApplication()
	app.SetNamespace(namespace)
	app.SetName(name)
	app.SetLabels(map[string]string{argoapp.LabelPullToOCMManagedCluster: "true"})
	app.SetAnnotations(map[string]string{
		argoapp.AnnotationOCMManagedCluster: cluster,
		argoapp.AnnotationSkipReconcile:     "true",
	})
	app.Object["spec"] = map[string]any{
		"project":     "default",
		"source":      map[string]any{"repoURL": "https://git.example.com/apps.git", "path": "guestbook", "targetRevision": "main"},
		"destination": map[string]any{"server": argoapp.InClusterServer, "namespace": "guestbook"},
	}
	return app
}

// AppProject is a hub AppProject in argoCDNamespace that permits every source repository
// and destination, and the Applications of sourceNamespaces (spec.sourceNamespaces): Argo
// CD's rules for an Application outside its namespace, which the hub applies before it
// pulls one, the default project included.
func AppProject(argoCDNamespace, name string, sourceNamespaces ...string) *unstructured.Unstructured {
	project := argoapp.NewAppProject()
	project.SetNamespace(argoCDNamespace)
	project.SetName(name)
	namespaces := make([]any, len(sourceNamespaces))
	for i, ns := range sourceNamespaces {
		namespaces[i] = ns
	}
	project.Object["spec"] = map[string]any{
		"sourceRepos":      []any{"*"},
		"destinations":     []any{map[string]any{"server": "*", "name": "*", "namespace": "*"}},
		"sourceNamespaces": namespaces,
	}
	return project
}

// PropagatedWork returns the work of app in cluster, without its manifests: named,
// labelled and annotated as the propagation controller of the addon addonName writes it,
// the ApplicationSet markers included when an ApplicationSet controls app.
func PropagatedWork(app *unstructured.Unstructured, cluster, addonName string) *workv1.ManifestWork {
	work := &workv1.ManifestWork{ObjectMeta: metav1.ObjectMeta{
		Name: argoapp.ManifestWorkName(app.GetName(), app.GetUID()), Namespace: cluster,
		Labels: map[string]string{argoapp.LabelPullToOCMManagedCluster: "true", argoapp.LabelAddon: addonName},
		Annotations: map[string]string{
			argoapp.AnnotationHubApplicationNamespace: app.GetNamespace(),
			argoapp.AnnotationHubApplicationName:      app.GetName(),
		},
	}}
	if appSet, ok := argoapp.OwningApplicationSet(app.GetOwnerReferences()); ok {
		work.Labels[argoapp.LabelApplicationSet] = "true"
		work.Labels[argoapp.LabelApplicationSetHash] = argoapp.ApplicationSetHash(app.GetNamespace(), appSet)
		work.Annotations[argoapp.AnnotationHostingApplicationSet] = argoapp.ApplicationSetKey(app.GetNamespace(), appSet)
	}
	return work
}

// GetApp reads a hub Application of the test's namespace; nil when it does not exist.
func (h *Hub) GetApp(name string) *unstructured.Unstructured {
	h.T.Helper()
	app := argoapp.NewApplication()
	err := h.C.Get(h.Ctx, types.NamespacedName{Namespace: h.Namespace, Name: name}, app)
	if apierrors.IsNotFound(err) {
		return nil
	}
	h.G.Expect(err).NotTo(gomega.HaveOccurred())
	return app
}

// UpdateApp reads a hub Application, changes it and writes it back, retrying on
// conflict.
func (h *Hub) UpdateApp(name string, change func(app *unstructured.Unstructured)) {
	h.T.Helper()
	h.G.Eventually(func() error {
		app := h.GetApp(name)
		if app == nil {
			return fmt.Errorf("application %s is gone", name)
		}
		change(app)
		return h.C.Update(h.Ctx, app)
	}).Should(gomega.Succeed())
}

// WorksOf returns the works, in every namespace, that point back to a hub Application of
// the test's namespace.
func (h *Hub) WorksOf(name string) []workv1.ManifestWork {
	h.T.Helper()
	works := &workv1.ManifestWorkList{}
	h.G.Expect(h.C.List(h.Ctx, works)).To(gomega.Succeed())
	return slices.DeleteFunc(works.Items, func(w workv1.ManifestWork) bool {
		return w.Annotations[argoapp.AnnotationHubApplicationNamespace] != h.Namespace ||
			w.Annotations[argoapp.AnnotationHubApplicationName] != name
	})
}

// WorkKeys returns "<namespace>/<name>" of the works of a hub Application, sorted.
func (h *Hub) WorkKeys(name string) []string {
	var keys []string
	for _, w := range h.WorksOf(name) {
		keys = append(keys, w.Namespace+"/"+w.Name)
	}
	slices.Sort(keys)
	return keys
}

// WorkKey returns the key of the work of app in cluster.
func WorkKey(app *unstructured.Unstructured, cluster string) string {
	return cluster + "/" + argoapp.ManifestWorkName(app.GetName(), app.GetUID())
}

// WaitForWork waits until the only work of a hub Application is its work in cluster,
// and returns it.
func (h *Hub) WaitForWork(name, cluster string) *workv1.ManifestWork {
	h.T.Helper()
	app := h.GetApp(name)
	h.G.Expect(app).NotTo(gomega.BeNil())
	want := WorkKey(app, cluster)
	h.G.Eventually(func() []string { return h.WorkKeys(name) }).Should(gomega.Equal([]string{want}))
	return &h.WorksOf(name)[0]
}

// Payload returns the Application that a work carries.
func Payload(t testing.TB, work *workv1.ManifestWork) *unstructured.Unstructured {
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

// Condition returns the message of a condition of a hub Application; "" without it.
func (h *Hub) Condition(name, conditionType string) string {
	h.T.Helper()
	app := h.GetApp(name)
	if app == nil {
		return ""
	}
	message, _, err := argoapp.FindCondition(app, conditionType)
	h.G.Expect(err).NotTo(gomega.HaveOccurred())
	return message
}

// Event is what the suites read of an Event.
type Event struct {
	Type, Reason, Message string
}

// EventsOn returns the Events recorded on the object kind namespace/name; of any kind
// when kind is empty.
func (h *Hub) EventsOn(kind, namespace, name string) []Event {
	h.T.Helper()
	list := &corev1.EventList{}
	h.G.Expect(h.C.List(h.Ctx, list, client.InNamespace(namespace))).To(gomega.Succeed())
	var out []Event
	for _, e := range list.Items {
		if (kind == "" || e.InvolvedObject.Kind == kind) && e.InvolvedObject.Name == name {
			out = append(out, Event{Type: e.Type, Reason: e.Reason, Message: e.Message})
		}
	}
	return out
}

// EventReasons returns the reasons of the Events of eventType recorded on the object
// namespace/name.
func (h *Hub) EventReasons(namespace, name, eventType string) []string {
	h.T.Helper()
	var reasons []string
	for _, e := range h.EventsOn("", namespace, name) {
		if e.Type == eventType {
			reasons = append(reasons, e.Reason)
		}
	}
	return reasons
}

// ExpectEvent waits for an Event of eventType and reason on an object whose message
// holds every one of words.
func (h *Hub) ExpectEvent(kind, namespace, name, eventType, reason string, words ...string) {
	h.T.Helper()
	h.G.Eventually(func() []Event { return h.EventsOn(kind, namespace, name) }).Should(gomega.ContainElement(gomega.SatisfyAll(
		gomega.HaveField("Type", eventType), gomega.HaveField("Reason", reason),
		gomega.HaveField("Message", gomega.SatisfyAll(ContainsAll(words)...)),
	)), "%s Event %s on %s %s/%s naming %q", eventType, reason, kind, namespace, name, words)
}

// ContainsAll matches a message that is not empty and holds every one of words.
func ContainsAll(words []string) []gomega.OmegaMatcher {
	matchers := []gomega.OmegaMatcher{gomega.Not(gomega.BeEmpty())}
	for _, w := range words {
		matchers = append(matchers, gomega.ContainSubstring(w))
	}
	return matchers
}

// ExpectNoPropagationError waits until a hub Application reports no propagation error.
func (h *Hub) ExpectNoPropagationError(name string) {
	h.T.Helper()
	h.G.Eventually(func() string { return h.Condition(name, argoapp.ConditionOCMPropagationError) }).Should(gomega.BeEmpty())
}

// ExpectNoWorks waits until a hub Application has no work.
func (h *Hub) ExpectNoWorks(name string) {
	h.T.Helper()
	h.G.Eventually(func() []string { return h.WorkKeys(name) }).Should(gomega.BeEmpty())
}

// ExpectNoWorksStay checks that a hub Application has no work, for the suites'
// Consistently duration.
func (h *Hub) ExpectNoWorksStay(name string) {
	h.T.Helper()
	h.G.Consistently(func() []string { return h.WorkKeys(name) }).Should(gomega.BeEmpty())
}

// ExpectPropagationError waits for a hub Application to report reason: a Warning Event
// with the reason whose message holds every one of words, and the OCMPropagationError
// condition whose message starts with the reason and holds them too.
func (h *Hub) ExpectPropagationError(name, reason string, words ...string) {
	h.T.Helper()
	h.G.Eventually(func() string { return h.Condition(name, argoapp.ConditionOCMPropagationError) }).Should(
		gomega.SatisfyAll(append(ContainsAll(words), gomega.HavePrefix(reason+": "))...),
		"condition %s of application %s", argoapp.ConditionOCMPropagationError, name)
	h.ExpectEvent(argoapp.KindApplication, h.Namespace, name, corev1.EventTypeWarning, reason, words...)
}

// The work agent.

// SetApplied sets the Applied condition of work for its current generation, as the work
// agent does once it applied the work; appliedAt, when set, is its transition time.
func SetApplied(work *workv1.ManifestWork, appliedAt time.Time) {
	applied := metav1.Condition{
		Type: workv1.WorkApplied, Status: metav1.ConditionTrue, Reason: "AppliedManifestWorkComplete",
		Message: "Apply manifest work complete", ObservedGeneration: work.Generation,
	}
	if !appliedAt.IsZero() {
		applied.LastTransitionTime = metav1.NewTime(appliedAt)
	}
	meta.SetStatusCondition(&work.Status.Conditions, applied)
}

// MarkApplied plays the work agent: it sets the work's Applied condition for its current
// generation.
func (h *Hub) MarkApplied(key types.NamespacedName) {
	h.T.Helper()
	h.UpdateWorkStatus(key, func(work *workv1.ManifestWork) { SetApplied(work, time.Time{}) })
}

// UpdateWorkStatus plays the work agent: it reads the work key, changes it with change
// and writes its status back, retrying on conflict. It returns the work written.
func (h *Hub) UpdateWorkStatus(key types.NamespacedName, change func(work *workv1.ManifestWork)) *workv1.ManifestWork {
	h.T.Helper()
	return update(h, key, func() *workv1.ManifestWork { return &workv1.ManifestWork{} }, change, h.writeStatus)
}

// UpdateAddonStatus plays the addon's agent and the addon framework: it reads the
// ManagedClusterAddOn key, changes it with change and writes its status back, retrying
// on conflict. It returns the ManagedClusterAddOn written.
func (h *Hub) UpdateAddonStatus(key types.NamespacedName, change func(addon *addonv1beta1.ManagedClusterAddOn)) *addonv1beta1.ManagedClusterAddOn {
	h.T.Helper()
	return update(h, key, func() *addonv1beta1.ManagedClusterAddOn { return &addonv1beta1.ManagedClusterAddOn{} }, change, h.writeStatus)
}

// UpdateSlice plays the spoke agent: it reads the ApplicationStatusSlice key, changes it
// with change and writes it back, retrying on conflict.
func (h *Hub) UpdateSlice(key types.NamespacedName, change func(slice *statusv1alpha1.ApplicationStatusSlice)) {
	h.T.Helper()
	update(h, key, func() *statusv1alpha1.ApplicationStatusSlice { return &statusv1alpha1.ApplicationStatusSlice{} }, change, h.write)
}

// UpdateCluster reads the ManagedCluster name, changes it with change and writes it back,
// retrying on conflict.
func (h *Hub) UpdateCluster(name string, change func(cluster *clusterv1.ManagedCluster)) {
	h.T.Helper()
	update(h, types.NamespacedName{Name: name}, func() *clusterv1.ManagedCluster { return &clusterv1.ManagedCluster{} }, change, h.write)
}

// update reads the object key into a new object, changes it and writes it with write
// (the object or its status), until that succeeds; it returns the object written.
func update[T client.Object](h *Hub, key types.NamespacedName, newObject func() T, change func(T), write func(client.Object) error) T {
	h.T.Helper()
	var obj T
	h.G.Eventually(func() error {
		obj = newObject()
		if err := h.C.Get(h.Ctx, key, obj); err != nil {
			return err
		}
		change(obj)
		return write(obj)
	}).Should(gomega.Succeed())
	return obj
}

func (h *Hub) write(obj client.Object) error { return h.C.Update(h.Ctx, obj) }

func (h *Hub) writeStatus(obj client.Object) error { return h.C.Status().Update(h.Ctx, obj) }

// Feedback is what the work agent reports of the Application a work applied.
type Feedback struct {
	// AppliedAt is the transition time of the Applied condition; zero means now.
	AppliedAt time.Time
	// Namespace and Name are those of the Application on the managed cluster.
	Namespace, Name string
	// Values are the status feedback values by name (argoapp.Feedback*).
	Values map[string]string
}

// SetFeedback plays the work agent: the work is applied, and its Application reports
// feedback.
func (h *Hub) SetFeedback(key types.NamespacedName, feedback Feedback) {
	h.T.Helper()
	h.UpdateWorkStatus(key, func(work *workv1.ManifestWork) {
		SetApplied(work, feedback.AppliedAt)
		work.Status.ResourceStatus.Manifests = []workv1.ManifestCondition{ApplicationFeedback(feedback.Namespace, feedback.Name, feedback.Values)}
	})
}

// ApplicationFeedback is the work agent's status of the Application namespace/name that
// a work applied: values are its status feedback values by name (argoapp.Feedback*).
func ApplicationFeedback(namespace, name string, values map[string]string) workv1.ManifestCondition {
	var feedback []workv1.FeedbackValue
	for _, name := range slices.Sorted(maps.Keys(values)) {
		feedback = append(feedback, workv1.FeedbackValue{Name: name, Value: workv1.FieldValue{Type: workv1.String, String: ptr.To(values[name])}})
	}
	return workv1.ManifestCondition{
		ResourceMeta: workv1.ManifestResourceMeta{
			Group: argoapp.Group, Version: argoapp.ApplicationGVK.Version, Kind: argoapp.KindApplication,
			Resource: argoapp.ResourceApplications, Namespace: namespace, Name: name,
		},
		StatusFeedbacks: workv1.StatusFeedbackResult{Values: feedback},
		Conditions:      []metav1.Condition{},
	}
}

// SetAnnotation sets one annotation of obj.
func SetAnnotation(obj metav1.Object, key, value string) {
	annotations := obj.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[key] = value
	obj.SetAnnotations(annotations)
}
