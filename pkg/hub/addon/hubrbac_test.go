package addon

import (
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestStripHubRBAC: the agents' Roles of two clusters hold one copy of their rules, keep
// what granted compares, and lose their managed fields; a stripped Role is left as it is.
func TestStripHubRBAC(t *testing.T) {
	role := func(namespace string) *rbacv1.Role {
		return &rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: namespace,
				ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "argocd-pull-manager"}}},
			Rules: HubRole("argocd-pull").Rules,
		}
	}
	var stripped []*rbacv1.Role
	for _, namespace := range []string{"c1", "c2"} {
		obj, err := stripHubRBAC(role(namespace))
		if err != nil {
			t.Fatal(err)
		}
		stripped = append(stripped, obj.(*rbacv1.Role))
	}
	if &stripped[0].Rules[0] != &stripped[1].Rules[0] {
		t.Error("the Roles of two clusters hold two copies of the same rules")
	}
	want := role("c1")
	for _, r := range stripped {
		if r.ManagedFields != nil {
			t.Errorf("%s: managed fields kept", r.Namespace)
		}
		if !equality.Semantic.DeepEqual(r.Rules, want.Rules) {
			t.Errorf("%s: rules %v, want %v", r.Namespace, r.Rules, want.Rules)
		}
	}
	again, err := stripHubRBAC(stripped[0])
	if err != nil || again.(*rbacv1.Role) != stripped[0] || &stripped[0].Rules[0] != &again.(*rbacv1.Role).Rules[0] {
		t.Errorf("a stripped Role changed when stripped again (err %v)", err)
	}
}
