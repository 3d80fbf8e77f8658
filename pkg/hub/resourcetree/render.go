// Package resourcetree writes, for each pulled hub Application, the entries that the hub
// Argo CD's application-controller would write to its cache (Redis) if it reconciled the
// app: the app's resource tree and its managed resources, from the app's entry in its
// cluster's ApplicationStatusSlices. The hub's argocd-server reads them to answer the
// resource tree (GET /api/v1/applications/{name}/resource-tree, the UI's tree) and the
// managed resources; its tree watch hears the notification that follows each write. The
// hub application-controller skips pulled apps (skip-reconcile), so nothing else writes
// these keys. docs/design.md, section 2.6, and docs/decisions/0002-hub-argocd-cache.md says why this mechanism and what it couples
// to; pkg/argocdcache holds that coupling.
package resourcetree

import (
	"cmp"
	"slices"

	statusv1alpha1 "github.com/ocm-gitops/argocd-pull-addon/pkg/apis/argocdpull/v1alpha1"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/argocdcache"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/clusterreport"
)

// absentState is how the application-controller writes a manifest it does not have
// (json.Marshal of nil).
const absentState = "null"

// NodeIdentity says whether the nodes of a pulled app's tree carry a UID, which decides
// what the hub's argocd-server does with them. Its resource endpoints (the live manifest,
// patch, delete, resource actions, links, Pod logs) act only on a tree node that has a UID,
// and then on the cluster of the hub Application's spec.destination, with argocd-server's
// own credentials for that cluster (server/application getAppLiveResource, getSelectedPods
// in Argo CD v3.2). docs/security.md, "The hub's Argo CD and a pulled app's tree".
type NodeIdentity bool

const (
	// NoUIDs: the hub Application's destination may be the hub itself (the documented
	// template's https://kubernetes.default.svc), so argocd-server would act on the hub's
	// objects of the same names. Without a UID, every resource endpoint refuses the node
	// ("... not found as part of application"), and the UI still draws the whole tree; the
	// argocd CLI's tree output (-o tree), which links nodes by UID, shows the nodes
	// unlinked.
	NoUIDs NodeIdentity = false
	// StableUIDs: the hub Application's destination names the app's own managed cluster
	// (spec.destination.name), an Argo CD cluster that is never the hub, so argocd-server
	// acts there or not at all; the nodes carry stable stand-in UIDs, and the CLI's tree
	// output links them.
	StableUIDs NodeIdentity = true
)

// NodeIdentityOf returns the NodeIdentity of a hub Application pulled to cluster, from its
// destination: StableUIDs only when spec.destination.name is the cluster's name, with no
// server, and the cluster is not the hub's own (hubCluster).
func NodeIdentityOf(destination argoapp.Destination, cluster, hubCluster string) NodeIdentity {
	return NodeIdentity(cluster != "" && cluster != hubCluster && destination.Server == "" && destination.Name == cluster)
}

// Render returns the resource tree and the managed resources of a pulled app as the hub
// application-controller would cache them: every managed resource as a node with its
// health and images, then the other nodes of the spoke's tree (ReplicaSets, Pods, ...)
// under their parents, in Argo CD's order (ApplicationTree.Normalize: by FullName,
// group/kind/namespace/name). The nodes carry UIDs as identity says.
//
// The managed resources are the OutOfSync ones, modified, in FullName order, each with
// the states of Argo CD's diff that the entry carries for it (its Diffs, checked again by
// clusterreport.CarriedDiffs): the normalized live state, the target state and the
// predicted live state, which `argocd app diff` and the UI's diff compare. The raw live
// state (LiveState) stays "null": the slices do not carry it. An OutOfSync resource whose
// states the agent left out (the entry's DiffsOmitted) has "null" states, on which
// `argocd app diff` fails rather than report no difference. Synced resources are not
// listed: a resource without a live and a target state is one that `argocd app diff`
// cannot compare ("both live and config are null objects"), and a Synced one has no
// difference to show.
func Render(e statusv1alpha1.AppStatus, identity NodeIdentity) (argocdcache.Tree, []argocdcache.ResourceDiff) {
	uidOf := func(r argocdcache.Ref) string {
		if identity == StableUIDs {
			return r.StandInUID()
		}
		return ""
	}
	tree := argocdcache.Tree{Nodes: make([]argocdcache.Node, 0, len(e.Resources)+len(e.Nodes))}
	seen := make(map[string]bool, len(e.Resources)+len(e.Nodes))
	managed := []argocdcache.ResourceDiff{}
	states := clusterreport.CarriedDiffs(e)
	for _, r := range e.Resources {
		diff := argocdcache.ResourceDiff{Group: r.Group, Kind: r.Kind, Namespace: r.Namespace, Name: r.Name,
			TargetState: absentState, LiveState: absentState, NormalizedLiveState: absentState, PredictedLiveState: absentState,
			Modified: r.Status == argoapp.SyncOutOfSync}
		if diff.Modified && !seen[diff.FullName()] {
			if d, ok := states[clusterreport.DiffKey(r.Group, r.Kind, r.Namespace, r.Name)]; ok {
				diff.NormalizedLiveState, diff.TargetState, diff.PredictedLiveState = orAbsent(d.LiveState), orAbsent(d.TargetState), orAbsent(d.PredictedLiveState)
			}
			managed = append(managed, diff)
		}
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

// orAbsent returns a state as the application-controller writes it: "null" for none.
func orAbsent(state string) string {
	if state == "" {
		return absentState
	}
	return state
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
