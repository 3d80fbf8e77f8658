package appstatus

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/hubcache"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/observed"
)

// TestApplyStatusKeepsForeignConditions: the mirror owns Argo CD's condition types (and
// its own notes), not a condition another writer put on the hub Application, nor the
// propagation controller's.
func TestApplyStatusKeepsForeignConditions(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	foreign := map[string]any{"type": "example.com/Reviewed", "message": "approved by the release board", "lastTransitionTime": "2026-01-01T00:00:00Z"}
	propagation := map[string]any{"type": argoapp.ConditionOCMPropagationError, "message": "AddonNotEnabled: no addon", "lastTransitionTime": "2026-01-01T00:00:00Z"}
	for _, tc := range []struct {
		name     string
		reported []argoapp.Condition
		want     []argoapp.Condition
	}{
		{
			name:     "an agent error comes and a stale one goes, the foreign ones stay",
			reported: []argoapp.Condition{{Type: "SyncError", Message: "the sync failed"}},
			want: []argoapp.Condition{
				{Type: "example.com/Reviewed", Message: "approved by the release board"},
				{Type: argoapp.ConditionOCMPropagationError, Message: "AddonNotEnabled: no addon"},
				{Type: "SyncError", Message: "the sync failed"},
			},
		},
		{
			name: "the agent reports nothing, the foreign ones stay",
			want: []argoapp.Condition{
				{Type: "example.com/Reviewed", Message: "approved by the release board"},
				{Type: argoapp.ConditionOCMPropagationError, Message: "AddonNotEnabled: no addon"},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			app := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"conditions": []any{
				foreign,
				propagation,
				map[string]any{"type": "ComparisonError", "message": "gone on the spoke", "lastTransitionTime": "2026-01-01T00:00:00Z"},
			}}}}
			ApplyStatus(app, Desired{State: observed.State{Reported: true, Conditions: tc.reported}}, now)
			items, _, _ := unstructured.NestedSlice(app.Object, "status", "conditions")
			var got []argoapp.Condition
			for _, item := range items {
				c := item.(map[string]any)
				got = append(got, argoapp.Condition{Type: c["type"].(string), Message: c["message"].(string)})
			}
			if len(got) != len(tc.want) {
				t.Fatalf("conditions %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("conditions %v, want %v", got, tc.want)
				}
			}
		})
	}
}

// TestApplyStatusNotReported: when the agent's report has no entry for the app, what
// only the report carries goes (no half-stale mix of old resources and errors with new
// revisions), the feedback stays, the note says why; when the entry comes back, so does
// all of it. Applying the same state twice changes nothing.
func TestApplyStatusNotReported(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	reported := observed.State{
		SyncStatus: "OutOfSync", SyncRevision: "r1", SyncRevisions: []string{"r1", "r2"},
		HealthStatus: "Degraded", HealthMessage: "not enough replicas",
		OperationPhase: "Failed", OperationStart: "2026-01-01T00:00:00Z", OperationMsg: "one or more objects failed to apply",
		Reported:   true,
		Resources:  []argoapp.ResourceStatus{{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "x", Name: "web", Status: "OutOfSync"}},
		Conditions: []argoapp.Condition{{Type: "SyncError", Message: "services is forbidden"}},
	}
	feedbackOnly := observed.State{
		SyncStatus: "Synced", SyncRevision: "r3", HealthStatus: "Degraded",
		OperationPhase: "Succeeded", OperationStart: "2026-01-01T00:00:00Z",
	}
	note := argoapp.Condition{Type: observed.ConditionNotReported, Message: "The agent of cluster c1 watches the namespaces [argocd]; ..."}
	app := &unstructured.Unstructured{Object: map[string]any{}}
	ApplyStatus(app, Desired{State: reported}, now)

	changed, _ := ApplyStatus(app, Desired{State: feedbackOnly, NotReported: &note}, now)
	status, _, _ := unstructured.NestedMap(app.Object, "status")
	if !changed {
		t.Fatal("no change when the entry went")
	}
	for _, path := range [][]string{{"sync", "revisions"}, {"health", "message"}, {"operationState", "message"}, {"resources"}} {
		if _, found, _ := unstructured.NestedFieldNoCopy(status, path...); found {
			t.Errorf("status.%v kept without an entry", path)
		}
	}
	for path, want := range map[string][]string{"Synced": {"sync", "status"}, "r3": {"sync", "revision"}, "Degraded": {"health", "status"}, "Succeeded": {"operationState", "phase"}} {
		if got, _, _ := unstructured.NestedString(status, want...); got != path {
			t.Errorf("status.%v = %q, want %q from the feedback", want, got, path)
		}
	}
	if conditions := ownedConditions(status); len(conditions) != 1 || conditions[0] != note {
		t.Errorf("conditions %v, want only the note", conditions)
	}
	if changed, _ := ApplyStatus(app, Desired{State: feedbackOnly, NotReported: &note}, now.Add(time.Minute)); changed {
		t.Error("the same state again changed the status")
	}

	// The entry comes back: all of it, and the note goes.
	if changed, _ := ApplyStatus(app, Desired{State: reported}, now); !changed {
		t.Fatal("no change when the entry came back")
	}
	status, _, _ = unstructured.NestedMap(app.Object, "status")
	if revisions, _, _ := unstructured.NestedStringSlice(status, "sync", "revisions"); len(revisions) != 2 {
		t.Errorf("revisions %v", revisions)
	}
	if resources, _, _ := unstructured.NestedSlice(status, "resources"); len(resources) != 1 {
		t.Errorf("resources %v", resources)
	}
	if conditions := ownedConditions(status); len(conditions) != 1 || conditions[0].Type != "SyncError" {
		t.Errorf("conditions %v, want the agent's SyncError only", conditions)
	}
}

