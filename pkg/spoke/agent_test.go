package spoke

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/workqueue"

	statusv1alpha1 "github.com/ocm-gitops/argocd-pull-addon/pkg/apis/argocdpull/v1alpha1"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/clusterreport"
)

// hubHash stands for the hub hash that starts an AppliedManifestWork's name.
var hubHash = strings.Repeat("ab", 32)

func TestIsFromHub(t *testing.T) {
	owner := func(apiVersion, kind, name string) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: name}}
	}
	tests := []struct {
		name        string
		labels      map[string]string
		annotations map[string]string
		owners      []metav1.OwnerReference
		want        bool
		wantWork    string
	}{
		{name: "created on the cluster"},
		{name: "ApplicationSet marker", labels: map[string]string{argoapp.LabelApplicationSet: "true"}, want: true},
		{name: "marker false", labels: map[string]string{argoapp.LabelApplicationSet: "false"}},
		{name: "hosting ApplicationSet", annotations: map[string]string{argoapp.AnnotationHostingApplicationSet: "ns/set"}, want: true},
		{name: "hub back-pointer", annotations: map[string]string{argoapp.AnnotationHubApplicationName: "web"}, want: true},
		{
			name: "owned by the work agent", owners: owner("work.open-cluster-management.io/v1", "AppliedManifestWork", hubHash+"-web-1a2b3"),
			want: true, wantWork: "web-1a2b3",
		},
		{name: "owner of an unexpected name", owners: owner("work.open-cluster-management.io/v1", "AppliedManifestWork", "web"), want: true},
		{name: "owner not hex", owners: owner("work.open-cluster-management.io/v1", "AppliedManifestWork", strings.Repeat("z", 64)+"-web"), want: true},
		{name: "another group", owners: owner("example.com/v1", "AppliedManifestWork", hubHash+"-web")},
		{name: "another kind", owners: owner("work.open-cluster-management.io/v1", "ManifestWork", hubHash+"-web")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := &metav1.ObjectMeta{Labels: tt.labels, Annotations: tt.annotations, OwnerReferences: tt.owners}
			if got := isFromHub(obj); got != tt.want {
				t.Errorf("isFromHub = %v, want %v", got, tt.want)
			}
			if work, _ := manifestWorkOf(tt.owners); work != tt.wantWork {
				t.Errorf("manifestWorkOf = %q, want %q", work, tt.wantWork)
			}
		})
	}
}

func TestObserveApplication(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{
			"name": "web", "namespace": "argocd", "creationTimestamp": "2026-01-01T00:00:00Z",
			"annotations": map[string]any{
				argoapp.AnnotationHubApplicationNamespace: "hub-ns",
				argoapp.AnnotationHubApplicationName:      "web",
			},
		},
		"status": map[string]any{
			"sync":         map[string]any{"status": "Synced", "revision": "abc"},
			"health":       map[string]any{"status": "Healthy"},
			"reconciledAt": "2026-01-01T00:05:00Z",
		},
	}}
	got := observeApplication(u)
	if got.report.HubNamespace != "hub-ns" || got.report.HubName != "web" || got.report.Sync.Revision != "abc" {
		t.Errorf("report = %+v", got.report)
	}
	if !got.reconciledAt.Equal(time.Date(2026, 1, 1, 0, 5, 0, 0, time.UTC)) || got.created.IsZero() {
		t.Errorf("reconciledAt = %v, created = %v", got.reconciledAt, got.created)
	}

	u.Object["status"] = map[string]any{"sync": "Synced"}
	got = observeApplication(u)
	if len(got.report.Conditions) != 1 || got.report.Conditions[0].Type != clusterreport.ConditionStatusDecodeError ||
		!strings.Contains(got.report.Conditions[0].Message, ".status.sync") {
		t.Errorf("an unreadable status reports %+v", got.report.Conditions)
	}
}

func TestControllerDiagnostic(t *testing.T) {
	now := time.Date(2026, 1, 1, 1, 0, 0, 0, time.UTC)
	window := 10 * time.Minute
	app := func(reconciled, created time.Duration) observedApp {
		o := observedApp{created: now.Add(-created)}
		if reconciled >= 0 {
			o.reconciledAt = now.Add(-reconciled)
		}
		return o
	}
	tests := []struct {
		name   string
		state  crdState
		apps   []observedApp
		status metav1.ConditionStatus
		reason string
	}{
		{"no CRD", crdMissing, nil, metav1.ConditionUnknown, clusterreport.ReasonApplicationCRDMissing},
		{"no apps", crdPresent, nil, metav1.ConditionUnknown, clusterreport.ReasonNoApplications},
		{"only new apps", crdPresent, []observedApp{app(-1, time.Minute)}, metav1.ConditionUnknown, clusterreport.ReasonNoApplications},
		{"recent", crdPresent, []observedApp{app(time.Minute, time.Hour), app(time.Hour, time.Hour)}, metav1.ConditionTrue, clusterreport.ReasonReconciling},
		{"stale", crdPresent, []observedApp{app(time.Hour, time.Hour), app(-1, time.Hour)}, metav1.ConditionFalse, clusterreport.ReasonNotReconciling},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := controllerDiagnostic(tt.state, tt.apps, now, window)
			if d.Status != string(tt.status) || d.Reason != tt.reason {
				t.Errorf("diagnostic = %+v, want %s %s", d, tt.status, tt.reason)
			}
		})
	}
	d := controllerDiagnostic(crdPresent, []observedApp{app(time.Minute, time.Hour), app(time.Hour, time.Hour)}, now, window)
	if d.Message != "1 of 2 Applications were reconciled in the last 10m0s." {
		t.Errorf("message = %q", d.Message)
	}
}

