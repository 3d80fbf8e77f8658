// Package statusslices is the hub's reader of the status channel (docs/design.md,
// sections 2.4 and 4): the ApplicationStatusSlices in which each cluster's agent reports the complete
// status of its apps. pkg/hub builds one Reader and hands it, in the observed.Decoder, to
// the status mirror and the ApplicationSet report controller: the decoder asks it for an
// app before the agent's report on the ManagedClusterAddOn, so that both show every
// resource of an app, with its health, whatever the size of the cluster's report. Handler
// enqueues what a change of a slice concerns. The package registers no controller; the
// hub's cache keeps the slices as hubcache.Options says.
package statusslices

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	statusv1alpha1 "github.com/ocm-gitops/argocd-pull-addon/pkg/apis/argocdpull/v1alpha1"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/clusterreport"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/hubcache"
)

// ConditionTruncated is the condition type, on the hub Application and on the report's
// cluster entry, that says the app's status did not fit in one slice and the agent left
// part of it out. It ends in "Warning", so Argo CD's UI shows it as a warning.
const ConditionTruncated = "StatusTruncatedWarning"

// Reader finds apps in the slices of the hub's cache. It holds no copy of them: it
// checks each slice once per resourceVersion (DecodeSlices) and converts only the entry
// it finds. It is safe for concurrent use.
type Reader struct {
	client    client.Reader
	addonName string

	mu sync.Mutex
	// checked are the slices of each cluster namespace that DecodeSlices accepted or
	// rejected, by UID: those of the last Find in that namespace, so that a deleted slice
	// is forgotten at the next.
	checked map[string]map[types.UID]checkedSlice
}

type checkedSlice struct {
	resourceVersion string
	err             error
}

// NewReader returns a reader of the slices of addonName, from c (the client that reads
// through the manager's cache, hubcache.NewClient).
func NewReader(c client.Reader, addonName string) *Reader {
	return &Reader{client: c, addonName: addonName, checked: map[string]map[types.UID]checkedSlice{}}
}

// Find returns the app of cluster's slices that the ManifestWork workName carries, or
// that points back to the hub Application hub; nil when no slice holds it, or the slices
// cannot be read (the agent's report on the ManagedClusterAddOn is then used).
func (r *Reader) Find(cluster, workName string, hub types.NamespacedName) *clusterreport.App {
	app, _ := r.FindWithSlice(cluster, workName, hub)
	return app
}

// Location is where FindWithSlice found an app: the slice that holds it, in the version
// the cache holds, and the entry's Digest (statusv1alpha1.AppStatus.Digest).
type Location struct {
	Slice, ResourceVersion, Digest string
}

// FindWithSlice is Find, and also returns where it found the app.
func (r *Reader) FindWithSlice(cluster, workName string, hub types.NamespacedName) (*clusterreport.App, Location) {
	found, foundIn := r.latest(cluster, func(e *statusv1alpha1.AppStatus) bool {
		return (workName != "" && e.ManifestWork == workName) ||
			(e.Hub != nil && e.Hub.Name != "" && e.Hub.Namespace == hub.Namespace && e.Hub.Name == hub.Name)
	})
	if found == nil {
		return nil, Location{}
	}
	app := AppOf(*found)
	return &app, foundIn
}

// SpokeApplication is what a cluster's agent reports of the Application namespace/name on
// the cluster, whatever created it.
type SpokeApplication struct {
	// Hub is the hub Application it carries the annotations of; nil for one that no hub
	// Application pulled (a spoke-local Application).
	Hub *types.NamespacedName
	// ManifestWork names the work that applied it; empty for a spoke-local one.
	ManifestWork string
}

// FindSpokeApplication returns what cluster's slices report of the Application
// namespace/name on the cluster, and whether they report it: the agent reports every
// Application in the namespaces it watches, those made on the cluster by identity alone
// (clusterreport.SpokeLocalEntry).
func (r *Reader) FindSpokeApplication(cluster, namespace, name string) (SpokeApplication, bool) {
	found, _ := r.latest(cluster, func(e *statusv1alpha1.AppStatus) bool { return e.Namespace == namespace && e.Name == name })
	if found == nil {
		return SpokeApplication{}, false
	}
	app := SpokeApplication{ManifestWork: found.ManifestWork}
	if found.Hub != nil && found.Hub.Name != "" {
		app.Hub = &types.NamespacedName{Namespace: found.Hub.Namespace, Name: found.Hub.Name}
	}
	return app, true
}

