package clusterreport

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	statusv1alpha1 "github.com/ocm-gitops/argocd-pull-addon/pkg/apis/argocdpull/v1alpha1"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/argocdcache"
)

// TestRedactedState: a state goes as Argo CD cached it, but a Secret's only when each of
// its data and stringData values is Argo CD's mask, and without kubectl's
// last-applied-configuration; what is not a JSON object never goes.
func TestRedactedState(t *testing.T) {
	const lastApplied = `"metadata":{"annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{\"data\":{\"password\":\"++++++++\"}}"},"name":"db"}`
	for _, tt := range []struct {
		name, group, kind, state string
		want                     string
		ok                       bool
	}{
		{"no object", "", "Secret", "null", "", true},
		{"none", "apps", "Deployment", "", "", true},
		{"a Deployment", "apps", "Deployment", `{"apiVersion":"apps/v1","kind":"Deployment","spec":{"replicas":2}}`, `{"apiVersion":"apps/v1","kind":"Deployment","spec":{"replicas":2}}`, true},
		{"a ConfigMap's data", "", "ConfigMap", `{"apiVersion":"v1","kind":"ConfigMap","data":{"k":"plain"}}`, `{"apiVersion":"v1","kind":"ConfigMap","data":{"k":"plain"}}`, true},
		{"a Secret as Argo CD caches it", "", "Secret", `{"apiVersion":"v1","data":{"a":"++++++++","b":"++++++++++++"},"kind":"Secret"}`, `{"apiVersion":"v1","data":{"a":"++++++++","b":"++++++++++++"},"kind":"Secret"}`, true},
		{"a Secret without data", "", "Secret", `{"apiVersion":"v1","kind":"Secret","type":"Opaque"}`, `{"apiVersion":"v1","kind":"Secret","type":"Opaque"}`, true},
		{"a Secret's plain data", "", "Secret", `{"apiVersion":"v1","data":{"a":"c2VjcmV0"},"kind":"Secret"}`, "", false},
		{"a Secret's plain stringData", "", "Secret", `{"apiVersion":"v1","kind":"Secret","stringData":{"a":"secret"}}`, "", false},
		{"a Secret's data of another shape", "", "Secret", `{"apiVersion":"v1","kind":"Secret","data":["c2VjcmV0"]}`, "", false},
		{"a Secret's empty value", "", "Secret", `{"apiVersion":"v1","kind":"Secret","data":{"a":""}}`, "", false},
		{"a Secret under another key", "apps", "Deployment", `{"apiVersion":"v1","kind":"Secret","data":{"a":"c2VjcmV0"}}`, "", false},
		{"a Secret's last-applied-configuration", "", "Secret", `{"apiVersion":"v1","data":{"password":"++++++++"},"kind":"Secret",` + lastApplied + `}`,
			`{"apiVersion":"v1","data":{"password":"++++++++"},"kind":"Secret","metadata":{"name":"db"}}`, true},
		{"a Secret's data twice, the first plain", "", "Secret", `{"apiVersion":"v1","data":{"a":"c2VjcmV0"},"data":{"a":"++++++++"},"kind":"Secret"}`,
			`{"apiVersion":"v1","data":{"a":"++++++++"},"kind":"Secret"}`, true},
		{"a list", "", "ConfigMap", `[{"kind":"ConfigMap"}]`, "", false},
		{"not JSON", "", "ConfigMap", `{"kind":`, "", false},
	} {
		got, ok := RedactedState(tt.group, tt.kind, tt.state)
		if got != tt.want || ok != tt.ok {
			t.Errorf("%s: %q, %v; want %q, %v", tt.name, got, ok, tt.want, tt.ok)
		}
	}
}

