package argoapp

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// An Application's status.conditions is a list of {type, message, lastTransitionTime},
// written by several controllers: Argo CD, and on the hub the addon's controllers, each
// for its own types. The helpers below change the conditions of one type and keep every
// other entry exactly as it is, so that a read-modify-write with optimistic locking
// never clobbers another writer's conditions.

// SetCondition makes status.conditions of app hold exactly one condition of type
// condType, with message. Its lastTransitionTime is now when the condition is added or
// its message changes, and is kept otherwise. It reports whether app changed, and
// fails, leaving app unchanged, when status or status.conditions has the wrong type.
func SetCondition(app *unstructured.Unstructured, condType, message string, now time.Time) (bool, error) {
	conditions, err := conditionsOf(app)
	if err != nil {
		return false, err
	}
	entry := map[string]any{
		"type":               condType,
		"message":            message,
		"lastTransitionTime": now.UTC().Format(time.RFC3339),
	}
	out := make([]any, 0, len(conditions)+1)
	matches := 0
	changed := true
	for _, item := range conditions {
		current := item.(map[string]any) // conditionsOf checked
		if current["type"] != condType {
			out = append(out, item)
			continue
		}
		matches++
		if matches > 1 {
			continue // a duplicate: drop it
		}
		if current["message"] == message {
			// Same condition: keep it as it is, with its transition time.
			entry = current
			changed = false
		}
		out = append(out, entry) // in place of the old one
	}
	if matches == 0 {
		out = append(out, entry)
	}
	if !changed && matches == 1 {
		return false, nil
	}
	return true, setConditions(app, out)
}

// RemoveCondition removes every condition of type condType from status.conditions of
// app. It reports whether app changed, and fails, leaving app unchanged, when status or
// status.conditions has the wrong type.
func RemoveCondition(app *unstructured.Unstructured, condType string) (bool, error) {
	conditions, err := conditionsOf(app)
	if err != nil {
		return false, err
	}
	var kept []any
	for _, item := range conditions {
		if item.(map[string]any)["type"] != condType {
			kept = append(kept, item)
		}
	}
	if len(kept) == len(conditions) {
		return false, nil
	}
	return true, setConditions(app, kept)
}

// FindCondition returns the message of the condition of type condType in
// status.conditions of app, and whether there is one.
func FindCondition(app *unstructured.Unstructured, condType string) (string, bool, error) {
	conditions, err := conditionsOf(app)
	if err != nil {
		return "", false, err
	}
	for _, item := range conditions {
		entry := item.(map[string]any)
		if entry["type"] == condType {
			message, _ := entry["message"].(string)
			return message, true, nil
		}
	}
	return "", false, nil
}

// ConditionSince returns the message and the lastTransitionTime of the condition of type
// condType in status.conditions of app, and whether there is one. A missing or
// unreadable time is zero.
func ConditionSince(app *unstructured.Unstructured, condType string) (string, time.Time, bool) {
	conditions, err := conditionsOf(app)
	if err != nil {
		return "", time.Time{}, false
	}
	for _, item := range conditions {
		entry := item.(map[string]any)
		if entry["type"] != condType {
			continue
		}
		message, _ := entry["message"].(string)
		raw, _ := entry["lastTransitionTime"].(string)
		since, _ := time.Parse(time.RFC3339, raw)
		return message, since, true
	}
	return "", time.Time{}, false
}

// conditionsOf returns status.conditions of app, each entry checked to be an object.
func conditionsOf(app *unstructured.Unstructured) ([]any, error) {
	var r fieldReader
	status := r.object(app.Object, "", "status")
	conditions := r.list(status, ".status", "conditions")
	for i, item := range conditions {
		r.element(item, fmt.Sprintf(".status.conditions[%d]", i))
		if item == nil {
			r.fail(fmt.Sprintf(".status.conditions[%d]", i), "object", item)
		}
	}
	if r.err != nil {
		return nil, fmt.Errorf("conditions of application %s/%s: %w", app.GetNamespace(), app.GetName(), r.err)
	}
	return conditions, nil
}

// setConditions sets status.conditions of app to conditions, or removes it when
// conditions is empty.
func setConditions(app *unstructured.Unstructured, conditions []any) error {
	if len(conditions) == 0 {
		unstructured.RemoveNestedField(app.Object, "status", "conditions")
		return nil
	}
	if app.Object["status"] == nil {
		delete(app.Object, "status") // an explicit null, which SetNestedSlice cannot descend into
	}
	return unstructured.SetNestedSlice(app.Object, conditions, "status", "conditions")
}

// IsServedByAnotherController reports whether the propagation controller found that
// another pull controller serves app: its OCMPropagationError condition has the reason
// ReasonServedByAnotherController.
func IsServedByAnotherController(app *unstructured.Unstructured) bool {
	message, _, _ := FindCondition(app, ConditionOCMPropagationError)
	return strings.HasPrefix(message, ReasonServedByAnotherController+":")
}
