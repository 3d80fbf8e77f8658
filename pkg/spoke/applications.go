package spoke

import (
	"context"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/clusterreport"
)

// kindAppliedManifestWork is the kind of the object through which OCM's work agent owns
// what it applied on the managed cluster.
const kindAppliedManifestWork = "AppliedManifestWork"

// appliedManifestWorkHashLength is the length of the hub hash that starts the name of an
// AppliedManifestWork: "<64 hex characters>-<ManifestWork name>".
const appliedManifestWorkHashLength = 64

// isFromHub reports whether a local Application came from the hub: it carries the
// ApplicationSet marker or a hub back-pointer, or OCM's work agent owns it. The hub
// renders standalone apps without markers, so the owner is what tells those apart from
// apps created on the managed cluster.
func isFromHub(obj metav1.Object) bool {
	if marker, err := strconv.ParseBool(obj.GetLabels()[argoapp.LabelApplicationSet]); err == nil && marker {
		return true
	}
	annotations := obj.GetAnnotations()
	if annotations[argoapp.AnnotationHubApplicationName] != "" || annotations[argoapp.AnnotationHostingApplicationSet] != "" {
		return true
	}
	_, owned := manifestWorkOf(obj.GetOwnerReferences())
	return owned
}

// manifestWorkOf returns the name of the ManifestWork that carries an object, read from
// the AppliedManifestWork among its owners, and whether such an owner exists. The name is
// empty when the owner's name is not of the form the work agent writes.
func manifestWorkOf(refs []metav1.OwnerReference) (string, bool) {
	for _, ref := range refs {
		if ref.Kind != kindAppliedManifestWork {
			continue
		}
		if gv, err := schema.ParseGroupVersion(ref.APIVersion); err != nil || gv.Group != workv1.GroupName {
			continue
		}
		name := ref.Name
		if len(name) > appliedManifestWorkHashLength+1 && name[appliedManifestWorkHashLength] == '-' {
			if _, err := hex.DecodeString(name[:appliedManifestWorkHashLength]); err == nil {
				return name[appliedManifestWorkHashLength+1:], true
			}
		}
		return "", true
	}
	return "", false
}

// localApplication is what the agent's informers keep of a local Application: its
// identity, whether it came from the hub and, when it did, its report, decoded once as it
// arrives. Everything else of the object (its spec, status.history but its last
// argoapp.HistoryLimit entries, the sync result's plain successes, managed fields and
// annotations) is dropped before the informer stores it, so
// that the agent holds one compact copy of each app, not the object and a decoding of it.
type localApplication struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	// fromHub is isFromHub of the Application; app is set only when it is true.
	fromHub bool
	app     observedApp
	// operationStep is what the operation protocol asks of the agent for it
	// (operations.go), for an Application from the hub.
	operationStep operationStep
}

var _ runtime.Object = &localApplication{}

// DeepCopyObject returns a copy that shares the decoded report, which the agent never
// changes in place.
func (l *localApplication) DeepCopyObject() runtime.Object {
	out := *l
	l.DeepCopyInto(&out.ObjectMeta)
	return &out
}

// compactApplication is the transform of the Application informers: it turns each
// Application into a *localApplication (tombstones keep the one they hold).
func compactApplication(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	l := &localApplication{
		TypeMeta: metav1.TypeMeta{APIVersion: argoapp.GroupVersion.String(), Kind: argoapp.KindApplication},
		ObjectMeta: metav1.ObjectMeta{
			Namespace: u.GetNamespace(), Name: u.GetName(), UID: u.GetUID(), ResourceVersion: u.GetResourceVersion(),
		},
		fromHub: isFromHub(u),
	}
	if l.fromHub {
		l.app = observeApplication(u)
		l.operationStep = nextOperationStep(viewOperation(u))
	}
	return l, nil
}

// observedApp is one local Application from the hub, as the agent read it.
type observedApp struct {
	report clusterreport.App
	// reconciledAt is status.reconciledAt; zero when absent or unreadable.
	reconciledAt time.Time
	created      time.Time
	// resourceVersion of the Application: a new one makes the agent read its tree again.
	resourceVersion string
	// passing: the Application is in a state that the cluster leaves on its own
	// (argoapp.PassingState), and no one waits for its operation
	// (argoapp.AwaitedOperation). Its slice entry may wait (publisher.holdBack).
	passing bool
}

