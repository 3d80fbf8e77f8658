package observed

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	addonv1beta1 "open-cluster-management.io/api/addon/v1beta1"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/clusterreport"
)

// TestObserve pins what the hub says of an app, from the agent's report and the work's
// status: the entry when there is one, and otherwise why there is none.
func TestObserve(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	const grace = 10 * time.Second
	hub := types.NamespacedName{Namespace: "openshift-gitops", Name: "web"}
	entry := func(namespace string) clusterreport.App {
		return clusterreport.App{Namespace: namespace, Name: "web", ManifestWork: "web-1a2b3", ObservedAt: now}
	}
	other := clusterreport.App{Namespace: "argocd", Name: "db", ManifestWork: "db-4c5d6", ObservedAt: now}
	report := func(scope *clusterreport.Scope, apps ...clusterreport.App) []metav1.Condition {
		enc, err := clusterreport.Encode(clusterreport.Report{Apps: apps, Scope: scope})
		if err != nil {
			t.Fatal(err)
		}
		return enc.Conditions
	}
	watching := func(namespaces ...string) *clusterreport.Scope {
		return &clusterreport.Scope{WatchNamespaces: namespaces}
	}
	available := metav1.Condition{Type: addonv1beta1.ManagedClusterAddOnConditionAvailable, Status: metav1.ConditionTrue, Reason: "Lease"}
	unavailable := metav1.Condition{Type: addonv1beta1.ManagedClusterAddOnConditionAvailable, Status: metav1.ConditionUnknown, Reason: "Lease"}
	work := func(namespace string, appliedAgo time.Duration) *workv1.ManifestWork {
		w := &workv1.ManifestWork{ObjectMeta: metav1.ObjectMeta{Namespace: "cluster1", Name: "web-1a2b3"}}
		if appliedAgo < 0 {
			return w // not applied yet
		}
		w.Status.Conditions = []metav1.Condition{{Type: workv1.WorkApplied, Status: metav1.ConditionTrue, LastTransitionTime: metav1.NewTime(now.Add(-appliedAgo))}}
		w.Status.ResourceStatus.Manifests = []workv1.ManifestCondition{{ResourceMeta: workv1.ManifestResourceMeta{
			Group: argoapp.Group, Version: "v1alpha1", Kind: argoapp.KindApplication, Resource: "applications", Namespace: namespace, Name: "web",
		}}}
		return w
	}
	garbage := metav1.Condition{Type: clusterreport.AppConditionType("openshift-gitops", "web"), Status: metav1.ConditionTrue, Reason: "X", Message: "{not json"}

	tests := []struct {
		name       string
		conditions []metav1.Condition
		work       *workv1.ManifestWork
		reported   bool
		rejected   bool
		reason     string
		recheck    bool
		message    []string
	}{
		{name: "reported", conditions: report(watching("argocd"), entry("argocd")), work: work("argocd", time.Hour), reported: true},
		{name: "not applied yet: nothing to say", conditions: report(watching("argocd"), other), work: work("", -1)},
		{name: "unavailable: the stale condition says why", conditions: append(report(watching("argocd"), other), unavailable), work: work("openshift-gitops", time.Hour)},
		{name: "delivered to a namespace the agent does not watch: at once",
			conditions: report(watching("argocd", "team-a"), other), work: work("openshift-gitops", 0), reason: ReasonNamespaceNotWatched,
			message: []string{"The agent of cluster cluster1 watches the namespaces [argocd, team-a]; this application was delivered to namespace openshift-gitops",
				"chart value agent.watchNamespaces", argoapp.AnnotationOCMManagedClusterAppNamespace}},
		{name: "an older agent without a scope: no claim about namespaces, and only after the grace",
			conditions: report(nil, other), work: work("openshift-gitops", grace/2), recheck: true},
		{name: "an older agent without a scope, after the grace",
			conditions: report(nil, other), work: work("openshift-gitops", grace), reason: ReasonNotInAgentReport,
			message: []string{"reports applications, but not this one (openshift-gitops/web, delivered by ManifestWork web-1a2b3)", "this agent does not publish the namespaces it watches"}},
		{name: "a watched namespace, missing for the grace", conditions: report(watching("openshift-gitops"), other), work: work("openshift-gitops", time.Hour),
			reason: ReasonNotInAgentReport, message: []string{"kubectl get application -n openshift-gitops web"}},
		{name: "the scope's list is cut: cannot tell", conditions: report(&clusterreport.Scope{WatchNamespaces: []string{"argocd"}, NamespacesOmitted: 1}, other),
			work: work("openshift-gitops", 0), recheck: true},
		{name: "no report at all", conditions: nil, work: work("argocd", time.Hour), reason: ReasonNoAgentReport,
			message: []string{"has published no report on ManagedClusterAddOn cluster1/argocd-pull"}},
		{name: "the budget left apps out", conditions: scopeLeftOut(t, report(watching("argocd"), other)), work: work("argocd", time.Hour),
			reason: ReasonLeftOutOfReport, message: []string{"to fit its size budget"}},
		{name: "the hub refuses the agent's slices", conditions: refusingSlices(t, watching("argocd")), work: work("argocd", time.Hour),
			reason: ReasonSlicesRefused, message: []string{"cannot write its ApplicationStatusSlices on the hub", "The hub said: status unknown for quota"}},
		{name: "an entry that never decoded is a rejection, not an absence",
			conditions: append(report(watching("openshift-gitops"), other), garbage), work: work("openshift-gitops", time.Hour), rejected: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewDecoder().WithAbsenceGrace(grace)
			addon := &addonv1beta1.ManagedClusterAddOn{
				ObjectMeta: metav1.ObjectMeta{Namespace: "cluster1", Name: "argocd-pull", ResourceVersion: "1"},
				Status:     addonv1beta1.ManagedClusterAddOnStatus{Conditions: tt.conditions},
			}
			if !slicesContainType(tt.conditions, available.Type) {
				addon.Status.Conditions = append(addon.Status.Conditions, available)
			}
			o := r.Observe(addon, tt.work, hub, now)
			if (o.App != nil) != tt.reported || (o.Rejection != nil) != tt.rejected || (o.RecheckAfter > 0) != tt.recheck {
				t.Fatalf("Observe = %+v", o)
			}
			if tt.rejected && o.Rejection.LastGood {
				t.Errorf("an entry never decoded shows as the last good one")
			}
			if tt.reason == "" {
				if o.Absence != nil {
					t.Fatalf("absence %+v, want none", o.Absence)
				}
				return
			}
			if o.Absence == nil || o.Absence.Reason != tt.reason {
				t.Fatalf("absence %+v, want reason %s", o.Absence, tt.reason)
			}
			c := o.Absence.Condition()
			if c.Type != ConditionNotReported || !strings.Contains(c.Message, "the hub shows only") {
				t.Errorf("condition = %+v", c)
			}
			for _, m := range tt.message {
				if !strings.Contains(c.Message, m) {
					t.Errorf("message %q lacks %q", c.Message, m)
				}
			}
		})
	}
}