// latest returns the entry of cluster's valid slices that matches, and where it is; of
// an app in two slices (an agent that stopped between two writes), the one observed
// last. Nil when none matches, or the slices cannot be read. The entry is the cache's:
// read-only.
func (r *Reader) latest(cluster string, matches func(*statusv1alpha1.AppStatus) bool) (*statusv1alpha1.AppStatus, Location) {
	list := &statusv1alpha1.ApplicationStatusSliceList{}
	// Read-only: the cache's slices, not copies.
	if err := r.client.List(context.Background(), list, client.InNamespace(cluster),
		client.MatchingLabels{statusv1alpha1.LabelAddon: r.addonName}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, Location{}
	}
	var found *statusv1alpha1.AppStatus
	var foundIn Location
	for i := range list.Items {
		s := &list.Items[i]
		if r.check(cluster, s) != nil {
			continue
		}
		for j := range s.Apps {
			if e := &s.Apps[j]; matches(e) && (found == nil || e.ObservedAt.After(found.ObservedAt.Time)) {
				found, foundIn = e, Location{Slice: s.Name, ResourceVersion: s.ResourceVersion, Digest: e.Digest}
			}
		}
	}
	r.forgetOthers(cluster, list.Items)
	return found, foundIn
}

// check returns the error of DecodeSlices for slice s of cluster, computed once per
// resourceVersion.
func (r *Reader) check(cluster string, s *statusv1alpha1.ApplicationStatusSlice) error {
	r.mu.Lock()
	c, ok := r.checked[cluster][s.UID]
	r.mu.Unlock()
	if ok && c.resourceVersion == s.ResourceVersion {
		return c.err
	}
	_, err := clusterreport.DecodeSlices([]statusv1alpha1.ApplicationStatusSlice{*s})
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.checked[cluster] == nil {
		r.checked[cluster] = map[types.UID]checkedSlice{}
	}
	r.checked[cluster][s.UID] = checkedSlice{resourceVersion: s.ResourceVersion, err: err}
	return err
}

// forgetOthers forgets the checks of cluster's slices that are not in current.
func (r *Reader) forgetOthers(cluster string, current []statusv1alpha1.ApplicationStatusSlice) {
	r.mu.Lock()
	defer r.mu.Unlock()
	checked := r.checked[cluster]
	if len(checked) == len(current) {
		return
	}
	keep := make(map[types.UID]bool, len(current))
	for i := range current {
		keep[current[i].UID] = true
	}
	for uid := range checked {
		if !keep[uid] {
			delete(checked, uid)
		}
	}
	if len(checked) == 0 {
		delete(r.checked, cluster)
	}
}

// AppOf returns a slice's entry as the hub's view of an app: every resource with its
// sync status and health (status and message), from its Resources or, in an entry of the
// hub's cache, its PackedResources; Argo CD's conditions; its history; and, when the agent had to cut
// the app, a ConditionTruncated that says what it left out.
func AppOf(e statusv1alpha1.AppStatus) clusterreport.App {
	app := clusterreport.App{
		Namespace: e.Namespace, Name: e.Name, ApplicationSet: e.ApplicationSet, ManifestWork: e.ManifestWork, Refreshed: e.Refreshed,
		Sync:       argoapp.SyncStatus{Status: e.Sync.Status, Revision: e.Sync.Revision, Revisions: e.Sync.Revisions},
		History:    clusterreport.HistoryFromEntry(e.History),
		ObservedAt: e.ObservedAt.Time,
	}
	if e.Hub != nil {
		app.HubNamespace, app.HubName = e.Hub.Namespace, e.Hub.Name
	}
	if e.Health != nil {
		app.Health = argoapp.HealthStatus{Status: e.Health.Status, Message: e.Health.Message}
	}
	if op := e.Operation; op != nil {
		app.Operation = argoapp.OperationState{Phase: op.Phase, StartedAt: op.StartedAt, FinishedAt: op.FinishedAt, Message: op.Message,
			ComparedBeforeFinish: op.ComparedBeforeFinish}
		if r := op.SyncResult; r != nil {
			result := &argoapp.SyncResult{Revision: r.Revision, Revisions: r.Revisions}
			for _, res := range r.Resources {
				result.Resources = append(result.Resources, argoapp.ResourceResult{
					Group: res.Group, Version: res.Version, Kind: res.Kind, Namespace: res.Namespace, Name: res.Name,
					Status: res.Status, Message: res.Message, HookType: res.HookType, HookPhase: res.HookPhase, SyncPhase: res.SyncPhase,
				})
			}
			app.Operation.SyncResult = result
		}
	}
	for _, r := range e.Resources {
		resource := argoapp.ResourceStatus{Group: r.Group, Version: r.Version, Kind: r.Kind, Namespace: r.Namespace, Name: r.Name, Status: r.Status}
		if r.Health != nil {
			resource.Health = argoapp.HealthStatus{Status: r.Health.Status, Message: r.Health.Message}
		}
		app.Resources = append(app.Resources, resource)
	}
	for _, c := range e.Conditions {
		if c.Type == ConditionTruncated {
			continue // the hub's own, below: the agent says it in Truncated
		}
		app.Conditions = append(app.Conditions, argoapp.Condition{Type: c.Type, Message: c.Message})
	}
	if e.PackedResources != "" { // an entry of the hub's cache
		packed, ok := hubcache.UnpackResources(e.PackedResources)
		app.Resources = packed // the cache's entries have no Resources
		if !ok {
			app.Conditions = append(app.Conditions, argoapp.Condition{Type: ConditionTruncated, Message: fmt.Sprintf(
				"The hub's cache could not read all the resources of this application, a defect of the addon-manager: it shows %d of them.", len(packed))})
		}
	}
	if t := e.Truncated; t != nil {
		app.ResourcesOmitted = int(t.ResourcesOmitted)
		app.ConditionsOmitted = int(t.ConditionsOmitted)
		app.Conditions = append(app.Conditions, argoapp.Condition{Type: ConditionTruncated, Message: fmt.Sprintf(
			"The status of this application exceeds what one ApplicationStatusSlice holds (%d KiB): the agent left out %d resources, %d resource tree nodes and %d conditions%s.",
			clusterreport.MaxSliceBytes/1024, t.ResourcesOmitted, t.NodesOmitted, t.ConditionsOmitted, shortened(t.MessagesShortened))})
	}
	return app
}

