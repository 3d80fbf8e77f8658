package propagation

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/yaml"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/test/testenv"
)

const testUID = "3f2a9c1e-7b4d-4e8a-9c1f-0a1b2c3d4e5f"

// hubApp is a pulled hub Application as the hub apiserver returns it, with every
// server-set field filled so that the tests can check that none of them is shipped.
const hubApp = `
apiVersion: argoproj.io/v1alpha1
kind: Application
metadata:
  name: guestbook
  namespace: openshift-gitops
  uid: ` + testUID + `
  resourceVersion: "42"
  generation: 3
  creationTimestamp: "2026-01-01T00:00:00Z"
  managedFields:
  - {manager: kubectl, operation: Apply, apiVersion: argoproj.io/v1alpha1}
  labels:
    apps.open-cluster-management.io/pull-to-ocm-managed-cluster: "true"
    team: web
  annotations:
    apps.open-cluster-management.io/ocm-managed-cluster: east-1
    argocd.argoproj.io/skip-reconcile: "true"
    kubectl.kubernetes.io/last-applied-configuration: '{"kind":"Application"}'
    notes: keep me
spec:
  project: default
  source: {repoURL: https://git.example.com/apps.git, path: guestbook, targetRevision: main}
  destination: {server: https://remote.example.com:6443, name: remote, namespace: guestbook}
  syncPolicy:
    automated: {prune: true}
    syncOptions: [CreateNamespace=true]
status:
  sync: {status: Synced, revision: abc}
  health: {status: Healthy}
`

// hubProject is the hub AppProject named team-a.
const hubProject = `
apiVersion: argoproj.io/v1alpha1
kind: AppProject
metadata:
  name: team-a
  namespace: openshift-gitops
  uid: 0c0ffee0-0000-4000-8000-000000000000
  resourceVersion: "7"
  labels: {owner: team-a}
  annotations:
    kubectl.kubernetes.io/last-applied-configuration: '{"kind":"AppProject"}'
    purpose: shop
spec:
  sourceRepos: ['*']
  destinations: [{namespace: '*', server: '*'}]
status:
  jwtTokensByRole: {}
`

// parse parses a YAML object into the form an informer hands out.
func parse(t *testing.T, manifest string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(manifest), &u.Object); err != nil {
		t.Fatalf("parse test object: %v", err)
	}
	return u
}

// decodeManifests decodes the manifests of a work, in order.
func decodeManifests(t *testing.T, work *workv1.ManifestWork) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for i, m := range work.Spec.Workload.Manifests {
		u := &unstructured.Unstructured{}
		if err := json.Unmarshal(m.Raw, &u.Object); err != nil {
			t.Fatalf("manifest %d is not JSON: %v", i, err)
		}
		out = append(out, u)
	}
	return out
}

// payloadApplication returns the single Application among the work's manifests.
func payloadApplication(t *testing.T, work *workv1.ManifestWork) *unstructured.Unstructured {
	t.Helper()
	var found *unstructured.Unstructured
	for _, m := range decodeManifests(t, work) {
		if m.GroupVersionKind() == argoapp.ApplicationGVK {
			if found != nil {
				t.Fatal("work carries more than one Application")
			}
			found = m
		}
	}
	if found == nil {
		t.Fatal("work carries no Application")
	}
	return found
}

// nested returns the value at path in obj, failing the test on a type error.
func nested(t *testing.T, obj *unstructured.Unstructured, path ...string) any {
	t.Helper()
	v, _, err := unstructured.NestedFieldNoCopy(obj.Object, path...)
	if err != nil {
		t.Fatalf("read %v: %v", path, err)
	}
	return v
}

// renderCase is a case of TestRenderManifestWork: hubApp changed by mutate, rendered
// with project, and what check finds in the work and its Application.
type renderCase struct {
	name    string
	mutate  func(app *unstructured.Unstructured)
	project string // YAML of RenderOptions.AppProject, if any
	check   func(t *testing.T, work *workv1.ManifestWork, payload *unstructured.Unstructured)
}

