package hubcache

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestTransformApplication: the cache holds a digest of status.resources, which matches
// the same list and no other, and nothing of the managed fields; an Application without
// resources keeps none.
func TestTransformApplication(t *testing.T) {
	resources := []any{
		map[string]any{"group": "apps", "version": "v1", "kind": "Deployment", "namespace": "x", "name": "web", "status": "Synced",
			"health": map[string]any{"status": "Healthy"}},
		map[string]any{"version": "v1", "kind": "ConfigMap", "namespace": "x", "name": "web", "status": "Synced"},
	}
	app := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": "web", "managedFields": []any{map[string]any{"manager": "argocd-pull"}}},
		"status":   map[string]any{"resources": resources, "sync": map[string]any{"status": "Synced"}},
	}}
	obj, err := TransformApplication(app.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	cached := obj.(*unstructured.Unstructured)
	if len(cached.GetManagedFields()) != 0 {
		t.Error("managed fields kept")
	}
	digest := cached.Object["status"].(map[string]any)["resources"]
	if !SameResources(digest, resources) {
		t.Errorf("digest %v does not match its list", digest)
	}
	if SameResources(digest, resources[:1]) || SameResources(digest, nil) {
		t.Error("digest matches another list")
	}
	if SameResources(resources, resources) {
		t.Error("a list is taken for a digest")
	}
	if sync, _, _ := unstructured.NestedString(cached.Object, "status", "sync", "status"); sync != "Synced" {
		t.Errorf("status.sync.status %q", sync)
	}

	bare, err := TransformApplication(&unstructured.Unstructured{Object: map[string]any{"status": map[string]any{}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, found, _ := unstructured.NestedFieldNoCopy(bare.(*unstructured.Unstructured).Object, "status", "resources"); found {
		t.Error("an Application without resources got a digest")
	}
}
