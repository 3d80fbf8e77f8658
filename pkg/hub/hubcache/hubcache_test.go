package hubcache

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
	"unique"
	"unsafe"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	statusv1alpha1 "github.com/ocm-gitops/argocd-pull-addon/pkg/apis/argocdpull/v1alpha1"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/clusterreport"
)

// TestTransformApplication: the cache holds a digest of status.resources (and of
// status.history), which matches the same list and no other, and nothing of the managed
// fields; an Application without resources keeps none.
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
	cached := Thawed(obj.(*unstructured.Unstructured))
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
	withHistory := app.DeepCopy()
	history := []any{map[string]any{"id": int64(1), "revision": "3f5e1c2a", "deployedAt": "2026-11-28T06:00:00Z"}}
	withHistory.Object["status"].(map[string]any)["history"] = history
	obj, err = TransformApplication(withHistory)
	if err != nil {
		t.Fatal(err)
	}
	if digest := Thawed(obj.(*unstructured.Unstructured)).Object["status"].(map[string]any)["history"]; !SameResources(digest, history) {
		t.Errorf("status.history is cached as %v, want the digest of its list", digest)
	}
	if sync, _, _ := unstructured.NestedString(cached.Object, "status", "sync", "status"); sync != "Synced" {
		t.Errorf("status.sync.status %q", sync)
	}

	bare, err := TransformApplication(&unstructured.Unstructured{Object: map[string]any{"status": map[string]any{}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, found, _ := unstructured.NestedFieldNoCopy(Thawed(bare.(*unstructured.Unstructured)).Object, "status", "resources"); found {
		t.Error("an Application without resources got a digest")
	}
}

// TestFrozenApplication: the cache holds every field of an Application but its metadata
// as JSON text, once however often it is transformed (client-go transforms an informer's
// initial list twice); thawing gives back the Application the apiserver served, whole
// numbers as int64, without touching the cache's own map; and the client thaws what it
// reads, Applications only, unless asked to keep them frozen.
func TestFrozenApplication(t *testing.T) {
	served := func() *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
			"metadata": map[string]any{"name": "web", "namespace": "argocd", "generation": int64(3),
				"creationTimestamp": "2026-11-27T05:00:00Z",
				"labels":            map[string]any{"apps.open-cluster-management.io/pull-to-ocm-managed-cluster": "true"}},
			"spec": map[string]any{"project": "default", "syncPolicy": map[string]any{"retry": map[string]any{"limit": int64(5)}},
				"ignoreDifferences": []any{map[string]any{"kind": "Secret", "jsonPointers": []any{"/data"}}}},
			"operation": map[string]any{"sync": map[string]any{"revision": "main", "prune": true}},
			"status": map[string]any{"sync": map[string]any{"status": "Synced"}, "health": map[string]any{"status": "Healthy"},
				"operationState": map[string]any{"phase": "Succeeded", "retryCount": int64(1)}},
		}}
	}
	once, err := TransformApplication(served())
	if err != nil {
		t.Fatal(err)
	}
	cached := once.(*unstructured.Unstructured)
	for _, key := range []string{"spec", "operation", "status"} {
		if _, text := cached.Object[key].(string); !text {
			t.Errorf("%s is not frozen: %T", key, cached.Object[key])
		}
	}
	if _, ok := cached.Object["metadata"].(map[string]any); !ok || cached.GetName() != "web" || len(cached.GetLabels()) != 1 {
		t.Errorf("the metadata is not kept as it is: %v", cached.Object["metadata"])
	}
	for _, field := range frozenMetadataFields {
		if _, ok := cached.Object["metadata"].(map[string]any)[field]; ok {
			t.Errorf("metadata.%s is not frozen", field)
		}
	}
	twice, err := TransformApplication(cached.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(twice, cached) {
		t.Errorf("transformed twice:\n%v\nonce:\n%v", twice, cached)
	}

	before := cached.DeepCopy()
	thawed := Thawed(cached)
	if !equality.Semantic.DeepEqual(thawed, served()) {
		t.Errorf("thawed:\n%v\nwant\n%v", thawed, served())
	}
	if !equality.Semantic.DeepEqual(cached, before) {
		t.Error("thawing changed the cache's object")
	}
	if isFrozen(thawed) || Thawed(thawed) != thawed {
		t.Error("a thawed Application is thawed again")
	}
	if Thawed(&workv1.ManifestWork{}) != nil {
		t.Error("a ManifestWork is thawed")
	}

	// The client thaws Applications, and leaves other kinds alone: a Secret's type is a
	// top-level string too.
	secret := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
		"metadata": map[string]any{"name": "s", "namespace": "argocd"}}}
	reader := &thawingReads{WithWatch: fake.NewClientBuilder().WithObjects(cached.DeepCopy(), secret.DeepCopy()).Build()}
	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(cached.GroupVersionKind())
	if err := reader.Get(t.Context(), client.ObjectKey{Namespace: "argocd", Name: "web"}, got); err != nil {
		t.Fatal(err)
	}
	if isFrozen(got) || got.Object["spec"].(map[string]any)["project"] != "default" {
		t.Errorf("Get gave a frozen Application: %v", got.Object)
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(cached.GroupVersionKind().GroupVersion().WithKind("ApplicationList"))
	if err := reader.List(t.Context(), list); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || isFrozen(&list.Items[0]) {
		t.Errorf("List gave %v", list.Items)
	}
	if err := reader.List(t.Context(), list, KeepFrozen); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || !isFrozen(&list.Items[0]) {
		t.Errorf("List with KeepFrozen gave %v", list.Items)
	}
	keptFrozen := &unstructured.Unstructured{}
	keptFrozen.SetGroupVersionKind(cached.GroupVersionKind())
	if err := reader.Get(t.Context(), client.ObjectKey{Namespace: "argocd", Name: "web"}, keptFrozen, KeepFrozen); err != nil {
		t.Fatal(err)
	}
	if !isFrozen(keptFrozen) || keptFrozen.GetName() != "web" {
		t.Errorf("Get with KeepFrozen gave %v", keptFrozen.Object)
	}

	// MayHold says no only when a frozen field lacks the text.
	if !MayHold(cached, "status", "Healthy") || MayHold(cached, "status", "OCMPropagationError") {
		t.Error("MayHold does not read the frozen status")
	}
	if !MayHold(thawed, "status", "OCMPropagationError") || !MayHold(cached, "metadata", "OCMPropagationError") {
		t.Error("MayHold says no of a field that is not frozen")
	}

	gotSecret := &unstructured.Unstructured{}
	gotSecret.SetGroupVersionKind(secret.GroupVersionKind())
	if err := reader.Get(t.Context(), client.ObjectKey{Namespace: "argocd", Name: "s"}, gotSecret); err != nil {
		t.Fatalf("a Secret read through the client: %v", err)
	}
}

