package argoapp

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// application parses a YAML Application into the form an informer hands out.
func application(t *testing.T, manifest string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(manifest), &u.Object); err != nil {
		t.Fatalf("parse test application: %v", err)
	}
	return u
}

const appHeader = `
apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: guestbook, namespace: argocd}
`

// decodeCase is a case of a decoder's table: appHeader+body decodes to want, or fails
// on the malformed field at the path wantErr.
type decodeCase[T any] struct {
	name    string
	body    string
	want    T
	wantErr string // a path the error must name; empty for success
}

// testDecode runs the cases of the decoder called name: an error wraps ErrMalformedField
// and names the path and the application. A nil application is an error too.
func testDecode[T any](t *testing.T, name string, decode func(*unstructured.Unstructured) (T, error), tests []decodeCase[T]) {
	t.Helper()
	t.Run("nil application", func(t *testing.T) {
		if _, err := decode(nil); err == nil {
			t.Fatalf("%s(nil) returned no error", name)
		}
	})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decode(application(t, appHeader+tt.body))
			if tt.wantErr != "" {
				if !errors.Is(err, ErrMalformedField) {
					t.Fatalf("error = %v, want one wrapping ErrMalformedField", err)
				}
				if !strings.Contains(err.Error(), tt.wantErr+" is ") {
					t.Errorf("error %q does not name the path %s", err, tt.wantErr)
				}
				if !strings.Contains(err.Error(), "argocd/guestbook") {
					t.Errorf("error %q does not name the application", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("%s() = %+v, want %+v", name, got, tt.want)
			}
		})
	}
}

func TestDecodeSpec(t *testing.T) {
	testDecode(t, "DecodeSpec", DecodeSpec, []decodeCase[Spec]{
		{
			name: "single source",
			body: `
spec:
  project: team-a
  destination: {server: https://example.com, namespace: shop}
  source: {repoURL: https://git.example.com/a.git, path: guestbook, targetRevision: main}
`,
			want: Spec{
				Project:     "team-a",
				Destination: Destination{Server: "https://example.com", Namespace: "shop"},
				Source:      &Source{RepoURL: "https://git.example.com/a.git", Path: "guestbook", TargetRevision: "main"},
			},
		},
		{
			name: "multi source",
			body: `
spec:
  destination: {name: in-cluster, namespace: shop}
  sources:
  - {repoURL: https://charts.example.com, chart: web, targetRevision: 1.2.3}
  - {repoURL: https://git.example.com/values.git, ref: values}
`,
			want: Spec{
				Destination: Destination{Name: "in-cluster", Namespace: "shop"},
				Sources: []Source{
					{RepoURL: "https://charts.example.com", Chart: "web", TargetRevision: "1.2.3"},
					{RepoURL: "https://git.example.com/values.git", Ref: "values"},
				},
			},
		},
		{name: "no spec", body: ``, want: Spec{}},
		{name: "explicit nulls", body: "spec: {project: null, source: null, destination: null}", want: Spec{}},
		{name: "project not a string", body: "spec: {project: 5}", wantErr: ".spec.project"},
		{name: "spec not an object", body: "spec: [a]", wantErr: ".spec"},
		{name: "destination not an object", body: "spec: {destination: here}", wantErr: ".spec.destination"},
		{name: "server not a string", body: "spec: {destination: {server: [a]}}", wantErr: ".spec.destination.server"},
		{name: "sources not a list", body: "spec: {sources: {repoURL: x}}", wantErr: ".spec.sources"},
		{name: "source entry not an object", body: "spec: {sources: [x]}", wantErr: ".spec.sources[0]"},
		{name: "source field not a string", body: "spec: {sources: [{repoURL: a}, {path: true}]}", wantErr: ".spec.sources[1].path"},
	})
}

func TestSpecProjectAndSources(t *testing.T) {
	if got := (Spec{}).ProjectName(); got != DefaultProject {
		t.Errorf("empty project = %q, want %q", got, DefaultProject)
	}
	if got := (Spec{Project: "team-a"}).ProjectName(); got != "team-a" {
		t.Errorf("project = %q, want team-a", got)
	}
	if (Spec{Source: &Source{}}).IsMultiSource() {
		t.Error("single source reported as multi-source")
	}
	if !(Spec{Sources: []Source{{}}}).IsMultiSource() {
		t.Error("multi-source not reported")
	}
}

