package clusterreport

import (
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FuzzDecode feeds Decode arbitrary conditions. Decode must not panic; whatever it
// accepts must hold to the limits of the encoding, encode again, and decode to the same
// apps once normalised by one encoding.
func FuzzDecode(f *testing.F) {
	seeds, err := Encode(Report{Apps: []App{
		failingApp("argocd", "web", 3),
		healthyApp("argocd", "multi", 1),
		{Namespace: "argocd", Name: "bare"},
	}})
	if err != nil {
		f.Fatal(err)
	}
	for _, c := range seeds.Conditions {
		f.Add(c.Type, c.Message)
	}
	f.Add(AppConditionType("argocd", "web"), validPayload)
	f.Add(AppConditionType("argocd", "web"), `{"v":1,"namespace":"argocd","name":"web","resources":[["a"]],"observedAt":"x"}`)
	f.Add(AppConditionType("argocd", "web"), `{"v":2}`)
	f.Add(ConditionApplicationCRD, "anything")
	f.Add("Available", "{")

	f.Fuzz(func(t *testing.T, conditionType, message string) {
		conditions := []metav1.Condition{
			{Type: conditionType, Status: metav1.ConditionTrue, Reason: "Fuzz", Message: message},
			seeds.Conditions[0],
		}
		report, _ := Decode(conditions)
		for _, app := range report.Apps {
			if len(app.Resources) > MaxResourcesPerApp || len(app.Conditions) > MaxConditionsPerApp ||
				len(app.Sync.Revisions) > MaxRevisions || app.ResourcesOmitted < 0 || app.ConditionsOmitted < 0 {
				t.Fatalf("decoded app breaks the limits: %+v", app)
			}
			if app.Namespace == "" || app.Name == "" {
				t.Fatalf("decoded app without identity: %+v", app)
			}
		}
		if len(report.Apps) != 2 {
			return
		}
		once, err := Encode(Report{Apps: report.Apps})
		if err != nil {
			t.Fatalf("a decoded report does not encode: %v", err)
		}
		normalised, err := Decode(once.Conditions)
		if err != nil {
			t.Fatalf("an encoded report does not decode: %v", err)
		}
		twice, err := Encode(Report{Apps: normalised.Apps})
		if err != nil {
			t.Fatalf("a normalised report does not encode: %v", err)
		}
		if !reflect.DeepEqual(once, twice) {
			t.Fatalf("encoding is not stable:\n%+v\n%+v", once.Conditions, twice.Conditions)
		}
	})
}
