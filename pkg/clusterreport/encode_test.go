package clusterreport

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
)

// The API's validation of a condition (open-cluster-management.io/api, the
// ManagedClusterAddOn CRD).
var (
	apiTypePattern   = regexp.MustCompile(`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$`)
	apiReasonPattern = regexp.MustCompile(`^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$`)
)

// encodeValid encodes report, failing the test on an error or on conditions that the
// API would refuse.
func encodeValid(t *testing.T, report Report) Encoding {
	t.Helper()
	enc, err := Encode(report)
	if err != nil {
		t.Fatalf("Encode: %v", err)
	}
	checkAPIValid(t, enc)
	return enc
}

// checkAPIValid fails the test when a condition would be refused by the apiserver, or the
// conditions break the budget.
func checkAPIValid(t *testing.T, enc Encoding) {
	t.Helper()
	total := 0
	for _, c := range enc.Conditions {
		if len(c.Type) > MaxConditionTypeLength || !apiTypePattern.MatchString(c.Type) {
			t.Errorf("condition type %q is not valid", c.Type)
		}
		if len(c.Reason) > 1024 || !apiReasonPattern.MatchString(c.Reason) {
			t.Errorf("condition %s: reason %q is not valid", c.Type, c.Reason)
		}
		if len(c.Message) > MaxConditionMessageBytes {
			t.Errorf("condition %s: message of %d bytes", c.Type, len(c.Message))
		}
		switch c.Status {
		case metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionUnknown:
		default:
			t.Errorf("condition %s: status %q", c.Type, c.Status)
		}
		total += ConditionSize(c)
	}
	if total != enc.Bytes {
		t.Errorf("Bytes = %d, conditions take %d", enc.Bytes, total)
	}
	if total > MaxBytes {
		t.Errorf("conditions take %d bytes, more than the budget of %d", total, MaxBytes)
	}
}

// observed is the observation time of the test apps.
var observed = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// forbidden is the message Argo CD writes when its application-controller lacks RBAC.
const forbidden = `Failed sync attempt: one or more objects failed to apply, reason: services is forbidden: User "system:serviceaccount:argocd:argocd-application-controller" cannot create resource "services" in API group "" in the namespace "guestbook"`

// healthyApp returns a Synced and Healthy app with n resources.
func healthyApp(namespace, name string, n int) App {
	app := App{
		Namespace: namespace, Name: name,
		HubNamespace: "openshift-gitops", HubName: name,
		ApplicationSet: "openshift-gitops/guestbook-allclusters-app-set",
		ManifestWork:   name + "-1a2b3",
		Sync:           argoapp.SyncStatus{Status: "Synced", Revision: "8f2c1e5d9a7b6c4d3e2f1a0b9c8d7e6f5a4b3c2d"},
		Health:         argoapp.HealthStatus{Status: "Healthy"},
		Operation:      argoapp.OperationState{Phase: "Succeeded", StartedAt: "2026-01-01T00:00:00Z", Message: "successfully synced (all tasks run)"},
		ObservedAt:     observed,
	}
	for i := range n {
		app.Resources = append(app.Resources, argoapp.ResourceStatus{
			Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "guestbook",
			Name: fmt.Sprintf("%s-deployment-%03d", name, i), Status: "Synced",
			Health: argoapp.HealthStatus{Status: "Healthy"},
		})
	}
	return app
}

// failingApp returns an OutOfSync, Degraded app with n resources, two of them failing,
// a SyncError and a warning.
func failingApp(namespace, name string, n int) App {
	app := healthyApp(namespace, name, n)
	app.Sync.Status = "OutOfSync"
	app.Health = argoapp.HealthStatus{Status: "Degraded", Message: "Deployment does not have minimum availability"}
	app.Operation.Phase, app.Operation.Message = "Failed", "one or more objects failed to apply"
	app.Conditions = []argoapp.Condition{
		{Type: "SyncError", Message: forbidden},
		{Type: "OrphanedResourceWarning", Message: "Application has 2 orphaned resources"},
	}
	if n > 0 {
		app.Resources[0].Status, app.Resources[0].Health.Status = "OutOfSync", "Missing"
	}
	if n > 1 {
		app.Resources[1].Health.Status = "Degraded"
	}
	return app
}

