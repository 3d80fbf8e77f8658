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
	"crypto/sha1" //nolint:gosec // a name-based UUID, not a security use
	"fmt"
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
		ref := argocdcache.Ref{Group: r.Group, Version: r.Version, Kind: r.Kind, Namespace: r.Namespace, Name: r.Name}
		ref.UID = uidOf(ref)
		tree.Nodes = append(tree.Nodes, argocdcache.Node{Ref: ref, Images: r.Images, Health: health(r.Health)})
	}
	for _, n := range e.Nodes {
		ref := argocdcache.Ref{Group: n.Group, Version: n.Version, Kind: n.Kind, Namespace: n.Namespace, Name: n.Name}
		ref.UID = uidOf(ref)
		if seen[fullName(ref)] {
			continue
		}
		seen[fullName(ref)] = true
		node := argocdcache.Node{Ref: ref, Images: n.Images, Health: health(n.Health)}
		for _, p := range n.ParentRefs {
			parent := argocdcache.Ref{Group: p.Group, Kind: p.Kind, Namespace: p.Namespace, Name: p.Name}
			parent.UID = uidOf(parent)
			node.ParentRefs = append(node.ParentRefs, parent)
		}
		tree.Nodes = append(tree.Nodes, node)
	}
	slices.SortFunc(tree.Nodes, func(a, b argocdcache.Node) int {
		return cmp.Compare(fullName(a.Ref), fullName(b.Ref))
	})
	slices.SortStableFunc(managed, func(a, b argocdcache.ResourceDiff) int { return cmp.Compare(a.FullName(), b.FullName()) })
	return tree, managed
}

// uidOf is a stable stand-in for a resource's UID, which the slices do not carry: a
// name-based UUID (RFC 9562 version 5) of group/kind/namespace/name. The argocd CLI's
// tree view links children to parents by UID; the UI by group, kind, namespace and name.
func uidOf(r argocdcache.Ref) string {
	sum := sha1.Sum([]byte("argocd-pull.open-cluster-management.io/" + fullName(r))) //nolint:gosec // an identifier, not a security use
	sum[6] = sum[6]&0x0f | 0x50
	sum[8] = sum[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", sum[0:4], sum[4:6], sum[6:8], sum[8:10], sum[10:16])
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