// A final operation phase gets finishedAt once, at the time the hub learnt it; a new
// operation clears it until it finishes.
func TestApplyStatusOperationFinishedAt(t *testing.T) {
	app := argoapp.NewApplication()
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	finishedAt := func() string {
		s, _, _ := unstructured.NestedString(app.Object, "status", "operationState", "finishedAt")
		return s
	}
	op := func(phase, started string) Desired {
		return Desired{State: observed.State{OperationPhase: phase, OperationStart: started}}
	}
	ApplyStatus(app, op("Running", "2026-05-01T11:59:00Z"), now)
	if got := finishedAt(); got != "" {
		t.Errorf("a running operation has finishedAt %q", got)
	}
	ApplyStatus(app, op("Succeeded", "2026-05-01T11:59:00Z"), now)
	if got := finishedAt(); got != "2026-05-01T12:00:00Z" {
		t.Errorf("finishedAt = %q, want the time the hub saw it finish", got)
	}
	if changed, _ := ApplyStatus(app, op("Succeeded", "2026-05-01T11:59:00Z"), now.Add(time.Minute)); changed || finishedAt() != "2026-05-01T12:00:00Z" {
		t.Errorf("the same finished operation changed the status (%v) or its finishedAt (%q)", changed, finishedAt())
	}
	ApplyStatus(app, op("Running", "2026-05-01T12:05:00Z"), now.Add(5*time.Minute))
	if got := finishedAt(); got != "" {
		t.Errorf("a new running operation keeps finishedAt %q", got)
	}
}

// TestApplyStatusOperationResult: with the agent's entry of the same operation, the hub
// shows the spoke's finishedAt and sync result, which Argo CD's CLI reads (argocd app sync
// counts the resources whose prune was skipped); a new operation drops them.
func TestApplyStatusOperationResult(t *testing.T) {
	app := argoapp.NewApplication()
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	result := &argoapp.SyncResult{Revision: "abc123", Resources: []argoapp.ResourceResult{
		{Version: "v1", Kind: "ConfigMap", Namespace: "shop", Name: "extra", Status: "PruneSkipped", Message: "ignored (requires pruning)", SyncPhase: "Sync"},
	}}
	ApplyStatus(app, Desired{State: observed.State{OperationPhase: "Succeeded", OperationStart: "2026-05-01T11:59:00Z",
		OperationFinish: "2026-05-01T11:59:04Z", OperationResult: result, Reported: true}}, now)
	op, _, _ := unstructured.NestedMap(app.Object, "status", "operationState")
	want := map[string]any{"revision": "abc123", "resources": []any{map[string]any{
		"group": "", "version": "v1", "kind": "ConfigMap", "namespace": "shop", "name": "extra",
		"status": "PruneSkipped", "message": "ignored (requires pruning)", "syncPhase": "Sync"}}}
	if !reflect.DeepEqual(op["syncResult"], want) {
		t.Errorf("syncResult = %v, want %v", op["syncResult"], want)
	}
	if op["finishedAt"] != "2026-05-01T11:59:04Z" {
		t.Errorf("finishedAt = %v, want the spoke's", op["finishedAt"])
	}
	ApplyStatus(app, Desired{State: observed.State{OperationPhase: "Running", OperationStart: "2026-05-01T12:05:00Z", Reported: true}}, now)
	op, _, _ = unstructured.NestedMap(app.Object, "status", "operationState")
	if _, ok := op["syncResult"]; ok {
		t.Errorf("a new operation keeps the sync result of the last: %v", op)
	}
}

