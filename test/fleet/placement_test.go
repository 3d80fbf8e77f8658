package fleet

import (
	"strings"
	"testing"

	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	clusterv1beta2 "open-cluster-management.io/api/cluster/v1beta2"
	"sigs.k8s.io/yaml"
)

// TestPlacementYAML: the binding of the default ManagedClusterSet, then a Placement of the
// clusters with the labels asked for, or of every cluster of the set without labels.
func TestPlacementYAML(t *testing.T) {
	for _, c := range []struct {
		name   string
		labels map[string]string
	}{
		{"addon", map[string]string{"feature.open-cluster-management.io/addon-argocd-pull": "available"}},
		{"two-labels", map[string]string{"b": "true", "a/x": "true"}},
		{"everywhere", nil},
	} {
		docs := strings.Split(string(PlacementYAML(c.name, c.labels)), "\n---\n")
		if len(docs) != 2 {
			t.Fatalf("%s: %d documents, want 2", c.name, len(docs))
		}
		binding := &clusterv1beta2.ManagedClusterSetBinding{}
		placement := &clusterv1beta1.Placement{}
		if err := yaml.UnmarshalStrict([]byte(docs[0]), binding); err != nil {
			t.Fatal(err)
		}
		if err := yaml.UnmarshalStrict([]byte(docs[1]), placement); err != nil {
			t.Fatal(err)
		}
		if binding.Kind != "ManagedClusterSetBinding" || binding.Name != "default" || binding.Spec.ClusterSet != "default" {
			t.Errorf("%s: binding %+v", c.name, binding)
		}
		if placement.Kind != "Placement" || placement.Name != c.name || len(placement.Spec.ClusterSets) != 1 || placement.Spec.ClusterSets[0] != "default" {
			t.Errorf("%s: placement %+v", c.name, placement)
		}
		var selected map[string]string
		if len(placement.Spec.Predicates) > 0 {
			selected = placement.Spec.Predicates[0].RequiredClusterSelector.LabelSelector.MatchLabels
		}
		if len(selected) != len(c.labels) || len(placement.Spec.Predicates) > 1 {
			t.Errorf("%s: selects %v, want %v", c.name, selected, c.labels)
		}
		for k, v := range c.labels {
			if selected[k] != v {
				t.Errorf("%s: selects %v, want %v", c.name, selected, c.labels)
			}
		}
	}
}
