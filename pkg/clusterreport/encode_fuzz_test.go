package clusterreport

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
)

// fuzzChoices turns the bytes of a fuzz input into the choices that build a report, so
// that the fuzzer steers the shape of the report (how many apps, which statuses, which
// strings where) by mutating them. Past the end of the bytes, every choice is the first.
type fuzzChoices struct {
	data []byte
	next int
}

// intn returns a choice in [0, n).
func (c *fuzzChoices) intn(n int) int {
	if n <= 1 || c.next >= len(c.data) {
		return 0
	}
	c.next++
	return int(c.data[c.next-1]) % n
}

// pick returns one of the options.
func (c *fuzzChoices) pick(options ...string) string {
	return options[c.intn(len(options))]
}

// cut returns at most n bytes of s, cut at a character boundary.
func cut(s string, n int) string {
	for len(s) > n {
		_, size := utf8.DecodeLastRuneInString(s)
		s = s[:len(s)-size]
	}
	return s
}

// fuzzReport builds a valid report from the fuzz input: up to 127 apps of up to 255
// resources and 25 conditions each, with text for names, statuses and messages. Large
// inputs exceed MaxBytes, so that the budget degrades and drops apps.
//
// The strings are valid UTF-8: the agent reads them from the apiserver, whose JSON
// decoding never yields anything else. Condition types are at most maxStatusBytes
// long, as Argo CD's are (SyncError, ComparisonError, ...), so that the encoding does
// not cut them.
func fuzzReport(data []byte, text string, apps, resources uint8, repeat uint16) Report {
	c := &fuzzChoices{data: data}
	text = strings.ToValidUTF8(text, "?")
	long := cut(strings.Repeat(text, int(repeat%64)+1), 4*MaxMessageBytes)
	name := cut(text, 200)
	word := cut(text, maxStatusBytes)
	message := func() string { return c.pick("", word, text, long, forbidden) }

	var r Report
	if c.intn(2) == 1 {
		r.Diagnostics = append(r.Diagnostics, Diagnostic{Type: ConditionApplicationCRD, Status: "True", Reason: ReasonCRDFound, Message: message()})
	}
	if c.intn(2) == 1 {
		r.Diagnostics = append(r.Diagnostics, Diagnostic{Type: ConditionApplicationControllerRBAC, Status: "False", Reason: ReasonForbidden, Message: message()})
	}
	seen := map[string]bool{}
	for i := range int(apps % 128) {
		app := App{
			Namespace: c.pick("argocd", "team-a", cut(text, MaxNameBytes), strings.Repeat("n", 63)),
			Name:      cut(c.pick(name, "guestbook", strings.Repeat("a", 240)), MaxNameBytes-4) + fmt.Sprintf("-%d", i),
			Sync: argoapp.SyncStatus{
				Status:   c.pick("Synced", "OutOfSync", "Unknown", "", word, long),
				Revision: c.pick("8f2c1e5d9a7b6c4d3e2f1a0b9c8d7e6f5a4b3c2d", "", name, long),
			},
			Health:     argoapp.HealthStatus{Status: c.pick("Healthy", "Degraded", "Progressing", "Missing", "", long), Message: message()},
			ObservedAt: observed.Add(time.Duration(c.intn(256)) * 1500 * time.Millisecond),
		}
		if seen[app.Key()] || app.Namespace == "" {
			continue
		}
		seen[app.Key()] = true
		if c.intn(2) == 1 {
			app.HubNamespace, app.HubName = c.pick("openshift-gitops", "", long), cut(app.Name, MaxNameBytes)
			app.ApplicationSet = c.pick("openshift-gitops/guestbook", text, long)
			app.ManifestWork = c.pick(app.Name+"-1a2b3", long)
		}
		for range c.intn(4) * c.intn(24) {
			app.Sync.Revisions = append(app.Sync.Revisions, c.pick("abc123", "1.2.3", name, long))
		}
		if c.intn(2) == 1 {
			app.Operation = argoapp.OperationState{
				Phase:     c.pick("Succeeded", "Failed", "Error", "Running", "", word),
				StartedAt: c.pick("2026-01-01T00:00:00Z", "", long),
				Message:   message(),
			}
		}
		for j := range c.intn(int(resources) + 1) {
			app.Resources = append(app.Resources, argoapp.ResourceStatus{
				Group: c.pick("apps", "", word), Version: "v1", Kind: c.pick("Deployment", "Service", word),
				Namespace: c.pick("guestbook", "", name),
				Name:      fmt.Sprintf("%s-%d", c.pick("web", name, long), j),
				Status:    c.pick("Synced", "OutOfSync", "", word),
				Health:    argoapp.HealthStatus{Status: c.pick("Healthy", "Degraded", "Missing", "", word), Message: message()},
			})
		}
		for range c.intn(26) {
			app.Conditions = append(app.Conditions, argoapp.Condition{
				Type:    c.pick("SyncError", "ComparisonError", "OrphanedResourceWarning", "SharedResourceWarning", word),
				Message: message(),
			})
		}
		app.ResourcesOmitted, app.ConditionsOmitted = c.intn(3), c.intn(3)
		r.Apps = append(r.Apps, app)
	}
	return r
}

