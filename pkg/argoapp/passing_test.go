package argoapp

import (
	"testing"

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
