package propagation

import (
	"bytes"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/hubcache"
	"github.com/ocm-gitops/argocd-pull-addon/test/testenv"
)

func TestApplicationInputsChanged(t *testing.T) {
	tests := []struct {
		name   string
		base   func(app *unstructured.Unstructured) // of both versions, when set
		change func(app *unstructured.Unstructured)
		want   bool
	}{
		{"status only", nil, func(app *unstructured.Unstructured) {
			app.Object["status"] = map[string]any{"sync": map[string]any{"status": "OutOfSync"}}
			app.SetGeneration(app.GetGeneration() + 1) // no status subresource: the generation moves too
			app.SetResourceVersion("43")
			app.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "appstatus"}})
		}, false},
		{"spec", nil, func(app *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(app.Object, "v2", "spec", "source", "targetRevision")
		}, true},
		{"operation", nil, func(app *unstructured.Unstructured) {
			app.Object["operation"] = map[string]any{"sync": map[string]any{}}
		}, true},
		{"label", nil, func(app *unstructured.Unstructured) { app.SetLabels(nil) }, true},
		{"annotation", nil, func(app *unstructured.Unstructured) { testenv.SetAnnotation(app, argoapp.AnnotationRefresh, "hard") }, true},
		{"finalizers", nil, func(app *unstructured.Unstructured) { app.SetFinalizers([]string{argoapp.ResourcesFinalizer}) }, true},
		{"deletion", nil, func(app *unstructured.Unstructured) { now := metav1.Now(); app.SetDeletionTimestamp(&now) }, true},
		{"owner", nil, func(app *unstructured.Unstructured) {
			app.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "argoproj.io/v1alpha1", Kind: "ApplicationSet", Name: "set"}})
		}, true},
		{"operation state of an app with an operation", withOperation, func(app *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(app.Object, "Succeeded", "status", "operationState", "phase")
		}, true},
		{"other status of an app with an operation", withOperation, func(app *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(app.Object, "Healthy", "status", "health", "status")
		}, false},
	}
	// As the apiserver serves them, and as the manager's cache holds them (frozen).
	cached := func(app *unstructured.Unstructured) *unstructured.Unstructured {
		obj, err := hubcache.TransformApplication(app.DeepCopy())
		if err != nil {
			t.Fatal(err)
		}
		return obj.(*unstructured.Unstructured)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			oldApp := parse(t, hubApp)
			if tt.base != nil {
				tt.base(oldApp)
			}
			newApp := oldApp.DeepCopy()
			tt.change(newApp)
			if got := applicationInputsChanged(oldApp, newApp); got != tt.want {
				t.Errorf("applicationInputsChanged() = %v, want %v", got, tt.want)
			}
			if got := applicationInputsChanged(cached(oldApp), cached(newApp)); got != tt.want {
				t.Errorf("applicationInputsChanged() of the cached versions = %v, want %v", got, tt.want)
			}
		})
	}
}

// withOperation gives an app a sync operation that is running.
func withOperation(app *unstructured.Unstructured) {
	app.Object["operation"] = map[string]any{"sync": map[string]any{"revision": "main"}}
	_ = unstructured.SetNestedField(app.Object, "Running", "status", "operationState", "phase")
	_ = unstructured.SetNestedField(app.Object, "2026-01-02T03:04:05Z", "status", "operationState", "startedAt")
}