// decodeAll decodes an encoding and fails the test on any error.
func decodeAll(t *testing.T, enc Encoding) Report {
	t.Helper()
	report, err := Decode(enc.Conditions)
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	return report
}

// wireForm returns what an app decodes to: resources sorted and without health
// messages, conditions errors first.
func wireForm(app App) App {
	app.Resources = slices.Clone(app.Resources)
	for i := range app.Resources {
		app.Resources[i].Health.Message = ""
	}
	slices.SortFunc(app.Resources, compareResources)
	p := newAppPlan(app)
	app.Conditions = p.conditions
	return app
}

func TestRoundTrip(t *testing.T) {
	multiSource := healthyApp("argocd", "multi", 2)
	multiSource.Sync.Revision = ""
	multiSource.Sync.Revisions = []string{"abc123", "1.2.3"}
	standalone := App{Namespace: "team-a", Name: "bare", ManifestWork: "bare-9f8e7", ObservedAt: observed}
	failing := failingApp("argocd", "failing", 5)
	failing.Resources[2].Health.Message = "health messages are not carried"

	report := Report{
		Apps: []App{failing, multiSource, standalone, healthyApp("argocd", "guestbook", 3)},
		Diagnostics: []Diagnostic{
			{Type: ConditionApplicationCRD, Status: "True", Reason: ReasonCRDFound, Message: "argoproj.io/v1alpha1 applications are served"},
			{Type: ConditionApplicationControllerRBAC, Status: "False", Reason: ReasonForbidden, Message: forbidden},
		},
	}
	enc := encodeValid(t, report)
	if enc.Cut.Any() {
		t.Errorf("Cut = %+v, want nothing cut", enc.Cut)
	}
	got := decodeAll(t, enc)

	want := []App{wireForm(failing), wireForm(healthyApp("argocd", "guestbook", 3)), wireForm(multiSource), wireForm(standalone)}
	if !reflect.DeepEqual(got.Apps, want) {
		t.Errorf("round trip:\n got %+v\nwant %+v", got.Apps, want)
	}
	if !reflect.DeepEqual(got.Diagnostics, []Diagnostic{report.Diagnostics[0], report.Diagnostics[1]}) {
		t.Errorf("diagnostics = %+v, want %+v", got.Diagnostics, report.Diagnostics)
	}

	// The app conditions say sync and health in their status and reason.
	byType := map[string]metav1.Condition{}
	for _, c := range enc.Conditions {
		byType[c.Type] = c
	}
	for _, tc := range []struct {
		app    App
		status metav1.ConditionStatus
		reason string
	}{
		{failing, metav1.ConditionFalse, "OutOfSync_Degraded"},
		{multiSource, metav1.ConditionTrue, "Synced_Healthy"},
		{standalone, metav1.ConditionUnknown, "Unknown_Unknown"},
	} {
		c, ok := byType[AppConditionType(tc.app.Namespace, tc.app.Name)]
		if !ok {
			t.Errorf("no condition for %s", tc.app.Key())
			continue
		}
		if c.Status != tc.status || c.Reason != tc.reason {
			t.Errorf("%s: status %s reason %s, want %s %s", tc.app.Key(), c.Status, c.Reason, tc.status, tc.reason)
		}
	}
	summary, ok := byType[ConditionSummary]
	if !ok || summary.Status != metav1.ConditionFalse || summary.Reason != ReasonNotAllSyncedAndHealthy {
		t.Fatalf("summary = %+v", summary)
	}
	if want := "4 applications: 2 Synced and Healthy, 2 not: argocd/failing (OutOfSync/Degraded), team-a/bare (Unknown/Unknown)."; summary.Message != want {
		t.Errorf("summary message = %q, want %q", summary.Message, want)
	}
}

