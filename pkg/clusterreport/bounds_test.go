package clusterreport

import (
	"fmt"
	"testing"

	statusv1alpha1 "github.com/ocm-gitops/argocd-pull-addon/pkg/apis/argocdpull/v1alpha1"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
)

// TestFitEntryCutsListsToTheirCounts: an app with more resources, nodes or conditions
// than a slice holds keeps the most of each, problems first, and says what it left out;
// Entry cuts each node's parents and images and the revisions.
func TestFitEntryCutsListsToTheirCounts(t *testing.T) {
	app := App{Namespace: "argocd", Name: "wide", ObservedAt: sliceTestTime}
	for i := range MaxSliceResourcesPerApp + 5 {
		// Names and statuses only, so that this many fit in MaxSliceBytes.
		r := argoapp.ResourceStatus{Name: fmt.Sprintf("r%05d", i), Status: "Synced"}
		if i == MaxSliceResourcesPerApp+4 {
			r.Status = "OutOfSync" // the last by name: kept, as a problem
		}
		app.Resources = append(app.Resources, r)
	}
	for i := range MaxSliceConditionsPerApp + 3 {
		app.Conditions = append(app.Conditions, argoapp.Condition{Type: "SharedResourceWarning", Message: fmt.Sprint(i)})
	}
	app.Conditions = append(app.Conditions, argoapp.Condition{Type: "SyncError", Message: "kept: an error"})
	for i := range MaxRevisions + 2 {
		app.Sync.Revisions = append(app.Sync.Revisions, fmt.Sprint(i))
	}
	var tree Tree
	for i := range MaxSliceNodesPerApp + 7 {
		tree.Nodes = append(tree.Nodes, statusv1alpha1.ResourceNode{Version: "v1", Kind: "P", Name: fmt.Sprintf("n%05d", i)})
	}
	wide := statusv1alpha1.ResourceNode{Version: "v1", Kind: "Pod", Name: "wide"}
	for i := range MaxImagesPerResource + 1 {
		wide.Images = append(wide.Images, fmt.Sprintf("image-%03d", i))
		wide.ParentRefs = append(wide.ParentRefs, statusv1alpha1.ResourceRef{Kind: "ReplicaSet", Name: fmt.Sprintf("rs-%03d", i)})
	}
	tree.Nodes = append(tree.Nodes, wide)

	e := Entry(app, Tree{Nodes: []statusv1alpha1.ResourceNode{wide}})
	nodes := Entry(App{Namespace: "argocd", Name: "deep", ObservedAt: sliceTestTime}, tree)
	if len(e.Sync.Revisions) != MaxRevisions {
		t.Errorf("%d revisions, want %d", len(e.Sync.Revisions), MaxRevisions)
	}
	for _, n := range nodes.Nodes {
		if n.Name == "wide" && (len(n.Images) != MaxImagesPerResource || len(n.ParentRefs) != MaxParentRefsPerNode) {
			t.Errorf("a node keeps %d images and %d parents, want %d and %d", len(n.Images), len(n.ParentRefs), MaxImagesPerResource, MaxParentRefsPerNode)
		}
	}
	fitted, fittedNodes := FitEntry(e), FitEntry(nodes)
	if len(fitted.Resources) != MaxSliceResourcesPerApp || len(fittedNodes.Nodes) != MaxSliceNodesPerApp || len(fitted.Conditions) != MaxSliceConditionsPerApp {
		t.Errorf("kept %d resources, %d nodes, %d conditions; want %d, %d, %d", len(fitted.Resources), len(fittedNodes.Nodes), len(fitted.Conditions),
			MaxSliceResourcesPerApp, MaxSliceNodesPerApp, MaxSliceConditionsPerApp)
	}
	if c := fitted.Truncated; c == nil || c.ResourcesOmitted != 5 || c.NodesOmitted != 0 || c.ConditionsOmitted != 4 || c.MessagesShortened {
		t.Errorf("truncation %+v, want 5 resources and 4 conditions left out", c)
	}
	if c := fittedNodes.Truncated; c == nil || c.NodesOmitted != 8 {
		t.Errorf("truncation %+v, want 8 nodes left out", c)
	}
	if fitted.Resources[len(fitted.Resources)-1].Status != "OutOfSync" {
		t.Error("the OutOfSync resource was left out before Synced ones")
	}
	if fitted.Conditions[0].Type != "SyncError" {
		t.Error("the error condition was left out before warnings")
	}
	for _, f := range []statusv1alpha1.AppStatus{fitted, fittedNodes} {
		if size := EntrySize(f); size > MaxSliceBytes {
			t.Errorf("the fitted entry takes %d bytes, more than %d", size, MaxSliceBytes)
		}
	}
	if len(e.Resources) != MaxSliceResourcesPerApp+5 {
		t.Error("FitEntry changed the entry it was given")
	}
}

// TestPlanSlicesHoldsAtMostMaxAppsPerSlice: however small the entries, a slice holds at
// most MaxAppsPerSlice apps, also one on the hub that holds more (an older agent's).
func TestPlanSlicesHoldsAtMostMaxAppsPerSlice(t *testing.T) {
	var apps []statusv1alpha1.AppStatus
	sizes := map[string]int{}
	for i := range 2*MaxAppsPerSlice + 1 {
		e := statusv1alpha1.AppStatus{Namespace: "a", Name: fmt.Sprintf("%05d", i)}
		apps = append(apps, e)
		sizes[EntryKey(e)] = 1
	}
	plan := PlanSlicesSized("argocd-pull", nil, apps, sizes, nil)
	again := PlanSlicesSized("argocd-pull", []Slice{{Name: "argocd-pull-0", Apps: apps}}, apps, sizes, nil)
	for _, p := range [][]Slice{plan, again} {
		total := 0
		for _, s := range p {
			if len(s.Apps) > MaxAppsPerSlice {
				t.Errorf("slice %s holds %d apps, more than %d", s.Name, len(s.Apps), MaxAppsPerSlice)
			}
			total += len(s.Apps)
		}
		if total != len(apps) || len(p) != 3 {
			t.Errorf("%d slices hold %d apps, want 3 holding %d", len(p), total, len(apps))
		}
	}
	if _, err := DecodeSlices([]statusv1alpha1.ApplicationStatusSlice{{FormatVersion: SliceFormatVersion, Apps: apps}}); err == nil {
		t.Errorf("a slice of %d apps decoded", len(apps))
	}
}