func TestDecodeStatus(t *testing.T) {
	testDecode(t, "DecodeStatus", DecodeStatus, []decodeCase[Status]{
		{
			name: "full status",
			body: `
status:
  sync: {status: OutOfSync, revision: abc123}
  health: {status: Degraded, message: "pod crash"}
  reconciledAt: "2026-01-01T00:01:00Z"
  operationState: {phase: Failed, startedAt: "2026-01-01T00:00:00Z", message: "one or more objects failed to apply"}
  resources:
  - {group: apps, version: v1, kind: Deployment, namespace: shop, name: web, status: Synced, health: {status: Healthy}}
  - {version: v1, kind: Service, namespace: shop, name: web, status: OutOfSync}
  conditions:
  - {type: SyncError, message: 'services is forbidden: User "system:serviceaccount:argocd:argocd-application-controller"', lastTransitionTime: "2026-01-01T00:00:00Z"}
`,
			want: Status{
				Sync:           SyncStatus{Status: "OutOfSync", Revision: "abc123"},
				Health:         HealthStatus{Status: "Degraded", Message: "pod crash"},
				OperationState: OperationState{Phase: "Failed", StartedAt: "2026-01-01T00:00:00Z", Message: "one or more objects failed to apply"},
				Resources: []ResourceStatus{
					{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "shop", Name: "web", Status: "Synced", Health: HealthStatus{Status: "Healthy"}},
					{Version: "v1", Kind: "Service", Namespace: "shop", Name: "web", Status: "OutOfSync"},
				},
				Conditions:   []Condition{{Type: "SyncError", Message: `services is forbidden: User "system:serviceaccount:argocd:argocd-application-controller"`}},
				ReconciledAt: "2026-01-01T00:01:00Z",
			},
		},
		{
			name: "multi-source revisions",
			body: "status: {sync: {status: Synced, revisions: [abc, def]}}",
			want: Status{Sync: SyncStatus{Status: "Synced", Revisions: []string{"abc", "def"}}},
		},
		{name: "no status", body: ``, want: Status{}},
		{name: "empty status", body: "status: {}", want: Status{}},
		{name: "sync status not a string", body: "status: {sync: {status: 1}}", wantErr: ".status.sync.status"},
		{name: "revisions not a list", body: "status: {sync: {revisions: abc}}", wantErr: ".status.sync.revisions"},
		{name: "revision entry not a string", body: "status: {sync: {revisions: [abc, {a: b}]}}", wantErr: ".status.sync.revisions[1]"},
		{name: "health not an object", body: "status: {health: Healthy}", wantErr: ".status.health"},
		{name: "startedAt not a string", body: "status: {operationState: {startedAt: 5}}", wantErr: ".status.operationState.startedAt"},
		{name: "resource health status not a string", body: "status: {resources: [{kind: Pod, health: {status: [x]}}]}", wantErr: ".status.resources[0].health.status"},
		{name: "condition not an object", body: "status: {conditions: [SyncError]}", wantErr: ".status.conditions[0]"},
		{name: "status not an object", body: "status: Healthy", wantErr: ".status"},
		{name: "reconciledAt not a string", body: "status: {reconciledAt: 5}", wantErr: ".status.reconciledAt"},
	})
}

func TestFeedbackFields(t *testing.T) {
	want := map[string]string{
		"healthStatus":            ".status.health.status",
		"syncStatus":              ".status.sync.status",
		"syncRevision":            ".status.sync.revision",
		"operationStatePhase":     ".status.operationState.phase",
		"operationStateStartedAt": ".status.operationState.startedAt",
		"operationStateID":        `.status.operationState.operation.info[?(@.name=="argocd-pull.open-cluster-management.io/operation-id")].value`,
	}
	got := map[string]string{}
	for _, f := range FeedbackFields() {
		if _, dup := got[f.Name]; dup {
			t.Errorf("feedback %q listed twice", f.Name)
		}
		got[f.Name] = f.Path
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("FeedbackFields() = %v, want %v", got, want)
	}
}
