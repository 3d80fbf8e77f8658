package spoke

import (
	"context"
	"crypto/sha256"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
	addonv1beta1 "open-cluster-management.io/api/addon/v1beta1"

	statusv1alpha1 "github.com/ocm-gitops/argocd-pull-addon/pkg/apis/argocdpull/v1alpha1"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/clusterreport"
)

// The status channel (docs/design.md, section 4): the agent writes the complete status
// of its apps into ApplicationStatusSlices in its cluster namespace on the hub, besides
// the conditions of its ManagedClusterAddOn.

// sliceGVR is the resource of the slices.
var sliceGVR = statusv1alpha1.GroupVersion.WithResource(statusv1alpha1.Resource)

// statusSlices is what the agent knows of its slices on the hub, from their informer and
// from its own writes: a hubSlice of each, not the slices themselves.
type statusSlices struct {
	client   dynamic.ResourceInterface
	informer cache.SharedIndexInformer
	// listFailed is set when listing the slices failed before the informer synced: a hub
	// older than the slices (no such resource), an identity not granted them, or a hub
	// that did not answer.
	listFailed atomic.Bool

	mu sync.Mutex
	// byName are the agent's slices on the hub; a newer resourceVersion replaces an older.
	byName map[string]*hubSlice
}

// hubSlice is what the agent keeps of one of its slices on the hub: what it compares
// with the slice it would write (format, label, owner) and, for each app in the slice's
// order, its EntrySize, digest and observedAt (clusterreport.EntryDigest). That is enough
// to plan the slices and to tell whether one must be written, without a second copy of
// every app's entry.
type hubSlice struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	formatVersion int32
	appCount      int32
	apps          []hubSliceApp
}

type hubSliceApp struct {
	namespace, name string
	size            int
	digest          [sha256.Size]byte
	observedAt      metav1.Time
}

func (a hubSliceApp) key() string { return clusterreport.AppKey(a.namespace, a.name) }

var _ runtime.Object = &hubSlice{}

// DeepCopyObject returns a copy that shares the apps, which are never changed in place.
func (h *hubSlice) DeepCopyObject() runtime.Object {
	out := *h
	h.DeepCopyInto(&out.ObjectMeta)
	return &out
}

// newHubSlice returns what the agent keeps of slice, whose entries are given by entry
// (their key, size, digest and observedAt).
func newHubSlice(slice *statusv1alpha1.ApplicationStatusSlice, entry func(e statusv1alpha1.AppStatus) hubSliceApp) *hubSlice {
	h := &hubSlice{
		TypeMeta: slice.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Namespace: slice.Namespace, Name: slice.Name, UID: slice.UID, ResourceVersion: slice.ResourceVersion,
			Labels: slice.Labels, OwnerReferences: slice.OwnerReferences,
		},
		formatVersion: slice.FormatVersion,
		appCount:      slice.AppCount,
		apps:          make([]hubSliceApp, 0, len(slice.Apps)),
	}
	for _, e := range slice.Apps {
		h.apps = append(h.apps, entry(e))
	}
	return h
}

// digestEntry is the hubSliceApp of an entry as the hub holds it.
func digestEntry(e statusv1alpha1.AppStatus) hubSliceApp {
	size, digest := clusterreport.EntryDigest(e)
	return hubSliceApp{namespace: e.Namespace, name: e.Name, size: size, digest: digest, observedAt: e.ObservedAt}
}

// channel says where the agent reports its apps: in the slices once their informer has
// synced (the hub serves them to the agent); in the conditions of the ManagedClusterAddOn
// when listing them failed first (a hub older than the slices); unknown before either,
// when the agent waits rather than write every app's condition only to remove them
// once the slices are listed.
func (s *statusSlices) channel() reportChannel {
	switch {
	case s.informer.HasSynced():
		return channelSlices
	case s.listFailed.Load():
		return channelConditions
	}
	return channelUnknown
}

// reportChannel is where the agent reports its apps (statusSlices.channel).
type reportChannel int

const (
	channelUnknown reportChannel = iota
	channelSlices
	channelConditions
)

