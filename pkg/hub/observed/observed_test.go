package observed

import (
	"errors"
	"slices"
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

// TestReportsClaimError pins that the decode error of each version goes to exactly one
// ClaimError caller, even when another reader (the status mirror, a reconcile) decoded
// that version first through Get.
func TestReportsClaimError(t *testing.T) {
	addon := func(rv string, message string) *addonv1beta1.ManagedClusterAddOn {
		return &addonv1beta1.ManagedClusterAddOn{
			ObjectMeta: metav1.ObjectMeta{Namespace: "cluster1", Name: "argocd-pull", ResourceVersion: rv},
			Status: addonv1beta1.ManagedClusterAddOnStatus{Conditions: []metav1.Condition{{
				Type: clusterreport.AppConditionPrefix + "argocd.garbage", Status: metav1.ConditionTrue, Message: message,
			}}},
		}
	}
	r := NewDecoder()
	bad := addon("1", "{not json")
	if _, err, first := r.Get(bad); err == nil || !first {
		t.Fatalf("Get of a new invalid version: err %v, first %v; want an error, first", err, first)
	}
	err := r.ClaimError(bad)
	if !errors.Is(err, clusterreport.ErrMalformed) {
		t.Fatalf("ClaimError after another reader's Get = %v; want ErrMalformed", err)
	}
	if err := r.ClaimError(bad); err != nil {
		t.Fatalf("second ClaimError of the same version = %v; want nil", err)
	}
	if _, err, first := r.Get(bad); err == nil || first {
		t.Fatalf("Get of a decoded version: err %v, first %v; want the error, not first", err, first)
	}
	if err := r.ClaimError(addon("2", "{not json either")); err == nil {
		t.Fatal("ClaimError of a new invalid version = nil; want its error")
	}
	if err := r.ClaimError(addon("3", `{"v":1}`)); err == nil {
		t.Fatal("ClaimError of an invalid payload = nil; want its error")
	}
	valid := &addonv1beta1.ManagedClusterAddOn{ObjectMeta: metav1.ObjectMeta{Namespace: "cluster1", Name: "argocd-pull", ResourceVersion: "4"}}
	if err := r.ClaimError(valid); err != nil {
		t.Fatalf("ClaimError of a valid version = %v; want nil", err)
	}
	if err := r.ClaimError(nil); err != nil {
		t.Fatalf("ClaimError(nil) = %v; want nil", err)
	}
}

// TestReportsKeepLastGood pins that a rejected entry, or a report rejected as a whole,
// shows the last good version of the apps the hub knew, with the reason, and that a
// valid report replaces it.
func TestReportsKeepLastGood(t *testing.T) {
	observedAt := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	app := func(name, health string) clusterreport.App {
		return clusterreport.App{Namespace: "argocd", Name: name, ManifestWork: name + "-work",
			Health: argoapp.HealthStatus{Status: health}, ObservedAt: observedAt}
	}
	encode := func(apps ...clusterreport.App) []metav1.Condition {
		enc, err := clusterreport.Encode(clusterreport.Report{Apps: apps})
		if err != nil {
			t.Fatal(err)
		}
		return enc.Conditions
	}
	version := func(rv string, conditions []metav1.Condition) *addonv1beta1.ManagedClusterAddOn {
		return &addonv1beta1.ManagedClusterAddOn{
			ObjectMeta: metav1.ObjectMeta{Namespace: "cluster1", Name: "argocd-pull", ResourceVersion: rv},
			Status:     addonv1beta1.ManagedClusterAddOnStatus{Conditions: conditions},
		}
	}
	find := func(r *Decoder, addon *addonv1beta1.ManagedClusterAddOn, name string) (*clusterreport.App, *Rejection) {
		o := r.Observe(addon, &workv1.ManifestWork{ObjectMeta: metav1.ObjectMeta{Namespace: "cluster1", Name: name + "-work"}},
			types.NamespacedName{Namespace: "hub", Name: name}, time.Now())
		return o.App, o.Rejection
	}
	// corrupt replaces the payload of the condition of app name.
	corrupt := func(conditions []metav1.Condition, name, message string) []metav1.Condition {
		out := slices.Clone(conditions)
		for i := range out {
			if out[i].Type == clusterreport.AppConditionType("argocd", name) {
				out[i].Message = message
			}
		}
		return out
	}

	r := NewDecoder()
	good := encode(app("web", "Healthy"), app("db", "Healthy"))
	if got, rejection := find(r, version("1", good), "web"); got == nil || rejection != nil {
		t.Fatalf("valid report: app %v, rejection %v", got, rejection)
	}

	// One entry rejected: its last good version, with why; the other app is untouched.
	bad := corrupt(encode(app("web", "Degraded"), app("db", "Healthy")), "web", "{not json")
	got, rejection := find(r, version("2", bad), "web")
	if got == nil || got.Health.Status != "Healthy" || rejection == nil || !rejection.LastGood ||
		!errors.Is(rejection.Err, clusterreport.ErrMalformed) {
		t.Fatalf("rejected entry: app %v, rejection %+v; want the last good (Healthy) and ErrMalformed", got, rejection)
	}
	cond := rejection.Condition("cluster1")
	if cond.Type != ConditionInvalidReport || !strings.Contains(cond.Message, "cluster cluster1") ||
		!strings.Contains(cond.Message, "last good status") {
		t.Errorf("condition = %+v", cond)
	}
	if got, rejection := find(r, version("2", bad), "db"); got == nil || rejection != nil {
		t.Errorf("the other app: %v, rejection %v; want it, not rejected", got, rejection)
	}
	// The same entry stays rejected in a later version, and keeps the same last good one.
	if got, rejection := find(r, version("3", corrupt(bad, "web", `{"v":99}`)), "web"); got == nil ||
		got.Health.Status != "Healthy" || rejection == nil || !errors.Is(rejection.Err, clusterreport.ErrUnsupportedVersion) {
		t.Fatalf("rejected again: app %v, rejection %+v", got, rejection)
	}

	// The whole report over the budget: every app's last good version.
	huge := append(slices.Clone(good), metav1.Condition{
		Type: clusterreport.AppConditionPrefix + "argocd.padding", Message: strings.Repeat("x", clusterreport.MaxBytes)})
	got, rejection = find(r, version("4", huge), "db")
	if got == nil || rejection == nil || !rejection.LastGood || !errors.Is(rejection.Err, clusterreport.ErrTooLarge) {
		t.Fatalf("report too large: app %v, rejection %+v", got, rejection)
	}
	// An app the hub never saw: no data, and the report's rejection.
	if got, rejection := find(r, version("4", huge), "new"); got != nil || rejection == nil || rejection.LastGood {
		t.Fatalf("unknown app of a rejected report: app %v, rejection %+v", got, rejection)
	}

	// A valid report again: the new data, no rejection.
	if got, rejection := find(r, version("5", encode(app("web", "Degraded"))), "web"); got == nil ||
		got.Health.Status != "Degraded" || rejection != nil {
		t.Fatalf("valid again: app %v, rejection %v", got, rejection)
	}
	if got, _ := find(r, version("5", encode(app("web", "Degraded"))), "db"); got != nil {
		t.Errorf("an app the valid report no longer carries is still shown: %v", got)
	}
}

func TestOverBudgetChanged(t *testing.T) {
	small := []metav1.Condition{{Type: clusterreport.AppConditionPrefix + "argocd.a", Message: "{}"}}
	huge := append(slices.Clone(small), metav1.Condition{
		Type: clusterreport.AppConditionPrefix + "argocd.b", Message: strings.Repeat("x", clusterreport.MaxBytes)})
	foreign := append(slices.Clone(small), metav1.Condition{Type: "Available", Message: strings.Repeat("x", clusterreport.MaxBytes)})
	if !OverBudgetChanged(small, huge) || !OverBudgetChanged(huge, small) {
		t.Error("crossing the budget is a change")
	}
	if OverBudgetChanged(small, foreign) || OverBudgetChanged(huge, huge) {
		t.Error("conditions the agent does not own, or staying over, are no change")
	}
}
