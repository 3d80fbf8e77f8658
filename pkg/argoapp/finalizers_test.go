package argoapp

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestReleaseFinalizers(t *testing.T) {
	app := func(labels, annotations map[string]string, finalizers ...string) *unstructured.Unstructured {
		a := NewApplication()
		a.SetLabels(labels)
		a.SetAnnotations(annotations)
		a.SetFinalizers(finalizers)
		return a
	}
	pullLabel := map[string]string{LabelPullToOCMManagedCluster: "true"}
	skipped := map[string]string{AnnotationSkipReconcile: "true"}
	foreign := "example.com/hold"
	for _, tc := range []struct {
		name            string
		app             *unstructured.Unstructured
		servedElsewhere bool
		wantRemoved     []string
		wantKept        []string
	}{
		{"pulled and skipped: ours and Argo CD's go", app(pullLabel, skipped, FinalizerManifestWorkCleanup, ResourcesFinalizer, foreign),
			false, []string{FinalizerManifestWorkCleanup, ResourcesFinalizer}, []string{foreign}},
		{"ours only, skipped: Argo CD's go too", app(nil, skipped, FinalizerManifestWorkCleanup, ResourcesFinalizer+"/background"),
			false, []string{FinalizerManifestWorkCleanup, ResourcesFinalizer + "/background"}, []string{}},
		{"not skipped: the hub Argo CD keeps its own", app(pullLabel, nil, FinalizerManifestWorkCleanup, ResourcesFinalizer),
			false, []string{FinalizerManifestWorkCleanup}, []string{ResourcesFinalizer}},
		{"served by another controller: its business", app(pullLabel, skipped, ResourcesFinalizer),
			true, nil, []string{ResourcesFinalizer}},
		{"not pulled: nothing", app(nil, skipped, ResourcesFinalizer), false, nil, []string{ResourcesFinalizer}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			removed := ReleaseFinalizers(tc.app, HandlesArgoCDFinalizers(tc.app, tc.servedElsewhere))
			if !slices.Equal(removed, tc.wantRemoved) {
				t.Errorf("removed %v, want %v", removed, tc.wantRemoved)
			}
			kept := tc.app.GetFinalizers()
			if kept == nil {
				kept = []string{}
			}
			if !slices.Equal(kept, tc.wantKept) {
				t.Errorf("kept %v, want %v", kept, tc.wantKept)
			}
		})
	}
}