// FuzzEncode encodes fuzzed reports, small and far over the budget, and checks what the
// agent relies on: Encode accepts every valid report, deterministically and in any order;
// what it writes the API accepts, fits MaxBytes and decodes without error; each decoded
// app is its report cut only as documented (statuses, identity and observation time
// kept, counts of resources and conditions conserved, errors kept, cut strings prefixes
// of the originals); an app the budget did not touch has the fingerprint of its report;
// and apps are left out only after every kept app is at minimal detail, healthy apps
// first and apps with errors last.
func FuzzEncode(f *testing.F) {
	f.Add([]byte{}, "", uint8(0), uint8(0), uint16(0))
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9}, "guestbook", uint8(3), uint8(5), uint16(0))
	f.Add([]byte{2, 1, 0, 3, 3, 1, 1, 1, 3, 2, 2, 2, 2, 1, 3, 0, 1, 4}, "日本語のメッセージ <&> \"quoted\"", uint8(40), uint8(120), uint16(20))
	f.Add([]byte{0xff, 0x10, 0x33, 0x7, 0x81, 0x42, 0x99}, strings.Repeat("x", 253), uint8(250), uint8(250), uint16(63))
	f.Add([]byte{3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3}, "🙂\u2028\x00\x1f", uint8(200), uint8(200), uint16(63))
	f.Fuzz(func(t *testing.T, data []byte, text string, apps, resources uint8, repeat uint16) {
		report := fuzzReport(data, text, apps, resources, repeat)
		enc, err := Encode(report)
		if err != nil {
			t.Fatalf("Encode of a valid report: %v", err)
		}
		checkAPIValid(t, enc)

		shuffled := Report{Apps: slices.Clone(report.Apps), Diagnostics: slices.Clone(report.Diagnostics)}
		slices.Reverse(shuffled.Apps)
		slices.Reverse(shuffled.Diagnostics)
		if again, err := Encode(shuffled); err != nil || !reflect.DeepEqual(again, enc) {
			t.Fatalf("Encode depends on the order of the apps (err %v)", err)
		}

		decoded, err := Decode(enc.Conditions)
		if err != nil {
			t.Fatalf("Decode of an encoding: %v", err)
		}
		if len(decoded.Diagnostics) != len(report.Diagnostics) {
			t.Fatalf("%d diagnostics decoded, %d encoded", len(decoded.Diagnostics), len(report.Diagnostics))
		}
		for _, d := range decoded.Diagnostics {
			i := slices.IndexFunc(report.Diagnostics, func(in Diagnostic) bool { return in.Type == d.Type })
			if i < 0 {
				t.Fatalf("decoded diagnostic %+v was not in the report", d)
			}
			want := report.Diagnostics[i]
			want.Message = TruncateMessage(want.Message, MaxMessageBytes)
			if d != want {
				t.Fatalf("diagnostic %+v decoded as %+v", want, d)
			}
		}
		if len(decoded.Apps)+enc.Cut.Apps != len(report.Apps) {
			t.Fatalf("%d apps decoded and %d left out, of %d", len(decoded.Apps), enc.Cut.Apps, len(report.Apps))
		}
		byKey := map[string]App{}
		for _, app := range report.Apps {
			byKey[app.Key()] = app
		}
		kept := map[string]bool{}
		for _, got := range decoded.Apps {
			in, ok := byKey[got.Key()]
			if !ok {
				t.Fatalf("decoded app %s was not in the report", got.Key())
			}
			kept[got.Key()] = true
			checkDecodedApp(t, in, got)
			if !enc.Cut.Any() {
				a, errA := Fingerprint(in)
				b, errB := Fingerprint(got)
				if errA != nil || errB != nil || a != b {
					t.Fatalf("nothing was cut, but %s decodes to another fingerprint (%v, %v)", in.Key(), errA, errB)
				}
			}
			if enc.Cut.Apps > 0 && (len(got.Resources) > 0 || got.ApplicationSet != "" || got.HubName != "" ||
				got.Health.Message != "" || slices.ContainsFunc(got.Conditions, func(c argoapp.Condition) bool { return !IsErrorCondition(c.Type) })) {
				t.Fatalf("apps were left out while %s kept more than minimal detail: %+v", got.Key(), got)
			}
		}

		// Apps are left out healthy ones first, then those without errors.
		droppedUnhealthy, droppedWithErrors := false, false
		for _, app := range report.Apps {
			if !kept[app.Key()] {
				droppedUnhealthy = droppedUnhealthy || !app.SyncedAndHealthy() || app.HasErrors()
				droppedWithErrors = droppedWithErrors || app.HasErrors()
			}
		}
		for _, app := range report.Apps {
			if !kept[app.Key()] {
				continue
			}
			if droppedUnhealthy && app.SyncedAndHealthy() && !app.HasErrors() {
				t.Fatalf("healthy %s kept while an unhealthy app was left out", app.Key())
			}
			if droppedWithErrors && !app.HasErrors() {
				t.Fatalf("%s, without errors, kept while an app with errors was left out", app.Key())
			}
		}

		summary := findCondition(enc.Conditions, ConditionSummary)
		if len(summary.Message) > MaxSummaryMessageBytes || !utf8.ValidString(summary.Message) {
			t.Fatalf("summary message of %d bytes, valid UTF-8 %v", len(summary.Message), utf8.ValidString(summary.Message))
		}
		if !strings.HasSuffix(summary.Message, Ellipsis) && enc.Cut.Any() != strings.Contains(summary.Message, "To fit the report") {
			t.Fatalf("cut %+v, summary %q", enc.Cut, summary.Message)
		}
	})
}

