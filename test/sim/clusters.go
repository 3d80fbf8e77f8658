package sim

import (
	"context"
	"fmt"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/retry"
	addonv1beta1 "open-cluster-management.io/api/addon/v1beta1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ocm-gitops/argocd-pull-addon/test/testenv"
)

// decisionsPerPlacementDecision is how many clusters OCM's placement controller puts in
// one PlacementDecision.
const decisionsPerPlacementDecision = 100

// PlacementName is the Placement whose decisions bind the simulated clusters to
// AppNamespace.
const PlacementName = "sim-clusters"

// ClusterName returns the name of the i-th simulated cluster.
func ClusterName(i int) string { return fmt.Sprintf("cluster-%04d", i) }

// CreateClusters creates n simulated clusters, with the addon enabled and Available on
// each, and the PlacementDecisions that select them all in AppNamespace. It returns their
// names.
func (h *Hub) CreateClusters(ctx context.Context, n, parallel int) ([]string, error) {
	names := make([]string, n)
	for i := range names {
		names[i] = ClusterName(i)
	}
	if err := forEach(ctx, names, parallel, h.CreateCluster); err != nil {
		return nil, err
	}
	for start := 0; start < n; start += decisionsPerPlacementDecision {
		end := min(start+decisionsPerPlacementDecision, n)
		if err := h.createDecision(ctx, start/decisionsPerPlacementDecision, names[start:end]); err != nil {
			return nil, err
		}
	}
	return names, nil
}

// CreateCluster creates one simulated cluster: its ManagedCluster and namespace, and the
// addon's ManagedClusterAddOn, Available.
func (h *Hub) CreateCluster(ctx context.Context, name string) error {
	if err := createIgnoringExisting(ctx, h.Client, &clusterv1.ManagedCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"env": "sim"}},
		Spec:       clusterv1.ManagedClusterSpec{HubAcceptsClient: true},
	}); err != nil {
		return err
	}
	if err := createIgnoringExisting(ctx, h.Client, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		return err
	}
	// Owned by the ClusterManagementAddOn, as OCM's addon-manager sets it; the addon
	// framework acts only on owned addons.
	addon := &addonv1beta1.ManagedClusterAddOn{ObjectMeta: metav1.ObjectMeta{
		Name: AddonName, Namespace: name,
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(h.cma, schema.GroupVersion(addonv1beta1.GroupVersion).WithKind("ClusterManagementAddOn"))},
	}}
	if err := createIgnoringExisting(ctx, h.Client, addon); err != nil {
		return err
	}
	// What the klusterlet's registration agent sets while the agent renews its lease. The
	// addon framework writes the status too.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := h.Client.Get(ctx, client.ObjectKeyFromObject(addon), addon); err != nil {
			return err
		}
		meta.SetStatusCondition(&addon.Status.Conditions, metav1.Condition{
			Type: addonv1beta1.ManagedClusterAddOnConditionAvailable, Status: metav1.ConditionTrue,
			Reason: "ManagedClusterAddOnLeaseUpdated", Message: "the agent of the simulated cluster is available",
		})
		return h.Client.Status().Update(ctx, addon)
	})
	if err != nil {
		return fmt.Errorf("mark the addon of %s available: %w", name, err)
	}
	return nil
}

func (h *Hub) createDecision(ctx context.Context, index int, clusters []string) error {
	_, err := testenv.CreatePlacementDecision(ctx, h.Client, AppNamespace, PlacementName, index, clusters...)
	return err
}

// forEach calls fn for every item, parallel at a time, and returns the first error.
func forEach[T any](ctx context.Context, items []T, parallel int, fn func(context.Context, T) error) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(max(parallel, 1))
	for _, item := range items {
		g.Go(func() error { return fn(ctx, item) })
	}
	return g.Wait()
}
