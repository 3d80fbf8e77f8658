package hubcache

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	workv1 "open-cluster-management.io/api/work/v1"

	statusv1alpha1 "github.com/ocm-gitops/argocd-pull-addon/pkg/apis/argocdpull/v1alpha1"
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

// TestStripSlice: the cache keeps of a slice every resource with what the hub shows,
// without tree nodes and images, and shares the message-less health of the resources.
func TestStripSlice(t *testing.T) {
	healthy := func() *statusv1alpha1.Health { return &statusv1alpha1.Health{Status: "Healthy"} }
	slice := &statusv1alpha1.ApplicationStatusSlice{Apps: []statusv1alpha1.AppStatus{{
		Namespace: "argocd", Name: "web",
		Resources: []statusv1alpha1.ResourceStatus{
			{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "web", Name: "web", Status: "Synced", Health: healthy(), Images: []string{"web:1"}},
			{Version: "v1", Kind: "Service", Namespace: "web", Name: "web", Status: "Synced", Health: healthy()},
			{Version: "v1", Kind: "Pod", Namespace: "web", Name: "web-1", Status: "Synced", Health: &statusv1alpha1.Health{Status: "Degraded", Message: "Back-off"}},
		},
		Nodes: []statusv1alpha1.ResourceNode{{Kind: "ReplicaSet", Name: "web-5d9c"}},
	}}}
	want := slice.DeepCopy()
	obj, err := stripSlice(slice)
	if err != nil {
		t.Fatal(err)
	}
	got := obj.(*statusv1alpha1.ApplicationStatusSlice).Apps[0]
	if got.Nodes != nil {
		t.Error("nodes kept")
	}
	if len(got.Resources) != 3 || cap(got.Resources) != 3 {
		t.Fatalf("resources %v (capacity %d)", got.Resources, cap(got.Resources))
	}
	for i, r := range got.Resources {
		w := want.Apps[0].Resources[i]
		w.Images = nil
		if !equality.Semantic.DeepEqual(r, w) {
			t.Errorf("resource %d: %+v, want %+v", i, r, w)
		}
	}
	if got.Resources[0].Health != got.Resources[1].Health {
		t.Error("the message-less health is not shared")
	}
}

// TestStripWork: the cache keeps a work's conditions and the identity and feedback of
// each manifest, not the manifest's conditions.
func TestStripWork(t *testing.T) {
	work := &workv1.ManifestWork{Status: workv1.ManifestWorkStatus{
		Conditions: []metav1.Condition{{Type: workv1.WorkApplied, Status: metav1.ConditionTrue}},
		ResourceStatus: workv1.ManifestResourceStatus{Manifests: []workv1.ManifestCondition{{
			ResourceMeta:    workv1.ManifestResourceMeta{Kind: "Application", Name: "web"},
			StatusFeedbacks: workv1.StatusFeedbackResult{Values: []workv1.FeedbackValue{{Name: "healthStatus"}}},
			Conditions:      []metav1.Condition{{Type: workv1.ManifestApplied, Status: metav1.ConditionTrue, Message: "Apply manifest complete"}},
		}}},
	}}
	obj, err := stripWork(work)
	if err != nil {
		t.Fatal(err)
	}
	got := obj.(*workv1.ManifestWork)
	m := got.Status.ResourceStatus.Manifests[0]
	if len(got.Status.Conditions) != 1 || m.ResourceMeta.Name != "web" || len(m.StatusFeedbacks.Values) != 1 || m.Conditions != nil {
		t.Errorf("status %+v", got.Status)
	}
}
