package testenv

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CreatePlacementDecision creates, when they do not exist yet, the Placement namespace/
// placement and its PlacementDecision number index, named, labelled and owned the way
// OCM's placement controller writes them, and sets the decision to select clusters. It
// returns the decision. The addon's tenant gate counts only such decisions.
func CreatePlacementDecision(ctx context.Context, c client.Client, namespace, placement string, index int, clusters ...string) (*clusterv1beta1.PlacementDecision, error) {
	owner := &clusterv1beta1.Placement{ObjectMeta: metav1.ObjectMeta{Name: placement, Namespace: namespace}}
	if err := c.Create(ctx, owner); client.IgnoreAlreadyExists(err) != nil {
		return nil, fmt.Errorf("create placement %s/%s: %w", namespace, placement, err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(owner), owner); err != nil {
		return nil, fmt.Errorf("get placement %s/%s: %w", namespace, placement, err)
	}
	decision := &clusterv1beta1.PlacementDecision{ObjectMeta: metav1.ObjectMeta{
		Name: fmt.Sprintf("%s-decision-%d", placement, index), Namespace: namespace,
		Labels: map[string]string{clusterv1beta1.PlacementLabel: placement},
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(owner,
			schema.GroupVersionKind{Group: clusterv1beta1.GroupName, Version: "v1beta1", Kind: "Placement"})},
	}}
	if err := c.Create(ctx, decision); client.IgnoreAlreadyExists(err) != nil {
		return nil, fmt.Errorf("create placement decision %s/%s: %w", namespace, decision.Name, err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(decision), decision); err != nil {
		return nil, fmt.Errorf("get placement decision %s/%s: %w", namespace, decision.Name, err)
	}
	decision.Status.Decisions = nil
	for _, cluster := range clusters {
		decision.Status.Decisions = append(decision.Status.Decisions, clusterv1beta1.ClusterDecision{ClusterName: cluster, Reason: "test"})
	}
	if err := c.Status().Update(ctx, decision); err != nil {
		return nil, fmt.Errorf("set the decisions of %s/%s: %w", namespace, decision.Name, err)
	}
	return decision, nil
}