func TestRBACDiagnostic(t *testing.T) {
	forbidden := `services is forbidden: User "system:serviceaccount:argocd:argocd-application-controller" cannot create resource "services"`
	app := func(name string, conditions []argoapp.Condition, operation string) observedApp {
		return observedApp{report: clusterreport.App{
			Namespace: "argocd", Name: name, Conditions: conditions,
			Operation: argoapp.OperationState{Message: operation},
		}}
	}
	ok := rbacDiagnostic(crdPresent, []observedApp{
		app("fine", nil, ""),
		app("warned", []argoapp.Condition{{Type: "SharedResourceWarning", Message: "x is forbidden"}}, ""),
	})
	if ok.Status != string(metav1.ConditionTrue) || ok.Reason != clusterreport.ReasonNoForbidden {
		t.Errorf("without errors: %+v", ok)
	}
	var apps []observedApp
	for _, name := range []string{"a", "b", "c", "d"} {
		apps = append(apps, app(name, []argoapp.Condition{{Type: "SyncError", Message: forbidden}}, ""))
	}
	apps = append(apps, app("e", nil, "one or more objects failed to apply, reason: "+forbidden))
	d := rbacDiagnostic(crdPresent, apps)
	if d.Status != string(metav1.ConditionFalse) || d.Reason != clusterreport.ReasonForbidden {
		t.Fatalf("with errors: %+v", d)
	}
	for _, want := range []string{"5 of 5 Applications fail with RBAC errors", "argocd/a: services is forbidden", "argocd/c:", "And 2 more."} {
		if !strings.Contains(d.Message, want) {
			t.Errorf("message %q does not say %q", d.Message, want)
		}
	}
	if strings.Contains(d.Message, "argocd/d:") {
		t.Errorf("message %q lists more than %d apps", d.Message, rbacListed)
	}
	if d := rbacDiagnostic(crdMissing, apps); d.Status != string(metav1.ConditionUnknown) {
		t.Errorf("without the CRD: %+v", d)
	}
}

func TestStamp(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	web := observedApp{report: clusterreport.App{Namespace: "argocd", Name: "web", Sync: argoapp.SyncStatus{Status: "Synced", Revision: "a"}}}
	p := newPublisher()

	got := p.stamp([]observedApp{web}, nil, t0, false)
	if !got[0].ObservedAt.Equal(t0) {
		t.Fatalf("new app observed at %v, want %v", got[0].ObservedAt, t0)
	}
	if got := p.stamp([]observedApp{web}, nil, t0.Add(time.Minute), false); !got[0].ObservedAt.Equal(t0) {
		t.Errorf("unchanged app observed at %v, want %v", got[0].ObservedAt, t0)
	}
	changed := web
	changed.report.Sync.Revision = "b"
	if got := p.stamp([]observedApp{changed}, nil, t0.Add(2*time.Minute), false); !got[0].ObservedAt.Equal(t0.Add(2 * time.Minute)) {
		t.Errorf("changed app observed at %v", got[0].ObservedAt)
	}
	p.stamp(nil, nil, t0, false)
	if len(p.observations) != 0 {
		t.Errorf("gone apps are remembered: %v", p.observations)
	}

	// A restarted agent takes the time from the report on the hub, when the app did not
	// change since.
	published := web.report
	published.ObservedAt = t0.Add(-time.Hour)
	encoding, err := clusterreport.Encode(clusterreport.Report{Apps: []clusterreport.App{published}})
	if err != nil {
		t.Fatal(err)
	}
	restarted := newPublisher()
	if got := restarted.stamp([]observedApp{web}, encoding.Conditions, t0, false); !got[0].ObservedAt.Equal(published.ObservedAt) {
		t.Errorf("after a restart observed at %v, want %v", got[0].ObservedAt, published.ObservedAt)
	}
	restarted = newPublisher()
	if got := restarted.stamp([]observedApp{changed}, encoding.Conditions, t0, false); !got[0].ObservedAt.Equal(t0) {
		t.Errorf("an app changed during a restart observed at %v, want %v", got[0].ObservedAt, t0)
	}
}

