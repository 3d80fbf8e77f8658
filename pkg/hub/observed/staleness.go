package observed

// This file tells when a cluster's data is stale: its addon is unavailable.

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	addonv1beta1 "open-cluster-management.io/api/addon/v1beta1"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
)

// ConditionStale is the condition type, on the report's cluster entry and on the hub
// Application, that says the data is the last reported before the cluster's addon
// became unavailable. It ends in "Warning", so Argo CD's UI shows it as a warning.
const ConditionStale = "StaleStatusWarning"

// Staleness says since when a cluster's addon is unavailable.
type Staleness struct {
	// Since is the last transition time of the addon's Available condition.
	Since metav1.Time
	// Status and Reason are those of the Available condition.
	Status metav1.ConditionStatus
	Reason string
}

// StalenessOf returns the staleness of the cluster of addon: non-nil when its Available
// condition is False or Unknown, which the addon framework sets when the agent's lease
// expires. Without an Available condition the addon is not known to be unavailable.
func StalenessOf(addon *addonv1beta1.ManagedClusterAddOn) *Staleness {
	if addon == nil {
		return nil
	}
	c := meta.FindStatusCondition(addon.Status.Conditions, addonv1beta1.ManagedClusterAddOnConditionAvailable)
	if c == nil || c.Status == metav1.ConditionTrue {
		return nil
	}
	return &Staleness{Since: c.LastTransitionTime, Status: c.Status, Reason: c.Reason}
}

// Condition returns the stale condition of cluster.
func (s *Staleness) Condition(cluster string) argoapp.Condition {
	return argoapp.Condition{
		Type: ConditionStale,
		Message: fmt.Sprintf("The status from cluster %s is stale: its addon has been unavailable (Available=%s, %s) since %s; this is the last status it reported.",
			cluster, s.Status, s.Reason, s.Since.UTC().Format(time.RFC3339)),
	}
}