// newStatusSlices returns the agent's view of its slices in its cluster namespace, and
// the informer to run. A change of a slice by anyone asks for a publish.
func newStatusSlices(hub dynamic.Interface, cluster, addonName string, changed func()) (*statusSlices, error) {
	selector := labels.SelectorFromSet(labels.Set{statusv1alpha1.LabelAddon: addonName}).String()
	client := hub.Resource(sliceGVR).Namespace(cluster)
	informer := newInformer(client, func(o *metav1.ListOptions) { o.LabelSelector = selector })
	s := &statusSlices{client: client, informer: informer, byName: map[string]*hubSlice{}}
	// Hold a hubSlice, computed once per version of a slice, rather than the slice.
	if err := informer.SetTransform(func(obj any) (any, error) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return obj, nil
		}
		slice, err := sliceFromUnstructured(u)
		if err != nil {
			return nil, err
		}
		return newHubSlice(slice, digestEntry), nil
	}); err != nil {
		return nil, fmt.Errorf("transform the slices: %w", err)
	}
	if err := informer.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		if !informer.HasSynced() && !s.listFailed.Swap(true) {
			changed()
		}
		cache.DefaultWatchErrorHandler(ctx, r, err)
	}); err != nil {
		return nil, fmt.Errorf("handle the errors of the slices' watch: %w", err)
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
			if slice, ok := obj.(*hubSlice); ok {
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
	slice, ok := obj.(*hubSlice)
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
func (s *statusSlices) snapshot() []*hubSlice {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*hubSlice, 0, len(s.byName))
	for _, slice := range s.byName {
		out = append(out, slice)
	}
	slices.SortFunc(out, func(a, b *hubSlice) int {
		return strings.Compare(a.Name, b.Name)
	})
	return out
}

// sliceWrites counts what a publish of the slices did: the slices it applied and deleted,
// and the apps whose newer entries it held back (holdBack), for how much longer.
type sliceWrites struct {
	applied, deleted int
	held             int
	heldFor          time.Duration
}

// entryState is an app's entry as last built: it is built again only when the app or
// its tree changed.
type entryState struct {
	// spokeLocal marks the entry of an Application that no hub pulled
	// (clusterreport.SpokeLocalEntry): built once, as its identity never changes.
	spokeLocal         bool
	appResourceVersion string
	treeReadAt         time.Time
	entry              statusv1alpha1.AppStatus
	size               int
	digest             [sha256.Size]byte
}

// publishSlices writes the slices of apps, and of the Applications no hub pulled
// (spokeLocal, by identity alone), each only when it differs from the hub's, and deletes
// the agent's slices that hold no app any more. addon owns the slices. Only the entries
// of apps that changed are built again, and slices are compared by digests.
func (a *agent) publishSlices(ctx context.Context, apps []observedApp, spokeLocal []types.NamespacedName, addon corev1.ObjectReference, now time.Time) (sliceWrites, error) {
	var done sliceWrites
	if !a.slices.informer.HasSynced() {
		// Without the hub's slices the agent would create duplicates. A hub without the
		// CRD (not upgraded yet) never syncs: the ManagedClusterAddOn report goes on.
		return done, nil
	}
	p := &a.publisher
	onHub := a.slices.snapshot()
	// The plan needs of the slices on the hub only which apps each holds, and their sizes.
	hubSlices := make([]clusterreport.Slice, 0, len(onHub))
	hubSizes := make(map[string]map[string]int, len(onHub))
	byName := make(map[string]*hubSlice, len(onHub))
	onHubByKey := map[string]hubSliceApp{}
	for _, s := range onHub {
		held := clusterreport.Slice{Name: s.Name, Apps: make([]statusv1alpha1.AppStatus, 0, len(s.apps))}
		sizes := make(map[string]int, len(s.apps))
		for _, e := range s.apps {
			held.Apps = append(held.Apps, statusv1alpha1.AppStatus{Namespace: e.namespace, Name: e.name})
			sizes[e.key()] = e.size
			onHubByKey[e.key()] = e
		}
		hubSlices = append(hubSlices, held)
		hubSizes[s.Name] = sizes
		byName[s.Name] = s
	}

	entries := make([]statusv1alpha1.AppStatus, 0, len(apps)+len(spokeLocal))
	sizes := make(map[string]int, len(apps)+len(spokeLocal))
	current := make(map[string]entryState, len(apps)+len(spokeLocal))
	var changes []entryChange
	for _, app := range apps {
		key := app.report.Key()
		state, ok := p.entries[key]
		last := state
		readAt, fresh := a.trees.fresh(app)
		if !ok || state.spokeLocal || !fresh || state.appResourceVersion != app.resourceVersion || !state.treeReadAt.Equal(readAt) {
			var tree clusterreport.Tree
			tree, readAt = a.trees.read(ctx, app)
			report := app.report
			report.ObservedAt = now
			entry := clusterreport.FitEntry(clusterreport.Entry(report, tree))
			size, digest := clusterreport.EntryDigest(entry)
			// observedAt moves only when the content does: kept from the last entry, or,
			// after a restart, from the hub.
			switch h, onHub := onHubByKey[key]; {
			case ok && state.digest == digest:
				entry.ObservedAt = state.entry.ObservedAt
			case !ok && onHub && h.digest == digest:
				entry.ObservedAt = h.observedAt
			}
			state = entryState{appResourceVersion: app.resourceVersion, treeReadAt: readAt, entry: entry, size: size, digest: digest}
		}
		if h, onHub := onHubByKey[key]; !onHub || h.digest != state.digest {
			change := entryChange{index: len(entries), passing: app.passing, entry: state}
			if held, isHeld := p.held[key]; isHeld && held.digest == h.digest {
				change.onHub = &held
			} else if ok && onHub && last.digest == h.digest {
				change.onHub = &last
			}
			changes = append(changes, change)
		}
		current[key] = state
		entries = append(entries, state.entry)
		sizes[key] = state.size
	}
	for _, id := range spokeLocal {
		key := clusterreport.AppKey(id.Namespace, id.Name)
		state, ok := p.entries[key]
		if !ok || !state.spokeLocal {
			entry := clusterreport.SpokeLocalEntry(id.Namespace, id.Name, now)
			size, digest := clusterreport.EntryDigest(entry)
			if h, onHub := onHubByKey[key]; onHub && h.digest == digest {
				entry.ObservedAt = h.observedAt
			}
			state = entryState{spokeLocal: true, entry: entry, size: size, digest: digest}
		}
		if h, onHub := onHubByKey[key]; !onHub || h.digest != state.digest {
			changes = append(changes, entryChange{index: len(entries), entry: state})
		}
		current[key] = state
		entries = append(entries, state.entry)
		sizes[key] = state.size
	}
	p.entries = current
	// What the slices carry: the current entries, or the hub's of the apps held back.
	planned := current
	gone := len(onHubByKey) > len(current)
	if done.held, done.heldFor = p.holdBack(changes, gone, a.tuning.settleWait, time.Now()); done.heldFor > 0 {
		planned = maps.Clone(current)
		for _, c := range changes {
			held := *c.onHub
			key := clusterreport.EntryKey(held.entry)
			entries[c.index], sizes[key], planned[key] = held.entry, held.size, held
		}
	}
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
		if current != nil && sameSliceByDigest(current, desired, planned) {
			continue
		}
		if gains(current, desired) {
			gaining = append(gaining, desired)
		} else {
			other = append(other, desired)
		}
	}
	for _, desired := range append(gaining, other...) {
		if err := a.applySlice(ctx, desired, planned); err != nil {
			return done, err
		}
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
		done.deleted++
	}
	return done, nil
}