func TestTransitionTimes(t *testing.T) {
	then := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	now := metav1.NewTime(then.Add(time.Hour))
	onHub := []metav1.Condition{
		{Type: "a", Status: metav1.ConditionTrue, Reason: "R", Message: "old", LastTransitionTime: then},
		{Type: "b", Status: metav1.ConditionTrue, Reason: "R", LastTransitionTime: then},
	}
	desired := []metav1.Condition{
		{Type: "a", Status: metav1.ConditionTrue, Reason: "R", Message: "new"},
		{Type: "b", Status: metav1.ConditionFalse, Reason: "R"},
		{Type: "c", Status: metav1.ConditionTrue, Reason: "R"},
	}
	got := withTransitionTimes(desired, onHub, now)
	for i, want := range []metav1.Time{then, now, now} {
		if !got[i].LastTransitionTime.Equal(&want) {
			t.Errorf("%s: transition at %v, want %v", got[i].Type, got[i].LastTransitionTime, want)
		}
	}
	if desired[0].LastTransitionTime != (metav1.Time{}) {
		t.Error("withTransitionTimes changed its input")
	}
	if sameConditions(got, onHub) || !sameConditions(got, withTransitionTimes(desired, got, now)) {
		t.Error("sameConditions is wrong")
	}
}

func TestOwnConditions(t *testing.T) {
	got := ownConditions([]metav1.Condition{
		{Type: clusterreport.ConditionSummary},
		{Type: "Available"},
		{Type: clusterreport.AppConditionType("argocd", "web")},
		{Type: "ManifestApplied"},
	})
	if len(got) != 2 || got[0].Type != clusterreport.AppConditionType("argocd", "web") || got[1].Type != clusterreport.ConditionSummary {
		t.Errorf("ownConditions = %+v", got)
	}
}

