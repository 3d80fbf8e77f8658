package propagation

// This file holds the writes to ManifestWorks: server-side apply when the work differs
// from its render, what this process applied last, and deletion.

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"reflect"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	workv1 "open-cluster-management.io/api/work/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/hubcache"
)

// renderedWorkLabels and renderedWorkAnnotations are the metadata keys that
// RenderManifestWork may set on a work. A rendered work without one of them must not
// keep it from an earlier render.
var (
	renderedWorkLabels = []string{
		argoapp.LabelPullToOCMManagedCluster, argoapp.LabelApplicationSet, argoapp.LabelApplicationSetHash,
		argoapp.LabelAddon,
	}
	renderedWorkAnnotations = []string{
		argoapp.AnnotationHubApplicationNamespace, argoapp.AnnotationHubApplicationName, argoapp.AnnotationHostingApplicationSet,
		argoapp.AnnotationOperationID,
	}
)

// workUpToDate reports whether the existing work already holds what desired, a fresh
// render, says. The apiserver defaults some fields of a work (the work agent's field
// manager, the feedback scrape type), so the comparison is semantic:
//   - the rendered labels and annotations match, present or absent;
//   - the manifests match exactly, compared by their hubcache.CompactManifest forms
//     (the cache holds a work's manifests in that form; a work read from the apiserver
//     holds them whole);
//   - every other field of the desired spec is in the existing spec with the same value,
//     and the existing spec has no top-level field that the render leaves out.
func workUpToDate(existing, desired *workv1.ManifestWork) bool {
	if !sameEntries(existing.Labels, desired.Labels, renderedWorkLabels) ||
		!sameEntries(existing.Annotations, desired.Annotations, renderedWorkAnnotations) {
		return false
	}
	existingSpec, err := jsonValue(compactSpec(existing.Spec))
	if err != nil {
		return false
	}
	desiredSpec, err := jsonValue(compactSpec(desired.Spec))
	if err != nil {
		return false
	}
	e, _ := existingSpec.(map[string]any)
	d, _ := desiredSpec.(map[string]any)
	for field := range e {
		if _, ok := d[field]; !ok {
			return false
		}
	}
	return reflect.DeepEqual(e["workload"], d["workload"]) && covers(e, d)
}

// compactSpec returns spec with its manifests in their hubcache.CompactManifest form.
func compactSpec(spec workv1.ManifestWorkSpec) workv1.ManifestWorkSpec {
	spec.Workload.Manifests = hubcache.CompactManifests(spec.Workload.Manifests)
	return spec
}

// sameEntries reports whether a and b agree on the keys of b and on keys, present or
// absent.
func sameEntries(a, b map[string]string, keys []string) bool {
	same := func(key string) bool {
		va, oka := a[key]
		vb, okb := b[key]
		return oka == okb && va == vb
	}
	for key := range b {
		if !same(key) {
			return false
		}
	}
	for _, key := range keys {
		if !same(key) {
			return false
		}
	}
	return true
}

// covers reports whether existing holds every value that desired sets: objects may
// have more fields, lists must have the same length, and scalars must be equal.
func covers(existing, desired any) bool {
	switch d := desired.(type) {
	case map[string]any:
		e, ok := existing.(map[string]any)
		if !ok {
			return false
		}
		for key, value := range d {
			if !covers(e[key], value) {
				return false
			}
		}
		return true
	case []any:
		e, ok := existing.([]any)
		if !ok || len(e) != len(d) {
			return false
		}
		for i := range d {
			if !covers(e[i], d[i]) {
				return false
			}
		}
		return true
	default:
		return reflect.DeepEqual(existing, desired)
	}
}

// jsonValue returns v as decoded JSON: maps, slices and scalars.
func jsonValue(v any) (any, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out any
	return out, json.Unmarshal(raw, &out)
}

// appliedConfiguration is a rendered work encoded for server-side apply, and the
// fingerprint of that encoding.
type appliedConfiguration struct {
	key         types.NamespacedName
	object      *unstructured.Unstructured
	fingerprint [sha256.Size]byte
}