// TestApplyStatusReconciledAfterTheOperation: Argo CD's CLI waits while reconciledAt is
// before the operation's finishedAt. While the hub shows a finished operation whose
// comparison on the spoke has not come yet (the feedback's phase before the agent's
// entry, or an entry compared before the finish), reconciledAt is before finishedAt;
// once the agent's entry is of a comparison after it, reconciledAt is not, even when
// nothing else changed.
func TestApplyStatusReconciledAfterTheOperation(t *testing.T) {
	app := argoapp.NewApplication()
	now := time.Date(2026, 5, 1, 12, 0, 10, 0, time.UTC)
	times := func() (string, string) {
		r, _, _ := unstructured.NestedString(app.Object, "status", "reconciledAt")
		f, _, _ := unstructured.NestedString(app.Object, "status", "operationState", "finishedAt")
		return r, f
	}
	state := observed.State{SyncStatus: "OutOfSync", OperationPhase: "Succeeded", OperationStart: "2026-05-01T12:00:00Z", Reported: true}
	// The feedback says Succeeded; the agent's entry still has the operation Running.
	ApplyStatus(app, Desired{State: state}, now)
	if r, f := times(); !argoapp.ComparedBefore(r, f) {
		t.Errorf("reconciledAt %s, finishedAt %s: the CLI would take the status before the operation for the one after", r, f)
	}
	// The agent's entry of the operation, compared before it finished.
	state.OperationReported, state.OperationFinish, state.OperationComparedBeforeFinish = true, "2026-05-01T12:00:04Z", true
	ApplyStatus(app, Desired{State: state}, now.Add(time.Second))
	if r, f := times(); f != "2026-05-01T12:00:04Z" || !argoapp.ComparedBefore(r, f) {
		t.Errorf("reconciledAt %s, finishedAt %s: want the spoke's finishedAt, and reconciledAt before it", r, f)
	}
	// Compared after: reconciledAt moves past finishedAt, though the rest is the same.
	state.OperationComparedBeforeFinish = false
	if changed, _ := ApplyStatus(app, Desired{State: state}, now.Add(2*time.Second)); !changed {
		t.Fatal("the comparison after the operation wrote nothing")
	}
	if r, f := times(); argoapp.ComparedBefore(r, f) {
		t.Errorf("reconciledAt %s is still before finishedAt %s", r, f)
	}
	if changed, _ := ApplyStatus(app, Desired{State: state}, now.Add(3*time.Second)); changed {
		t.Error("the same state wrote again")
	}
}

// TestApplyStatusOnTheCachedDigest: an Application from the manager's cache holds a
// digest of status.resources (hubcache.ResourcesDigest). The same resources change
// nothing, and the merge patch carries no resources when something else changes; other
// resources replace the digest with the list; none remove the field, which the merge
// patch then sets to null.
func TestApplyStatusOnTheCachedDigest(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	state := observed.State{
		SyncStatus: "Synced", SyncRevision: "r1", HealthStatus: "Healthy", Reported: true,
		Resources: []argoapp.ResourceStatus{
			{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "x", Name: "web", Status: "Synced", Health: argoapp.HealthStatus{Status: "Healthy"}},
			{Version: "v1", Kind: "ConfigMap", Namespace: "x", Name: "web", Status: "Synced"},
		},
	}
	// The app as the apiserver has it, after a first mirror.
	live := argoapp.NewApplication()
	live.Object["status"] = map[string]any{"health": map[string]any{"status": "Healthy"}}
	ApplyStatus(live, Desired{State: state}, now)
	cached := func() *unstructured.Unstructured {
		obj, err := hubcache.TransformApplication(live.DeepCopy())
		if err != nil {
			t.Fatal(err)
		}
		// As the manager's client reads it from the cache: thawed.
		app := hubcache.Thawed(obj.(*unstructured.Unstructured))
		if digest, _, _ := unstructured.NestedString(app.Object, "status", "resources"); digest == "" {
			t.Fatalf("the cache holds status.resources %v, want a digest", app.Object["status"])
		}
		return app
	}
	patch := func(before, after *unstructured.Unstructured) map[string]any {
		raw, err := client.MergeFrom(before).Data(after)
		if err != nil {
			t.Fatal(err)
		}
		var p map[string]any
		if err := json.Unmarshal(raw, &p); err != nil {
			t.Fatal(err)
		}
		return p
	}

	app := cached()
	if changed, _ := ApplyStatus(app, Desired{State: state}, now.Add(time.Minute)); changed {
		t.Errorf("the same resources changed the cached status: %v", app.Object["status"])
	}

	app = cached()
	before := app.DeepCopy()
	degraded := state
	degraded.HealthStatus = "Degraded"
	if changed, _ := ApplyStatus(app, Desired{State: degraded}, now.Add(time.Minute)); !changed {
		t.Fatal("no change for a new health")
	}
	if _, found, _ := unstructured.NestedFieldNoCopy(patch(before, app), "status", "resources"); found {
		t.Errorf("the patch of a new health carries status.resources: %v", patch(before, app))
	}

	app = cached()
	before = app.DeepCopy()
	outOfSync := state
	outOfSync.Resources = []argoapp.ResourceStatus{{Version: "v1", Kind: "ConfigMap", Namespace: "x", Name: "web", Status: "OutOfSync"}}
	if changed, _ := ApplyStatus(app, Desired{State: outOfSync}, now.Add(time.Minute)); !changed {
		t.Fatal("no change for new resources")
	}
	if resources, _, _ := unstructured.NestedSlice(patch(before, app), "status", "resources"); len(resources) != 1 {
		t.Errorf("the patch of new resources carries %v", resources)
	}

	app = cached()
	before = app.DeepCopy()
	none := state
	none.Resources = nil
	if changed, _ := ApplyStatus(app, Desired{State: none}, now.Add(time.Minute)); !changed {
		t.Fatal("no change when the resources went")
	}
	if value, found, _ := unstructured.NestedFieldNoCopy(patch(before, app), "status", "resources"); !found || value != nil {
		t.Errorf("the patch when the resources went carries status.resources %v (found %t), want null", value, found)
	}
}