// annotated returns the mutation that sets the annotation key of the app to value.
func annotated(key, value string) func(app *unstructured.Unstructured) {
	return func(app *unstructured.Unstructured) { testenv.SetAnnotation(app, key, value) }
}

// destinationOverride is the case of an annotation that overrides the field of the
// payload's destination with value: the destination is that field and the namespace, and
// the annotation is not shipped.
func destinationOverride(name, annotation, field, value string) renderCase {
	return renderCase{
		name:   name,
		mutate: annotated(annotation, value),
		check: func(t *testing.T, work *workv1.ManifestWork, payload *unstructured.Unstructured) {
			want := map[string]any{field: value, "namespace": "guestbook"}
			if got := nested(t, payload, "spec", "destination"); !reflect.DeepEqual(got, want) {
				t.Errorf("destination = %v, want %v", got, want)
			}
			if _, ok := payload.GetAnnotations()[annotation]; ok {
				t.Errorf("payload keeps the annotation %s", annotation)
			}
		},
	}
}

func TestRenderManifestWork(t *testing.T) {
	appSetOwner := func(app *unstructured.Unstructured) {
		app.Object["metadata"].(map[string]any)["ownerReferences"] = []any{map[string]any{
			"apiVersion": "argoproj.io/v1alpha1", "kind": "ApplicationSet",
			"name": "guestbook-allclusters-app-set", "uid": "1111", "controller": true,
		}}
	}
	tests := []renderCase{
		{
			name: "standalone app: work identity and back-pointers",
			check: func(t *testing.T, work *workv1.ManifestWork, payload *unstructured.Unstructured) {
				if work.Name != "guestbook-3f2a9" || work.Namespace != "east-1" {
					t.Errorf("work = %s/%s, want east-1/guestbook-3f2a9", work.Namespace, work.Name)
				}
				wantAnnotations := map[string]string{
					argoapp.AnnotationHubApplicationNamespace: "openshift-gitops",
					argoapp.AnnotationHubApplicationName:      "guestbook",
				}
				if !reflect.DeepEqual(work.Annotations, wantAnnotations) {
					t.Errorf("work annotations = %v, want %v", work.Annotations, wantAnnotations)
				}
				wantLabels := map[string]string{argoapp.LabelPullToOCMManagedCluster: "true"}
				if !reflect.DeepEqual(work.Labels, wantLabels) {
					t.Errorf("work labels = %v, want %v", work.Labels, wantLabels)
				}
				if n := len(work.Spec.Workload.Manifests); n != 1 {
					t.Errorf("work carries %d manifests, want 1", n)
				}
				if work.Spec.DeleteOption != nil {
					t.Errorf("delete option = %+v, want none (foreground)", work.Spec.DeleteOption)
				}
				if work.APIVersion != "work.open-cluster-management.io/v1" || work.Kind != "ManifestWork" {
					t.Errorf("type = %s %s", work.APIVersion, work.Kind)
				}
			},
		},
		{
			name: "standalone app: payload metadata rebuilt and sanitized",
			check: func(t *testing.T, work *workv1.ManifestWork, payload *unstructured.Unstructured) {
				wantMetadata := map[string]any{
					"name":        "guestbook",
					"namespace":   "openshift-gitops",
					"labels":      map[string]any{"team": "web"},
					"annotations": map[string]any{"notes": "keep me"},
				}
				if got := payload.Object["metadata"]; !reflect.DeepEqual(got, wantMetadata) {
					t.Errorf("payload metadata = %v, want %v", got, wantMetadata)
				}
				if _, ok := payload.Object["status"]; ok {
					t.Error("payload carries status")
				}
				if _, ok := payload.Object["operation"]; ok {
					t.Error("payload carries an operation the hub app does not have")
				}
				if got := payload.GetAPIVersion() + " " + payload.GetKind(); got != "argoproj.io/v1alpha1 Application" {
					t.Errorf("payload type = %s", got)
				}
			},
		},
		{
			name: "standalone app: destination rewritten to in-cluster, rest of spec kept",
			check: func(t *testing.T, work *workv1.ManifestWork, payload *unstructured.Unstructured) {
				want := parse(t, hubApp).Object["spec"].(map[string]any)
				want["destination"] = map[string]any{"server": argoapp.InClusterServer, "namespace": "guestbook"}
				if got := payload.Object["spec"]; !reflect.DeepEqual(got, want) {
					t.Errorf("payload spec = %v, want %v", got, want)
				}
			},
		},
		{
			name:   "applicationset app: markers on work and payload",
			mutate: appSetOwner,
			check: func(t *testing.T, work *workv1.ManifestWork, payload *unstructured.Unstructured) {
				const key = "openshift-gitops/guestbook-allclusters-app-set"
				wantLabels := map[string]string{
					argoapp.LabelPullToOCMManagedCluster: "true",
					argoapp.LabelApplicationSet:          "true",
					// sha1sum of key, as existing pull systems label their works.
					argoapp.LabelApplicationSetHash: "7c56220e0df8e95192c72aa775ed8d4bd9fe807f",
				}
				if !reflect.DeepEqual(work.Labels, wantLabels) {
					t.Errorf("work labels = %v, want %v", work.Labels, wantLabels)
				}
				if got := work.Annotations[argoapp.AnnotationHostingApplicationSet]; got != key {
					t.Errorf("work hosting annotation = %q, want %q", got, key)
				}
				if got := payload.GetLabels()[argoapp.LabelApplicationSet]; got != "true" {
					t.Errorf("payload application-set label = %q, want true", got)
				}
				if got := payload.GetAnnotations()[argoapp.AnnotationHostingApplicationSet]; got != key {
					t.Errorf("payload hosting annotation = %q, want %q", got, key)
				}
				if nested(t, payload, "metadata", "ownerReferences") != nil {
					t.Error("payload carries owner references")
				}
			},
		},
		{
			name: "owner that is not an applicationset: standalone",
			mutate: func(app *unstructured.Unstructured) {
				app.Object["metadata"].(map[string]any)["ownerReferences"] = []any{map[string]any{
					"apiVersion": "v1", "kind": "ConfigMap", "name": "cm", "uid": "2222",
				}}
			},
			check: func(t *testing.T, work *workv1.ManifestWork, payload *unstructured.Unstructured) {
				if _, ok := work.Labels[argoapp.LabelApplicationSet]; ok {
					t.Error("work marked as an ApplicationSet app")
				}
				if _, ok := work.Annotations[argoapp.AnnotationHostingApplicationSet]; ok {
					t.Error("work has a hosting annotation")
				}
				if _, ok := payload.GetLabels()[argoapp.LabelApplicationSet]; ok {
					t.Error("payload marked as an ApplicationSet app")
				}
			},
		},
		destinationOverride("destination-name override", argoapp.AnnotationDestinationName, "name", "prod-east"),
		destinationOverride("destination-server override", argoapp.AnnotationDestinationServer, "server", "https://10.0.0.1:6443"),
		{
			name: "no destination: in-cluster server added",
			mutate: func(app *unstructured.Unstructured) {
				unstructured.RemoveNestedField(app.Object, "spec", "destination")
			},
			check: func(t *testing.T, work *workv1.ManifestWork, payload *unstructured.Unstructured) {
				want := map[string]any{"server": argoapp.InClusterServer}
				if got := nested(t, payload, "spec", "destination"); !reflect.DeepEqual(got, want) {
					t.Errorf("destination = %v, want %v", got, want)
				}
			},
		},
		{
			name:   "app-namespace annotation",
			mutate: annotated(argoapp.AnnotationOCMManagedClusterAppNamespace, "gitops-east"),
			check: func(t *testing.T, work *workv1.ManifestWork, payload *unstructured.Unstructured) {
				if payload.GetNamespace() != "gitops-east" {
					t.Errorf("payload namespace = %q, want gitops-east", payload.GetNamespace())
				}
				if got := work.Spec.ManifestConfigs[0].ResourceIdentifier.Namespace; got != "gitops-east" {
					t.Errorf("manifest config namespace = %q, want gitops-east", got)
				}
				if _, ok := payload.GetAnnotations()[argoapp.AnnotationOCMManagedClusterAppNamespace]; ok {
					t.Error("payload keeps the app-namespace annotation")
				}
				if got := work.Annotations[argoapp.AnnotationHubApplicationNamespace]; got != "openshift-gitops" {
					t.Errorf("hub namespace back-pointer = %q, want openshift-gitops", got)
				}
			},
		},
		{
			name:   "no app-namespace annotation and no namespace: argocd",
			mutate: func(app *unstructured.Unstructured) { app.SetNamespace("") },
			check: func(t *testing.T, work *workv1.ManifestWork, payload *unstructured.Unstructured) {
				if payload.GetNamespace() != argoapp.DefaultAppNamespace {
					t.Errorf("payload namespace = %q, want %q", payload.GetNamespace(), argoapp.DefaultAppNamespace)
				}
			},
		},
		{
			name: "argo cd finalizers copied, others dropped",
			mutate: func(app *unstructured.Unstructured) {
				app.SetFinalizers([]string{
					argoapp.ResourcesFinalizer,
					"post-delete-finalizer.argocd.argoproj.io/cleanup",
					"apps.open-cluster-management.io/manifestwork-cleanup",
					"example.com/argocd.argoproj.io",
				})
			},
			check: func(t *testing.T, work *workv1.ManifestWork, payload *unstructured.Unstructured) {
				want := []string{argoapp.ResourcesFinalizer, "post-delete-finalizer.argocd.argoproj.io/cleanup"}
				if got := payload.GetFinalizers(); !reflect.DeepEqual(got, want) {
					t.Errorf("payload finalizers = %v, want %v", got, want)
				}
			},
		},
		{
			// The operation travels as a request for the cluster's agent
			// (setOperationRequest), never as .operation, which the work agent would
			// apply again after the spoke ran it; nor do the protocol's annotations that
			// a user set on the hub Application.
			name: "operation and protocol annotations left out",
			mutate: func(app *unstructured.Unstructured) {
				app.Object["operation"] = map[string]any{
					"initiatedBy": map[string]any{"username": "admin"},
					"sync":        map[string]any{"revision": "abc", "prune": true, "syncOptions": []any{"ServerSideApply=true"}},
				}
				annotations := app.GetAnnotations()
				for _, key := range []string{argoapp.AnnotationOperationRequest, argoapp.AnnotationOperationTerminate, argoapp.AnnotationOperationDelivered} {
					annotations[key] = "forged"
				}
				app.SetAnnotations(annotations)
			},
			check: func(t *testing.T, work *workv1.ManifestWork, payload *unstructured.Unstructured) {
				if got, ok := payload.Object["operation"]; ok {
					t.Errorf("payload operation = %v, want none", got)
				}
				for _, key := range []string{argoapp.AnnotationOperationRequest, argoapp.AnnotationOperationTerminate, argoapp.AnnotationOperationDelivered} {
					if got, ok := payload.GetAnnotations()[key]; ok {
						t.Errorf("payload annotation %s = %q, want none", key, got)
					}
				}
			},
		},
		{
			name:   "refresh annotation reaches the spoke, pull label and skip-reconcile do not",
			mutate: annotated(argoapp.AnnotationRefresh, "hard"),
			check: func(t *testing.T, work *workv1.ManifestWork, payload *unstructured.Unstructured) {
				if got := payload.GetAnnotations()[argoapp.AnnotationRefresh]; got != "hard" {
					t.Errorf("payload refresh annotation = %q, want hard", got)
				}
				if _, ok := payload.GetLabels()[argoapp.LabelPullToOCMManagedCluster]; ok {
					t.Error("payload keeps the pull label")
				}
				for _, key := range []string{argoapp.AnnotationSkipReconcile, argoapp.AnnotationOCMManagedCluster} {
					if _, ok := payload.GetAnnotations()[key]; ok {
						t.Errorf("payload keeps annotation %s", key)
					}
				}
			},
		},
		{
			name: "multi-source app: sources kept as they are",
			mutate: func(app *unstructured.Unstructured) {
				unstructured.RemoveNestedField(app.Object, "spec", "source")
				app.Object["spec"].(map[string]any)["sources"] = []any{
					map[string]any{"repoURL": "https://charts.example.com", "chart": "web", "targetRevision": "1.2.3",
						"helm": map[string]any{"valueFiles": []any{"$values/web/values.yaml"}}},
					map[string]any{"repoURL": "https://git.example.com/values.git", "targetRevision": "main", "ref": "values"},
				}
			},
			check: func(t *testing.T, work *workv1.ManifestWork, payload *unstructured.Unstructured) {
				want := []any{
					map[string]any{"repoURL": "https://charts.example.com", "chart": "web", "targetRevision": "1.2.3",
						"helm": map[string]any{"valueFiles": []any{"$values/web/values.yaml"}}},
					map[string]any{"repoURL": "https://git.example.com/values.git", "targetRevision": "main", "ref": "values"},
				}
				if got := nested(t, payload, "spec", "sources"); !reflect.DeepEqual(got, want) {
					t.Errorf("payload sources = %v, want %v", got, want)
				}
				if got := nested(t, payload, "spec", "source"); got != nil {
					t.Errorf("payload has a source %v the hub app lacks", got)
				}
				spec, err := argoapp.DecodeSpec(payload)
				if err != nil || !spec.IsMultiSource() || len(spec.Sources) != 2 {
					t.Errorf("payload does not decode as a two-source app: %+v, %v", spec, err)
				}
			},
		},
		{
			name: "unicode in label and annotation values survives",
			mutate: func(app *unstructured.Unstructured) {
				testenv.SetAnnotation(app, "description", "Gästebuch ☕ 日本語 — \"quoted\" <tag> & 🚀")
				app.SetLabels(withEntry(app.GetLabels(), "team", "équipe-α"))
			},
			check: func(t *testing.T, work *workv1.ManifestWork, payload *unstructured.Unstructured) {
				if got := payload.GetAnnotations()["description"]; got != "Gästebuch ☕ 日本語 — \"quoted\" <tag> & 🚀" {
					t.Errorf("annotation = %q", got)
				}
				if got := payload.GetLabels()["team"]; got != "équipe-α" {
					t.Errorf("label = %q", got)
				}
			},
		},
		{
			name:    "non-default project: namespace, project and app, both orphaned",
			mutate:  func(app *unstructured.Unstructured) { app.Object["spec"].(map[string]any)["project"] = "team-a" },
			project: hubProject,
			check: func(t *testing.T, work *workv1.ManifestWork, payload *unstructured.Unstructured) {
				manifests := decodeManifests(t, work)
				if len(manifests) != 3 {
					t.Fatalf("work carries %d manifests, want 3", len(manifests))
				}
				wantNamespace := map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "openshift-gitops"}}
				if !reflect.DeepEqual(manifests[0].Object, wantNamespace) {
					t.Errorf("manifest 0 = %v, want %v", manifests[0].Object, wantNamespace)
				}
				wantProject := parse(t, `
apiVersion: argoproj.io/v1alpha1
kind: AppProject
metadata:
  name: team-a
  namespace: openshift-gitops
  labels: {owner: team-a}
  annotations: {purpose: shop}
spec:
  sourceRepos: ['*']
  destinations: [{namespace: '*', server: '*'}]
`)
				if !reflect.DeepEqual(manifests[1].Object, wantProject.Object) {
					t.Errorf("manifest 1 = %v, want %v", manifests[1].Object, wantProject.Object)
				}
				if manifests[2].GetKind() != argoapp.KindApplication {
					t.Errorf("manifest 2 is a %s, want the Application", manifests[2].GetKind())
				}
				wantDelete := &workv1.DeleteOption{
					PropagationPolicy: workv1.DeletePropagationPolicyTypeSelectivelyOrphan,
					SelectivelyOrphan: &workv1.SelectivelyOrphan{OrphaningRules: []workv1.OrphaningRule{
						{Group: "", Resource: "namespaces", Name: "openshift-gitops"},
						{Group: "argoproj.io", Resource: "appprojects", Namespace: "openshift-gitops", Name: "team-a"},
					}},
				}
				if !reflect.DeepEqual(work.Spec.DeleteOption, wantDelete) {
					t.Errorf("delete option = %+v, want %+v", work.Spec.DeleteOption, wantDelete)
				}
				var ids []workv1.ResourceIdentifier
				for _, c := range work.Spec.ManifestConfigs {
					ids = append(ids, c.ResourceIdentifier)
					if c.UpdateStrategy == nil || c.UpdateStrategy.Type != workv1.UpdateStrategyTypeServerSideApply {
						t.Errorf("%v is not applied server-side", c.ResourceIdentifier)
					}
				}
				wantIDs := []workv1.ResourceIdentifier{
					{Group: "argoproj.io", Resource: "applications", Namespace: "openshift-gitops", Name: "guestbook"},
					{Group: "", Resource: "namespaces", Name: "openshift-gitops"},
					{Group: "argoproj.io", Resource: "appprojects", Namespace: "openshift-gitops", Name: "team-a"},
				}
				if !reflect.DeepEqual(ids, wantIDs) {
					t.Errorf("manifest configs = %v, want %v", ids, wantIDs)
				}
			},
		},
		{
			name: "non-default project in another app namespace: project moves with the app",
			mutate: func(app *unstructured.Unstructured) {
				app.Object["spec"].(map[string]any)["project"] = "team-a"
				testenv.SetAnnotation(app, argoapp.AnnotationOCMManagedClusterAppNamespace, "gitops-east")
			},
			project: hubProject,
			check: func(t *testing.T, work *workv1.ManifestWork, payload *unstructured.Unstructured) {
				manifests := decodeManifests(t, work)
				if len(manifests) != 3 || manifests[0].GetName() != "gitops-east" || manifests[1].GetNamespace() != "gitops-east" {
					t.Errorf("namespace and project not in gitops-east: %v", manifests)
				}
			},
		},
		{
			name:   "non-default project without its AppProject: app alone",
			mutate: func(app *unstructured.Unstructured) { app.Object["spec"].(map[string]any)["project"] = "team-a" },
			check: func(t *testing.T, work *workv1.ManifestWork, payload *unstructured.Unstructured) {
				if n := len(work.Spec.Workload.Manifests); n != 1 {
					t.Errorf("work carries %d manifests, want 1", n)
				}
				if work.Spec.DeleteOption != nil {
					t.Errorf("delete option = %+v, want none", work.Spec.DeleteOption)
				}
			},
		},
		{
			name:    "default project: an AppProject passed in is not shipped",
			project: strings.Replace(hubProject, "name: team-a", "name: default", 1),
			check: func(t *testing.T, work *workv1.ManifestWork, payload *unstructured.Unstructured) {
				if n := len(work.Spec.Workload.Manifests); n != 1 {
					t.Errorf("work carries %d manifests, want 1", n)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			app := parse(t, hubApp)
			if tt.mutate != nil {
				tt.mutate(app)
			}
			var opts RenderOptions
			if tt.project != "" {
				opts.AppProject = parse(t, tt.project)
			}
			before := app.DeepCopy()
			work, err := RenderManifestWork(app, opts)
			if err != nil {
				t.Fatalf("RenderManifestWork() error: %v", err)
			}
			if !reflect.DeepEqual(app, before) {
				t.Error("RenderManifestWork changed its input")
			}
			again, err := RenderManifestWork(app, opts)
			if err != nil || !reflect.DeepEqual(work, again) {
				t.Error("rendering the same app twice gives different works")
			}
			tt.check(t, work, payloadApplication(t, work))
		})
	}
}