// newAppliedConfiguration encodes the fields of a rendered work to apply: the typed
// object without its status and the zero creation timestamp, which the typed encoding
// always writes. The encoding is deterministic, so that two renders of the same content
// have the same fingerprint.
func newAppliedConfiguration(work *workv1.ManifestWork) (*appliedConfiguration, error) {
	raw, err := json.Marshal(work)
	if err != nil {
		return nil, fmt.Errorf("encode manifestwork %s/%s: %w", work.Namespace, work.Name, err)
	}
	obj := map[string]any{}
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, fmt.Errorf("encode manifestwork %s/%s: %w", work.Namespace, work.Name, err)
	}
	delete(obj, "status")
	unstructured.RemoveNestedField(obj, "metadata", "creationTimestamp")
	u := &unstructured.Unstructured{Object: obj}
	u.SetGroupVersionKind(schema.GroupVersion(workv1.GroupVersion).WithKind("ManifestWork"))
	return &appliedConfiguration{key: client.ObjectKeyFromObject(work), object: u, fingerprint: sha256.Sum256(raw)}, nil
}

// applyWork creates or updates a work with server-side apply, and remembers what it
// applied (see appliedWorks). The controller owns every field it sends, and takes them
// over from any other writer (force); a field dropped from the render is dropped from
// the work.
func (r *reconciler) applyWork(ctx context.Context, work *appliedConfiguration) error {
	if err := r.client.Apply(ctx, client.ApplyConfigurationFromUnstructured(work.object),
		client.FieldOwner(FieldManager), client.ForceOwnership, hubcache.MetadataAnswer); err != nil {
		return fmt.Errorf("apply manifestwork %s: %w", work.key, err)
	}
	// The apply answers with the work as stored.
	r.applied.record(work.key, appliedWork{resourceVersion: work.object.GetResourceVersion(), fingerprint: work.fingerprint})
	return nil
}

// appliedWorks remembers, for each work this process applied and its cache does not show
// yet, the resourceVersion the apply answered with and the fingerprint of what it
// applied. The reconcile reads works from the cache, which catches up with a write a
// moment after it: with this, it tells a cache that lags behind its own last apply (and
// waits for that write's event) from a work that someone else changed (and applies
// again), without asking the apiserver. An entry goes once the cache shows that
// version or a later one. The zero value is ready.
type appliedWorks struct {
	mu     sync.Mutex
	byWork map[types.NamespacedName]appliedWork
}

// appliedWork is what the last apply of a work by this process wrote.
type appliedWork struct {
	resourceVersion string
	fingerprint     [sha256.Size]byte
}

// record remembers the last apply of a work.
func (a *appliedWorks) record(key types.NamespacedName, w appliedWork) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.byWork == nil {
		a.byWork = map[types.NamespacedName]appliedWork{}
	}
	a.byWork[key] = w
}

// forget drops what is remembered of a work: it is being deleted.
func (a *appliedWorks) forget(key types.NamespacedName) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.byWork, key)
}

// lookup compares cached, the cache's version of the work key (nil when the cache has
// none), with this process's last apply of it. lagging: the cache shows a version older
// than that apply, which last holds. unsure: the cache cannot tell, since it has no
// such work (the apply's event has not come yet, or the work was deleted since) or its
// resourceVersions do not compare; ask the apiserver. Neither: the cache is current.
func (a *appliedWorks) lookup(key types.NamespacedName, cached *workv1.ManifestWork) (last appliedWork, lagging, unsure bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	last, ok := a.byWork[key]
	if !ok {
		return appliedWork{}, false, false
	}
	if cached == nil {
		return last, false, true
	}
	// Resource versions compare as integers (KEP-5504).
	order, err := resourceversion.CompareResourceVersion(cached.ResourceVersion, last.resourceVersion)
	if err != nil {
		return last, false, true
	}
	if order >= 0 {
		delete(a.byWork, key)
		return appliedWork{}, false, false
	}
	return last, true, false
}

// deleteWorks deletes works, skipping those already being deleted. app, when not nil,
// is the hub Application to record the deletions on.
func (r *reconciler) deleteWorks(ctx context.Context, app *unstructured.Unstructured, works []workv1.ManifestWork) error {
	log := ctrl.LoggerFrom(ctx)
	for i := range works {
		work := &works[i]
		if work.DeletionTimestamp != nil {
			continue
		}
		r.applied.forget(client.ObjectKeyFromObject(work))
		// The UID precondition keeps a work re-created under the same name since the
		// cache was filled.
		err := r.client.Delete(ctx, work, client.Preconditions{UID: &work.UID})
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("delete manifestwork %s/%s: %w", work.Namespace, work.Name, err)
		}
		log.Info("deleted ManifestWork", "work", client.ObjectKeyFromObject(work))
		if app != nil {
			r.recorder.Eventf(app, nil, corev1.EventTypeNormal, ReasonManifestWorkDeleted, eventAction,
				"Deleted ManifestWork %s/%s", work.Namespace, work.Name)
		}
	}
	return nil
}
