package spoke

import (
	"context"
	"crypto/sha256"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	addonv1beta1 "open-cluster-management.io/api/addon/v1beta1"

	statusv1alpha1 "github.com/ocm-gitops/argocd-pull-addon/pkg/apis/argocdpull/v1alpha1"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/clusterreport"
)

// The status channel (docs/design.md, section 8a): the agent writes the complete status
// of its apps into ApplicationStatusSlices in its cluster namespace on the hub, besides
// the conditions of its ManagedClusterAddOn.

// sliceGVR is the resource of the slices.
var sliceGVR = statusv1alpha1.GroupVersion.WithResource(statusv1alpha1.Resource)

// statusSlices is what the agent knows of its slices on the hub, from their informer and
// from its own writes.
type statusSlices struct {
	client   dynamic.ResourceInterface
	informer cache.SharedIndexInformer

	mu sync.Mutex
	// byName are the agent's slices on the hub; a newer resourceVersion replaces an older.
	byName map[string]*statusv1alpha1.ApplicationStatusSlice
}

// newStatusSlices returns the agent's view of its slices in its cluster namespace, and
// the informer to run. A change of a slice by anyone asks for a publish.
func newStatusSlices(hub dynamic.Interface, cluster, addonName string, changed func()) (*statusSlices, error) {
	selector := labels.SelectorFromSet(labels.Set{statusv1alpha1.LabelAddon: addonName}).String()
	informer := dynamicinformer.NewFilteredDynamicInformer(hub, sliceGVR, cluster, 0, cache.Indexers{},
		func(o *metav1.ListOptions) { o.LabelSelector = selector }).Informer()
	s := &statusSlices{client: hub.Resource(sliceGVR).Namespace(cluster), informer: informer,
		byName: map[string]*statusv1alpha1.ApplicationStatusSlice{}}
	// Hold the typed slice, without managed fields, rather than the unstructured one.
	if err := informer.SetTransform(func(obj any) (any, error) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return obj, nil
		}
		slice, err := sliceFromUnstructured(u)
		if err != nil {
			return nil, err
		}
		slice.ManagedFields = nil
		return slice, nil
	}); err != nil {
		return nil, fmt.Errorf("transform the slices: %w", err)
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { s.observe(obj); changed() },
		UpdateFunc: func(_, obj any) {
			s.observe(obj)
			changed()
		},
		DeleteFunc: func(obj any) {
			if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tombstone.Obj
			}
			if slice, ok := obj.(*statusv1alpha1.ApplicationStatusSlice); ok {
				s.forget(slice.Name)
			}
			changed()
		},
	}); err != nil {
		return nil, fmt.Errorf("watch the slices: %w", err)
	}
	return s, nil
}

func sliceFromUnstructured(u *unstructured.Unstructured) (*statusv1alpha1.ApplicationStatusSlice, error) {
	slice := &statusv1alpha1.ApplicationStatusSlice{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, slice); err != nil {
		return nil, fmt.Errorf("decode ApplicationStatusSlice %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	return slice, nil
}

// observe records a slice unless a newer one is known.
func (s *statusSlices) observe(obj any) {
	slice, ok := obj.(*statusv1alpha1.ApplicationStatusSlice)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if known, ok := s.byName[slice.Name]; ok && known.UID == slice.UID && olderResourceVersion(slice.ResourceVersion, known.ResourceVersion) {
		return
	}
	s.byName[slice.Name] = slice
}

func (s *statusSlices) forget(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.byName, name)
}

// snapshot returns the known slices, sorted by name.
func (s *statusSlices) snapshot() []*statusv1alpha1.ApplicationStatusSlice {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*statusv1alpha1.ApplicationStatusSlice, 0, len(s.byName))
	for _, slice := range s.byName {
		out = append(out, slice)
	}
	slices.SortFunc(out, func(a, b *statusv1alpha1.ApplicationStatusSlice) int {
		return strings.Compare(a.Name, b.Name)
	})
	return out
}

// sliceWrites counts what a publish of the slices did.
type sliceWrites struct {
	applied, deleted int
}

// entryState is an app's entry as last built: it is built again only when the app or
// its tree changed.
type entryState struct {
	appResourceVersion string
	treeReadAt         time.Time
	entry              statusv1alpha1.AppStatus
	size               int
	digest             [sha256.Size]byte
}

// hubSliceState is what the agent computed of one slice on the hub, at one
// resourceVersion: the EntrySize, digest and observedAt of each app, by key.
type hubSliceState struct {
	resourceVersion string
	sizes           map[string]int
	digests         map[string][sha256.Size]byte
	observedAt      map[string]metav1.Time
}

func newHubSliceState(slice *statusv1alpha1.ApplicationStatusSlice) hubSliceState {
	h := hubSliceState{resourceVersion: slice.ResourceVersion, sizes: map[string]int{},
		digests: map[string][sha256.Size]byte{}, observedAt: map[string]metav1.Time{}}
	for _, e := range slice.Apps {
		key := clusterreport.EntryKey(e)
		h.sizes[key], h.digests[key] = clusterreport.EntryDigest(e)
		h.observedAt[key] = e.ObservedAt
	}
	return h
}