// entryChange is an app whose current entry is not the hub's: at index in the planned
// entries, whether its state is passing (observedApp.passing), and the hub's entry, when
// the agent still has it (the one it last built or held).
type entryChange struct {
	index   int
	passing bool
	entry   entryState
	onHub   *entryState
}

// holdBack decides whether the slices keep the hub's entries of the changed apps for now:
// while every change is a passing state (observedApp.passing) of an app the hub already
// holds, with nothing in it that must not wait (the app's conditions, Argo CD's errors
// among them; the answer to a hub refresh; where it came from), and for at most wait from
// the first change held. A rollout is then written when it settles, or once per wait
// while it lasts, rather than at each of its steps; a new app, an app gone (gone), an
// error or a settled state goes at once, and takes every held change with it. It returns
// how many apps it holds back and for how much longer; zero when it holds none.
func (p *publisher) holdBack(changes []entryChange, gone bool, wait time.Duration, now time.Time) (int, time.Duration) {
	hold := len(changes) > 0 && !gone
	for _, c := range changes {
		hold = hold && c.passing && c.onHub != nil && sameNews(c.onHub.entry, c.entry.entry)
	}
	left := p.holding.Wait(struct{}{}, hold, wait, now)
	if left <= 0 {
		clear(p.held)
		return 0, 0
	}
	for _, c := range changes {
		p.held[clusterreport.EntryKey(c.onHub.entry)] = *c.onHub
	}
	return len(changes), left
}