func shortened(messages bool) string {
	if messages {
		return ", and shortened the messages"
	}
	return ""
}

// ChangedApps returns the apps whose status differs between two versions of a slice
// (nil for none): the old version of a removed or changed one, the new version of an
// added or changed one. A controller enqueues the hub Applications of these. A change of
// an app's tree alone (its Digest, and its Size) is no change of its status.
func ChangedApps(old, new *statusv1alpha1.ApplicationStatusSlice) []clusterreport.App {
	return changedApps(old, new, func(a, b statusv1alpha1.AppStatus) bool {
		a.Digest, b.Digest = "", ""
		a.Size, b.Size = 0, 0
		return equality.Semantic.DeepEqual(a, b)
	})
}

// ChangedTrees is ChangedApps for a controller that reads the whole entry, its tree
// included: it compares the entries' Digests, which the hub's cache sets (and the
// entries whole when one has none).
func ChangedTrees(old, new *statusv1alpha1.ApplicationStatusSlice) []clusterreport.App {
	return changedApps(old, new, func(a, b statusv1alpha1.AppStatus) bool {
		if a.Digest != "" && b.Digest != "" {
			return a.Digest == b.Digest
		}
		return equality.Semantic.DeepEqual(a, b)
	})
}

func changedApps(old, new *statusv1alpha1.ApplicationStatusSlice, same func(a, b statusv1alpha1.AppStatus) bool) []clusterreport.App {
	index := func(s *statusv1alpha1.ApplicationStatusSlice) map[string]statusv1alpha1.AppStatus {
		m := map[string]statusv1alpha1.AppStatus{}
		if s != nil {
			for _, e := range s.Apps {
				m[clusterreport.EntryKey(e)] = e
			}
		}
		return m
	}
	before, after := index(old), index(new)
	var changed []clusterreport.App
	for key, a := range after {
		b, ok := before[key]
		switch {
		case !ok:
			changed = append(changed, AppOf(a))
		case !same(a, b):
			changed = append(changed, AppOf(a), AppOf(b))
		}
	}
	for key, b := range before {
		if _, ok := after[key]; !ok {
			changed = append(changed, AppOf(b))
		}
	}
	return changed
}

// EnqueueApp enqueues what a controller recomputes for one app of a cluster.
type EnqueueApp func(ctx context.Context, cluster string, app clusterreport.App, q workqueue.TypedRateLimitingInterface[reconcile.Request])

// Handler enqueues, for each change of a slice, the apps whose status changed
// (ChangedApps).
func Handler(enqueue EnqueueApp) handler.EventHandler {
	return handlerOf(enqueue, ChangedApps)
}

// TreeHandler enqueues, for each change of a slice, the apps whose entries changed, their
// trees included (ChangedTrees).
func TreeHandler(enqueue EnqueueApp) handler.EventHandler {
	return handlerOf(enqueue, ChangedTrees)
}

func handlerOf(enqueue EnqueueApp, changed func(old, new *statusv1alpha1.ApplicationStatusSlice) []clusterreport.App) handler.EventHandler {
	type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]
	slice := func(o client.Object) *statusv1alpha1.ApplicationStatusSlice {
		s, _ := o.(*statusv1alpha1.ApplicationStatusSlice)
		return s
	}
	each := func(ctx context.Context, cluster string, apps []clusterreport.App, q queue) {
		for _, app := range apps {
			enqueue(ctx, cluster, app, q)
		}
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q queue) {
			each(ctx, e.Object.GetNamespace(), changed(nil, slice(e.Object)), q)
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q queue) {
			each(ctx, e.ObjectNew.GetNamespace(), changed(slice(e.ObjectOld), slice(e.ObjectNew)), q)
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q queue) {
			each(ctx, e.Object.GetNamespace(), changed(slice(e.Object), nil), q)
		},
	}
}
