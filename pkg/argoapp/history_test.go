package argoapp

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// TestDecodeHistory: DecodeStatus reads the last HistoryLimit entries of status.history,
// oldest first, with each source whole: its named fields, and the rest as sorted JSON in
// Details; a field of the wrong type is an error that names it.
func TestDecodeHistory(t *testing.T) {
	var b strings.Builder
	b.WriteString("status:\n  history:\n")
	for i := range HistoryLimit + 2 {
		fmt.Fprintf(&b, "  - {id: %d, revision: rev%d, deployedAt: '2026-11-28T06:0%d:00Z', source: {repoURL: https://git.example.com/a.git, path: web, targetRevision: HEAD}}\n", i, i, i%10)
	}
	b.WriteString(`  - id: 12
    revisions: [a1, b1]
    deployedAt: '2026-11-28T07:00:00Z'
    deployStartedAt: '2026-11-28T06:59:00Z'
    initiatedBy: {username: alice}
    sources:
    - {repoURL: https://charts.example.com, chart: web, targetRevision: 1.2.3, helm: {valueFiles: [$values/web.yaml], parameters: [{name: a, value: b}]}}
    - {repoURL: https://git.example.com/values.git, ref: values}
`)
	status, err := DecodeStatus(application(t, appHeader+b.String()))
	if err != nil {
		t.Fatal(err)
	}
	if len(status.History) != HistoryLimit {
		t.Fatalf("%d entries, want the last %d", len(status.History), HistoryLimit)
	}
	if first := status.History[0]; first.ID != 3 || first.Revision != "rev3" || first.DeployedAt != "2026-11-28T06:03:00Z" ||
		*first.Source != (HistorySource{RepoURL: "https://git.example.com/a.git", Path: "web", TargetRevision: "HEAD"}) {
		t.Errorf("the oldest entry kept is %+v (%+v), want id 3 with its source", first, first.Source)
	}
	want := RevisionHistory{
		ID: 12, Revisions: []string{"a1", "b1"}, DeployedAt: "2026-11-28T07:00:00Z", DeployStartedAt: "2026-11-28T06:59:00Z",
		InitiatedBy: OperationInitiator{Username: "alice"},
		Sources: []HistorySource{
			{RepoURL: "https://charts.example.com", Chart: "web", TargetRevision: "1.2.3",
				Details: `{"helm":{"parameters":[{"name":"a","value":"b"}],"valueFiles":["$values/web.yaml"]}}`},
			{RepoURL: "https://git.example.com/values.git", Ref: "values"},
		},
	}
	if got := status.History[len(status.History)-1]; !reflect.DeepEqual(got, want) {
		t.Errorf("the newest entry is\n%+v\nwant\n%+v", got, want)
	}
	object, ok := want.Sources[0].SourceObject()
	if !ok || !reflect.DeepEqual(object, map[string]any{"repoURL": "https://charts.example.com", "chart": "web", "targetRevision": "1.2.3",
		"helm": map[string]any{"parameters": []any{map[string]any{"name": "a", "value": "b"}}, "valueFiles": []any{"$values/web.yaml"}}}) {
		t.Errorf("SourceObject() = %v, %v; want the source as Argo CD wrote it", object, ok)
	}

	for _, tt := range []struct{ body, path string }{
		{"status: {history: [{id: one}]}", ".status.history[0].id"},
		{"status: {history: [{id: 1.5}]}", ".status.history[0].id"},
		{"status: {history: [{id: 1, source: {repoURL: 5}}]}", ".status.history[0].source.repoURL"},
		{"status: {history: [{id: 1, initiatedBy: {automated: yes please}}]}", ".status.history[0].initiatedBy.automated"},
		{"status: {history: [{id: 1, revisions: [1]}]}", ".status.history[0].revisions[0]"},
	} {
		if _, err := DecodeStatus(application(t, appHeader+tt.body)); err == nil || !strings.Contains(err.Error(), tt.path+" is ") {
			t.Errorf("%s: error %v, want one naming %s", tt.body, err, tt.path)
		}
	}
}

// TestSourceObjectKeepsArgoCDsFields: of a source's Details, only the objects of Argo
// CD's helm, kustomize, directory and plugin fields are kept; the named fields win over
// Details; Details that is not a JSON object fails.
func TestSourceObjectKeepsArgoCDsFields(t *testing.T) {
	s := HistorySource{RepoURL: "https://git.example.com/a.git", Path: "web",
		Details: `{"repoURL":"https://evil.example.com","chart":"forged","kustomize":{"namePrefix":"x-"},"helm":"not an object","unknown":{}}`}
	got, ok := s.SourceObject()
	want := map[string]any{"repoURL": "https://git.example.com/a.git", "path": "web", "kustomize": map[string]any{"namePrefix": "x-"}}
	if !ok || !reflect.DeepEqual(got, want) {
		t.Errorf("SourceObject() = %v, %v; want %v", got, ok, want)
	}
	if _, ok := (HistorySource{RepoURL: "r", Details: "[1]"}).SourceObject(); ok {
		t.Error("Details that is a list made a source")
	}
}