func TestWorkUpToDate(t *testing.T) {
	app := parse(t, hubApp)
	desired, err := RenderManifestWork(app, RenderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		change func(w *workv1.ManifestWork)
		want   bool
	}{
		{"identical", func(*workv1.ManifestWork) {}, true},
		{"server defaults and other metadata", func(w *workv1.ManifestWork) {
			w.ResourceVersion, w.Generation = "9", 4
			w.Labels["someone"] = "else"
			w.Spec.ManifestConfigs[0].UpdateStrategy.ServerSideApply.FieldManager = "work-agent"
			w.Status.Conditions = []metav1.Condition{{Type: workv1.WorkApplied}}
		}, true},
		{"a manifest differs", func(w *workv1.ManifestWork) {
			w.Spec.Workload.Manifests[0].Raw = []byte(`{"kind":"Application"}`)
		}, false},
		{"the cache's compact form of the same manifests", func(w *workv1.ManifestWork) {
			w.Spec.Workload.Manifests = hubcache.CompactManifests(w.Spec.Workload.Manifests)
		}, true},
		{"the cache's compact form of a manifest that differs", func(w *workv1.ManifestWork) {
			w.Spec.Workload.Manifests[0].Raw = bytes.Replace(w.Spec.Workload.Manifests[0].Raw, []byte(`"project":"`), []byte(`"project":"x`), 1)
			w.Spec.Workload.Manifests = hubcache.CompactManifests(w.Spec.Workload.Manifests)
		}, false},
		{"a rendered label is missing", func(w *workv1.ManifestWork) {
			delete(w.Labels, argoapp.LabelPullToOCMManagedCluster)
		}, false},
		{"a label of an earlier render stayed", func(w *workv1.ManifestWork) {
			w.Labels[argoapp.LabelApplicationSet] = "true"
		}, false},
		{"an annotation differs", func(w *workv1.ManifestWork) {
			w.Annotations[argoapp.AnnotationHubApplicationName] = "other"
		}, false},
		{"a config differs", func(w *workv1.ManifestWork) {
			w.Spec.ManifestConfigs[0].FeedbackScrapeType = workv1.FeedbackPollType
		}, false},
		{"a field the render leaves out", func(w *workv1.ManifestWork) {
			w.Spec.DeleteOption = &workv1.DeleteOption{PropagationPolicy: workv1.DeletePropagationPolicyTypeOrphan}
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			existing := desired.DeepCopy()
			tt.change(existing)
			if got := workUpToDate(existing, desired); got != tt.want {
				t.Errorf("workUpToDate() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestPauseState(t *testing.T) {
	tests := []struct {
		annotations map[string]string
		paused      bool
		invalid     bool
	}{
		{nil, false, false},
		{map[string]string{AnnotationPausePropagation: "true"}, true, false},
		{map[string]string{AnnotationPausePropagation: "false"}, false, false},
		{map[string]string{AnnotationPausePropagation: "yes"}, true, true},
		{map[string]string{AnnotationPausePropagation: ""}, true, true},
	}
	for _, tt := range tests {
		paused, why := pauseState(tt.annotations)
		if paused != tt.paused || (why != "") != tt.invalid {
			t.Errorf("pauseState(%v) = %v, %q; want paused %v, invalid %v", tt.annotations, paused, why, tt.paused, tt.invalid)
		}
	}
}

func TestEscapeJSONPointer(t *testing.T) {
	if got := argoapp.AnnotationPointer("argocd.argoproj.io/refresh"); got != "/metadata/annotations/argocd.argoproj.io~1refresh" {
		t.Errorf("AnnotationPointer = %q", got)
	}
	if got := argoapp.AnnotationPointer("a~b"); got != "/metadata/annotations/a~0b" {
		t.Errorf("AnnotationPointer = %q", got)
	}
}

func TestAppliedWorksLookup(t *testing.T) {
	key := types.NamespacedName{Namespace: "east", Name: "guestbook-1a2b3"}
	cached := func(resourceVersion string) *workv1.ManifestWork {
		return &workv1.ManifestWork{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, ResourceVersion: resourceVersion}}
	}
	applied := appliedWork{resourceVersion: "120", fingerprint: [32]byte{1}}
	tests := []struct {
		name            string
		record          bool
		cached          *workv1.ManifestWork
		lagging, unsure bool
		// kept: the record stays for the next lookup.
		kept bool
	}{
		{"nothing applied: the cache is current", false, cached("7"), false, false, false},
		{"nothing applied, none cached", false, nil, false, false, false},
		{"the cache is behind the apply", true, cached("99"), true, false, true},
		{"the cache is behind by digits", true, cached("5"), true, false, true},
		{"the cache shows the apply", true, cached("120"), false, false, false},
		{"the cache shows a later write", true, cached("1000"), false, false, false},
		{"the cache has no such work", true, nil, false, true, true},
		{"resource versions that do not compare", true, cached("x7"), false, true, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var a appliedWorks
			if tc.record {
				a.record(key, applied)
			}
			last, lagging, unsure := a.lookup(key, tc.cached)
			if lagging != tc.lagging || unsure != tc.unsure {
				t.Errorf("lagging %t, unsure %t; want %t, %t", lagging, unsure, tc.lagging, tc.unsure)
			}
			if (lagging || unsure) && last != applied {
				t.Errorf("last %+v, want %+v", last, applied)
			}
			if _, kept := a.byWork[key]; kept != tc.kept {
				t.Errorf("record kept %t, want %t", kept, tc.kept)
			}
		})
	}
}

func TestAppliedConfigurationFingerprint(t *testing.T) {
	app := parse(t, hubApp)
	render := func() *workv1.ManifestWork {
		work, err := RenderManifestWork(app, RenderOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return work
	}
	a, err := newAppliedConfiguration(render())
	if err != nil {
		t.Fatal(err)
	}
	b, err := newAppliedConfiguration(render())
	if err != nil {
		t.Fatal(err)
	}
	if a.fingerprint != b.fingerprint {
		t.Error("two renders of one Application have different fingerprints")
	}
	if _, found := a.object.Object["status"]; found {
		t.Error("the apply configuration carries a status")
	}
	if _, found, _ := unstructured.NestedFieldNoCopy(a.object.Object, "metadata", "creationTimestamp"); found {
		t.Error("the apply configuration carries a creation timestamp")
	}
	_ = unstructured.SetNestedField(app.Object, "v2", "spec", "source", "targetRevision")
	c, err := newAppliedConfiguration(render())
	if err != nil {
		t.Fatal(err)
	}
	if c.fingerprint == a.fingerprint {
		t.Error("a changed Application has the fingerprint of the old one")
	}
}