// TestEntryCarriesTheDiffsOfOutOfSyncResources: an entry carries the states of its
// OutOfSync resources and of no other, within MaxDiffBytesPerApp, and counts and says
// what it leaves out; an app whose states could not be read says why.
func TestEntryCarriesTheDiffsOfOutOfSyncResources(t *testing.T) {
	state := func(name string, bytes int) string {
		return `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"` + name + `"},"data":{"k":"` + strings.Repeat("x", bytes) + `"}}`
	}
	app := App{Namespace: "argocd", Name: "web", ObservedAt: time.Date(2026, 11, 28, 6, 0, 0, 0, time.UTC), Sync: argoapp.SyncStatus{Status: "OutOfSync"}}
	var states States
	for i, status := range []string{"Synced", "OutOfSync", "OutOfSync", "OutOfSync", "OutOfSync", "OutOfSync"} {
		name := fmt.Sprintf("c%d", i)
		app.Resources = append(app.Resources, argoapp.ResourceStatus{Version: "v1", Kind: "ConfigMap", Namespace: "web", Name: name, Status: status})
		size := 100
		if i == 3 {
			size = MaxDiffBytesPerApp // over the budget alone
		}
		if i == 5 {
			continue // no states cached
		}
		states.Diffs = append(states.Diffs, statusv1alpha1.ResourceDiff{Kind: "ConfigMap", Namespace: "web", Name: name,
			LiveState: state(name, size), TargetState: state(name, 1), PredictedLiveState: state(name, 1)})
	}
	states.Diffs[4].LiveState = `{"apiVersion":"v1","kind":"Secret","data":{"a":"c2VjcmV0"}}` // c4: not redacted

	e := Entry(app, Tree{States: states})
	var carried []string
	for _, d := range e.Diffs {
		carried = append(carried, d.Name)
	}
	if strings.Join(carried, ",") != "c1,c2" {
		t.Errorf("the entry carries the states of %v, want c1 and c2", carried)
	}
	if e.Diffs[0].LiveState != states.Diffs[1].LiveState || e.Diffs[0].TargetState != states.Diffs[1].TargetState ||
		e.Diffs[0].PredictedLiveState != states.Diffs[1].PredictedLiveState {
		t.Errorf("c1's states changed: %+v", e.Diffs[0])
	}
	if e.DiffsOmitted != 3 {
		t.Errorf("%d omitted, want 3", e.DiffsOmitted)
	}
	for _, want := range []string{"3 of the 5 OutOfSync", "1 exceed what an app carries (1000 diffs, 256 KiB of states)", "1 have a state that is not a manifest, or a Secret's state that is not redacted", "1 have no states"} {
		if !strings.Contains(e.DiffsMessage, want) {
			t.Errorf("the message %q does not say %q", e.DiffsMessage, want)
		}
	}
	if strings.Contains(fmt.Sprint(e), "c2VjcmV0") {
		t.Error("the Secret's data is in the entry")
	}

	unread := Entry(app, Tree{States: States{Unavailable: "NOPERM this user has no permissions to access the key"}})
	if unread.Diffs != nil || unread.DiffsOmitted != 5 || !strings.Contains(unread.DiffsMessage, "NOPERM") {
		t.Errorf("states not read: %d diffs, %d omitted, %q", len(unread.Diffs), unread.DiffsOmitted, unread.DiffsMessage)
	}
	synced := app
	synced.Resources = app.Resources[:1]
	if e := Entry(synced, Tree{States: states}); e.Diffs != nil || e.DiffsOmitted != 0 || e.DiffsMessage != "" {
		t.Errorf("an app without an OutOfSync resource: %+v", e)
	}

	// The budget holds however many resources differ.
	many := app
	many.Resources = nil
	var big States
	for i := range MaxDiffsPerApp + 10 {
		name := fmt.Sprintf("m%04d", i)
		many.Resources = append(many.Resources, argoapp.ResourceStatus{Version: "v1", Kind: "ConfigMap", Namespace: "web", Name: name, Status: "OutOfSync"})
		big.Diffs = append(big.Diffs, statusv1alpha1.ResourceDiff{Kind: "ConfigMap", Namespace: "web", Name: name, TargetState: state(name, 1)})
	}
	e = Entry(many, Tree{States: big})
	if len(e.Diffs) != MaxDiffsPerApp || e.DiffsOmitted != 10 {
		t.Errorf("%d diffs and %d omitted of %d, want %d and 10", len(e.Diffs), e.DiffsOmitted, len(many.Resources), MaxDiffsPerApp)
	}
	bytes := 0
	for _, d := range e.Diffs {
		bytes += diffBytes(d)
	}
	if bytes > MaxDiffBytesPerApp {
		t.Errorf("%d bytes of states, over %d", bytes, MaxDiffBytesPerApp)
	}
}