// publishSlices writes the slices of apps, each only when it differs from the hub's, and
// deletes the agent's slices that hold no app any more. addon owns the slices. Only the
// entries of apps that changed are built again, and slices are compared by digests.
func (a *agent) publishSlices(ctx context.Context, apps []observedApp, addon corev1.ObjectReference, now time.Time) (sliceWrites, error) {
	var done sliceWrites
	if !a.slices.informer.HasSynced() {
		// Without the hub's slices the agent would create duplicates. A hub without the
		// CRD (not upgraded yet) never syncs: the ManagedClusterAddOn report goes on.
		return done, nil
	}
	p := &a.publisher
	onHub := a.slices.snapshot()
	hubSlices := make([]clusterreport.Slice, 0, len(onHub))
	byName := map[string]*statusv1alpha1.ApplicationStatusSlice{}
	hubSizes := map[string]map[string]int{}
	hubState := make(map[string]hubSliceState, len(onHub))
	onHubByKey := map[string]hubSliceState{}
	for _, s := range onHub {
		hubSlices = append(hubSlices, clusterreport.Slice{Name: s.Name, Apps: s.Apps})
		byName[s.Name] = s
		h, ok := p.hubSlices[s.Name]
		if !ok || h.resourceVersion != s.ResourceVersion {
			h = newHubSliceState(s)
		}
		hubState[s.Name] = h
		hubSizes[s.Name] = h.sizes
		for key := range h.digests {
			onHubByKey[key] = h
		}
	}
	p.hubSlices = hubState

	entries := make([]statusv1alpha1.AppStatus, 0, len(apps))
	sizes := make(map[string]int, len(apps))
	current := make(map[string]entryState, len(apps))
	for _, app := range apps {
		key := app.report.Key()
		tree, readAt := a.trees.get(ctx, app)
		state, ok := p.entries[key]
		if !ok || state.appResourceVersion != app.resourceVersion || !state.treeReadAt.Equal(readAt) {
			report := app.report
			report.ObservedAt = now
			entry := clusterreport.FitEntry(clusterreport.Entry(report, tree))
			size, digest := clusterreport.EntryDigest(entry)
			// observedAt moves only when the content does: kept from the last entry, or,
			// after a restart, from the hub.
			switch h, onHub := onHubByKey[key]; {
			case ok && state.digest == digest:
				entry.ObservedAt = state.entry.ObservedAt
			case !ok && onHub && h.digests[key] == digest:
				entry.ObservedAt = h.observedAt[key]
			}
			state = entryState{appResourceVersion: app.resourceVersion, treeReadAt: readAt, entry: entry, size: size, digest: digest}
		}
		current[key] = state
		entries = append(entries, state.entry)
		sizes[key] = state.size
	}
	p.entries = current
	plan := clusterreport.PlanSlicesSized(a.opts.AddonName, hubSlices, entries, sizes, hubSizes)

	owner := &addonv1beta1.ManagedClusterAddOn{ObjectMeta: metav1.ObjectMeta{Name: addon.Name, Namespace: addon.Namespace, UID: addon.UID}}
	// Slices that gain an app first, so that an app that moves is never missing on the
	// hub; the others next; deletions last.
	var gaining, other []*statusv1alpha1.ApplicationStatusSlice
	keep := map[string]bool{}
	for _, s := range plan {
		keep[s.Name] = true
		desired := clusterreport.SliceObject(owner, s)
		current := byName[s.Name]
		if current != nil && sameSliceByDigest(current, desired, hubState[s.Name], p.entries) {
			continue
		}
		if gains(current, desired) {
			gaining = append(gaining, desired)
		} else {
			other = append(other, desired)
		}
	}
	for _, desired := range append(gaining, other...) {
		written, err := a.applySlice(ctx, desired)
		if err != nil {
			return done, err
		}
		h := hubSliceState{resourceVersion: written.ResourceVersion, sizes: map[string]int{},
			digests: map[string][sha256.Size]byte{}, observedAt: map[string]metav1.Time{}}
		for _, e := range desired.Apps {
			key := clusterreport.EntryKey(e)
			h.sizes[key], h.digests[key], h.observedAt[key] = p.entries[key].size, p.entries[key].digest, e.ObservedAt
		}
		p.hubSlices[desired.Name] = h
		done.applied++
	}
	for _, s := range onHub {
		if keep[s.Name] {
			continue
		}
		uid := s.UID
		err := a.slices.client.Delete(ctx, s.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		if err != nil && !apierrors.IsNotFound(err) {
			return done, fmt.Errorf("delete ApplicationStatusSlice %s/%s: %w", a.opts.ClusterName, s.Name, err)
		}
		a.slices.forget(s.Name)
		delete(p.hubSlices, s.Name)
		done.deleted++
	}
	return done, nil
}

// sameSliceByDigest reports whether the slice on the hub holds what desired holds: the
// same format, label and owner, and the same apps in the same order, each with the
// digest and observedAt of its current entry.
func sameSliceByDigest(onHub, desired *statusv1alpha1.ApplicationStatusSlice, h hubSliceState, entries map[string]entryState) bool {
	if onHub.FormatVersion != desired.FormatVersion || onHub.AppCount != desired.AppCount || len(onHub.Apps) != len(desired.Apps) ||
		onHub.Labels[statusv1alpha1.LabelAddon] != desired.Labels[statusv1alpha1.LabelAddon] ||
		!slices.ContainsFunc(onHub.OwnerReferences, func(r metav1.OwnerReference) bool { return r.UID == desired.OwnerReferences[0].UID }) {
		return false
	}
	for i, e := range desired.Apps {
		key := clusterreport.EntryKey(e)
		if clusterreport.EntryKey(onHub.Apps[i]) != key || h.digests[key] != entries[key].digest || !h.observedAt[key].Time.Equal(e.ObservedAt.Time) {
			return false
		}
	}
	return true
}

// gains reports whether desired holds an app that current does not.
func gains(current, desired *statusv1alpha1.ApplicationStatusSlice) bool {
	if current == nil {
		return true
	}
	held := make(map[string]bool, len(current.Apps))
	for _, e := range current.Apps {
		held[clusterreport.EntryKey(e)] = true
	}
	for _, e := range desired.Apps {
		if !held[clusterreport.EntryKey(e)] {
			return true
		}
	}
	return false
}

// applySlice applies a slice server-side, as FieldManager, records the result and
// returns it.
func (a *agent) applySlice(ctx context.Context, slice *statusv1alpha1.ApplicationStatusSlice) (*statusv1alpha1.ApplicationStatusSlice, error) {
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(slice)
	if err != nil {
		return nil, fmt.Errorf("encode ApplicationStatusSlice %s: %w", slice.Name, err)
	}
	ctx, cancel := context.WithTimeout(ctx, a.tuning.requestTimeout)
	defer cancel()
	applied, err := a.slices.client.Apply(ctx, slice.Name, &unstructured.Unstructured{Object: content},
		metav1.ApplyOptions{FieldManager: FieldManager, Force: true})
	if err != nil {
		return nil, fmt.Errorf("apply ApplicationStatusSlice %s/%s: %w", a.opts.ClusterName, slice.Name, err)
	}
	written, err := sliceFromUnstructured(applied)
	if err != nil {
		return nil, err
	}
	written.ManagedFields = nil
	a.slices.observe(written)
	return written, nil
}

// trees caches each app's resource tree, read from Argo CD's cache when the app changed
// (its resourceVersion), when Argo CD says its tree changed, or after treeRetryAfter
// when it could not be read.
type trees struct {
	reader *treeReader // nil when disabled

	mu    sync.Mutex
	byApp map[string]cachedTree
}

type cachedTree struct {
	tree            clusterreport.Tree
	resourceVersion string
	stale           bool
	readAt          time.Time
}

// treeDisabled is the Unavailable of every tree when the agent does not read them.
const treeDisabled = "the agent does not read Argo CD's resource trees (--argocd-redis=" + ArgoCDRedisDisabled + ")"

func newTrees(reader *treeReader) *trees {
	return &trees{reader: reader, byApp: map[string]cachedTree{}}
}

// get returns the tree of app, reading it when the cached one may be out of date, and
// when it was read: a new time means a new tree.
func (t *trees) get(ctx context.Context, app observedApp) (clusterreport.Tree, time.Time) {
	if t.reader == nil {
		return clusterreport.Tree{Unavailable: treeDisabled}, time.Time{}
	}
	key := app.report.Key()
	t.mu.Lock()
	cached, ok := t.byApp[key]
	t.mu.Unlock()
	fresh := ok && !cached.stale && cached.resourceVersion == app.resourceVersion &&
		(cached.tree.Unavailable == "" || time.Since(cached.readAt) < treeRetryAfter)
	if fresh {
		return cached.tree, cached.readAt
	}
	tree := t.reader.Read(ctx, app.report.Namespace, app.report.Name)
	readAt := time.Now()
	t.mu.Lock()
	t.byApp[key] = cachedTree{tree: tree, resourceVersion: app.resourceVersion, readAt: readAt}
	t.mu.Unlock()
	return tree, readAt
}

// invalidate marks the tree of an app out of date.
func (t *trees) invalidate(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if cached, ok := t.byApp[key]; ok {
		cached.stale = true
		t.byApp[key] = cached
	}
}

// invalidateAll marks every tree out of date (a full resync).
func (t *trees) invalidateAll() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for key, cached := range t.byApp {
		cached.stale = true
		t.byApp[key] = cached
	}
}

// retain forgets the trees of apps that are gone.
func (t *trees) retain(apps []observedApp) {
	keep := make(map[string]bool, len(apps))
	for _, app := range apps {
		keep[app.report.Key()] = true
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for key := range t.byApp {
		if !keep[key] {
			delete(t.byApp, key)
		}
	}
}