func TestOlderResourceVersion(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{"9", "10", true}, {"10", "9", false}, {"10", "10", false}, {"x", "10", false}, {"", "1", false},
	}
	for _, tt := range tests {
		if got := olderResourceVersion(tt.a, tt.b); got != tt.want {
			t.Errorf("olderResourceVersion(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestOptions(t *testing.T) {
	opts := Options{HubKubeconfig: "/hub", ClusterName: "cluster1"}.withDefaults()
	if err := opts.Validate(); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
	if opts.AddonName != clusterreport.DefaultAddonName || opts.WatchNamespaces[0] != argoapp.DefaultAppNamespace ||
		opts.PublishDelay != 200*time.Millisecond || opts.AddonNamespace != DefaultAddonNamespace {
		t.Errorf("defaults = %+v", opts)
	}
	bad := opts
	bad.HubKubeconfig, bad.ClusterName, bad.WatchNamespaces, bad.PublishDelay = "", "Cluster_1", []string{"a/b"}, 2*time.Second
	bad.PprofAddr = ":6060" // every interface, without authentication
	err := bad.Validate()
	for _, want := range []string{"hub kubeconfig", "cluster name", "watch namespace", "publish delay", "pprof address"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want it to name the %s", err, want)
		}
	}
}

func TestRetryBackoff(t *testing.T) {
	refused := &url.Error{Op: "Patch", URL: "https://hub:6443", Err: syscall.ECONNREFUSED}
	for _, tt := range []struct {
		name string
		err  error
		want bool
	}{
		{"connection refused", fmt.Errorf("apply the report: %w", refused), true},
		{"timed out", &url.Error{Op: "Get", URL: "https://hub:6443", Err: context.DeadlineExceeded}, true},
		{"the hub is unavailable", apierrors.NewServiceUnavailable("etcd"), false},
		{"forbidden", apierrors.NewForbidden(schema.GroupResource{Resource: "managedclusteraddons"}, "argocd-pull", errors.New("no")), false},
		{"the ManagedClusterAddOn is missing", errAddonMissing, false},
	} {
		if got := hubDidNotAnswer(tt.err); got != tt.want {
			t.Errorf("%s: hubDidNotAnswer = %v, want %v", tt.name, got, tt.want)
		}
	}

	b := &retryBackoff{
		exponential: workqueue.NewTypedItemExponentialFailureRateLimiter[string](500*time.Millisecond, 30*time.Second),
		reconnect:   time.Second,
	}
	var waits []time.Duration
	for range 10 {
		waits = append(waits, b.When(reportKey))
	}
	if last := waits[len(waits)-1]; last != 30*time.Second {
		t.Errorf("a hub that answers with errors: the 10th wait is %v, want the cap 30s (%v)", last, waits)
	}
	b.unanswered.Store(true)
	for range 5 {
		if d := b.When(reportKey); d < time.Second || d > 2*time.Second {
			t.Errorf("a hub that does not answer: wait %v, want between 1s and 2s", d)
		}
	}
	b.Forget(reportKey)
	if d := b.When(reportKey); d != 500*time.Millisecond {
		t.Errorf("after a success, the first wait is %v, want 500ms", d)
	}
}

// TestSummaryWait: with the apps in the status slices, a change of the summary alone
// waits until the interval after the last write of the agent's conditions; any other
// change, a first summary, or a report without slices is written at once.
func TestSummaryWait(t *testing.T) {
	const interval = 5 * time.Second
	last := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	summary := func(message string) metav1.Condition {
		return metav1.Condition{Type: clusterreport.ConditionSummary, Status: metav1.ConditionFalse, Reason: clusterreport.ReasonNotAllSyncedAndHealthy, Message: message}
	}
	scope := metav1.Condition{Type: clusterreport.ConditionReportScope, Status: metav1.ConditionTrue, Reason: clusterreport.ReasonAllApplicationsReported}
	narrower := scope
	narrower.Message = "another scope"
	onHub := []metav1.Condition{scope, summary("2 applications: 1 Synced and Healthy, 1 not: argocd/a (OutOfSync/Missing).")}
	nextSummary := []metav1.Condition{scope, summary("2 applications: 1 Synced and Healthy, 1 not: argocd/a (Synced/Progressing).")}
	for _, tc := range []struct {
		name     string
		desired  []metav1.Condition
		onHub    []metav1.Condition
		inSlices bool
		after    time.Duration
		want     time.Duration
	}{
		{"the summary alone, just after a write", nextSummary, onHub, true, time.Second, 4 * time.Second},
		{"the summary alone, an interval after a write", nextSummary, onHub, true, interval, 0},
		{"no change", onHub, onHub, true, time.Second, 0},
		{"another condition too", []metav1.Condition{narrower, nextSummary[1]}, onHub, true, time.Second, 0},
		{"the first summary", nextSummary, []metav1.Condition{scope}, true, time.Second, 0},
		{"the apps in conditions, not slices", nextSummary, onHub, false, time.Second, 0},
	} {
		p := newPublisher()
		p.applied = last
		if got := max(p.summaryWait(tc.desired, tc.onHub, tc.inSlices, interval, last.Add(tc.after)), 0); got != tc.want {
			t.Errorf("%s: summaryWait = %v; want %v", tc.name, got, tc.want)
		}
	}
}

func TestHoldBack(t *testing.T) {
	const wait = 5 * time.Second
	t0 := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	entry := func(health string, conditions ...statusv1alpha1.Condition) entryState {
		e := statusv1alpha1.AppStatus{Namespace: "argocd", Name: "web", Health: &statusv1alpha1.Health{Status: health}, Conditions: conditions}
		size, digest := clusterreport.EntryDigest(e)
		return entryState{entry: e, size: size, digest: digest}
	}
	missing, progressing := entry("Missing"), entry("Progressing")
	failing := entry("Progressing", statusv1alpha1.Condition{Type: "SyncError", Message: "forbidden"})
	change := func(passing bool, now entryState, onHub *entryState) entryChange {
		return entryChange{passing: passing, entry: now, onHub: onHub}
	}
	for _, tc := range []struct {
		name    string
		changes []entryChange
		gone    bool
		want    int
	}{
		{"a passing state", []entryChange{change(true, progressing, &missing)}, false, 1},
		{"no change", nil, false, 0},
		{"a settled state", []entryChange{change(true, progressing, &missing), change(false, progressing, &missing)}, false, 0},
		{"a new app", []entryChange{change(true, progressing, nil)}, false, 0},
		{"an error", []entryChange{change(true, failing, &missing)}, false, 0},
		{"an app gone", []entryChange{change(true, progressing, &missing)}, true, 0},
	} {
		p := newPublisher()
		held, left := p.holdBack(tc.changes, tc.gone, wait, t0)
		if held != tc.want || (held > 0) != (left == wait) {
			t.Errorf("%s: holdBack = %d apps for %v; want %d apps", tc.name, held, left, tc.want)
		}
		if len(p.held) != tc.want {
			t.Errorf("%s: %d entries held; want %d", tc.name, len(p.held), tc.want)
		}
	}

	// A hold counts from its first change, and ends after wait, whatever comes after.
	p := newPublisher()
	passing := []entryChange{change(true, progressing, &missing)}
	for _, step := range []struct {
		after time.Duration
		left  time.Duration
	}{{0, wait}, {2 * time.Second, 3 * time.Second}, {4 * time.Second, time.Second}, {wait, 0}, {wait + time.Second, wait}} {
		if _, left := p.holdBack(passing, false, wait, t0.Add(step.after)); left != step.left {
			t.Errorf("%v after the first change: held for %v more; want %v", step.after, left, step.left)
		}
	}
}