// scopeLeftOut rewrites the scope condition of a report as if the budget had left 3
// apps out.
func scopeLeftOut(t *testing.T, conditions []metav1.Condition) []metav1.Condition {
	t.Helper()
	for i := range conditions {
		if conditions[i].Type == clusterreport.ConditionReportScope {
			conditions[i].Message = strings.Replace(conditions[i].Message, "}", `,"appsLeftOut":3}`, 1)
			return conditions
		}
	}
	t.Fatal("no scope condition")
	return nil
}

func slicesContainType(conditions []metav1.Condition, conditionType string) bool {
	for _, c := range conditions {
		if c.Type == conditionType {
			return true
		}
	}
	return false
}

func TestClusterWideChange(t *testing.T) {
	scope := func(message string) metav1.Condition {
		return metav1.Condition{Type: clusterreport.ConditionReportScope, Status: metav1.ConditionTrue, Message: message}
	}
	summary := metav1.Condition{Type: clusterreport.ConditionSummary, Status: metav1.ConditionTrue}
	tests := []struct {
		name     string
		old, new []metav1.Condition
		want     bool
	}{
		{"nothing", []metav1.Condition{summary}, []metav1.Condition{summary}, false},
		{"the first report", nil, []metav1.Condition{summary}, true},
		{"a scope appears", []metav1.Condition{summary}, []metav1.Condition{summary, scope("a")}, true},
		{"the scope changes", []metav1.Condition{summary, scope("a")}, []metav1.Condition{summary, scope("b")}, true},
		{"the scope stays", []metav1.Condition{summary, scope("a")}, []metav1.Condition{summary, scope("a")}, false},
	}
	for _, tt := range tests {
		if got := ClusterWideChange(tt.old, tt.new); got != tt.want {
			t.Errorf("%s: ClusterWideChange = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestWorkObservationChangedApplied pins that a work becoming applied, or applying its
// Application elsewhere, is an observed change: the absence depends on it.
func TestWorkObservationChangedApplied(t *testing.T) {
	pending := &workv1.ManifestWork{}
	applied := pending.DeepCopy()
	applied.Status.Conditions = []metav1.Condition{{Type: workv1.WorkApplied, Status: metav1.ConditionTrue}}
	applied.Status.ResourceStatus.Manifests = []workv1.ManifestCondition{{ResourceMeta: workv1.ManifestResourceMeta{
		Group: argoapp.Group, Kind: argoapp.KindApplication, Namespace: "argocd", Name: "web"}}}
	moved := applied.DeepCopy()
	moved.Status.ResourceStatus.Manifests[0].ResourceMeta.Namespace = "openshift-gitops"
	if !WorkObservationChanged(pending, applied) || !WorkObservationChanged(applied, moved) || WorkObservationChanged(moved, moved.DeepCopy()) {
		t.Error("WorkObservationChanged misses a change of the applied Application, or sees one where there is none")
	}
}

// refusingSlices returns the conditions of an agent, of the scope, whose slices the hub
// refuses: the agent reports its apps in them, so none in conditions.
func refusingSlices(t *testing.T, scope *clusterreport.Scope) []metav1.Condition {
	t.Helper()
	enc, err := clusterreport.Encode(clusterreport.Report{AppsInSlices: true, Scope: scope, Diagnostics: []clusterreport.Diagnostic{{
		Type: clusterreport.ConditionStatusSlices, Status: string(metav1.ConditionFalse), Reason: clusterreport.ReasonSlicesRefused,
		Message: "The hub refuses the agent's ApplicationStatusSlices. The hub said: status unknown for quota: argocd-pull-status-slices",
	}}})
	if err != nil {
		t.Fatal(err)
	}
	return enc.Conditions
}
