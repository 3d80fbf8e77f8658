package argoapp

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestAwaitedOperation(t *testing.T) {
	operation := func(initiatedBy map[string]any) map[string]any {
		return map[string]any{"sync": map[string]any{"revision": "main"}, "initiatedBy": initiatedBy}
	}
	auto := operation(map[string]any{"automated": true})
	user := operation(map[string]any{"username": "admin"})
	rollingSync := operation(map[string]any{"username": "applicationset-controller", "automated": true})
	for _, tc := range []struct {
		name    string
		object  map[string]any
		awaited bool
	}{
		{"no operation", map[string]any{}, false},
		{"an automatic sync requested", map[string]any{"operation": auto}, false},
		{"an automatic sync running", map[string]any{"status": map[string]any{"operationState": map[string]any{"operation": auto, "phase": "Running"}}}, false},
		{"a user's sync requested", map[string]any{"operation": user}, true},
		{"a user's sync, the last", map[string]any{"status": map[string]any{"operationState": map[string]any{"operation": user, "phase": "Succeeded"}}}, true},
		{"a RollingSync step", map[string]any{"operation": rollingSync}, true},
		{"an operation that says nothing of who", map[string]any{"operation": operation(nil)}, true},
		{"a user's sync requested after an automatic one", map[string]any{"operation": user,
			"status": map[string]any{"operationState": map[string]any{"operation": auto, "phase": "Succeeded"}}}, true},
	} {
		if got := AwaitedOperation(&unstructured.Unstructured{Object: tc.object}); got != tc.awaited {
			t.Errorf("%s: AwaitedOperation = %v; want %v", tc.name, got, tc.awaited)
		}
	}
}

func TestSettleHolds(t *testing.T) {
	const limit = 5 * time.Second
	t0 := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	var h SettleHolds[string]
	for _, step := range []struct {
		key     string
		after   time.Duration
		mayWait bool
		want    time.Duration
	}{
		{"a", 0, true, limit},                         // a hold begins
		{"a", 2 * time.Second, true, 3 * time.Second}, // and counts from its first change
		{"b", 2 * time.Second, true, limit},           // each key its own
		{"a", limit, true, 0},                         // it ends at the limit
		{"a", limit + time.Second, true, limit},       // and the next begins afresh
		{"b", 3 * time.Second, false, 0},              // what may not wait ends it at once
		{"b", 4 * time.Second, true, limit},           // so the next counts from there
	} {
		if got := h.Wait(step.key, step.mayWait, limit, t0.Add(step.after)); got != step.want {
			t.Errorf("%s at %v (may wait %v): Wait = %v; want %v", step.key, step.after, step.mayWait, got, step.want)
		}
	}
	h.Forget("b")
	if got := h.Wait("b", true, limit, t0.Add(time.Minute)); got != limit {
		t.Errorf("after Forget: Wait = %v; want a new hold of %v", got, limit)
	}
}
