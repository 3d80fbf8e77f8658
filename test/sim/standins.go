package sim

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	addonv1beta1 "open-cluster-management.io/api/addon/v1beta1"
	workv1 "open-cluster-management.io/api/work/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	statusv1alpha1 "github.com/ocm-gitops/argocd-pull-addon/pkg/apis/argocdpull/v1alpha1"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/clusterreport"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/observed"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/spoke"
)

// SyncRevision is the revision every simulated Argo CD reports as synced.
const SyncRevision = "3f5e1c2a9b8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f"

// DefaultResourcesPerApp is how many resources each simulated Application deploys unless
// StandInOptions say otherwise: the size of an app (issue 12).
const DefaultResourcesPerApp = 20

// AppResources are the n managed resources of a simulated Application, as its agent
// reports them: a Deployment and a Service, Healthy, and ConfigMaps (no health) up to n.
func AppResources(n int) []argoapp.ResourceStatus {
	healthy := argoapp.HealthStatus{Status: "Healthy"}
	out := []argoapp.ResourceStatus{
		{Group: "apps", Version: "v1", Kind: "Deployment", Name: "web", Status: "Synced", Health: healthy},
		{Version: "v1", Kind: "Service", Name: "web", Status: "Synced", Health: healthy},
	}
	for i := 0; len(out) < n; i++ {
		out = append(out, argoapp.ResourceStatus{Version: "v1", Kind: "ConfigMap", Name: fmt.Sprintf("web-config-%02d", i), Status: "Synced"})
	}
	return out[:n]
}

// AppTree is the resource tree Argo CD keeps of a simulated Application whose resources
// are in namespace: its managed resources, and the Deployment's ReplicaSet and Pod with
// their image.
func AppTree(namespace string, resources []argoapp.ResourceStatus) clusterreport.Tree {
	healthy := &statusv1alpha1.Health{Status: "Healthy"}
	var tree clusterreport.Tree
	for _, r := range resources {
		node := statusv1alpha1.ResourceNode{Group: r.Group, Version: r.Version, Kind: r.Kind, Namespace: r.Namespace, Name: r.Name}
		if r.Health.Status != "" {
			node.Health = healthy
		}
		tree.Nodes = append(tree.Nodes, node)
	}
	image := []string{"registry.example/fleet/web:1.2.3"}
	tree.Nodes = append(tree.Nodes,
		statusv1alpha1.ResourceNode{Group: "apps", Version: "v1", Kind: "ReplicaSet", Namespace: namespace, Name: "web-5d9c7b", Health: healthy, Images: image,
			ParentRefs: []statusv1alpha1.ResourceRef{{Group: "apps", Kind: "Deployment", Namespace: namespace, Name: "web"}}},
		statusv1alpha1.ResourceNode{Version: "v1", Kind: "Pod", Namespace: namespace, Name: "web-5d9c7b-x2x4q", Health: healthy, Images: image,
			ParentRefs: []statusv1alpha1.ResourceRef{{Group: "apps", Kind: "ReplicaSet", Namespace: namespace, Name: "web-5d9c7b"}}},
	)
	return tree
}

// StandInOptions size the stand-ins.
type StandInOptions struct {
	// Workers is the concurrency of each stand-in controller.
	Workers int
	// ResourcesPerApp is how many managed resources each agent reports of each app
	// (AppResources); 0 means DefaultResourcesPerApp.
	ResourcesPerApp int
	// Rollout is what the work agent writes of each work, step by step (FleetRollout);
	// nil means AtOnce.
	Rollout []WorkStep
}

// StandIns are the work agent and the addon agents of every simulated cluster, as
// controllers of one in-process controller-runtime manager.
type StandIns struct {
	hub     *Hub
	mgr     ctrl.Manager
	publish chan event.TypedGenericEvent[string]

	mu sync.Mutex
	// injected holds, per cluster and hub Application name, Argo CD conditions that the
	// cluster's agent reports on top of a synced and healthy state.
	injected map[string]map[string][]argoapp.Condition
	// published is the last report each cluster's agent applied, by cluster.
	published map[string][]metav1.Condition
	// slices are the status slices each cluster's agent last applied, by cluster.
	slices map[string][]clusterreport.Slice
	// resources are what each agent reports of every app.
	resources []argoapp.ResourceStatus
	// rollout is what the work agent writes of each work; progress is where it is in
	// each work's, and stepAt when it last wrote a new state of each work's Application
	// (the agents' observedAt of it), by the work's UID.
	rollout  []WorkStep
	progress map[types.UID]workProgress
	stepAt   map[types.UID]time.Time
	// holding is since when each cluster's agent holds its slices back for the passing
	// states of its apps, and reported when it last applied its report.
	holding  argoapp.SettleHolds[string]
	reported map[string]time.Time

	// workAgent and agents write to the hub, each through its own counter.
	workAgent, agents client.Client
	// WorkAgent and Agents count the requests of the work agent and of the agents (their
	// reports and status slices), to tell their writes from the manager's in the
	// apiserver's counts.
	WorkAgent, Agents *RequestCounter
}