func TestEncodeExample(t *testing.T) {
	// The example of docs/design.md.
	app := failingApp("openshift-gitops", "cluster1-guestbook-app", 2)
	app.Resources[1].Kind, app.Resources[1].Group, app.Resources[1].Name = "Service", "", "guestbook-ui"
	app.Resources[1].Health.Status = "Healthy"
	app.Resources[1].Status = "Synced"
	app.Resources[0].Name = "guestbook-ui"
	app.Conditions = app.Conditions[:1]
	app.Operation.Message = "one or more objects failed to apply"
	enc, err := Encode(Report{Apps: []App{app}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range enc.Conditions {
		t.Logf("type: %s\nstatus: %s\nreason: %s\nmessage: %s\n", c.Type, c.Status, c.Reason, c.Message)
	}
	want := `{"v":1,"namespace":"openshift-gitops","name":"cluster1-guestbook-app","hub":{"namespace":"openshift-gitops","name":"cluster1-guestbook-app"},"applicationSet":"openshift-gitops/guestbook-allclusters-app-set","manifestWork":"cluster1-guestbook-app-1a2b3",` +
		`"sync":{"status":"OutOfSync","revision":"8f2c1e5d9a7b6c4d3e2f1a0b9c8d7e6f5a4b3c2d"},"health":{"status":"Degraded","message":"Deployment does not have minimum availability"},` +
		`"operation":{"phase":"Failed","startedAt":"2026-01-01T00:00:00Z","message":"one or more objects failed to apply"},` +
		`"resources":[["","v1","Service","guestbook","guestbook-ui","Synced","Healthy"],["apps","v1","Deployment","guestbook","guestbook-ui","OutOfSync","Missing"]],` +
		`"conditions":[{"type":"SyncError","message":` + mustJSON(t, forbidden) + `}],"observedAt":"2026-01-02T03:04:05Z"}`
	for _, c := range enc.Conditions {
		if IsAppCondition(c.Type) && c.Message != want {
			t.Errorf("payload:\n got %s\nwant %s", c.Message, want)
		}
	}
}

// mustJSON returns s as a JSON string.
func mustJSON(t *testing.T, s string) string {
	t.Helper()
	out, err := marshalCompact(s)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestEncodeDeterministic(t *testing.T) {
	var apps []App
	for i := range 30 {
		if i%4 == 0 {
			apps = append(apps, failingApp("ns", fmt.Sprintf("app-%02d", i), 20))
		} else {
			apps = append(apps, healthyApp("ns", fmt.Sprintf("app-%02d", i), 20))
		}
	}
	first, err := Encode(Report{Apps: apps})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 5 {
		shuffled := slices.Clone(apps)
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		for i := range shuffled {
			shuffled[i].Resources = slices.Clone(shuffled[i].Resources)
			rs := shuffled[i].Resources
			rng.Shuffle(len(rs), func(a, b int) { rs[a], rs[b] = rs[b], rs[a] })
			shuffled[i].Conditions = slices.Clone(shuffled[i].Conditions)
			slices.Reverse(shuffled[i].Conditions)
		}
		again, err := Encode(Report{Apps: shuffled})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(first, again) {
			t.Fatal("the same report in another order encodes differently")
		}
	}
	// The same holds when the budget cuts.
	var big []App
	for i := range 60 {
		big = append(big, healthyApp("ns", fmt.Sprintf("big-%02d", i), 100))
	}
	a, err := Encode(Report{Apps: big})
	if err != nil {
		t.Fatal(err)
	}
	slices.Reverse(big)
	b, err := Encode(Report{Apps: big})
	if err != nil {
		t.Fatal(err)
	}
	if !a.Cut.Any() || !reflect.DeepEqual(a, b) {
		t.Fatalf("a cut report is not deterministic (cut %+v)", a.Cut)
	}
}

func TestEncodePerAppCaps(t *testing.T) {
	app := healthyApp("argocd", "many", 150)
	app.Resources[140].Status = "OutOfSync" // a problem beyond the cap is kept first
	long := strings.Repeat("é", 1000)       // 2000 bytes
	app.Health.Message = long
	app.Conditions = []argoapp.Condition{{Type: "SharedResourceWarning", Message: long}}
	for i := range 30 {
		app.Conditions = append(app.Conditions, argoapp.Condition{Type: "ComparisonError", Message: fmt.Sprintf("error %02d", i)})
	}
	app.Sync.Revisions = make([]string, 100)
	for i := range app.Sync.Revisions {
		app.Sync.Revisions[i] = fmt.Sprintf("rev-%d", i)
	}
	enc := encodeValid(t, Report{Apps: []App{app}})
	if enc.Cut.Any() {
		t.Errorf("per-app caps counted as budget cuts: %+v", enc.Cut)
	}
	got := decodeAll(t, enc).Apps[0]
	if len(got.Resources) != MaxResourcesPerApp || got.ResourcesOmitted != 50 {
		t.Errorf("resources = %d, omitted %d; want %d and 50", len(got.Resources), got.ResourcesOmitted, MaxResourcesPerApp)
	}
	if !slices.ContainsFunc(got.Resources, func(r argoapp.ResourceStatus) bool { return r.Status == "OutOfSync" }) {
		t.Error("the OutOfSync resource was not kept")
	}
	if len(got.Health.Message) > MaxMessageBytes || !strings.HasSuffix(got.Health.Message, Ellipsis) {
		t.Errorf("health message of %d bytes, not cut with %q", len(got.Health.Message), Ellipsis)
	}
	if len(got.Conditions) != MaxConditionsPerApp || got.ConditionsOmitted != 11 {
		t.Errorf("conditions = %d, omitted %d; want %d and 11", len(got.Conditions), got.ConditionsOmitted, MaxConditionsPerApp)
	}
	for _, c := range got.Conditions {
		if !IsErrorCondition(c.Type) {
			t.Errorf("warning %s kept while errors were omitted", c.Type)
		}
	}
	if len(got.Sync.Revisions) != MaxRevisions {
		t.Errorf("revisions = %d, want %d", len(got.Sync.Revisions), MaxRevisions)
	}
}

func TestEncodeOversizedApp(t *testing.T) {
	// 100 resources with the longest names do not fit in one condition message.
	app := failingApp("argocd", "long-names", 100)
	for i := range app.Resources {
		app.Resources[i].Name = fmt.Sprintf("%03d-%s", i, strings.Repeat("n", 249))
		app.Resources[i].Group = strings.Repeat("g", 200)
	}
	enc := encodeValid(t, Report{Apps: []App{app}})
	got := decodeAll(t, enc).Apps[0]
	if len(got.Resources) == 0 || len(got.Resources) >= 100 || len(got.Resources)+got.ResourcesOmitted != 100 {
		t.Errorf("kept %d resources, omitted %d; want some of 100", len(got.Resources), got.ResourcesOmitted)
	}
	if got.Resources[0].Status != "OutOfSync" && got.Resources[1].Status != "OutOfSync" {
		t.Error("the failing resource was not kept first")
	}
	if enc.Cut.ResourceLists != 1 {
		t.Errorf("Cut = %+v, want one resource list", enc.Cut)
	}
}

func TestEncodeBudgetDegradesHealthyFirst(t *testing.T) {
	enc := encodeValid(t, Report{Apps: fleetApps(3, 60, 100)})
	t.Logf("63 apps of 100 resources: %d bytes, cut %+v", enc.Bytes, enc.Cut)
	report := decodeAll(t, enc)
	if len(report.Apps) != 63 {
		t.Fatalf("decoded %d apps, want all 63", len(report.Apps))
	}
	degraded := 0
	for _, app := range report.Apps {
		if strings.HasPrefix(app.Name, "failing-") {
			if len(app.Resources) != 100 || len(app.Conditions) != 2 || app.Conditions[0].Message != forbidden {
				t.Errorf("%s lost detail while healthy apps could lose theirs: %d resources, conditions %+v", app.Key(), len(app.Resources), app.Conditions)
			}
			continue
		}
		if len(app.Resources) == 0 && app.ResourcesOmitted == 100 {
			degraded++
		}
		if app.Sync.Status != "Synced" || app.Health.Status != "Healthy" {
			t.Errorf("%s lost its status", app.Key())
		}
	}
	if degraded == 0 || degraded != enc.Cut.ResourceLists {
		t.Errorf("%d healthy apps without resources, Cut = %+v", degraded, enc.Cut)
	}
	summary := findCondition(enc.Conditions, ConditionSummary)
	if !strings.Contains(summary.Message, fmt.Sprintf("shortened the resource lists of %d applications", degraded)) {
		t.Errorf("summary does not say what was cut: %q", summary.Message)
	}
}

func TestEncodeBudgetKeepsErrors(t *testing.T) {
	// So many failing apps that their resources and warnings must go: errors stay.
	enc := encodeValid(t, Report{Apps: fleetApps(250, 50, 30)})
	t.Logf("250 failing and 50 healthy apps: %d bytes, cut %+v", enc.Bytes, enc.Cut)
	report := decodeAll(t, enc)
	if len(report.Apps) != 300 || enc.Cut.Apps != 0 {
		t.Fatalf("decoded %d apps, cut %+v; want all", len(report.Apps), enc.Cut)
	}
	for _, app := range report.Apps {
		if strings.HasPrefix(app.Name, "healthy-") {
			if len(app.Resources) != 0 {
				t.Errorf("%s kept resources while failing apps lost theirs", app.Key())
			}
			continue
		}
		if !slices.ContainsFunc(app.Conditions, func(c argoapp.Condition) bool {
			return c.Type == "SyncError" && strings.HasPrefix(c.Message, "Failed sync attempt")
		}) {
			t.Errorf("%s lost its error: %+v", app.Key(), app.Conditions)
		}
	}
	if enc.Cut.Warnings == 0 {
		t.Errorf("Cut = %+v, want warnings cut", enc.Cut)
	}
}

func TestEncodeBudgetLastResort(t *testing.T) {
	// Beyond what any degradation fits: the summary counts the apps left out, and the
	// failing apps are the last to go.
	apps := fleetApps(1500, 500, 1)
	start := time.Now()
	enc, err := Encode(Report{Apps: apps, Scope: &Scope{WatchNamespaces: []string{"fleet"}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("2000 apps: %d bytes, cut %+v, in %v", enc.Bytes, enc.Cut, time.Since(start))
	checkAPIValid(t, enc)
	report := decodeAll(t, enc)
	if enc.Cut.Apps == 0 || len(report.Apps)+enc.Cut.Apps != 2000 {
		t.Fatalf("decoded %d apps, cut %+v", len(report.Apps), enc.Cut)
	}
	for _, app := range report.Apps {
		if strings.HasPrefix(app.Name, "healthy-") {
			t.Fatalf("healthy app %s kept while failing apps were left out", app.Key())
		}
	}
	// The scope tells the hub that apps were left out, and how many.
	if report.Scope == nil || report.Scope.AppsLeftOut != enc.Cut.Apps {
		t.Errorf("scope = %+v, want %d apps left out", report.Scope, enc.Cut.Apps)
	}
	if scope := findCondition(enc.Conditions, ConditionReportScope); scope.Status != metav1.ConditionFalse || scope.Reason != ReasonApplicationsLeftOut {
		t.Errorf("scope condition = %+v", scope)
	}
	summary := findCondition(enc.Conditions, ConditionSummary)
	if !strings.Contains(summary.Message, fmt.Sprintf("left out %d applications", enc.Cut.Apps)) ||
		!strings.HasPrefix(summary.Message, "2000 applications: 500 Synced and Healthy, 1500 not") {
		t.Errorf("summary = %q", summary.Message)
	}
}

// fleetApps returns failing apps (failing-0000...) then healthy ones (healthy-0000...)
// in namespace fleet, each with the given number of resources.
func fleetApps(failing, healthy, resources int) []App {
	var apps []App
	for i := range failing {
		apps = append(apps, failingApp("fleet", fmt.Sprintf("failing-%04d", i), resources))
	}
	for i := range healthy {
		apps = append(apps, healthyApp("fleet", fmt.Sprintf("healthy-%04d", i), resources))
	}
	return apps
}

// findCondition returns the condition of the given type, or a zero condition.
func findCondition(conditions []metav1.Condition, conditionType string) metav1.Condition {
	for _, c := range conditions {
		if c.Type == conditionType {
			return c
		}
	}
	return metav1.Condition{}
}

func TestEncodeSummary(t *testing.T) {
	tests := []struct {
		name    string
		apps    []App
		status  metav1.ConditionStatus
		reason  string
		message string
	}{
		{"none", nil, metav1.ConditionTrue, ReasonNoApplications, "No Application from the hub on this cluster."},
		{"all good", []App{healthyApp("a", "x", 0)}, metav1.ConditionTrue, ReasonAllSyncedAndHealthy, "1 application: all Synced and Healthy."},
		{
			"many not", []App{
				failingApp("a", "1", 0), failingApp("a", "2", 0), failingApp("a", "3", 0),
				failingApp("a", "4", 0), failingApp("a", "5", 0), failingApp("a", "6", 0), failingApp("a", "7", 0),
			}, metav1.ConditionFalse, ReasonNotAllSyncedAndHealthy,
			"7 applications: 0 Synced and Healthy, 7 not: a/1 (OutOfSync/Degraded), a/2 (OutOfSync/Degraded), a/3 (OutOfSync/Degraded), a/4 (OutOfSync/Degraded), a/5 (OutOfSync/Degraded) and 2 more.",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			enc, err := Encode(Report{Apps: tt.apps})
			if err != nil {
				t.Fatal(err)
			}
			c := findCondition(enc.Conditions, ConditionSummary)
			if c.Status != tt.status || c.Reason != tt.reason || c.Message != tt.message {
				t.Errorf("summary = %s %s %q, want %s %s %q", c.Status, c.Reason, c.Message, tt.status, tt.reason, tt.message)
			}
		})
	}
}

func TestEncodeAppsInSlices(t *testing.T) {
	// The apps of an agent that publishes them in status slices: no condition each, and
	// nothing cut however many there are; the summary counts them all and says where
	// they are, and the scope leaves none out.
	apps := fleetApps(1500, 500, 20)
	diagnostics := []Diagnostic{{Type: ConditionApplicationCRD, Status: "True", Reason: ReasonCRDFound, Message: "found"}}
	enc := encodeValid(t, Report{Apps: apps, Diagnostics: diagnostics, Scope: &Scope{WatchNamespaces: []string{"fleet"}}, AppsInSlices: true})
	var types []string
	for _, c := range enc.Conditions {
		types = append(types, c.Type)
	}
	if want := []string{ConditionApplicationCRD, ConditionSummary, ConditionReportScope}; !slices.Equal(types, want) {
		t.Fatalf("conditions %v, want %v", types, want)
	}
	if enc.Cut.Any() {
		t.Errorf("cut %+v, want nothing cut", enc.Cut)
	}
	report := decodeAll(t, enc)
	if len(report.Apps) != 0 || report.Scope == nil || report.Scope.AppsLeftOut != 0 {
		t.Errorf("decoded %d apps, scope %+v; want none, none left out", len(report.Apps), report.Scope)
	}
	summary := findCondition(enc.Conditions, ConditionSummary)
	if summary.Status != metav1.ConditionFalse || summary.Reason != ReasonNotAllSyncedAndHealthy ||
		!strings.HasPrefix(summary.Message, "2000 applications: 500 Synced and Healthy, 1500 not: fleet/failing-0000 (OutOfSync/Degraded)") ||
		!strings.HasSuffix(summary.Message, "The status of each application is in the ApplicationStatusSlices of this addon in this namespace.") {
		t.Errorf("summary = %s %s %q", summary.Status, summary.Reason, summary.Message)
	}
	// An invalid app is refused all the same.
	if _, err := Encode(Report{Apps: []App{{Namespace: "a"}}, AppsInSlices: true}); err == nil {
		t.Error("Encode took an app without a name")
	}
	// Without apps, the summary is the one of an agent with none.
	enc, err := Encode(Report{AppsInSlices: true})
	if err != nil {
		t.Fatal(err)
	}
	if summary := findCondition(enc.Conditions, ConditionSummary); summary.Message != "No Application from the hub on this cluster." {
		t.Errorf("summary without apps = %q", summary.Message)
	}
}

func TestEncodeInvalid(t *testing.T) {
	tests := []struct {
		name   string
		report Report
	}{
		{"no name", Report{Apps: []App{{Namespace: "a"}}}},
		{"no namespace", Report{Apps: []App{{Name: "a"}}}},
		{"name too long", Report{Apps: []App{{Namespace: "a", Name: strings.Repeat("n", 254)}}}},
		{"twice", Report{Apps: []App{{Namespace: "a", Name: "b"}, {Namespace: "a", Name: "b"}}}},
		{"not a diagnostic", Report{Diagnostics: []Diagnostic{{Type: "Available", Status: "True", Reason: "X"}}}},
		{"diagnostic twice", Report{Diagnostics: []Diagnostic{
			{Type: ConditionApplicationCRD, Status: "True", Reason: ReasonCRDFound},
			{Type: ConditionApplicationCRD, Status: "True", Reason: ReasonCRDFound},
		}}},
		{"bad status", Report{Diagnostics: []Diagnostic{{Type: ConditionApplicationCRD, Status: "yes", Reason: ReasonCRDFound}}}},
		{"bad reason", Report{Diagnostics: []Diagnostic{{Type: ConditionApplicationCRD, Status: "True", Reason: "not found"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Encode(tt.report); err == nil {
				t.Error("Encode succeeded")
			}
		})
	}
}

func TestAppConditionType(t *testing.T) {
	if got, want := AppConditionType("argocd", "guestbook.v2"), AppConditionPrefix+"argocd.guestbook.v2"; got != want {
		t.Errorf("AppConditionType = %q, want %q", got, want)
	}
	long := strings.Repeat("a", 63)
	name1 := strings.Repeat("b", 240) + "-one"
	name2 := strings.Repeat("b", 240) + "-two"
	t1, t2 := AppConditionType(long, name1), AppConditionType(long, name2)
	for _, typ := range []string{t1, t2, AppConditionType("ns", "-bad-"), AppConditionType("NS", "UPPER_ok")} {
		if len(typ) > MaxConditionTypeLength || !apiTypePattern.MatchString(typ) {
			t.Errorf("type %q (%d characters) is not a valid condition type", typ, len(typ))
		}
		if !IsAppCondition(typ) || !IsAgentCondition(typ) {
			t.Errorf("type %q is not recognised as an app condition", typ)
		}
	}
	if t1 == t2 {
		t.Errorf("long names sharing a prefix collide: %q", t1)
	}
	if t1 != AppConditionType(long, name1) {
		t.Error("AppConditionType is not stable")
	}
	for _, typ := range []string{"Available", "ManifestApplied", "RegistrationApplied", "Progressing", "Configured"} {
		if IsAgentCondition(typ) {
			t.Errorf("the framework's %s is taken as the agent's", typ)
		}
	}
}

func TestAppReason(t *testing.T) {
	tests := []struct{ sync, health, want string }{
		{"Synced", "Healthy", "Synced_Healthy"},
		{"OutOfSync", "Degraded", "OutOfSync_Degraded"},
		{"", "", "Unknown_Unknown"},
		{"Out of sync!", "9lives", "Outofsync_lives"},
		{strings.Repeat("x", 2000), "---", strings.Repeat("x", maxStatusBytes) + "_Unknown"},
	}
	for _, tt := range tests {
		got := AppReason(tt.sync, tt.health)
		if got != tt.want || !apiReasonPattern.MatchString(got) {
			t.Errorf("AppReason(%q, %q) = %q, want %q", tt.sync, tt.health, got, tt.want)
		}
	}
}

func TestTruncateMessage(t *testing.T) {
	tests := []struct {
		in   string
		max  int
		want string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"a longer message", 10, "a longe..."},
		{"ééééé", 8, "éé..."}, // not inside a character
		{"abcdef", 2, ".."},
		{"abcdef", -1, ""},
	}
	for _, tt := range tests {
		if got := TruncateMessage(tt.in, tt.max); got != tt.want {
			t.Errorf("TruncateMessage(%q, %d) = %q, want %q", tt.in, tt.max, got, tt.want)
		}
	}
}

func TestFingerprint(t *testing.T) {
	app := failingApp("argocd", "guestbook", 120)
	app.Health.Message = strings.Repeat("m", 3000)
	enc, err := Encode(Report{Apps: []App{app}})
	if err != nil {
		t.Fatal(err)
	}
	decoded := decodeAll(t, enc).Apps[0]
	a, err := Fingerprint(app)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Fingerprint(decoded)
	if a != b {
		t.Error("an app and its decoding have different fingerprints")
	}
	later := app
	later.ObservedAt = observed.Add(time.Hour)
	if c, _ := Fingerprint(later); c != a {
		t.Error("the fingerprint depends on ObservedAt")
	}
	changed := app
	changed.Sync.Revision = "another"
	if c, _ := Fingerprint(changed); c == a {
		t.Error("the fingerprint ignores the revision")
	}
}

func TestEncodeScope(t *testing.T) {
	many := make([]string, 0, MaxScopeNamespaces+3)
	for i := range MaxScopeNamespaces + 3 {
		many = append(many, fmt.Sprintf("ns-%03d", i))
	}
	tests := []struct {
		name    string
		scope   *Scope
		want    *Scope
		message string
	}{
		{"an older agent: no scope", nil, nil, ""},
		{"sorted, without duplicates; AppsLeftOut is Encode's",
			&Scope{WatchNamespaces: []string{"openshift-gitops", "argocd", "argocd"}, AppsLeftOut: 7},
			&Scope{WatchNamespaces: []string{"argocd", "openshift-gitops"}},
			`{"v":1,"watchNamespaces":["argocd","openshift-gitops"]}`},
		{"capped, the rest counted", &Scope{WatchNamespaces: many},
			&Scope{WatchNamespaces: many[:MaxScopeNamespaces], NamespacesOmitted: 3}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			enc := encodeValid(t, Report{Apps: []App{healthyApp("argocd", "web", 1)}, Scope: tt.scope})
			c := findCondition(enc.Conditions, ConditionReportScope)
			if tt.want == nil {
				if c.Type != "" {
					t.Fatalf("scope condition without a scope: %+v", c)
				}
			} else if c.Status != metav1.ConditionTrue || c.Reason != ReasonAllApplicationsReported {
				t.Errorf("scope condition = %+v", c)
			}
			if tt.message != "" && c.Message != tt.message {
				t.Errorf("message = %s, want %s", c.Message, tt.message)
			}
			if got := decodeAll(t, enc).Scope; !reflect.DeepEqual(got, tt.want) {
				t.Errorf("decoded scope = %+v, want %+v", got, tt.want)
			}
		})
	}
	if _, err := Encode(Report{Scope: &Scope{}}); err == nil {
		t.Error("a scope without namespaces encodes")
	}
	if _, err := Encode(Report{Scope: &Scope{WatchNamespaces: []string{""}}}); err == nil {
		t.Error("a scope with an empty namespace encodes")
	}
	// A scope of a newer agent: no scope, and an error that names it.
	report, err := Decode([]metav1.Condition{{Type: ConditionReportScope, Status: metav1.ConditionTrue, Reason: ReasonAllApplicationsReported,
		Message: `{"v":2,"watchNamespaces":["argocd"]}`}})
	var de *DecodeError
	if report.Scope != nil || !errors.Is(err, ErrUnsupportedVersion) || !errors.As(err, &de) || de.ConditionType != ConditionReportScope {
		t.Errorf("Decode of a v2 scope = %+v, %v", report.Scope, err)
	}
}

func TestScopeWatches(t *testing.T) {
	tests := []struct {
		name           string
		scope          *Scope
		namespace      string
		watches, known bool
	}{
		{"no scope", nil, "argocd", false, false},
		{"watched", &Scope{WatchNamespaces: []string{"argocd", "team-a"}}, "team-a", true, true},
		{"not watched", &Scope{WatchNamespaces: []string{"argocd"}}, "openshift-gitops", false, true},
		{"not listed, but the list is cut", &Scope{WatchNamespaces: []string{"argocd"}, NamespacesOmitted: 1}, "openshift-gitops", false, false},
	}
	for _, tt := range tests {
		watches, known := tt.scope.Watches(tt.namespace)
		if watches != tt.watches || known != tt.known {
			t.Errorf("%s: Watches(%q) = %v, %v; want %v, %v", tt.name, tt.namespace, watches, known, tt.watches, tt.known)
		}
	}
}