// checkDecodedApp checks that got is in as the encoding may cut it, whatever the detail.
func checkDecodedApp(t *testing.T, in, got App) {
	t.Helper()
	same := func(field, want, got string, maxBytes int) {
		t.Helper()
		if got != TruncateMessage(want, maxBytes) {
			t.Fatalf("%s: %s %q decoded as %q", in.Key(), field, want, got)
		}
	}
	same("sync status", in.Sync.Status, got.Sync.Status, maxStatusBytes)
	same("revision", in.Sync.Revision, got.Sync.Revision, MaxNameBytes)
	same("health status", in.Health.Status, got.Health.Status, maxStatusBytes)
	same("operation phase", in.Operation.Phase, got.Operation.Phase, maxStatusBytes)
	if !got.ObservedAt.Equal(in.ObservedAt.Truncate(time.Second)) {
		t.Fatalf("%s: observed at %v, decoded %v", in.Key(), in.ObservedAt, got.ObservedAt)
	}
	cutOf := func(field, want, got string) {
		t.Helper()
		if got != want && got != "" && (!strings.HasSuffix(got, Ellipsis) || !strings.HasPrefix(want, strings.TrimSuffix(got, Ellipsis))) {
			t.Fatalf("%s: %s %q decoded as %q, not a cut of it", in.Key(), field, want, got)
		}
	}
	cutOf("health message", in.Health.Message, got.Health.Message)
	cutOf("operation message", in.Operation.Message, got.Operation.Message)
	cutOf("applicationSet", in.ApplicationSet, got.ApplicationSet)

	if len(got.Resources) > MaxResourcesPerApp || len(got.Resources)+got.ResourcesOmitted != len(in.Resources)+in.ResourcesOmitted {
		t.Fatalf("%s: %d+%d resources decoded as %d+%d", in.Key(), len(in.Resources), in.ResourcesOmitted, len(got.Resources), got.ResourcesOmitted)
	}
	if !slices.IsSortedFunc(got.Resources, compareResources) {
		t.Fatalf("%s: resources not sorted", in.Key())
	}
	problems, gotProblems := 0, 0
	for _, r := range in.Resources {
		if isProblem(r) {
			problems++
		}
	}
	for _, r := range got.Resources {
		if isProblem(r) {
			gotProblems++
		}
	}
	if gotProblems < len(got.Resources) && gotProblems < min(problems, MaxResourcesPerApp) {
		t.Fatalf("%s: %d of %d problem resources kept, and healthy ones too", in.Key(), gotProblems, problems)
	}

	if len(got.Conditions) > MaxConditionsPerApp || len(got.Conditions)+got.ConditionsOmitted != len(in.Conditions)+in.ConditionsOmitted {
		t.Fatalf("%s: %d+%d conditions decoded as %d+%d", in.Key(), len(in.Conditions), in.ConditionsOmitted, len(got.Conditions), got.ConditionsOmitted)
	}
	errorsIn, errorsGot := 0, 0
	for _, c := range in.Conditions {
		if IsErrorCondition(c.Type) {
			errorsIn++
		}
	}
	for _, c := range got.Conditions {
		if IsErrorCondition(c.Type) {
			errorsGot++
		}
		if !slices.ContainsFunc(in.Conditions, func(ic argoapp.Condition) bool {
			return ic.Type == c.Type && (ic.Message == c.Message ||
				strings.HasSuffix(c.Message, Ellipsis) && strings.HasPrefix(ic.Message, strings.TrimSuffix(c.Message, Ellipsis)))
		}) {
			t.Fatalf("%s: condition %+v is not one of the app's, or a cut of one", in.Key(), c)
		}
	}
	if errorsGot != min(errorsIn, MaxConditionsPerApp) {
		t.Fatalf("%s: %d of %d errors kept", in.Key(), errorsGot, errorsIn)
	}
	for _, s := range []string{got.Namespace, got.Name, got.Health.Message, got.Operation.Message, got.ApplicationSet, got.ManifestWork} {
		if !utf8.ValidString(s) {
			t.Fatalf("%s: decoded %q is not valid UTF-8", in.Key(), s)
		}
	}
}
