// Package resourcetree writes, for each pulled hub Application, the entries that the hub
// Argo CD's application-controller would write to its cache (Redis) if it reconciled the
// app: the app's resource tree and its managed resources, from the app's entry in its
// cluster's ApplicationStatusSlices. The hub's argocd-server reads them to answer the
// resource tree (GET /api/v1/applications/{name}/resource-tree, the UI's tree) and the
// managed resources; its tree watch hears the notification that follows each write. The
// hub application-controller skips pulled apps (skip-reconcile), so nothing else writes
// these keys. docs/design.md, section 8b, says why this mechanism and what it couples
// to; pkg/argocdcache holds that coupling.
package resourcetree

import (
	"cmp"
	"slices"

	statusv1alpha1 "github.com/ocm-gitops/argocd-pull-addon/pkg/apis/argocdpull/v1alpha1"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/argocdcache"
)

// absentState is how the application-controller writes a manifest it does not have
// (json.Marshal of nil). The slices do not carry manifests.
const absentState = "null"

// syncOutOfSync is Argo CD's sync status of a resource that differs from git.
const syncOutOfSync = "OutOfSync"

// Render returns the resource tree and the managed resources of a pulled app as the hub
// application-controller would cache them: every managed resource as a node with its
// health and images, then the other nodes of the spoke's tree (ReplicaSets, Pods, ...)
// under their parents, in Argo CD's order (ApplicationTree.Normalize: by FullName,
// group/kind/namespace/name); and each managed resource, modified when it is OutOfSync, in
// FullName order, without the manifests, which the slices do not carry.
func Render(e statusv1alpha1.AppStatus) (argocdcache.Tree, []argocdcache.ResourceDiff) {
	tree := argocdcache.Tree{Nodes: make([]argocdcache.Node, 0, len(e.Resources)+len(e.Nodes))}
	seen := make(map[string]bool, len(e.Resources)+len(e.Nodes))
	managed := make([]argocdcache.ResourceDiff, 0, len(e.Resources))
	for _, r := range e.Resources {
		diff := argocdcache.ResourceDiff{Group: r.Group, Kind: r.Kind, Namespace: r.Namespace, Name: r.Name,
			TargetState: absentState, LiveState: absentState, NormalizedLiveState: absentState, PredictedLiveState: absentState,
			Modified: r.Status == syncOutOfSync}
		managed = append(managed, diff)
		if seen[diff.FullName()] {
			continue
		}
		seen[diff.FullName()] = true
		tree.Nodes = append(tree.Nodes, argocdcache.Node{
			Ref:    argocdcache.Ref{Group: r.Group, Version: r.Version, Kind: r.Kind, Namespace: r.Namespace, Name: r.Name},
			Images: r.Images, Health: health(r.Health),
		})
	}
	for _, n := range e.Nodes {
		ref := argocdcache.Ref{Group: n.Group, Version: n.Version, Kind: n.Kind, Namespace: n.Namespace, Name: n.Name}
		if seen[fullName(ref)] {
			continue
		}
		seen[fullName(ref)] = true
		node := argocdcache.Node{Ref: ref, Images: n.Images, Health: health(n.Health)}
		for _, p := range n.ParentRefs {
			node.ParentRefs = append(node.ParentRefs, argocdcache.Ref{Group: p.Group, Kind: p.Kind, Namespace: p.Namespace, Name: p.Name})
		}
		tree.Nodes = append(tree.Nodes, node)
	}
	slices.SortFunc(tree.Nodes, func(a, b argocdcache.Node) int {
		return cmp.Compare(fullName(a.Ref), fullName(b.Ref))
	})
	slices.SortStableFunc(managed, func(a, b argocdcache.ResourceDiff) int { return cmp.Compare(a.FullName(), b.FullName()) })
	return tree, managed
}

func fullName(r argocdcache.Ref) string {
	return r.Group + "/" + r.Kind + "/" + r.Namespace + "/" + r.Name
}

func health(h *statusv1alpha1.Health) *argocdcache.Health {
	if h == nil || (h.Status == "" && h.Message == "") {
		return nil
	}
	return &argocdcache.Health{Status: h.Status, Message: h.Message}
}
