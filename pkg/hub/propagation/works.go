package propagation

// This file holds the writes to ManifestWorks: server-side apply when the work differs
// from its render, and deletion.

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	workv1 "open-cluster-management.io/api/work/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
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
		argoapp.AnnotationOperationBaseline,
	}
)

// workUpToDate reports whether the existing work already holds what desired, a fresh
// render, says. The apiserver defaults some fields of a work (the work agent's field
// manager, the feedback scrape type), so the comparison is semantic:
//   - the rendered labels and annotations match, present or absent;
//   - the manifests match exactly;
//   - every other field of the desired spec is in the existing spec with the same value,
//     and the existing spec has no top-level field that the render leaves out.
func workUpToDate(existing, desired *workv1.ManifestWork) bool {
	if !sameEntries(existing.Labels, desired.Labels, renderedWorkLabels) ||
		!sameEntries(existing.Annotations, desired.Annotations, renderedWorkAnnotations) {
		return false
	}
	existingSpec, err := jsonValue(existing.Spec)
	if err != nil {
		return false
	}
	desiredSpec, err := jsonValue(desired.Spec)
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

// applyWork creates or updates a work with server-side apply. The controller owns
// every field it sends, and takes them over from any other writer (force); a field
// dropped from the render is dropped from the work.
func (r *reconciler) applyWork(ctx context.Context, work *workv1.ManifestWork) error {
	obj, err := applyConfiguration(work)
	if err != nil {
		return fmt.Errorf("encode manifestwork %s/%s: %w", work.Namespace, work.Name, err)
	}
	if err := r.client.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj),
		client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
		return fmt.Errorf("apply manifestwork %s/%s: %w", work.Namespace, work.Name, err)
	}
	return nil
}

// applyConfiguration returns the fields of a rendered work to apply: the typed object
// without its status and the zero creation timestamp, which the typed encoding always
// writes.
func applyConfiguration(work *workv1.ManifestWork) (*unstructured.Unstructured, error) {
	value, err := jsonValue(work)
	if err != nil {
		return nil, err
	}
	obj, ok := value.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("a manifestwork encodes as %T", value)
	}
	delete(obj, "status")
	unstructured.RemoveNestedField(obj, "metadata", "creationTimestamp")
	u := &unstructured.Unstructured{Object: obj}
	u.SetGroupVersionKind(schema.GroupVersion(workv1.GroupVersion).WithKind("ManifestWork"))
	return u, nil
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
