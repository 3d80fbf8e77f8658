package testenv_test

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	addonv1beta1 "open-cluster-management.io/api/addon/v1beta1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/ocm-gitops/argocd-pull-addon/pkg/apis/apps/v1alpha1"
	"github.com/ocm-gitops/argocd-pull-addon/test/testenv"
)

// TestStartServesTheCRDs checks that every API the addon's controllers use is served.
func TestStartServesTheCRDs(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()

	lists := map[string]client.ObjectList{
		"ManagedClusters":                   &clusterv1.ManagedClusterList{},
		"PlacementDecisions":                &clusterv1beta1.PlacementDecisionList{},
		"ManifestWorks":                     &workv1.ManifestWorkList{},
		"ManagedClusterAddOns":              &addonv1beta1.ManagedClusterAddOnList{},
		"ClusterManagementAddOns":           &addonv1beta1.ClusterManagementAddOnList{},
		"MulticlusterApplicationSetReports": &appsv1alpha1.MulticlusterApplicationSetReportList{},
	}
	for _, kind := range []string{"ApplicationList", "AppProjectList", "ApplicationSetList"} {
		u := &unstructured.UnstructuredList{}
		u.SetGroupVersionKind(schema.GroupVersionKind{Group: "argoproj.io", Version: "v1alpha1", Kind: kind})
		lists[kind] = u
	}
	for name, list := range lists {
		if err := env.Client.List(ctx, list); err != nil {
			t.Errorf("list %s: %v", name, err)
		}
	}
}
