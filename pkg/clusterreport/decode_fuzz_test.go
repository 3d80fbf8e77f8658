package clusterreport

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FuzzDecode feeds Decode arbitrary conditions next to a valid one. Decode must not
// panic, and its answer must hold to its contract: every error is a *DecodeError that
// wraps one of ErrMalformed, ErrTooLarge and ErrUnsupportedVersion; the order of the
// conditions does not matter; whatever it accepts respects the limits of the encoding,
// is valid UTF-8, carries the identity its condition type names, encodes again, decodes
// back to the same apps (same fingerprint and observation time), and encodes stably.
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
	f.Add(ConditionReportScope, `{"v":1,"watchNamespaces":["argocd","openshift-gitops"],"appsLeftOut":3}`)
	f.Add(ConditionReportScope, `{"v":1,"watchNamespaces":[""],"namespacesOmitted":-1}`)
	f.Add(ConditionReportScope, `{"v":2,"watchNamespaces":["argocd"]}`)
	f.Add(AppConditionType("argocd", "web"), validPayload)
	f.Add(AppConditionType("argocd", "web"), `{"v":1,"namespace":"argocd","name":"web","resources":[["a"]],"observedAt":"x"}`)
	f.Add(AppConditionType("argocd", "web"), `{"v":1,"namespace":"argocd","name":"web","hub":{"namespace":"","name":""},"operation":{},"observedAt":"2026-01-02T03:04:05.5+01:00"}`)
	f.Add(AppConditionType("argocd", "web"), `{"v":1,"namespace":"argocd","name":"web","health":{"message":"\xff\xfe"},"conditions":[{"type":"SyncError","message":"\u0000"}],"resourcesOmitted":9223372036854775807,"observedAt":"2026-01-02T03:04:05Z"}`)
	f.Add(AppConditionType("argocd", "web"), `{"v":2}`)
	f.Add(AppConditionType("argocd", strings.Repeat("a", 253)), `{"v":1,"namespace":"argocd","name":"`+strings.Repeat("a", 253)+`","observedAt":"2026-01-02T03:04:05Z"}`)
	f.Add(AppConditionType("argocd", "日本語"), `{"v":1,"namespace":"argocd","name":"日本語","observedAt":"2026-01-02T03:04:05Z"}`)
	// A second copy of a seed's app, observed at another time: neither copy is kept,
	// whatever the order.
	f.Add(AppConditionType("argocd", "bare"), `{"v":1,"namespace":"argocd","name":"bare","observedAt":"0000-01-01T00:00:00Z"}`)
	f.Add(ConditionApplicationCRD, "anything")
	f.Add("Available", "{")
	f.Add("", "")

	f.Fuzz(func(t *testing.T, conditionType, message string) {
		conditions := []metav1.Condition{
			{Type: conditionType, Status: metav1.ConditionTrue, Reason: "Fuzz", Message: message},
			seeds.Conditions[0],
		}
		report, err := Decode(conditions)
		checkDecodeErrors(t, err)
		reversed, errReversed := Decode([]metav1.Condition{conditions[1], conditions[0]})
		if !reflect.DeepEqual(report, reversed) || (err == nil) != (errReversed == nil) {
			t.Fatalf("Decode depends on the order of the conditions:\n%+v\n%+v", report, reversed)
		}
		types := map[string]bool{conditionType: true, seeds.Conditions[0].Type: true}
		for _, app := range report.Apps {
			if len(app.Resources) > MaxResourcesPerApp || len(app.Conditions) > MaxConditionsPerApp ||
				len(app.Sync.Revisions) > MaxRevisions || app.ResourcesOmitted < 0 || app.ConditionsOmitted < 0 {
				t.Fatalf("decoded app breaks the limits: %+v", app)
			}
			if app.Namespace == "" || app.Name == "" || !types[AppConditionType(app.Namespace, app.Name)] {
				t.Fatalf("decoded app %q does not carry the identity of its condition type", app.Key())
			}
			if !utf8.ValidString(fmt.Sprintf("%+v", app)) {
				t.Fatalf("decoded app %q is not valid UTF-8", app.Key())
			}
		}
		if s := report.Scope; s != nil {
			if len(s.WatchNamespaces) == 0 || len(s.WatchNamespaces) > MaxScopeNamespaces || s.NamespacesOmitted < 0 || s.AppsLeftOut < 0 {
				t.Fatalf("decoded scope breaks the limits: %+v", s)
			}
			enc, err := Encode(Report{Scope: s})
			if err != nil {
				t.Fatalf("a decoded scope does not encode: %v", err)
			}
			back, err := Decode(enc.Conditions)
			if err != nil || back.Scope == nil || !reflect.DeepEqual(back.Scope.WatchNamespaces, s.WatchNamespaces) ||
				back.Scope.NamespacesOmitted != s.NamespacesOmitted {
				t.Fatalf("a decoded scope does not decode back to itself: %+v, %+v, %v", s, back.Scope, err)
			}
		}
		if len(report.Apps) != 2 {
			return
		}
		once, err := Encode(Report{Apps: report.Apps})
		if err != nil {
			t.Fatalf("a decoded report does not encode: %v", err)
		}
		if once.Cut.Any() {
			t.Fatalf("two decoded apps do not fit the budget: %+v", once.Cut)
		}
		normalised, err := Decode(once.Conditions)
		if err != nil {
			t.Fatalf("an encoded report does not decode: %v", err)
		}
		for i, app := range report.Apps {
			before, errBefore := Fingerprint(app)
			after, errAfter := Fingerprint(normalised.Apps[i])
			if errBefore != nil || errAfter != nil || before != after ||
				!normalised.Apps[i].ObservedAt.Equal(app.ObservedAt.Truncate(time.Second)) {
				t.Fatalf("%s does not decode back to itself:\n%+v\n%+v", app.Key(), app, normalised.Apps[i])
			}
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

// checkDecodeErrors fails the test unless every error Decode joined is a *DecodeError
// that wraps one of the documented reasons.
func checkDecodeErrors(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		return
	}
	errs := []error{err}
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		errs = joined.Unwrap()
	}
	for _, err := range errs {
		var decodeErr *DecodeError
		if !errors.As(err, &decodeErr) {
			t.Fatalf("Decode returned %T, not a *DecodeError: %v", err, err)
		}
		if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrTooLarge) && !errors.Is(err, ErrUnsupportedVersion) {
			t.Fatalf("Decode returned an error of no documented reason: %v", err)
		}
	}
}
