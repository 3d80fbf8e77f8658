package argoapp

import (
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func projectWith(spec map[string]any) *unstructured.Unstructured {
	p := NewAppProject()
	p.SetNamespace("argocd")
	p.SetName("team")
	p.Object["spec"] = spec
	return p
}

// The source repositories are matched as Argo CD's AppProject.IsSourcePermitted matches
// them: normalized URLs, globs with '/' as separator, deny patterns.
func TestProjectPermitsSources(t *testing.T) {
	for _, tt := range []struct {
		name     string
		patterns []any
		spec     Spec
		denied   []string
	}{
		{"any repository", []any{"*"}, Spec{Source: &Source{RepoURL: "https://git.example.com/a.git"}}, nil},
		{"no pattern permits nothing", nil, Spec{Source: &Source{RepoURL: "https://git.example.com/a"}}, []string{"https://git.example.com/a"}},
		{"the same URL in another case and with .git", []any{"https://Git.Example.com/team/apps"}, Spec{Source: &Source{RepoURL: "https://git.example.com/team/apps.git"}}, nil},
		{"a glob does not cross '/'", []any{"https://git.example.com/team/*"}, Spec{Source: &Source{RepoURL: "https://git.example.com/team/sub/apps"}}, []string{"https://git.example.com/team/sub/apps"}},
		{"a glob within one segment", []any{"https://git.example.com/team/*"}, Spec{Source: &Source{RepoURL: "https://git.example.com/team/apps"}}, nil},
		{"scp-like SSH against its ssh:// form", []any{"ssh://git@git.example.com/team/apps"}, Spec{Source: &Source{RepoURL: "git@git.example.com:team/apps.git"}}, nil},
		{"a deny pattern wins", []any{"*", "!https://git.example.com/secret"}, Spec{Source: &Source{RepoURL: "https://git.example.com/secret"}}, []string{"https://git.example.com/secret"}},
		{"a deny pattern leaves the others", []any{"*", "!https://git.example.com/secret"}, Spec{Source: &Source{RepoURL: "https://git.example.com/open"}}, nil},
		{"every source of a multi-source app", []any{"https://git.example.com/team/*"},
			Spec{Source: &Source{RepoURL: "https://ignored.example.com/x"}, Sources: []Source{{RepoURL: "https://git.example.com/team/a"}, {RepoURL: "https://other.example.com/b"}}},
			[]string{"https://other.example.com/b"}},
	} {
		got := ProjectPermitsSources(projectWith(map[string]any{"sourceRepos": tt.patterns}), tt.spec)
		if !reflect.DeepEqual(got, tt.denied) {
			t.Errorf("%s: denied %q, want %q", tt.name, got, tt.denied)
		}
	}
}

// The destination is matched as Argo CD's AppProject.isDestinationMatched matches it,
// with the in-cluster name and server known to be one cluster.
func TestProjectPermitsDestination(t *testing.T) {
	dest := func(server, name, namespace string) map[string]any {
		return map[string]any{"server": server, "name": name, "namespace": namespace}
	}
	for _, tt := range []struct {
		name         string
		destinations []any
		destination  Destination
		want         bool
	}{
		{"anything", []any{dest("*", "", "*")}, Destination{Server: InClusterServer, Namespace: "web"}, true},
		{"no destination permits nothing", nil, Destination{Server: InClusterServer, Namespace: "web"}, false},
		{"a namespace glob", []any{dest("*", "", "team-*")}, Destination{Server: InClusterServer, Namespace: "kube-system"}, false},
		{"in-cluster by server, permitted by name", []any{dest("", "in-cluster", "web")}, Destination{Server: InClusterServer, Namespace: "web"}, true},
		{"in-cluster by name, permitted by server", []any{dest(InClusterServer, "", "web")}, Destination{Name: "in-cluster", Namespace: "web"}, true},
		{"a managed cluster by name", []any{dest("", "cluster1", "web")}, Destination{Name: "cluster1", Namespace: "web"}, true},
		{"another cluster by name", []any{dest("", "cluster1", "web")}, Destination{Name: "cluster2", Namespace: "web"}, false},
		{"a denied namespace", []any{dest("*", "", "*"), dest("*", "", "!kube-system")}, Destination{Server: InClusterServer, Namespace: "kube-system"}, false},
		{"a denied server", []any{dest("*", "", "*"), dest("!"+InClusterServer, "", "*")}, Destination{Server: InClusterServer, Namespace: "web"}, false},
	} {
		if got := ProjectPermitsDestination(projectWith(map[string]any{"destinations": tt.destinations}), tt.destination); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestHasInlineManifests(t *testing.T) {
	for _, tt := range []struct {
		name      string
		operation any
		want      bool
	}{
		{"no operation", nil, false},
		{"a sync from the sources", map[string]any{"sync": map[string]any{"revision": "main"}}, false},
		{"an empty list", map[string]any{"sync": map[string]any{"manifests": []any{}}}, false},
		{"inline manifests", map[string]any{"sync": map[string]any{"manifests": []any{"apiVersion: v1\nkind: ConfigMap"}}}, true},
		{"manifests of the wrong type", map[string]any{"sync": map[string]any{"manifests": "kind: ConfigMap"}}, true},
	} {
		app := NewApplication()
		if tt.operation != nil {
			app.Object["operation"] = tt.operation
		}
		if got := HasInlineManifests(app); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestOperationSourcesNotPermitted: the sources of a rollback's sync (from a history
// entry) are checked against the hub AppProject's source repositories, or, without one,
// against the repositories the Application's spec names; a sync that names no source (a
// sync of the spec), or the empty sync.source argocd-server's Rollback sets beside the
// sources of a multi-source entry, is let through.
func TestOperationSourcesNotPermitted(t *testing.T) {
	app := func(operation string) *unstructured.Unstructured {
		return application(t, appHeader+`
spec:
  project: team
  source: {repoURL: https://git.example.com/team/apps.git, path: web}
`+operation)
	}
	project := projectWith(map[string]any{"sourceRepos": []any{"https://git.example.com/team/*"}})
	for _, tt := range []struct {
		name, operation string
		project         *unstructured.Unstructured
		denied          []string
	}{
		{"no operation", "", project, nil},
		{"a sync of the spec", "operation: {sync: {revision: main}}", project, nil},
		{"a rollback within the project", "operation: {sync: {revision: abc, source: {repoURL: https://git.example.com/team/old.git, path: web}}}", project, nil},
		{"a rollback outside the project", "operation: {sync: {revision: abc, source: {repoURL: https://evil.example.com/x.git}}}", project,
			[]string{"https://evil.example.com/x.git"}},
		{"a multi-source rollback, one source outside", "operation: {sync: {revisions: [a, b], source: {repoURL: ''}, sources: [{repoURL: https://git.example.com/team/a}, {repoURL: https://evil.example.com/b}]}}", project,
			[]string{"https://evil.example.com/b"}},
		{"without a project, the spec's repository", "operation: {sync: {revision: abc, source: {repoURL: https://git.example.com/team/apps, path: old}}}", nil, nil},
		{"without a project, another repository", "operation: {sync: {revision: abc, source: {repoURL: https://git.example.com/team/other.git}}}", nil,
			[]string{"https://git.example.com/team/other.git"}},
		{"an unreadable source", "operation: {sync: {source: {repoURL: 5}}}", project, []string{"(unreadable: malformed field: .operation.sync.source.repoURL is float64, want string)"}},
	} {
		if got := OperationSourcesNotPermitted(app(tt.operation), tt.project); !reflect.DeepEqual(got, tt.denied) {
			t.Errorf("%s: denied %q, want %q", tt.name, got, tt.denied)
		}
	}
}