// StartStandIns starts the stand-ins; they stop with ctx.
func (h *Hub) StartStandIns(ctx context.Context, opts StandInOptions) (*StandIns, error) {
	workers := opts.Workers
	if opts.ResourcesPerApp == 0 {
		opts.ResourcesPerApp = DefaultResourcesPerApp
	}
	mgr, err := ctrl.NewManager(h.Config, ctrl.Options{
		Scheme:                 h.Env.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return nil, err
	}
	s := &StandIns{
		hub: h, mgr: mgr, publish: make(chan event.TypedGenericEvent[string], 1024),
		injected: map[string]map[string][]argoapp.Condition{}, published: map[string][]metav1.Condition{},
		slices: map[string][]clusterreport.Slice{}, resources: AppResources(opts.ResourcesPerApp),
		rollout: opts.Rollout, progress: map[types.UID]workProgress{}, stepAt: map[types.UID]time.Time{},
		reported: map[string]time.Time{}, WorkAgent: &RequestCounter{}, Agents: &RequestCounter{},
	}
	if s.rollout == nil {
		s.rollout = AtOnce
	}
	if s.workAgent, err = h.countedClient(s.WorkAgent); err != nil {
		return nil, err
	}
	if s.agents, err = h.countedClient(s.Agents); err != nil {
		return nil, err
	}
	if err := ctrl.NewControllerManagedBy(mgr).Named("sim-work-agent").
		For(&workv1.ManifestWork{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		Complete(reconcile.Func(s.reconcileWork)); err != nil {
		return nil, err
	}
	// The agents: one queue item per cluster, from its works and from Inject.
	agents, err := controller.NewTyped[string]("sim-agents", mgr, controller.TypedOptions[string]{
		MaxConcurrentReconciles: workers, Reconciler: reconcile.TypedFunc[string](s.reconcileAgent),
	})
	if err != nil {
		return nil, err
	}
	// Like the real agent, each cluster's agent publishes PublishDelay after the first
	// change it has not published: the delaying queue keeps the earliest time of a key.
	delay := spoke.DefaultOptions().PublishDelay
	workToCluster := handler.TypedFuncs[*workv1.ManifestWork, string]{
		CreateFunc: func(_ context.Context, e event.TypedCreateEvent[*workv1.ManifestWork], q workqueue.TypedRateLimitingInterface[string]) {
			q.AddAfter(e.Object.Namespace, delay)
		},
		UpdateFunc: func(_ context.Context, e event.TypedUpdateEvent[*workv1.ManifestWork], q workqueue.TypedRateLimitingInterface[string]) {
			q.AddAfter(e.ObjectNew.Namespace, delay)
		},
		DeleteFunc: func(_ context.Context, e event.TypedDeleteEvent[*workv1.ManifestWork], q workqueue.TypedRateLimitingInterface[string]) {
			q.AddAfter(e.Object.Namespace, delay)
		},
	}
	if err := agents.Watch(source.TypedKind(mgr.GetCache(), &workv1.ManifestWork{}, workToCluster)); err != nil {
		return nil, err
	}
	if err := agents.Watch(source.TypedChannel(s.publish, handler.TypedFuncs[string, string]{
		GenericFunc: func(_ context.Context, e event.TypedGenericEvent[string], q workqueue.TypedRateLimitingInterface[string]) {
			q.AddAfter(e.Object, delay)
		},
	})); err != nil {
		return nil, err
	}
	go func() {
		if err := mgr.Start(ctx); err != nil {
			ctrl.Log.Error(err, "the stand-ins stopped")
		}
	}()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		return nil, fmt.Errorf("the stand-ins' cache did not sync")
	}
	return s, nil
}

// Inject makes the agent of cluster report conditions for the hub Application
// appName: a change on the cluster, which its agent publishes PublishDelay later.
func (s *StandIns) Inject(cluster, appName string, conditions ...argoapp.Condition) {
	s.mu.Lock()
	if s.injected[cluster] == nil {
		s.injected[cluster] = map[string][]argoapp.Condition{}
	}
	s.injected[cluster][appName] = conditions
	s.mu.Unlock()
	s.publish <- event.TypedGenericEvent[string]{Object: cluster}
}

// reconcileAgent plays the addon agent of one cluster: it reports the cluster's pulled
// Applications, as the work agent applied them, in the state their work's status
// feedback shows, with their resources, their resource tree and any injected conditions,
// as pkg/spoke does on a hub that serves the status slices: the slices, each applied when
// it changed, then the report on the ManagedClusterAddOn (its summary of the apps),
// applied when it changed. Like pkg/spoke, it holds the slices back while only the
// passing states of a rollout change them, and writes a change of the summary alone at
// most once per summaryInterval.
func (s *StandIns) reconcileAgent(ctx context.Context, cluster string) (reconcile.Result, error) {
	works := &workv1.ManifestWorkList{}
	if err := s.mgr.GetClient().List(ctx, works, client.InNamespace(cluster)); err != nil {
		return reconcile.Result{}, err
	}
	// Under the lock: Inject writes into the cluster's map, and the work agent stepAt.
	s.mu.Lock()
	injected := s.injected[cluster]
	var report clusterreport.Report
	for i := range works.Items {
		work := &works.Items[i]
		observedAt, ok := s.stepAt[work.UID]
		if !ok {
			observedAt = work.CreationTimestamp.Time
		}
		if app, ok := reportedApp(work, injected, s.resources, observedAt); ok {
			report.Apps = append(report.Apps, app)
		}
	}
	s.mu.Unlock()
	report.Diagnostics = appDiagnostics(report.Apps)
	if len(report.Apps) == 0 && s.lastPublished(cluster) == nil {
		return reconcile.Result{}, nil
	}
	// The slices first, then the report that only sums the apps up, as the agent of a
	// hub that serves the slices does.
	addon := &addonv1beta1.ManagedClusterAddOn{}
	if err := s.mgr.GetClient().Get(ctx, types.NamespacedName{Namespace: cluster, Name: AddonName}, addon); err != nil {
		return reconcile.Result{}, err
	}
	held, err := s.publishSlices(ctx, addon, report.Apps)
	if err != nil {
		return reconcile.Result{}, err
	}
	report.AppsInSlices = true
	summaryHeld, err := s.publishReport(ctx, cluster, report)
	if err != nil {
		return reconcile.Result{}, err
	}
	wait := min(held, summaryHeld)
	if wait <= 0 {
		wait = max(held, summaryHeld)
	}
	return reconcile.Result{RequeueAfter: max(wait, 0)}, nil
}

// appDiagnostics are the agent's diagnostics that count its apps, as pkg/spoke's do (the
// application-controller's liveness and RBAC): they change, and are written at once, as
// apps arrive and as Argo CD first reconciles each.
func appDiagnostics(apps []clusterreport.App) []clusterreport.Diagnostic {
	reconciled := 0
	for _, app := range apps {
		if app.Sync.Status != "" {
			reconciled++
		}
	}
	alive := clusterreport.Diagnostic{Type: clusterreport.ConditionApplicationController, Status: string(metav1.ConditionUnknown),
		Reason: clusterreport.ReasonNoApplications, Message: "No Application has been reconciled yet."}
	if reconciled > 0 {
		alive.Status, alive.Reason = string(metav1.ConditionTrue), clusterreport.ReasonReconciling
		alive.Message = fmt.Sprintf("%d of %d Applications were reconciled.", reconciled, len(apps))
	}
	return []clusterreport.Diagnostic{alive, {
		Type: clusterreport.ConditionApplicationControllerRBAC, Status: string(metav1.ConditionTrue),
		Reason: clusterreport.ReasonNoForbidden, Message: fmt.Sprintf("No RBAC error in the %d Applications.", len(apps)),
	}}
}

// summaryInterval is how often the agent writes a change of its summary alone: pkg/spoke's.
const summaryInterval = 5 * time.Second

// publishReport applies the report of cluster when it differs from the last applied; a
// change of the summary alone waits until summaryInterval after the last write. It
// returns how much longer the report waits, zero when it is written or the same.
func (s *StandIns) publishReport(ctx context.Context, cluster string, report clusterreport.Report) (time.Duration, error) {
	addon := &addonv1beta1.ManagedClusterAddOn{ObjectMeta: metav1.ObjectMeta{Name: AddonName, Namespace: cluster}}
	encoding, err := clusterreport.Encode(report)
	if err != nil {
		return 0, fmt.Errorf("encode the report of %s: %w", cluster, err)
	}
	last := s.lastPublished(cluster)
	if slices.EqualFunc(encoding.Conditions, last, sameCondition) {
		return 0, nil
	}
	if last != nil && slices.EqualFunc(withoutSummary(encoding.Conditions), withoutSummary(last), sameCondition) {
		s.mu.Lock()
		wait := summaryInterval - time.Since(s.reported[cluster])
		s.mu.Unlock()
		if wait > 0 {
			return wait, nil
		}
	}
	now := metav1.Now()
	conditions := slices.Clone(encoding.Conditions)
	for i := range conditions {
		conditions[i].LastTransitionTime = now
	}
	body, err := spoke.ReportApplyPatch(AddonName, cluster, conditions)
	if err != nil {
		return 0, err
	}
	if err := s.agents.Status().Patch(ctx, addon, client.RawPatch(types.ApplyPatchType, body),
		client.ForceOwnership, client.FieldOwner(spoke.FieldManager)); err != nil {
		return 0, fmt.Errorf("apply the report of %s: %w", cluster, err)
	}
	s.mu.Lock()
	s.published[cluster] = encoding.Conditions
	s.reported[cluster] = now.Time
	s.mu.Unlock()
	return 0, nil
}

func withoutSummary(conditions []metav1.Condition) []metav1.Condition {
	return slices.DeleteFunc(slices.Clone(conditions), func(c metav1.Condition) bool { return c.Type == clusterreport.ConditionSummary })
}

// publishSlices plays the agent's status channel (docs/design.md, section 4): every app of the
// cluster, complete, with its tree, in ApplicationStatusSlices that the addon owns,
// planned with pkg/clusterreport as pkg/spoke plans them; a slice is applied,
// server-side, only when it changed, and deleted when it holds no app any more. While
// holdBack holds the changes back, it writes nothing, and returns how much longer.
func (s *StandIns) publishSlices(ctx context.Context, addon *addonv1beta1.ManagedClusterAddOn, apps []clusterreport.App) (time.Duration, error) {
	cluster := addon.Namespace
	entries := make([]statusv1alpha1.AppStatus, 0, len(apps))
	passing := map[string]bool{}
	for _, app := range apps {
		e := clusterreport.FitEntry(clusterreport.Entry(app, AppTree(app.Name, app.Resources)))
		entries = append(entries, e)
		passing[clusterreport.EntryKey(e)] = argoapp.PassingState(app.Sync.Status, app.Health.Status, app.Operation.Phase, true)
	}
	s.mu.Lock()
	onHub := s.slices[cluster]
	s.mu.Unlock()
	if wait := s.holdBack(cluster, onHub, entries, passing); wait > 0 {
		return wait, nil
	}
	plan := clusterreport.PlanSlices(AddonName, onHub, entries)
	previous := make(map[string]clusterreport.Slice, len(onHub))
	for _, p := range onHub {
		previous[p.Name] = p
	}
	for _, p := range plan {
		desired := clusterreport.SliceObject(addon, p)
		if last, ok := previous[p.Name]; ok && clusterreport.SameSlice(clusterreport.SliceObject(addon, last), desired) {
			delete(previous, p.Name)
			continue
		}
		delete(previous, p.Name)
		content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(desired)
		if err != nil {
			return 0, fmt.Errorf("encode ApplicationStatusSlice %s/%s: %w", cluster, p.Name, err)
		}
		unstructured.RemoveNestedField(content, "metadata", "creationTimestamp")
		if err := s.agents.Apply(ctx, client.ApplyConfigurationFromUnstructured(&unstructured.Unstructured{Object: content}),
			client.ForceOwnership, client.FieldOwner(spoke.FieldManager)); err != nil {
			return 0, fmt.Errorf("apply ApplicationStatusSlice %s/%s: %w", cluster, p.Name, err)
		}
	}
	for name := range previous {
		gone := &statusv1alpha1.ApplicationStatusSlice{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: cluster}}
		if err := s.agents.Delete(ctx, gone); client.IgnoreNotFound(err) != nil {
			return 0, fmt.Errorf("delete ApplicationStatusSlice %s/%s: %w", cluster, name, err)
		}
	}
	s.mu.Lock()
	s.slices[cluster] = plan
	s.mu.Unlock()
	return 0, nil
}

// holdBack returns how much longer the agent of cluster keeps the hub's slices (onHub)
// for entries, zero to write now, as pkg/spoke's publisher holds them back: while every
// app whose entry changed is one the hub holds, in a passing state, with the same
// conditions, for at most the settle wait from the first change held. A new app, an app
// gone or any other change goes at once.
func (s *StandIns) holdBack(cluster string, onHub []clusterreport.Slice, entries []statusv1alpha1.AppStatus, passing map[string]bool) time.Duration {
	held := map[string]statusv1alpha1.AppStatus{}
	for _, sl := range onHub {
		for _, e := range sl.Apps {
			held[clusterreport.EntryKey(e)] = e
		}
	}
	hold := len(held) == len(entries)
	changed := false
	for _, e := range entries {
		key := clusterreport.EntryKey(e)
		old, ok := held[key]
		switch {
		case !ok:
			hold = false
		case !equality.Semantic.DeepEqual(old, e):
			changed = true
			hold = hold && passing[key] && equality.Semantic.DeepEqual(old.Conditions, e.Conditions)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.holding.Wait(cluster, hold && changed, argoapp.DefaultSettleWait, time.Now())
}

func (s *StandIns) lastPublished(cluster string) []metav1.Condition {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.published[cluster]
}

func sameCondition(a, b metav1.Condition) bool {
	return a.Type == b.Type && a.Status == b.Status && a.Reason == b.Reason && a.Message == b.Message
}

// reportedApp is the agent's report of the Application that work carries, once applied:
// in the state that the work's status feedback shows (reconcileWork writes it), observed
// at observedAt, its resources in that state, in a namespace of the app's name, and
// injected conditions.
func reportedApp(work *workv1.ManifestWork, injected map[string][]argoapp.Condition, resources []argoapp.ResourceStatus, observedAt time.Time) (clusterreport.App, bool) {
	hubName := work.Annotations[argoapp.AnnotationHubApplicationName]
	if hubName == "" || meta.FindStatusCondition(work.Status.Conditions, workv1.WorkApplied) == nil || work.DeletionTimestamp != nil {
		return clusterreport.App{}, false
	}
	for _, m := range work.Spec.Workload.Manifests {
		var payload struct {
			APIVersion string            `json:"apiVersion"`
			Kind       string            `json:"kind"`
			Metadata   metav1.ObjectMeta `json:"metadata"`
		}
		if json.Unmarshal(m.Raw, &payload) != nil || payload.Kind != argoapp.KindApplication {
			continue
		}
		state := observed.FeedbackOf(work)
		app := clusterreport.App{
			Namespace: payload.Metadata.Namespace, Name: payload.Metadata.Name,
			HubNamespace: work.Annotations[argoapp.AnnotationHubApplicationNamespace], HubName: hubName,
			ApplicationSet: work.Annotations[argoapp.AnnotationHostingApplicationSet],
			ManifestWork:   work.Name,
			Sync:           argoapp.SyncStatus{Status: state.SyncStatus, Revision: state.SyncRevision},
			Health:         argoapp.HealthStatus{Status: state.HealthStatus},
			Operation:      argoapp.OperationState{Phase: state.OperationStatePhase, StartedAt: state.OperationStateStartedAt},
			Conditions:     injected[hubName],
			ObservedAt:     observedAt.UTC(),
		}
		if state.SyncStatus != "" { // Argo CD lists an app's resources once it has compared it
			app.Resources = slices.Clone(resources)
		}
		for i := range app.Resources {
			r := &app.Resources[i]
			r.Namespace = app.Name
			r.Status = state.SyncStatus
			if r.Health.Status != "" {
				r.Health.Status = cmp.Or(state.HealthStatus, "Missing")
			}
		}
		return app, true
	}
	return clusterreport.App{}, false
}

// Reader reads from the stand-ins' cache: the ManifestWorks, and whatever else a List
// asks for, kept current by watches.
func (s *StandIns) Reader() client.Reader { return s.mgr.GetCache() }