// TestApplyStatusProgressingFirst: health reaches Healthy through Progressing only for
// an app of a RollingSync ApplicationSet; any other goes Healthy at once.
func TestApplyStatusProgressingFirst(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name             string
		current          string
		progressingFirst bool
		wantHealth       string
		wantHolding      bool
	}{
		{name: "RollingSync, from Missing", current: "Missing", progressingFirst: true, wantHealth: argoapp.HealthProgressing, wantHolding: true},
		{name: "RollingSync, from no status", progressingFirst: true, wantHealth: argoapp.HealthProgressing, wantHolding: true},
		{name: "RollingSync, from Progressing", current: argoapp.HealthProgressing, progressingFirst: true, wantHealth: argoapp.HealthHealthy},
		{name: "other, from Missing", current: "Missing", wantHealth: argoapp.HealthHealthy},
		{name: "other, from Degraded", current: "Degraded", wantHealth: argoapp.HealthHealthy},
		{name: "other, from no status", wantHealth: argoapp.HealthHealthy},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			app := &unstructured.Unstructured{Object: map[string]any{}}
			if tt.current != "" {
				app.Object["status"] = map[string]any{"health": map[string]any{"status": tt.current}}
			}
			d := Desired{State: observed.State{SyncStatus: "Synced", HealthStatus: argoapp.HealthHealthy}, ProgressingFirst: tt.progressingFirst}
			changed, holding := ApplyStatus(app, d, now)
			if !changed || holding != tt.wantHolding || healthOf(app) != tt.wantHealth {
				t.Errorf("changed %v, holding %v, health %q; want true, %v, %q", changed, holding, healthOf(app), tt.wantHolding, tt.wantHealth)
			}
		})
	}
}

// TestAcknowledgeRefresh: the refresh leaves the hub Application only with an agent's
// entry of that refresh.
func TestAcknowledgeRefresh(t *testing.T) {
	asked := func() *unstructured.Unstructured {
		app := &unstructured.Unstructured{Object: map[string]any{}}
		app.SetAnnotations(map[string]string{argoapp.AnnotationRefresh: "hard", "example.com/kept": "yes"})
		return app
	}
	for _, tc := range []struct {
		name      string
		refreshID string
		refreshed string
		want      bool
	}{
		{"the entry is of the refresh", "r2", "r2", true},
		{"the entry is of an earlier refresh", "r2", "r1", false},
		{"no entry of any refresh", "r2", "", false},
		{"the work asks for none", "", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			app := asked()
			d := Desired{RefreshID: tc.refreshID, State: observed.State{Refreshed: tc.refreshed}}
			if got := AcknowledgeRefresh(app, d); got != tc.want {
				t.Fatalf("AcknowledgeRefresh = %v, want %v", got, tc.want)
			}
			annotations := app.GetAnnotations()
			_, pending := annotations[argoapp.AnnotationRefresh]
			if pending == tc.want || annotations["example.com/kept"] != "yes" {
				t.Errorf("annotations %v", annotations)
			}
		})
	}
	// Nothing asked: nothing to do, whatever the entry says.
	app := &unstructured.Unstructured{Object: map[string]any{}}
	if AcknowledgeRefresh(app, Desired{RefreshID: "r2", State: observed.State{Refreshed: "r2"}}) {
		t.Error("acknowledged a refresh the hub did not ask for")
	}
}
