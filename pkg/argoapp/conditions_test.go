package argoapp

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestSetCondition(t *testing.T) {
	now := time.Date(2026, 2, 3, 4, 5, 6, 0, time.UTC)
	const nowText = "2026-02-03T04:05:06Z"
	tests := []struct {
		name        string
		body        string
		message     string
		wantChanged bool
		want        []any // status.conditions after the call; nil for none
		wantErr     string
	}{
		{
			name:        "no status",
			message:     "AddonNotEnabled: no addon",
			wantChanged: true,
			want:        []any{cond("OCMPropagationError", "AddonNotEnabled: no addon", nowText)},
		},
		{
			name:        "null status",
			body:        "status: null",
			message:     "m",
			wantChanged: true,
			want:        []any{cond("OCMPropagationError", "m", nowText)},
		},
		{
			name: "other types are kept as they are, extra fields included",
			body: `
status:
  conditions:
  - {type: SyncError, message: boom, lastTransitionTime: "2025-01-01T00:00:00Z", extra: kept}
`,
			message:     "m",
			wantChanged: true,
			want: []any{
				map[string]any{"type": "SyncError", "message": "boom", "lastTransitionTime": "2025-01-01T00:00:00Z", "extra": "kept"},
				cond("OCMPropagationError", "m", nowText),
			},
		},
		{
			name: "same message keeps the transition time and changes nothing",
			body: `
status:
  conditions:
  - {type: OCMPropagationError, message: m, lastTransitionTime: "2025-01-01T00:00:00Z"}
  - {type: SyncError, message: boom}
`,
			message: "m",
			want: []any{
				cond("OCMPropagationError", "m", "2025-01-01T00:00:00Z"),
				map[string]any{"type": "SyncError", "message": "boom"},
			},
		},
		{
			name: "new message replaces the condition in place",
			body: `
status:
  conditions:
  - {type: SyncError, message: boom}
  - {type: OCMPropagationError, message: old, lastTransitionTime: "2025-01-01T00:00:00Z"}
  - {type: ComparisonError, message: bad}
`,
			message:     "new",
			wantChanged: true,
			want: []any{
				map[string]any{"type": "SyncError", "message": "boom"},
				cond("OCMPropagationError", "new", nowText),
				map[string]any{"type": "ComparisonError", "message": "bad"},
			},
		},
		{
			name: "duplicates of the type are dropped",
			body: `
status:
  conditions:
  - {type: OCMPropagationError, message: m, lastTransitionTime: "2025-01-01T00:00:00Z"}
  - {type: OCMPropagationError, message: other}
`,
			message:     "m",
			wantChanged: true,
			want:        []any{cond("OCMPropagationError", "m", "2025-01-01T00:00:00Z")},
		},
		{name: "conditions not a list", body: "status: {conditions: {type: x}}", message: "m", wantErr: ".status.conditions"},
		{name: "condition not an object", body: "status: {conditions: [x]}", message: "m", wantErr: ".status.conditions[0]"},
		{name: "null condition", body: "status: {conditions: [null]}", message: "m", wantErr: ".status.conditions[0]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			app := application(t, appHeader+tt.body)
			before := app.DeepCopy()
			changed, err := SetCondition(app, ConditionOCMPropagationError, tt.message, now)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one naming %s", err, tt.wantErr)
				}
				if !reflect.DeepEqual(app, before) {
					t.Error("the application changed on error")
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if changed != tt.wantChanged {
				t.Errorf("changed = %v, want %v", changed, tt.wantChanged)
			}
			if !changed && !reflect.DeepEqual(app, before) {
				t.Error("reported no change but the application changed")
			}
			if got := conditionsList(app); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("conditions = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestRemoveCondition(t *testing.T) {
	tests := []struct {
		name        string
		body        string
		wantChanged bool
		want        []any
	}{
		{name: "no status"},
		{
			name:        "only ours: the list goes",
			body:        "status: {sync: {status: Synced}, conditions: [{type: OCMPropagationError, message: m}, {type: OCMPropagationError, message: n}]}",
			wantChanged: true,
		},
		{
			name:        "others are kept in order",
			body:        "status: {conditions: [{type: A, message: a}, {type: OCMPropagationError, message: m}, {type: B, message: b}]}",
			wantChanged: true,
			want:        []any{map[string]any{"type": "A", "message": "a"}, map[string]any{"type": "B", "message": "b"}},
		},
		{
			name: "not there",
			body: "status: {conditions: [{type: A, message: a}]}",
			want: []any{map[string]any{"type": "A", "message": "a"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			app := application(t, appHeader+tt.body)
			changed, err := RemoveCondition(app, ConditionOCMPropagationError)
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if changed != tt.wantChanged {
				t.Errorf("changed = %v, want %v", changed, tt.wantChanged)
			}
			if got := conditionsList(app); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("conditions = %v, want %v", got, tt.want)
			}
			if _, found, _ := FindCondition(app, ConditionOCMPropagationError); found {
				t.Error("the condition is still there")
			}
		})
	}
	if _, err := RemoveCondition(application(t, appHeader+"status: {conditions: 5}"), "A"); err == nil {
		t.Error("a malformed conditions list gave no error")
	}
}

func TestFindCondition(t *testing.T) {
	app := application(t, appHeader+"status: {conditions: [{type: A, message: a}, {type: OCMPropagationError, message: m}]}")
	message, found, err := FindCondition(app, ConditionOCMPropagationError)
	if err != nil || !found || message != "m" {
		t.Errorf("FindCondition = %q, %v, %v; want m, true, nil", message, found, err)
	}
	if _, found, _ := FindCondition(app, "B"); found {
		t.Error("found a condition type that is not there")
	}
}

func cond(condType, message, at string) map[string]any {
	return map[string]any{"type": condType, "message": message, "lastTransitionTime": at}
}

// conditionsList returns status.conditions of the application, nil when absent.
func conditionsList(app interface{ UnstructuredContent() map[string]any }) []any {
	status, _ := app.UnstructuredContent()["status"].(map[string]any)
	conditions, _ := status["conditions"].([]any)
	return conditions
}

func TestConditionSince(t *testing.T) {
	app := NewApplication()
	if _, _, found := ConditionSince(app, ConditionOCMPropagationError); found {
		t.Fatal("found a condition on an application without status")
	}
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	if _, err := SetCondition(app, ConditionOCMPropagationError, "AddonNotEnabled: gone", at); err != nil {
		t.Fatal(err)
	}
	message, since, found := ConditionSince(app, ConditionOCMPropagationError)
	if !found || message != "AddonNotEnabled: gone" || !since.Equal(at) {
		t.Errorf("ConditionSince = %q, %v, %v; want the message and %v", message, since, found, at)
	}
}
