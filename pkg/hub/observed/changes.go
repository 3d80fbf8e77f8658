package observed

// This file compares two versions of a ManagedClusterAddOn's conditions: which apps
// they concern.

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	addonv1beta1 "open-cluster-management.io/api/addon/v1beta1"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/clusterreport"
)

// OverBudgetChanged reports whether the agent's conditions crossed clusterreport.MaxBytes
// between two versions of an addon's conditions: the whole report is then rejected, or
// accepted again, which concerns every app of the cluster.
func OverBudgetChanged(old, new []metav1.Condition) bool {
	return overBudget(old) != overBudget(new)
}

func overBudget(conditions []metav1.Condition) bool {
	total := 0
	for _, c := range conditions {
		if clusterreport.IsAgentCondition(c.Type) {
			total += clusterreport.ConditionSize(c)
		}
	}
	return total > clusterreport.MaxBytes
}

// ChangedAppConditions returns the app conditions of the agent that were added, removed
// or changed between two versions of an addon's conditions: the old version of a removed
// or changed one, the new version of an added or changed one.
func ChangedAppConditions(old, new []metav1.Condition) []metav1.Condition {
	index := func(cs []metav1.Condition) map[string]metav1.Condition {
		m := map[string]metav1.Condition{}
		for _, c := range cs {
			if clusterreport.IsAppCondition(c.Type) {
				m[c.Type] = c
			}
		}
		return m
	}
	before, after := index(old), index(new)
	var changed []metav1.Condition
	for t, a := range after {
		b, ok := before[t]
		if !ok || a.Message != b.Message {
			changed = append(changed, a)
		}
		if ok && a.Message != b.Message {
			changed = append(changed, b)
		}
	}
	for t, b := range before {
		if _, ok := after[t]; !ok {
			changed = append(changed, b)
		}
	}
	return changed
}

// AvailabilityChanged reports whether the Available condition of an addon changed
// between two versions of its conditions.
func AvailabilityChanged(old, new []metav1.Condition) bool {
	a := meta.FindStatusCondition(old, addonv1beta1.ManagedClusterAddOnConditionAvailable)
	b := meta.FindStatusCondition(new, addonv1beta1.ManagedClusterAddOnConditionAvailable)
	if a == nil || b == nil {
		return (a == nil) != (b == nil)
	}
	return a.Status != b.Status || !a.LastTransitionTime.Equal(&b.LastTransitionTime) || a.Reason != b.Reason
}

// ClusterWideChange reports whether a change of a ManagedClusterAddOn's conditions
// concerns every app of the cluster rather than the apps whose entries changed: its
// availability, the report crossing the size budget, the agent's scope, or the agent
// publishing its first report (or its report going).
func ClusterWideChange(old, new []metav1.Condition) bool {
	if AvailabilityChanged(old, new) || OverBudgetChanged(old, new) || published(old) != published(new) {
		return true
	}
	a := meta.FindStatusCondition(old, clusterreport.ConditionReportScope)
	b := meta.FindStatusCondition(new, clusterreport.ConditionReportScope)
	if a == nil || b == nil {
		return (a == nil) != (b == nil)
	}
	return a.Message != b.Message
}

// published reports whether the agent has written any of its conditions.
func published(conditions []metav1.Condition) bool {
	for _, c := range conditions {
		if clusterreport.IsAgentCondition(c.Type) {
			return true
		}
	}
	return false
}
