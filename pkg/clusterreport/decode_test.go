package clusterreport

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// appCondition returns an app condition with the given payload, typed for argocd/web.
func appCondition(message string) metav1.Condition {
	return metav1.Condition{
		Type: AppConditionType("argocd", "web"), Status: metav1.ConditionTrue, Reason: "Synced_Healthy",
		Message: message, LastTransitionTime: metav1.Now(),
	}
}

const validPayload = `{"v":1,"namespace":"argocd","name":"web","sync":{"status":"Synced"},"health":{"status":"Healthy"},"observedAt":"2026-01-02T03:04:05Z"}`

func TestDecodeApp(t *testing.T) {
	rows := func(n int, row string) string {
		return strings.TrimSuffix(strings.Repeat(row+",", n), ",")
	}
	payload := func(extra string) string {
		return `{"v":1,"namespace":"argocd","name":"web",` + extra + `"observedAt":"2026-01-02T03:04:05Z"}`
	}
	tests := []struct {
		name    string
		message string
		want    error // nil for success
	}{
		{"valid", validPayload, nil},
		{"unknown fields of a later agent", `{"v":1,"namespace":"argocd","name":"web","future":{"a":[1,2]},"observedAt":"2026-01-02T03:04:05Z"}`, nil},
		{"extra resource columns", payload(`"resources":[["apps","v1","Deployment","ns","web","Synced","Healthy","new column"]],`), nil},
		{"empty", "", ErrMalformed},
		{"not JSON", "Synced and Healthy", ErrMalformed},
		{"not an object", `[1,2,3]`, ErrMalformed},
		{"trailing data", validPayload + `{}`, ErrMalformed},
		{"no version", `{"namespace":"argocd","name":"web","observedAt":"2026-01-02T03:04:05Z"}`, ErrMalformed},
		{"version not a number", `{"v":"1","namespace":"argocd","name":"web"}`, ErrMalformed},
		{"version 2", `{"v":2,"namespace":"argocd","name":"web","sync":"a new shape"}`, ErrUnsupportedVersion},
		{"version 0", `{"v":0}`, ErrUnsupportedVersion},
		{"field of the wrong type", payload(`"sync":{"status":5},`), ErrMalformed},
		{"resources not rows", payload(`"resources":[{"kind":"Pod"}],`), ErrMalformed},
		{"short row", payload(`"resources":[["apps","v1","Deployment"]],`), ErrMalformed},
		{"null row", payload(`"resources":[null],`), ErrMalformed},
		{"too many resources", payload(`"resources":[` + rows(MaxResourcesPerApp+1, `["","v1","Pod","ns","p","Synced","Healthy"]`) + `],`), ErrMalformed},
		{"too many conditions", payload(`"conditions":[` + rows(MaxConditionsPerApp+1, `{"type":"SyncError"}`) + `],`), ErrMalformed},
		{"condition without type", payload(`"conditions":[{"message":"x"}],`), ErrMalformed},
		{"too many revisions", payload(`"sync":{"revisions":[` + rows(MaxRevisions+1, `"abc"`) + `]},`), ErrMalformed},
		{"message too long", payload(`"health":{"message":"` + strings.Repeat("m", MaxMessageBytes+1) + `"},`), ErrMalformed},
		{"negative count", payload(`"resourcesOmitted":-1,`), ErrMalformed},
		{"bad observedAt", `{"v":1,"namespace":"argocd","name":"web","observedAt":"yesterday"}`, ErrMalformed},
		{"no name", `{"v":1,"namespace":"argocd","observedAt":"2026-01-02T03:04:05Z"}`, ErrMalformed},
		{"another app than the type says", `{"v":1,"namespace":"argocd","name":"other","observedAt":"2026-01-02T03:04:05Z"}`, ErrMalformed},
		{"oversized message", `{"v":1,"pad":"` + strings.Repeat("x", MaxConditionMessageBytes) + `"}`, ErrTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			app, err := DecodeApp(appCondition(tt.message))
			if tt.want == nil {
				if err != nil {
					t.Fatalf("DecodeApp: %v", err)
				}
				if app.Key() != "argocd/web" {
					t.Errorf("decoded %s", app.Key())
				}
				return
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("error = %v, want %v", err, tt.want)
			}
			var decodeErr *DecodeError
			if !errors.As(err, &decodeErr) || decodeErr.ConditionType != AppConditionType("argocd", "web") {
				t.Errorf("error %v does not name the condition", err)
			}
		})
	}
}

func TestDecodeKeepsGoodEntries(t *testing.T) {
	enc, err := Encode(Report{Apps: []App{healthyApp("argocd", "good", 2)}})
	if err != nil {
		t.Fatal(err)
	}
	conditions := append(enc.Conditions,
		appCondition(`{"v":7}`),
		metav1.Condition{Type: "Available", Status: metav1.ConditionTrue, Reason: "ManagedClusterAddOnLeaseUpdated", Message: "not the agent's"},
		metav1.Condition{Type: AppConditionPrefix + "argocd.broken", Status: metav1.ConditionFalse, Reason: "X", Message: "{"},
	)
	report, err := Decode(conditions)
	if len(report.Apps) != 1 || report.Apps[0].Name != "good" {
		t.Errorf("decoded %+v, want the good app", report.Apps)
	}
	if !errors.Is(err, ErrUnsupportedVersion) || !errors.Is(err, ErrMalformed) {
		t.Errorf("error = %v, want both rejections", err)
	}
	if strings.Contains(fmt.Sprint(err), "Available") {
		t.Errorf("error %v mentions a condition the agent does not own", err)
	}
	var types []string
	for _, de := range DecodeErrors(err) {
		types = append(types, de.ConditionType)
	}
	if want := []string{AppConditionType("argocd", "web"), AppConditionPrefix + "argocd.broken"}; !reflect.DeepEqual(types, want) {
		t.Errorf("DecodeErrors names %v, want %v", types, want)
	}
	if DecodeErrors(nil) != nil || DecodeErrors(errors.New("other")) != nil {
		t.Error("DecodeErrors of no decode error is not empty")
	}
}

func TestDecodeRejectsOversizedReport(t *testing.T) {
	var conditions []metav1.Condition
	filler := `{"v":1,"pad":"` + strings.Repeat("x", 30000) + `"}`
	for i := range 10 {
		conditions = append(conditions, metav1.Condition{
			Type: AppConditionType("argocd", fmt.Sprintf("app-%d", i)), Status: metav1.ConditionTrue, Reason: "X", Message: filler,
		})
	}
	report, err := Decode(conditions)
	var decodeErr *DecodeError
	if !errors.Is(err, ErrTooLarge) || !errors.As(err, &decodeErr) || decodeErr.ConditionType != "" {
		t.Fatalf("error = %v, want the whole report too large", err)
	}
	if !reflect.DeepEqual(report, Report{}) {
		t.Errorf("report = %+v, want empty", report)
	}
	// Conditions the agent does not own do not count.
	foreign := []metav1.Condition{{Type: "SomeoneElses", Message: strings.Repeat("x", MaxBytes)}}
	if _, err := Decode(foreign); err != nil {
		t.Errorf("foreign conditions: %v", err)
	}
}