// observeApplication reads a local Application into its report, without ObservedAt. An
// Application whose status does not decode is reported with its identity, unknown
// statuses, and a clusterreport.ConditionStatusDecodeError that says why.
func observeApplication(obj *unstructured.Unstructured) observedApp {
	annotations := obj.GetAnnotations()
	app := clusterreport.App{
		Namespace:      obj.GetNamespace(),
		Name:           obj.GetName(),
		HubNamespace:   annotations[argoapp.AnnotationHubApplicationNamespace],
		HubName:        annotations[argoapp.AnnotationHubApplicationName],
		ApplicationSet: annotations[argoapp.AnnotationHostingApplicationSet],
		Refreshed:      annotations[argoapp.AnnotationRefreshed],
	}
	app.ManifestWork, _ = manifestWorkOf(obj.GetOwnerReferences())
	out := observedApp{created: obj.GetCreationTimestamp().Time, resourceVersion: obj.GetResourceVersion()}
	status, err := argoapp.DecodeStatus(obj)
	if err != nil {
		app.Conditions = []argoapp.Condition{{Type: clusterreport.ConditionStatusDecodeError, Message: err.Error()}}
		out.report = app
		return out
	}
	app.Sync = status.Sync
	app.Health = status.Health
	app.Operation = status.OperationState
	app.Operation.SyncResult = clusterreport.ReportedSyncResult(app.Operation.SyncResult)
	// In the order of the report, once per version of the app rather than at every
	// publish.
	clusterreport.SortResources(status.Resources)
	app.Resources = status.Resources
	app.Conditions = status.Conditions
	app.History = status.History
	out.report = app
	out.passing = !argoapp.AwaitedOperation(obj) &&
		argoapp.PassingState(app.Sync.Status, app.Health.Status, app.Operation.Phase, argoapp.SyncsAutomatically(obj))
	if t, err := time.Parse(time.RFC3339, status.ReconciledAt); err == nil {
		out.reconciledAt = t
	}
	return out
}

// watchApplicationAPI checks, at start and every crdCheckInterval, whether the managed
// cluster serves the Application API. It starts the Application informers when it first
// does, and asks for a publish whenever the answer changes.
func (a *agent) watchApplicationAPI(ctx context.Context) {
	ticker := time.NewTicker(a.tuning.crdCheckInterval)
	defer ticker.Stop()
	started := false
	for {
		state, err := a.checkApplicationAPI(ctx)
		if err != nil {
			a.log.Error(err, "ask the managed cluster for the Application API")
		} else if previous := crdState(a.crd.Swap(int32(state))); previous != state {
			a.log.Info("Application API", "served", state == crdPresent)
			if state == crdPresent && !started {
				started = true
				a.startApplicationInformers(ctx)
			}
			a.enqueue()
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// checkApplicationAPI asks discovery whether the managed cluster serves Applications.
func (a *agent) checkApplicationAPI(ctx context.Context) (crdState, error) {
	resources, err := a.spokeDiscovery.ServerResourcesForGroupVersion(ctx, argoapp.GroupVersion)
	if apierrors.IsNotFound(err) {
		return crdMissing, nil
	}
	if err != nil {
		return crdUnknown, fmt.Errorf("discover %s: %w", argoapp.GroupVersion, err)
	}
	for _, r := range resources.APIResources {
		if r.Name == argoapp.ResourceApplications {
			return crdPresent, nil
		}
	}
	return crdMissing, nil
}

// startApplicationInformers starts one Application informer per watched namespace, and
// asks for a publish once all have synced.
func (a *agent) startApplicationInformers(ctx context.Context) {
	var synced []cache.InformerSynced
	for _, ns := range a.opts.WatchNamespaces {
		informer := newInformer(a.spokeDynamic.Resource(argoapp.ApplicationGVR).Namespace(ns), noTweak)
		// The agent keeps of each Application its identity and its decoded report.
		if err := informer.SetTransform(compactApplication); err != nil {
			a.log.Error(err, "set the Application informer transform", "namespace", ns)
		}
		if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { a.onApplicationIdentity(obj) },
			UpdateFunc: a.onApplicationUpdate,
			DeleteFunc: func(obj any) { a.onApplicationIdentity(obj) },
		}); err != nil {
			a.log.Error(err, "watch Applications", "namespace", ns)
		}
		a.appInformers = append(a.appInformers, informer)
		synced = append(synced, informer.HasSynced)
		a.goFunc(func() { informer.RunWithContext(ctx) })
	}
	a.goFunc(func() {
		if cache.WaitForCacheSync(ctx.Done(), synced...) {
			a.appsSynced.Store(true)
			a.enqueue()
		}
	})
}

// onApplicationIdentity asks for a publish when an Application is created or deleted:
// one that no hub pulled is reported by its identity (spokeLocalApplications), so only
// its arrival and its going change the report.
func (a *agent) onApplicationIdentity(obj any) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	if l, ok := obj.(*localApplication); ok {
		if l.fromHub {
			a.trees.invalidate(clusterreport.AppKey(l.Namespace, l.Name))
			a.operations.observe(l)
		}
		a.enqueue()
	}
}

// onApplicationUpdate asks for a publish when the Application came from the hub before
// or after the change: a change of an Application made on the cluster (its status, say)
// changes nothing the agent reports, and one taken over by a hub Application came from
// the hub after the change.
func (a *agent) onApplicationUpdate(old, obj any) {
	if l, ok := obj.(*localApplication); ok {
		a.operations.observe(l)
	}
	for _, obj := range []any{old, obj} {
		if l, ok := obj.(*localApplication); ok && l.fromHub {
			a.trees.invalidate(clusterreport.AppKey(l.Namespace, l.Name))
			a.enqueue()
			return
		}
	}
}