func TestRenderManifestWorkApplicationConfig(t *testing.T) {
	work, err := RenderManifestWork(parse(t, hubApp), RenderOptions{})
	if err != nil {
		t.Fatalf("RenderManifestWork() error: %v", err)
	}
	want := []workv1.ManifestConfigOption{{
		ResourceIdentifier: workv1.ResourceIdentifier{
			Group: "argoproj.io", Resource: "applications", Namespace: "openshift-gitops", Name: "guestbook",
		},
		FeedbackRules: []workv1.FeedbackRule{{
			Type: workv1.JSONPathsType,
			JsonPaths: []workv1.JsonPath{
				{Name: "healthStatus", Path: ".status.health.status"},
				{Name: "syncStatus", Path: ".status.sync.status"},
				{Name: "syncRevision", Path: ".status.sync.revision"},
				{Name: "operationStatePhase", Path: ".status.operationState.phase"},
				{Name: "operationStateStartedAt", Path: ".status.operationState.startedAt"},
				{Name: "operationStateID", Path: `.status.operationState.operation.info[?(@.name=="argocd-pull.open-cluster-management.io/operation-id")].value`},
			},
		}},
		FeedbackScrapeType: workv1.FeedbackWatchType,
		UpdateStrategy: &workv1.UpdateStrategy{
			Type: workv1.UpdateStrategyTypeServerSideApply,
			ServerSideApply: &workv1.ServerSideApplyConfig{
				Force: true,
				IgnoreFields: []workv1.IgnoreField{{
					Condition: workv1.IgnoreFieldsConditionOnSpokeChange,
					JSONPaths: []string{`.metadata.annotations["argocd.argoproj.io/refresh"]`},
				}},
			},
		},
	}}
	if !reflect.DeepEqual(work.Spec.ManifestConfigs, want) {
		got, _ := json.MarshalIndent(work.Spec.ManifestConfigs, "", "  ")
		wantJSON, _ := json.MarshalIndent(want, "", "  ")
		t.Errorf("manifest configs =\n%s\nwant\n%s", got, wantJSON)
	}
	// The wire form is what the work agent reads.
	raw, err := json.Marshal(work.Spec.ManifestConfigs[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, fragment := range []string{`"feedbackScrapeType":"Watch"`, `"type":"ServerSideApply"`, `"force":true`, `"condition":"OnSpokeChange"`, `"type":"JSONPaths"`} {
		if !strings.Contains(string(raw), fragment) {
			t.Errorf("manifest config JSON %s lacks %s", raw, fragment)
		}
	}
}

func TestRenderManifestWorkErrors(t *testing.T) {
	tests := []struct {
		name       string
		noApp      bool // render nil in place of the app
		mutate     func(app *unstructured.Unstructured)
		project    string
		wantReason string
		wantInMsg  string
	}{
		{
			name:       "nil application",
			noApp:      true,
			wantReason: ReasonInvalidApplication,
		},
		{
			name:       "not an application",
			mutate:     func(app *unstructured.Unstructured) { app.SetKind("ApplicationSet") },
			wantReason: ReasonInvalidApplication,
			wantInMsg:  "openshift-gitops/guestbook",
		},
		{
			name:       "no uid",
			mutate:     func(app *unstructured.Unstructured) { app.SetUID("") },
			wantReason: ReasonInvalidApplication,
		},
		{
			name:       "malformed spec",
			mutate:     func(app *unstructured.Unstructured) { app.Object["spec"].(map[string]any)["destination"] = "east" },
			wantReason: ReasonInvalidApplication,
			wantInMsg:  ".spec.destination",
		},
		{
			name:       "missing cluster annotation",
			mutate:     annotated(argoapp.AnnotationOCMManagedCluster, ""),
			wantReason: ReasonMissingClusterAnnotation,
			wantInMsg:  argoapp.AnnotationOCMManagedCluster,
		},
		{
			name:       "cluster annotation not a namespace name",
			mutate:     annotated(argoapp.AnnotationOCMManagedCluster, "East_1"),
			wantReason: ReasonInvalidClusterName,
			wantInMsg:  "East_1",
		},
		{
			name:       "app namespace not a namespace name",
			mutate:     annotated(argoapp.AnnotationOCMManagedClusterAppNamespace, "Team A"),
			wantReason: ReasonInvalidAppNamespace,
			wantInMsg:  "Team A",
		},
		{
			name: "both destination overrides",
			mutate: func(app *unstructured.Unstructured) {
				testenv.SetAnnotation(app, argoapp.AnnotationDestinationName, "prod")
				testenv.SetAnnotation(app, argoapp.AnnotationDestinationServer, "https://prod:6443")
			},
			wantReason: ReasonInvalidDestination,
			wantInMsg:  "openshift-gitops/guestbook",
		},
		{
			name:       "app project of another name",
			mutate:     func(app *unstructured.Unstructured) { app.Object["spec"].(map[string]any)["project"] = "team-b" },
			project:    hubProject,
			wantReason: ReasonInvalidAppProject,
			wantInMsg:  "team-b",
		},
		{
			name:       "app project of another kind",
			mutate:     func(app *unstructured.Unstructured) { app.Object["spec"].(map[string]any)["project"] = "team-a" },
			project:    strings.Replace(hubProject, "kind: AppProject", "kind: ConfigMap", 1),
			wantReason: ReasonInvalidAppProject,
		},
		{
			name: "payload over the manifest size limit",
			mutate: func(app *unstructured.Unstructured) {
				testenv.SetAnnotation(app, "blob", strings.Repeat("x", MaxManifestsSize))
			},
			wantReason: ReasonPayloadTooLarge,
			wantInMsg:  "openshift-gitops/guestbook",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var opts RenderOptions
			if tt.project != "" {
				opts.AppProject = parse(t, tt.project)
			}
			app := parse(t, hubApp)
			if tt.mutate != nil {
				tt.mutate(app)
			}
			if tt.noApp {
				app = nil
			}
			work, err := RenderManifestWork(app, opts)
			if work != nil {
				t.Errorf("work rendered despite the error: %v", work.Name)
			}
			var renderErr *RenderError
			if !errors.As(err, &renderErr) {
				t.Fatalf("error = %v, want a *RenderError", err)
			}
			if renderErr.Reason != tt.wantReason {
				t.Errorf("reason = %q, want %q (error: %v)", renderErr.Reason, tt.wantReason, err)
			}
			if !strings.Contains(err.Error(), tt.wantInMsg) {
				t.Errorf("error %q does not mention %q", err, tt.wantInMsg)
			}
		})
	}
}

// TestRenderManifestWorkSizeLimitBoundary checks that the limit is measured on the
// manifests: a payload just under it renders.
func TestRenderManifestWorkSizeLimitBoundary(t *testing.T) {
	app := parse(t, hubApp)
	testenv.SetAnnotation(app, "blob", strings.Repeat("x", MaxManifestsSize-2048))
	work, err := RenderManifestWork(app, RenderOptions{})
	if err != nil {
		t.Fatalf("RenderManifestWork() error: %v", err)
	}
	if size := work.Spec.Workload.Manifests[0].Size(); size > MaxManifestsSize {
		t.Errorf("rendered %d bytes, over the limit %d", size, MaxManifestsSize)
	}
}

func TestRenderManifestWorkLongNameIsValid(t *testing.T) {
	app := parse(t, hubApp)
	app.SetName(strings.Repeat("g", 253))
	work, err := RenderManifestWork(app, RenderOptions{})
	if err != nil {
		t.Fatalf("RenderManifestWork() error: %v", err)
	}
	if errs := validation.IsDNS1123Subdomain(work.Name); len(errs) > 0 {
		t.Errorf("work name %q is invalid: %v", work.Name, errs)
	}
	if payload := payloadApplication(t, work); payload.GetName() != app.GetName() {
		t.Error("the payload Application lost its full name")
	}
	if got := work.Annotations[argoapp.AnnotationHubApplicationName]; got != app.GetName() {
		t.Error("the back-pointer lost the full app name")
	}
}