// sameNews reports whether an app's entry b holds nothing that a and the hub do not, of
// what must not wait: its conditions, the refresh it answers, and where it came from.
func sameNews(a, b statusv1alpha1.AppStatus) bool {
	return a.Refreshed == b.Refreshed && a.ManifestWork == b.ManifestWork && a.ApplicationSet == b.ApplicationSet &&
		equality.Semantic.DeepEqual(a.Hub, b.Hub) && equality.Semantic.DeepEqual(a.Conditions, b.Conditions)
}

// sameSliceByDigest reports whether the slice on the hub holds what desired holds: the
// same format, label and owner, and the same apps in the same order, each with the
// digest and observedAt of its current entry.
func sameSliceByDigest(onHub *hubSlice, desired *statusv1alpha1.ApplicationStatusSlice, entries map[string]entryState) bool {
	if onHub.formatVersion != desired.FormatVersion || onHub.appCount != desired.AppCount || len(onHub.apps) != len(desired.Apps) ||
		onHub.Labels[statusv1alpha1.LabelAddon] != desired.Labels[statusv1alpha1.LabelAddon] ||
		!slices.ContainsFunc(onHub.OwnerReferences, func(r metav1.OwnerReference) bool { return r.UID == desired.OwnerReferences[0].UID }) {
		return false
	}
	for i, e := range desired.Apps {
		key := clusterreport.EntryKey(e)
		h := onHub.apps[i]
		if h.key() != key || h.digest != entries[key].digest || !h.observedAt.Time.Equal(e.ObservedAt.Time) {
			return false
		}
	}
	return true
}

// gains reports whether desired holds an app that current does not.
func gains(current *hubSlice, desired *statusv1alpha1.ApplicationStatusSlice) bool {
	if current == nil {
		return true
	}
	held := make(map[string]bool, len(current.apps))
	for _, e := range current.apps {
		held[e.key()] = true
	}
	for _, e := range desired.Apps {
		if !held[clusterreport.EntryKey(e)] {
			return true
		}
	}
	return false
}

// applySlice applies a slice server-side, as FieldManager, and records what it wrote:
// the apps of slice, whose current entries are in entries, at the resourceVersion of
// the answer.
func (a *agent) applySlice(ctx context.Context, slice *statusv1alpha1.ApplicationStatusSlice, entries map[string]entryState) error {
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(slice)
	if err != nil {
		return fmt.Errorf("encode ApplicationStatusSlice %s: %w", slice.Name, err)
	}
	ctx, cancel := context.WithTimeout(ctx, a.tuning.requestTimeout)
	defer cancel()
	applied, err := a.slices.client.Apply(ctx, slice.Name, &unstructured.Unstructured{Object: content},
		metav1.ApplyOptions{FieldManager: FieldManager, Force: true})
	if err != nil {
		return fmt.Errorf("apply ApplicationStatusSlice %s/%s: %w", a.opts.ClusterName, slice.Name, err)
	}
	written := *slice
	written.UID, written.ResourceVersion = applied.GetUID(), applied.GetResourceVersion()
	a.slices.observe(newHubSlice(&written, func(e statusv1alpha1.AppStatus) hubSliceApp {
		key := clusterreport.EntryKey(e)
		return hubSliceApp{namespace: e.Namespace, name: e.Name, size: entries[key].size, digest: entries[key].digest, observedAt: e.ObservedAt}
	}))
	return nil
}
