package observed

import (
	"errors"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	addonv1beta1 "open-cluster-management.io/api/addon/v1beta1"

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
	r := NewReports()
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