// TestStripSlice: the cache keeps of a slice every resource with what the hub shows,
// packed, without tree nodes and images, and keeps a digest of each entry whole, which a
// change of the tree alone changes.
func TestStripSlice(t *testing.T) {
	healthy := func() *statusv1alpha1.Health { return &statusv1alpha1.Health{Status: "Healthy"} }
	slice := &statusv1alpha1.ApplicationStatusSlice{Apps: []statusv1alpha1.AppStatus{{
		Namespace: "argocd", Name: "web", ObservedAt: metav1.NewTime(time.Date(2026, 11, 25, 4, 0, 0, 0, time.UTC)),
		Sync: statusv1alpha1.SyncStatus{Status: "Synced", Revision: "3f5e1c2a9b8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f"},
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
	if got.Resources != nil {
		t.Errorf("resources kept as structs: %v", got.Resources)
	}
	resources, ok := UnpackResources(got.PackedResources)
	if want := unpacked(want.Apps[0].Resources); !ok || !equality.Semantic.DeepEqual(resources, want) {
		t.Errorf("packed resources %+v (%v), want %+v", resources, ok, want)
	}
	_, digest := clusterreport.EntryDigest(want.Apps[0])
	if got.Digest != string(digest[:]) {
		t.Error("the digest is not that of the entry as the agent wrote it")
	}
	if size, written := clusterreport.EntrySize(got), clusterreport.EntrySize(want.Apps[0]); size != written {
		t.Errorf("the cached entry counts %d bytes against the slice's bound; as the agent wrote it, %d", size, written)
	}
	// Transformed again, as an informer's initial list does: the same.
	again, err := stripSlice(obj.(*statusv1alpha1.ApplicationStatusSlice).DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	if twice := again.(*statusv1alpha1.ApplicationStatusSlice).Apps[0]; !equality.Semantic.DeepEqual(twice, got) {
		t.Errorf("transformed twice: %+v, once: %+v", twice, got)
	}
	// Another cluster's slice of the same app, decoded on its own: the strings both
	// repeat are the one canonical copy (argoapp.Intern), as long as it lives. The handles
	// keep it alive: the garbage collector may otherwise drop it between two strips, and
	// the next strip makes a new one.
	namespace, revision := unique.Make(want.Apps[0].Namespace), unique.Make(want.Apps[0].Sync.Revision)
	other := want.DeepCopy()
	other.Apps[0].Namespace, other.Apps[0].Sync.Revision = strings.Clone(other.Apps[0].Namespace), strings.Clone(other.Apps[0].Sync.Revision)
	obj, err = stripSlice(other)
	if err != nil {
		t.Fatal(err)
	}
	if o := obj.(*statusv1alpha1.ApplicationStatusSlice).Apps[0]; unsafe.StringData(o.Namespace) != unsafe.StringData(namespace.Value()) ||
		unsafe.StringData(o.Sync.Revision) != unsafe.StringData(revision.Value()) || o.Sync.Revision != want.Apps[0].Sync.Revision {
		t.Error("two slices hold two copies of the namespace and revision of the same app")
	}
	rescheduled := want.DeepCopy()
	rescheduled.Apps[0].Nodes[0].Name = "web-7f1a"
	obj, err = stripSlice(rescheduled)
	if err != nil {
		t.Fatal(err)
	}
	if obj.(*statusv1alpha1.ApplicationStatusSlice).Apps[0].Digest == got.Digest {
		t.Error("a change of the tree alone leaves the digest unchanged")
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
	app := []byte(`{"apiVersion":"argoproj.io/v1alpha1","kind":"Application","metadata":{"name":"web"},"spec":{"project":"default"}}`)
	work.Spec.Workload.Manifests = []workv1.Manifest{{RawExtension: runtime.RawExtension{Raw: app}}}
	obj, err := stripWork(work)
	if err != nil {
		t.Fatal(err)
	}
	got := obj.(*workv1.ManifestWork)
	m := got.Status.ResourceStatus.Manifests[0]
	if len(got.Status.Conditions) != 1 || m.ResourceMeta.Name != "web" || len(m.StatusFeedbacks.Values) != 1 || m.Conditions != nil {
		t.Errorf("status %+v", got.Status)
	}
	if manifests := got.Spec.Workload.Manifests; len(manifests) != 1 || string(manifests[0].Raw) != string(CompactManifest(app)) {
		t.Errorf("manifests %s, want the compact form of the Application", manifests)
	}
}

// TestCompactManifest: a manifest's compact form is the same for the same JSON value,
// however encoded, and differs for any other value; it keeps the kind, and the operation
// request and termination of an Application; it is its own compact form; what does not
// decode is kept.
func TestCompactManifest(t *testing.T) {
	app := `{"apiVersion":"argoproj.io/v1alpha1","kind":"Application","metadata":{"name":"web","namespace":"argocd",` +
		`"annotations":{"argocd-pull.open-cluster-management.io/operation":"{\"sync\":{\"revision\":\"main\"}}","example.com/a":"b"}},` +
		`"spec":{"project":"default","source":{"repoURL":"https://example.com/repo","targetRevision":"main"}}}`
	compact := CompactManifest([]byte(app))

	same := `{ "kind": "Application", "apiVersion": "argoproj.io/v1alpha1",
		"spec": {"source": {"targetRevision": "main", "repoURL": "https://example.com/repo"}, "project": "default"},
		"metadata": {"annotations": {"example.com/a": "b", "argocd-pull.open-cluster-management.io/operation": "{\"sync\":{\"revision\":\"main\"}}"},
		"namespace": "argocd", "name": "web"}}`
	if got := CompactManifest([]byte(same)); string(got) != string(compact) {
		t.Errorf("the same value encoded otherwise: %s, want %s", got, compact)
	}
	for _, other := range []string{
		strings.Replace(app, `"main"}}`, `"v2"}}`, 1),                           // spec.source.targetRevision
		strings.Replace(app, `\"revision\":\"main\"`, `\"revision\":\"v2\"`, 1), // the operation
		strings.Replace(app, `"project":"default"`, `"project":"default","extra":null`, 1),
		strings.Replace(app, `"argocd"`, `"argocd2"`, 1),
	} {
		if got := CompactManifest([]byte(other)); string(got) == string(compact) {
			t.Errorf("%s has the compact form of %s", other, app)
		}
	}
	if got := CompactManifest(compact); string(got) != string(compact) {
		t.Errorf("the compact form of a compact form: %s, want %s", got, compact)
	}
	var fields map[string]any
	if err := json.Unmarshal(compact, &fields); err != nil {
		t.Fatal(err)
	}
	digest, _ := fields[ManifestDigestKey].(string)
	metadata, _ := fields["metadata"].(map[string]any)
	annotations, _ := metadata["annotations"].(map[string]any)
	if fields["kind"] != "Application" || !strings.HasPrefix(digest, digestPrefix) || fields["spec"] != nil ||
		annotations["argocd-pull.open-cluster-management.io/operation"] != `{"sync":{"revision":"main"}}` || len(annotations) != 1 {
		t.Errorf("compact form %s", compact)
	}
	if got := CompactManifest([]byte(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"x"}}`)); strings.Contains(string(got), "operation") ||
		!strings.Contains(string(got), `"kind":"Namespace"`) {
		t.Errorf("compact form of a namespace: %s", got)
	}
	if got := CompactManifest([]byte(`not json`)); string(got) != "not json" {
		t.Errorf("compact form of what does not decode: %s", got)
	}
}

// TestInterningKeepsContent: the cache's Application and work hold the same content as
// the apiserver's but for what the transforms drop, and their repeated strings are one
// copy shared by every object.
func TestInterningKeepsContent(t *testing.T) {
	app := func() *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
			"metadata": map[string]any{"name": "guestbook-with-a-long-name-0001", "namespace": "argocd",
				"annotations": map[string]any{"apps.open-cluster-management.io/ocm-managed-cluster": "cluster1"},
				"finalizers":  []any{"resources-finalizer.argocd.argoproj.io"}},
			"spec": map[string]any{"project": "default", "syncPolicy": map[string]any{"automated": map[string]any{"prune": true}},
				"source": map[string]any{"repoURL": "https://github.com/argoproj/argocd-example-apps", "path": "guestbook"}},
			"status": map[string]any{"sync": map[string]any{"status": "Synced"}, "health": map[string]any{"status": "Healthy"},
				"operationState": map[string]any{"phase": "Succeeded", "retryCount": int64(1),
					"syncResult": map[string]any{"revision": "3f5e1c2a9b8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f"}}},
		}}
	}
	first, _ := TransformApplication(app())
	second, _ := TransformApplication(app())
	if thawed := Thawed(first.(*unstructured.Unstructured)); !equality.Semantic.DeepEqual(thawed, app()) {
		t.Errorf("the cached Application differs:\n%v\nwant\n%v", thawed, app())
	}
	// What the cache keeps as maps, the metadata (the rest is frozen).
	key := func(u any, want string) string {
		for k := range u.(*unstructured.Unstructured).Object["metadata"].(map[string]any) {
			if k == want {
				return k
			}
		}
		return ""
	}
	if a, b := key(first, "annotations"), key(second, "annotations"); unsafe.StringData(a) != unsafe.StringData(b) {
		t.Error("two cached Applications hold two copies of a key")
	}
	a, _, _ := unstructured.NestedString(first.(*unstructured.Unstructured).Object, "metadata", "namespace")
	b, _, _ := unstructured.NestedString(second.(*unstructured.Unstructured).Object, "metadata", "namespace")
	if unsafe.StringData(a) != unsafe.StringData(b) {
		t.Error("two cached Applications hold two copies of a short value")
	}

	healthy := "Healthy"
	work := func() *workv1.ManifestWork {
		return &workv1.ManifestWork{
			ObjectMeta: metav1.ObjectMeta{Name: "guestbook-1a2b3", Namespace: "cluster1",
				Labels:      map[string]string{"apps.open-cluster-management.io/pull-to-ocm-managed-cluster": "true"},
				Annotations: map[string]string{"apps.open-cluster-management.io/hub-application-name": "guestbook-with-a-long-name-0001"}},
			Spec: workv1.ManifestWorkSpec{ManifestConfigs: []workv1.ManifestConfigOption{{
				ResourceIdentifier: workv1.ResourceIdentifier{Group: "argoproj.io", Resource: "applications", Name: "guestbook", Namespace: "argocd"},
				FeedbackRules:      []workv1.FeedbackRule{{Type: workv1.JSONPathsType, JsonPaths: []workv1.JsonPath{{Name: "healthStatus", Path: ".status.health.status"}}}},
				UpdateStrategy: &workv1.UpdateStrategy{Type: workv1.UpdateStrategyTypeServerSideApply,
					ServerSideApply: &workv1.ServerSideApplyConfig{Force: true, FieldManager: "work-agent"}},
			}}},
			Status: workv1.ManifestWorkStatus{
				Conditions: []metav1.Condition{{Type: workv1.WorkApplied, Status: metav1.ConditionTrue, Reason: "AppliedManifestWorkComplete", Message: "Apply manifest work complete"}},
				ResourceStatus: workv1.ManifestResourceStatus{Manifests: []workv1.ManifestCondition{{
					ResourceMeta: workv1.ManifestResourceMeta{Group: "argoproj.io", Version: "v1alpha1", Kind: "Application", Resource: "applications", Name: "guestbook", Namespace: "argocd"},
					StatusFeedbacks: workv1.StatusFeedbackResult{Values: []workv1.FeedbackValue{{Name: "healthStatus",
						Value: workv1.FieldValue{Type: workv1.String, String: &healthy}}}},
				}}},
			},
		}
	}
	cached, _ := stripWork(work())
	if !equality.Semantic.DeepEqual(cached, work()) {
		t.Errorf("the cached work differs:\n%+v\nwant\n%+v", cached, work())
	}
	// The feedback rules and update strategy, the same in every work, are one copy; other
	// ones are copies of their own.
	again, _ := stripWork(work())
	one, two := cached.(*workv1.ManifestWork).Spec.ManifestConfigs[0], again.(*workv1.ManifestWork).Spec.ManifestConfigs[0]
	if &one.FeedbackRules[0] != &two.FeedbackRules[0] || one.UpdateStrategy != two.UpdateStrategy {
		t.Error("two cached works hold two copies of the same feedback rules or update strategy")
	}
	other := work()
	other.Spec.ManifestConfigs[0].FeedbackRules[0].JsonPaths[0].Path = ".status.health"
	other.Spec.ManifestConfigs[0].UpdateStrategy.ServerSideApply.Force = false
	want := other.DeepCopy()
	stripped, _ := stripWork(other)
	three := stripped.(*workv1.ManifestWork).Spec.ManifestConfigs[0]
	if &three.FeedbackRules[0] == &one.FeedbackRules[0] || three.UpdateStrategy == one.UpdateStrategy {
		t.Error("a work's own feedback rules or update strategy are replaced by other ones")
	}
	if !equality.Semantic.DeepEqual(stripped, want) {
		t.Errorf("the cached work differs:\n%+v\nwant\n%+v", stripped, want)
	}
}

// TestTransformApplicationSharesMetadata: Applications with the same labels, annotations
// or owner references hold one copy of each, others their own; each reads as it was;
// and a second transform, as an informer's initial list makes, leaves the shared ones as
// they are (run with -race: it only reads them while other goroutines read them too).
func TestTransformApplicationSharesMetadata(t *testing.T) {
	app := func(name, cluster string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
			"metadata": map[string]any{"name": name, "namespace": "argocd",
				"labels":      map[string]any{"apps.open-cluster-management.io/pull-to-ocm-managed-cluster": "true"},
				"annotations": map[string]any{"apps.open-cluster-management.io/ocm-managed-cluster": cluster, "argocd.argoproj.io/skip-reconcile": "true"},
				"ownerReferences": []any{map[string]any{"apiVersion": "argoproj.io/v1alpha1", "kind": "ApplicationSet", "name": "guestbook",
					"uid": "19123a17-d8b6-46e7-abea-85cc93df386e", "controller": true, "blockOwnerDeletion": true}}},
			"spec": map[string]any{"project": "default"},
		}}
		return u
	}
	metadata := func(obj any, key string) any {
		return obj.(*unstructured.Unstructured).Object["metadata"].(map[string]any)[key]
	}
	same := func(a, b any) bool { return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer() }
	one, _ := TransformApplication(app("guestbook-cluster1-a", "cluster1"))
	two, _ := TransformApplication(app("guestbook-cluster1-b", "cluster1"))
	three, _ := TransformApplication(app("guestbook-cluster2", "cluster2"))
	for _, key := range []string{"labels", "annotations", "ownerReferences"} {
		if !same(metadata(one, key), metadata(two, key)) {
			t.Errorf("two Applications hold two copies of the same %s", key)
		}
	}
	if same(metadata(one, "annotations"), metadata(three, "annotations")) {
		t.Error("an Application holds the annotations of another")
	}
	if !same(metadata(one, "labels"), metadata(three, "labels")) {
		t.Error("two Applications hold two copies of the same labels")
	}
	spec := func(obj any) string { return obj.(*unstructured.Unstructured).Object["spec"].(string) }
	if unsafe.StringData(spec(one)) != unsafe.StringData(spec(three)) {
		t.Error("two Applications hold two copies of the same frozen spec")
	}
	other := app("guestbook-cluster3", "cluster3")
	other.Object["spec"] = map[string]any{"project": "team-a"}
	if four, _ := TransformApplication(other); unsafe.StringData(spec(four)) == unsafe.StringData(spec(one)) || spec(four) != `{"project":"team-a"}` {
		t.Errorf("an Application holds the spec of another: %s", spec(four))
	}
	for name, got := range map[string]any{"guestbook-cluster1-b": two, "guestbook-cluster2": three} {
		cluster := map[string]string{"guestbook-cluster1-b": "cluster1", "guestbook-cluster2": "cluster2"}[name]
		if thawed := Thawed(got.(*unstructured.Unstructured)); !equality.Semantic.DeepEqual(thawed, app(name, cluster)) {
			t.Errorf("the cached Application differs:\n%v\nwant\n%v", thawed, app(name, cluster))
		}
	}

	// Transformed again, as an informer's initial list does, while other goroutines read
	// the shared metadata.
	labels := metadata(one, "labels").(map[string]any)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
					for range labels {
					}
				}
			}
		})
	}
	for range 100 {
		if again, err := TransformApplication(one); err != nil || again != one {
			t.Fatalf("transformed again: %v, %v", again, err)
		}
	}
	close(stop)
	wg.Wait()
	if !same(metadata(one, "labels"), labels) || len(labels) != 1 {
		t.Errorf("the shared labels changed: %v", labels)
	}
}

// TestStrippedSliceTooLarge: the hub rejects a slice whose apps, as the agent wrote
// them, exceed clusterreport.MaxSliceBytes, although the cache keeps less of them.
func TestStrippedSliceTooLarge(t *testing.T) {
	app := statusv1alpha1.AppStatus{Namespace: "argocd", Name: "huge", ObservedAt: metav1.NewTime(time.Date(2026, 11, 25, 4, 0, 0, 0, time.UTC))}
	// About 150 bytes each: past the bound in 8,000.
	for i := range 8000 {
		app.Resources = append(app.Resources, statusv1alpha1.ResourceStatus{Version: "v1", Kind: "ConfigMap", Namespace: "huge",
			Name: fmt.Sprintf("config-%06d", i), Status: "Synced", Images: []string{"registry.example.com/team/app:1.0.0"}})
	}
	if clusterreport.EntrySize(app) <= clusterreport.MaxSliceBytes {
		t.Fatalf("the app takes %d bytes, not more than %d", clusterreport.EntrySize(app), clusterreport.MaxSliceBytes)
	}
	slice := &statusv1alpha1.ApplicationStatusSlice{FormatVersion: clusterreport.SliceFormatVersion, Apps: []statusv1alpha1.AppStatus{app}}
	slice.Name = "argocd-pull-0"
	stripped, err := stripSlice(slice)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := clusterreport.DecodeSlices([]statusv1alpha1.ApplicationStatusSlice{*stripped.(*statusv1alpha1.ApplicationStatusSlice)}); !errors.Is(err, clusterreport.ErrTooLarge) {
		t.Errorf("a cached slice too large as the agent wrote it: %v, want %v", err, clusterreport.ErrTooLarge)
	}
}

// TestStrippedSliceOverTheBoundsKeepsOnlyItsApps: of a slice the hub rejects (over
// MaxSliceBytes, or over MaxAppsPerSlice), the cache keeps what finds each app and no
// content, so that what an agent writes beyond the bounds costs the manager no memory;
// the slice is still rejected, and transformed again, the same.
func TestStrippedSliceOverTheBoundsKeepsOnlyItsApps(t *testing.T) {
	observed := metav1.NewTime(time.Date(2026, 11, 25, 4, 0, 0, 0, time.UTC))
	message := strings.Repeat("x", clusterreport.MaxMessageBytes)
	large := statusv1alpha1.AppStatus{Namespace: "argocd", Name: "large", ManifestWork: "large-work", ObservedAt: observed,
		Hub: &statusv1alpha1.ObjectRef{Namespace: "apps", Name: "large"}}
	for i := range 1100 { // about 1.1 MiB of conditions
		large.Conditions = append(large.Conditions, statusv1alpha1.Condition{Type: "SyncError", Message: fmt.Sprint(i) + message})
	}
	many := make([]statusv1alpha1.AppStatus, 0, 3*clusterreport.MaxAppsPerSlice)
	for i := range 3 * clusterreport.MaxAppsPerSlice {
		many = append(many, statusv1alpha1.AppStatus{Namespace: "argocd", Name: fmt.Sprint(i), ObservedAt: observed,
			Conditions: []statusv1alpha1.Condition{{Type: "SyncError", Message: message}}})
	}
	for name, apps := range map[string][]statusv1alpha1.AppStatus{"over MaxSliceBytes": {large}, "over MaxAppsPerSlice": many} {
		slice := &statusv1alpha1.ApplicationStatusSlice{FormatVersion: clusterreport.SliceFormatVersion, Apps: apps}
		obj, err := stripSlice(slice.DeepCopy())
		if err != nil {
			t.Fatal(err)
		}
		stripped := obj.(*statusv1alpha1.ApplicationStatusSlice)
		if len(stripped.Apps) > clusterreport.MaxAppsPerSlice+1 {
			t.Errorf("%s: the cache keeps %d apps", name, len(stripped.Apps))
		}
		for _, e := range stripped.Apps {
			if e.Conditions != nil || e.PackedResources != "" || e.Digest == "" || e.Size == 0 || e.Name == "" {
				t.Fatalf("%s: the cache keeps of an app of a rejected slice %+v, want its identity, digest and size", name, e)
			}
		}
		if name == "over MaxSliceBytes" && (stripped.Apps[0].ManifestWork != "large-work" || stripped.Apps[0].Hub == nil || stripped.Apps[0].Hub.Name != "large") {
			t.Errorf("%s: what finds the app is gone: %+v", name, stripped.Apps[0])
		}
		if _, err := clusterreport.DecodeSlices([]statusv1alpha1.ApplicationStatusSlice{*stripped}); !errors.Is(err, clusterreport.ErrTooLarge) {
			t.Errorf("%s: the cached slice decodes: %v, want %v", name, err, clusterreport.ErrTooLarge)
		}
		again, err := stripSlice(stripped.DeepCopy())
		if err != nil {
			t.Fatal(err)
		}
		if !equality.Semantic.DeepEqual(again, stripped) {
			t.Errorf("%s: transformed twice differs from once", name)
		}
	}
}

// TestCacheHoldsAtMostMaxCachedSliceBytesOfASlice: the largest slices the agent's
// encoder writes are held (the fullest of the smallest apps, an app of the most
// conditions with the longest messages, one of the most resources), each in less than
// MaxCachedSliceBytes; a slice within MaxSliceBytes of JSON whose many empty items would
// take more is held as a rejected one, and rejected.
func TestCacheHoldsAtMostMaxCachedSliceBytesOfASlice(t *testing.T) {
	observed := time.Date(2026, 11, 25, 4, 0, 0, 0, time.UTC)
	var tiny []statusv1alpha1.AppStatus
	for i := range clusterreport.MaxAppsPerSlice {
		tiny = append(tiny, clusterreport.FitEntry(clusterreport.Entry(clusterreport.App{Namespace: "a", Name: fmt.Sprint(i), ObservedAt: observed}, clusterreport.Tree{})))
	}
	fullest := clusterreport.PlanSlices("argocd-pull", nil, tiny)[0].Apps
	conditions := clusterreport.App{Namespace: "argocd", Name: "conditions", ObservedAt: observed}
	for i := range clusterreport.MaxSliceConditionsPerApp {
		conditions.Conditions = append(conditions.Conditions, argoapp.Condition{Type: "SharedResourceWarning", Message: fmt.Sprint(i) + strings.Repeat("x", 2000)})
	}
	resources := clusterreport.App{Namespace: "argocd", Name: "resources", ObservedAt: observed}
	for i := range clusterreport.MaxSliceResourcesPerApp {
		resources.Resources = append(resources.Resources, argoapp.ResourceStatus{Name: fmt.Sprint(i), Status: "Synced"})
	}
	for name, apps := range map[string][]statusv1alpha1.AppStatus{
		fmt.Sprintf("%d apps", len(fullest)): fullest,
		"the most conditions":                {clusterreport.FitEntry(clusterreport.Entry(conditions, clusterreport.Tree{}))},
		"the most resources":                 {clusterreport.FitEntry(clusterreport.Entry(resources, clusterreport.Tree{}))},
	} {
		obj, err := stripSlice(&statusv1alpha1.ApplicationStatusSlice{FormatVersion: clusterreport.SliceFormatVersion, Apps: apps})
		if err != nil {
			t.Fatal(err)
		}
		stripped := obj.(*statusv1alpha1.ApplicationStatusSlice)
		if _, err := clusterreport.DecodeSlices([]statusv1alpha1.ApplicationStatusSlice{*stripped}); err != nil {
			t.Errorf("%s: the encoder's slice is rejected: %v", name, err)
		}
		cached := 0
		for i := range stripped.Apps {
			cached += cachedBytes(&stripped.Apps[i])
		}
		t.Logf("%s: %d bytes in the cache", name, cached)
	}

	// About 0.9 MiB of JSON: 300 apps of 1,000 empty conditions, 32 MB as structs.
	var hostile []statusv1alpha1.AppStatus
	for i := range 300 {
		hostile = append(hostile, statusv1alpha1.AppStatus{Namespace: "argocd", Name: fmt.Sprint(i), ObservedAt: metav1.NewTime(observed),
			Conditions: make([]statusv1alpha1.Condition, clusterreport.MaxSliceConditionsPerApp)})
	}
	slice := &statusv1alpha1.ApplicationStatusSlice{FormatVersion: clusterreport.SliceFormatVersion, Apps: hostile}
	obj, err := stripSlice(slice)
	if err != nil {
		t.Fatal(err)
	}
	stripped := obj.(*statusv1alpha1.ApplicationStatusSlice)
	cached := 0
	for i := range stripped.Apps {
		cached += cachedBytes(&stripped.Apps[i])
		if stripped.Apps[i].Conditions != nil {
			t.Fatal("the cache holds the conditions of a slice it would hold too much of")
		}
	}
	if cached > MaxCachedSliceBytes {
		t.Errorf("the cache holds %d bytes of the slice, more than %d", cached, MaxCachedSliceBytes)
	}
	if _, err := clusterreport.DecodeSlices([]statusv1alpha1.ApplicationStatusSlice{*stripped}); !errors.Is(err, clusterreport.ErrTooLarge) {
		t.Errorf("the slice decodes: %v, want %v", err, clusterreport.ErrTooLarge)
	}
	again, err := stripSlice(stripped.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(again, stripped) {
		t.Error("transformed twice differs from once")
	}
}

// TestSharedValuesSkipLargeOnes: a value past maxSharedBytes is not held, so two
// objects with the same large value keep copies of their own.
func TestSharedValuesSkipLargeOnes(t *testing.T) {
	s := &sharedValues[map[string]any]{}
	large := func() map[string]any {
		return map[string]any{"kubectl.kubernetes.io/last-applied-configuration": strings.Repeat("x", maxSharedBytes)}
	}
	small := func() map[string]any { return map[string]any{"team": "payments"} }
	same := func(a, b map[string]any) bool {
		return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
	}
	if a, b := s.of(large()), s.of(large()); same(a, b) {
		t.Error("a large value is held")
	}
	if a, b := s.of(small()), s.of(small()); !same(a, b) {
		t.Error("a small value is not held")
	}
}

// TestReportMetadata: the cache keeps of a report its metadata without managed fields,
// and names another writer of its statuses when that one wrote them no earlier than the
// report controller last applied them; a writer the controller has overridden since, or
// one of the metadata only, is not named.
func TestReportMetadata(t *testing.T) {
	const controller = "argocd-pull-report"
	at := func(second int) *metav1.Time {
		return ptr.To(metav1.NewTime(time.Date(2026, 11, 27, 1, 0, second, 0, time.UTC)))
	}
	applied := func(second int) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: controller, Operation: metav1.ManagedFieldsOperationApply, Time: at(second),
			FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:labels":{}},"f:statuses":{"f:summary":{}}}`)}}
	}
	edited := func(manager string, second int, fields string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, Time: at(second),
			FieldsV1: &metav1.FieldsV1{Raw: []byte(fields)}}
	}
	const statuses, labels = `{"f:statuses":{"f:clusterConditions":{}}}`, `{"f:metadata":{"f:labels":{"f:team":{}}}}`
	// A stored annotation of the transform's own name, set by hand, names no writer.
	report := func(entries ...metav1.ManagedFieldsEntry) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "guestbook", Namespace: "argocd",
			Annotations: map[string]string{"team": "web", ReportOtherWriterAnnotation: "set-by-hand"}, ManagedFields: entries}}
	}
	for _, c := range []struct {
		name    string
		entries []metav1.ManagedFieldsEntry
		want    string
	}{
		{"written by the controller only", []metav1.ManagedFieldsEntry{applied(10)}, ""},
		{"statuses edited after the controller's write", []metav1.ManagedFieldsEntry{applied(10), edited("kubectl-edit", 12, statuses)}, "kubectl-edit"},
		{"statuses edited in the same second", []metav1.ManagedFieldsEntry{applied(10), edited("kubectl-edit", 10, statuses)}, "kubectl-edit"},
		{"an edit the controller has overridden since", []metav1.ManagedFieldsEntry{edited("kubectl-edit", 8, statuses), applied(10)}, ""},
		{"labels only edited after the write", []metav1.ManagedFieldsEntry{applied(10), edited("kubectl-label", 12, labels)}, ""},
		{"never written by the controller", []metav1.ManagedFieldsEntry{edited("acm-report", 8, statuses)}, "acm-report"},
		{"an edit without a time", []metav1.ManagedFieldsEntry{applied(10), {Manager: "old", Operation: metav1.ManagedFieldsOperationUpdate,
			FieldsV1: &metav1.FieldsV1{Raw: []byte(statuses)}}}, "old"},
	} {
		t.Run(c.name, func(t *testing.T) {
			obj, err := reportMetadata(controller)(report(c.entries...))
			if err != nil {
				t.Fatal(err)
			}
			cached := obj.(*metav1.PartialObjectMetadata)
			if cached.ManagedFields != nil || cached.Annotations["team"] != "web" {
				t.Errorf("the cache keeps the managed fields or lost the annotations: %+v", cached.ObjectMeta)
			}
			if got := cached.Annotations[ReportOtherWriterAnnotation]; got != c.want {
				t.Errorf("other writer %q, want %q", got, c.want)
			}
			again, err := reportMetadata(controller)(cached.DeepCopy())
			if err != nil || !equality.Semantic.DeepEqual(again, cached) {
				t.Errorf("transformed twice:\n%+v\nonce:\n%+v", again, cached)
			}
		})
	}
}