// TestFitEntryCutsTheDiffsFirst: an app over a slice loses its diffs before anything
// else, counted in DiffsOmitted, and keeps its tree when that is enough.
func TestFitEntryCutsTheDiffsFirst(t *testing.T) {
	app := App{Namespace: "argocd", Name: "web", ObservedAt: time.Date(2026, 11, 28, 6, 0, 0, 0, time.UTC)}
	var tree Tree
	for i := range 6 {
		name := fmt.Sprintf("c%d", i)
		app.Resources = append(app.Resources, argoapp.ResourceStatus{Version: "v1", Kind: "ConfigMap", Namespace: "web", Name: name, Status: "OutOfSync"})
		tree.States.Diffs = append(tree.States.Diffs, statusv1alpha1.ResourceDiff{Kind: "ConfigMap", Namespace: "web", Name: name,
			TargetState: `{"kind":"ConfigMap","data":{"k":"` + strings.Repeat("x", 40*1024) + `"}}`})
	}
	// Nodes that take most of a slice: with the diffs, the app is over it.
	for i := range 9000 {
		tree.Nodes = append(tree.Nodes, statusv1alpha1.ResourceNode{Version: "v1", Kind: "Pod", Namespace: "web", Name: fmt.Sprintf("web-%05d-abcdefghijklmnopqrstuvwxyz", i)})
	}
	e := Entry(app, tree)
	if len(e.Diffs) != 6 || EntrySize(e) <= MaxSliceBytes {
		t.Fatalf("the test's entry: %d diffs, %d bytes", len(e.Diffs), EntrySize(e))
	}
	fitted := FitEntry(e)
	if EntrySize(fitted) > MaxSliceBytes {
		t.Errorf("fitted: %d bytes", EntrySize(fitted))
	}
	if fitted.Truncated != nil || len(fitted.Nodes) != len(e.Nodes) {
		t.Errorf("the tree was cut (%+v, %d nodes) while the diffs were enough", fitted.Truncated, len(fitted.Nodes))
	}
	if int(fitted.DiffsOmitted)+len(fitted.Diffs) != 6 || fitted.DiffsOmitted == 0 || !strings.Contains(fitted.DiffsMessage, "one ApplicationStatusSlice") {
		t.Errorf("%d diffs kept, %d omitted, %q", len(fitted.Diffs), fitted.DiffsOmitted, fitted.DiffsMessage)
	}
}

// FuzzRedactedState: whatever a state holds, what RedactedState lets go of a Secret (by
// its key or its own apiVersion and kind) is a JSON object whose data and stringData
// values are all Argo CD's masks.
func FuzzRedactedState(f *testing.F) {
	for _, seed := range []string{
		`{"apiVersion":"v1","kind":"Secret","data":{"a":"++++++++"}}`,
		`{"apiVersion":"v1","kind":"Secret","data":{"a":"c2VjcmV0"}}`,
		`{"apiVersion":"v1","kind":"Secret","stringData":{"a":"s"},"metadata":{"annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{}"}}}`,
		`{"apiVersion":"v1","kind":"ConfigMap","data":{"a":"x"}}`,
		`{"kind":"Secret","apiVersion":"v1","data":null}`, `null`, `[]`, `{"kind":"Secret","kind":"ConfigMap","apiVersion":"v1","data":{"a":"x"}}`,
	} {
		f.Add("", "Secret", seed)
		f.Add("apps", "Deployment", seed)
	}
	f.Fuzz(func(t *testing.T, group, kind, state string) {
		out, ok := RedactedState(group, kind, state)
		if !ok || out == "" {
			return
		}
		var obj map[string]any
		if err := json.Unmarshal([]byte(out), &obj); err != nil {
			t.Fatalf("%q let go as %q, not a JSON object: %v", state, out, err)
		}
		if !(group == "" && kind == "Secret") && !(obj["apiVersion"] == "v1" && obj["kind"] == "Secret") {
			return
		}
		if again, _ := json.Marshal(obj); string(again) != out {
			t.Fatalf("%q let go as %q, which its decoding %s does not show whole", state, out, again)
		}
		for _, field := range []string{"data", "stringData"} {
			values, _ := obj[field].(map[string]any)
			for k, v := range values {
				if s, _ := v.(string); s == "" || strings.Trim(s, "+") != "" {
					t.Fatalf("%q let go as %q: %s.%s is %v", state, out, field, k, v)
				}
			}
			if obj[field] != nil && values == nil {
				t.Fatalf("%q let go as %q: %s is %v", state, out, field, obj[field])
			}
		}
	})
}

func TestRedactedDiff(t *testing.T) {
	deployment := `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"}}`
	got, err := RedactedDiff(argocdcache.ResourceDiff{Group: "apps", Kind: "Deployment", Name: "web",
		LiveState: deployment, NormalizedLiveState: deployment, TargetState: "", PredictedLiveState: "null"})
	if err != nil {
		t.Fatal(err)
	}
	if got.LiveState != deployment || got.NormalizedLiveState != deployment || got.TargetState != "null" || got.PredictedLiveState != "null" {
		t.Errorf("RedactedDiff = %+v", got)
	}
	masked := `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"},"data":{"k":"++++++++"}}`
	if _, err := RedactedDiff(argocdcache.ResourceDiff{Kind: "Secret", Name: "s", LiveState: masked, TargetState: masked}); err != nil {
		t.Errorf("a Secret as Argo CD redacts it: %v", err)
	}
	plain := `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"},"data":{"k":"cGFzc3dvcmQ="}}`
	if _, err := RedactedDiff(argocdcache.ResourceDiff{Kind: "Secret", Name: "s", LiveState: masked, TargetState: plain}); err == nil {
		t.Error("a Secret's plain data passes")
	}
}
