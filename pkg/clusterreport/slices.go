package clusterreport

import (
	"cmp"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	addonv1beta1 "open-cluster-management.io/api/addon/v1beta1"

	statusv1alpha1 "github.com/ocm-gitops/argocd-pull-addon/pkg/apis/argocdpull/v1alpha1"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
)

// This file is the status channel (docs/design.md, section 4): the agent's complete
// report of its apps in ApplicationStatusSlices, each bounded, as many as the apps need.

// SliceFormatVersion is the version of the content of an ApplicationStatusSlice that
// SliceObject writes and DecodeSlices reads. Optional fields may be added to a version;
// a change that an older hub would misread takes a new version.
const SliceFormatVersion = 1

// Limits of the status channel, in bytes. The counts below bound the lists; the number of
// slices of a cluster is bounded on the hub (a ResourceQuota, pkg/hub/addon).
const (
	// SliceTargetBytes bounds a slice of several apps, in bytes of JSON of its app
	// entries. It keeps each write of a slice small.
	SliceTargetBytes = 128 * 1024

	// SliceFillBytes is the size up to which apps are added to a slice: the room left up
	// to SliceTargetBytes lets its apps grow (a resource that goes OutOfSync, a longer
	// message) without moving one to another slice, so that one app's change rewrites
	// one slice.
	SliceFillBytes = 96 * 1024

	// MaxSliceBytes bounds the app entries of one slice, in bytes of JSON. An app alone
	// may exceed SliceTargetBytes up to this; beyond, it is cut (FitEntry) and marked.
	// etcd's limit on an object is 1.5 MiB.
	MaxSliceBytes = 1024 * 1024
)

// Counts of the status channel. The schema of ApplicationStatusSlice says the same
// (maxItems; TestSliceSchemaBoundsAreTheEncoders checks it), so that the apiserver refuses
// what the agent never writes: FitEntry cuts an app's lists to them, marked in
// Truncated, Entry cuts the images and parents of each resource and node, and PlanSlices
// puts at most MaxAppsPerSlice apps in a slice. Each is far above what fits in
// MaxSliceBytes with the smallest entries Argo CD writes, so that only the bytes bound a
// real app.
const (
	// MaxAppsPerSlice bounds the apps of one slice. A slice of several apps holds at most
	// SliceTargetBytes of them, and the smallest entry takes about 100 bytes.
	MaxAppsPerSlice = 1000
	// MaxSliceResourcesPerApp and MaxSliceNodesPerApp bound an app's resources and tree
	// nodes: a resource's JSON takes at least about 55 bytes (version, kind, name,
	// status), so 1 MiB holds fewer; a node's about 40 (version, kind, name), so that
	// 20,000 of the smallest take most of it.
	MaxSliceResourcesPerApp = 20000
	MaxSliceNodesPerApp     = 20000
	// MaxSliceConditionsPerApp bounds an app's conditions. Argo CD writes one
	// SharedResourceWarning per shared resource; beyond a thousand, warnings go first.
	MaxSliceConditionsPerApp = 1000
	// MaxImagesPerResource bounds the images of one resource or node (a Pod's
	// containers, init containers included), and MaxParentRefsPerNode a node's parents
	// (its owner references).
	MaxImagesPerResource = 64
	MaxParentRefsPerNode = 64
)

// Tree is Argo CD's resource tree of an app, as the agent read it from the
// application-controller's cache.
type Tree struct {
	// Nodes are the tree's nodes, managed resources and their children alike.
	Nodes []statusv1alpha1.ResourceNode
	// Unavailable says why the tree could not be read; empty when Nodes are Argo CD's.
	Unavailable string
	// States are Argo CD's cached states of the app's resources, from which Entry takes
	// the Diffs of the OutOfSync ones. The agent reads them, or says in
	// States.Unavailable why not, whenever the app has an OutOfSync resource; none read
	// (the zero States) gives an entry no diffs and counts none omitted.
	States States
}

// Entry returns the status-channel entry of app: every resource, with its health and
// images from tree where status.resources has none (Argo CD 3 does not persist resource
// health by default), and the other nodes of the tree with their parents. Messages are
// cut at MaxMessageBytes and names at the length of a Kubernetes name, visibly; nothing
// is left out but the revisions past MaxRevisions, the images and parents of a
// resource or node past MaxImagesPerResource and MaxParentRefsPerNode, and the history
// that HistoryOf leaves out. The entry is deterministic: resources and nodes sorted by group, kind,
// namespace and name, conditions errors first.
func Entry(app App, tree Tree) statusv1alpha1.AppStatus {
	e := statusv1alpha1.AppStatus{
		Namespace:      app.Namespace,
		Name:           app.Name,
		ApplicationSet: TruncateMessage(app.ApplicationSet, 2*MaxNameBytes+1),
		ManifestWork:   TruncateMessage(app.ManifestWork, MaxNameBytes),
		Refreshed:      TruncateMessage(app.Refreshed, maxStatusBytes),
		Sync: statusv1alpha1.SyncStatus{
			Status:   TruncateMessage(app.Sync.Status, maxStatusBytes),
			Revision: TruncateMessage(app.Sync.Revision, MaxNameBytes),
		},
		Health:     health(app.Health, MaxMessageBytes),
		History:    HistoryOf(app.History),
		ObservedAt: metav1.NewTime(app.ObservedAt.UTC().Truncate(time.Second)),
	}
	if app.HubNamespace != "" || app.HubName != "" {
		e.Hub = &statusv1alpha1.ObjectRef{Namespace: TruncateMessage(app.HubNamespace, MaxNameBytes), Name: TruncateMessage(app.HubName, MaxNameBytes)}
	}
	for _, revision := range app.Sync.Revisions[:min(len(app.Sync.Revisions), MaxRevisions)] {
		e.Sync.Revisions = append(e.Sync.Revisions, TruncateMessage(revision, MaxNameBytes))
	}
	if op := app.Operation; op != (argoapp.OperationState{}) {
		e.Operation = &statusv1alpha1.OperationState{
			Phase:      TruncateMessage(op.Phase, maxStatusBytes),
			StartedAt:  TruncateMessage(op.StartedAt, maxStatusBytes),
			FinishedAt: TruncateMessage(op.FinishedAt, maxStatusBytes),
			Message:    TruncateMessage(op.Message, MaxMessageBytes),
			SyncResult: syncResult(op.SyncResult),

			ComparedBeforeFinish: op.ComparedBeforeFinish,
		}
	}
	conditions := slices.Clone(app.Conditions)
	slices.SortFunc(conditions, compareConditions)
	for _, c := range conditions {
		e.Conditions = append(e.Conditions, statusv1alpha1.Condition{
			Type: TruncateMessage(c.Type, maxStatusBytes), Message: TruncateMessage(c.Message, MaxMessageBytes),
		})
	}

	// The tree's node of each managed resource gives its health and images.
	inTree := make(map[string]statusv1alpha1.ResourceNode, len(tree.Nodes))
	for _, n := range tree.Nodes {
		inTree[nodeKey(n.Group, n.Kind, n.Namespace, n.Name)] = n
	}
	managed := make(map[string]bool, len(app.Resources))
	e.Resources = make([]statusv1alpha1.ResourceStatus, 0, len(app.Resources))
	for _, r := range app.Resources {
		key := nodeKey(r.Group, r.Kind, r.Namespace, r.Name)
		managed[key] = true
		row := statusv1alpha1.ResourceStatus{
			Group: r.Group, Version: r.Version, Kind: r.Kind, Namespace: r.Namespace, Name: r.Name,
			Status: r.Status, Health: health(r.Health, MaxMessageBytes),
		}
		if n, ok := inTree[key]; ok {
			if row.Health == nil {
				row.Health = n.Health
			}
			row.Images = n.Images
		}
		e.Resources = append(e.Resources, normalResource(row))
	}
	slices.SortFunc(e.Resources, func(a, b statusv1alpha1.ResourceStatus) int {
		return cmp.Or(compareRefs(a.Group, a.Kind, a.Namespace, a.Name, b.Group, b.Kind, b.Namespace, b.Name), strings.Compare(a.Version, b.Version))
	})
	e.Resources = slices.CompactFunc(e.Resources, func(a, b statusv1alpha1.ResourceStatus) bool {
		return equality.Semantic.DeepEqual(a, b)
	})
	children := 0
	for _, n := range tree.Nodes {
		if !managed[nodeKey(n.Group, n.Kind, n.Namespace, n.Name)] {
			children++
		}
	}
	if children > 0 {
		e.Nodes = make([]statusv1alpha1.ResourceNode, 0, children)
	}
	for _, n := range tree.Nodes {
		if !managed[nodeKey(n.Group, n.Kind, n.Namespace, n.Name)] {
			e.Nodes = append(e.Nodes, normalNode(n))
		}
	}
	slices.SortFunc(e.Nodes, func(a, b statusv1alpha1.ResourceNode) int {
		return cmp.Or(compareRefs(a.Group, a.Kind, a.Namespace, a.Name, b.Group, b.Kind, b.Namespace, b.Name), strings.Compare(a.Version, b.Version))
	})
	if tree.States.Diffs != nil || tree.States.Unavailable != "" {
		e.Diffs, e.DiffsOmitted, e.DiffsMessage = diffs(e.Resources, tree.States)
	}
	if tree.Unavailable != "" {
		e.TreeSource, e.TreeMessage = statusv1alpha1.TreeSourceNone, TruncateMessage(tree.Unavailable, MaxMessageBytes)
	} else {
		e.TreeSource = statusv1alpha1.TreeSourceArgoCDCache
	}
	return e
}

// ReportedSyncResult returns what the status channel carries of a sync's result r: its
// revisions, and the results that the app's resources do not already say, those of
// hooks and those whose sync did not end Synced (SyncFailed, Pruned, PruneSkipped: what
// Argo CD's CLI counts and prints). r itself when it has nothing else; nil for none.
func ReportedSyncResult(r *argoapp.SyncResult) *argoapp.SyncResult {
	plain := func(res argoapp.ResourceResult) bool { return res.Status == "Synced" && res.HookType == "" }
	if r == nil || !slices.ContainsFunc(r.Resources, plain) {
		return r
	}
	out := *r
	out.Resources = slices.DeleteFunc(slices.Clone(r.Resources), plain)
	return &out
}

// syncResult returns the entry's sync result of r (ReportedSyncResult), its strings cut
// to their limits and its revisions to MaxRevisions (its resources are counted by
// fitCounts). Nil for none.
func syncResult(r *argoapp.SyncResult) *statusv1alpha1.SyncResult {
	r = ReportedSyncResult(r)
	if r == nil {
		return nil
	}
	out := &statusv1alpha1.SyncResult{Revision: TruncateMessage(r.Revision, MaxNameBytes)}
	for _, revision := range r.Revisions[:min(len(r.Revisions), MaxRevisions)] {
		out.Revisions = append(out.Revisions, TruncateMessage(revision, MaxNameBytes))
	}
	for _, res := range r.Resources {
		out.Resources = append(out.Resources, statusv1alpha1.ResourceResult{
			Group: TruncateMessage(res.Group, MaxNameBytes), Version: TruncateMessage(res.Version, MaxNameBytes),
			Kind: TruncateMessage(res.Kind, MaxNameBytes), Namespace: TruncateMessage(res.Namespace, MaxNameBytes),
			Name: TruncateMessage(res.Name, MaxNameBytes), Status: TruncateMessage(res.Status, maxStatusBytes),
			Message: TruncateMessage(res.Message, MaxMessageBytes), HookType: TruncateMessage(res.HookType, maxStatusBytes),
			HookPhase: TruncateMessage(res.HookPhase, maxStatusBytes), SyncPhase: TruncateMessage(res.SyncPhase, maxStatusBytes),
		})
	}
	return out
}

// SpokeLocalEntry returns the status-channel entry of an Application that no hub
// pulled (made on the managed cluster): its identity alone. The hub reads from it that
// the name is taken on the cluster (statusslices.Reader.FindSpokeApplication); nothing
// of its spec or status leaves the cluster.
func SpokeLocalEntry(namespace, name string, observedAt time.Time) statusv1alpha1.AppStatus {
	return statusv1alpha1.AppStatus{Namespace: namespace, Name: name, ObservedAt: metav1.NewTime(observedAt.UTC().Truncate(time.Second))}
}

// IsSpokeLocalEntry reports whether an entry is a SpokeLocalEntry: no tree source (every
// entry of an app from the hub has one), and no hub Application, ApplicationSet or
// ManifestWork.
func IsSpokeLocalEntry(e statusv1alpha1.AppStatus) bool {
	return e.TreeSource == "" && e.Hub == nil && e.ApplicationSet == "" && e.ManifestWork == ""
}

// compareConditions orders conditions errors first, then by type and message.
func compareConditions(a, b argoapp.Condition) int {
	if ea, eb := IsErrorCondition(a.Type), IsErrorCondition(b.Type); ea != eb {
		if ea {
			return -1
		}
		return 1
	}
	return cmp.Or(strings.Compare(a.Type, b.Type), strings.Compare(a.Message, b.Message))
}

func nodeKey(group, kind, namespace, name string) string {
	return group + "/" + kind + "/" + namespace + "/" + name
}

func compareRefs(g1, k1, n1, m1, g2, k2, n2, m2 string) int {
	return cmp.Or(strings.Compare(g1, g2), strings.Compare(k1, k2), strings.Compare(n1, n2), strings.Compare(m1, m2))
}

// health returns h cut to the limits, or nil when it is empty.
func health(h argoapp.HealthStatus, messageBytes int) *statusv1alpha1.Health {
	if h == (argoapp.HealthStatus{}) {
		return nil
	}
	return &statusv1alpha1.Health{Status: TruncateMessage(h.Status, maxStatusBytes), Message: TruncateMessage(h.Message, messageBytes)}
}

// cutHealth returns h with its message cut to messageBytes: h itself when nothing is cut
// (entries share their Health values and never change one in place), else a copy.
func cutHealth(h *statusv1alpha1.Health, messageBytes int) *statusv1alpha1.Health {
	if h == nil {
		return nil
	}
	status, message := TruncateMessage(h.Status, maxStatusBytes), TruncateMessage(h.Message, messageBytes)
	if status == h.Status && message == h.Message {
		return h
	}
	return &statusv1alpha1.Health{Status: status, Message: message}
}

func normalResource(r statusv1alpha1.ResourceStatus) statusv1alpha1.ResourceStatus {
	r.Group, r.Version, r.Kind = TruncateMessage(r.Group, MaxNameBytes), TruncateMessage(r.Version, MaxNameBytes), TruncateMessage(r.Kind, MaxNameBytes)
	r.Namespace, r.Name = TruncateMessage(r.Namespace, MaxNameBytes), TruncateMessage(r.Name, MaxNameBytes)
	r.Status = TruncateMessage(r.Status, maxStatusBytes)
	r.Health = cutHealth(r.Health, MaxMessageBytes)
	r.Images = normalImages(r.Images)
	return r
}

func normalNode(n statusv1alpha1.ResourceNode) statusv1alpha1.ResourceNode {
	out := statusv1alpha1.ResourceNode{
		Group: TruncateMessage(n.Group, MaxNameBytes), Version: TruncateMessage(n.Version, MaxNameBytes),
		Kind: TruncateMessage(n.Kind, MaxNameBytes), Namespace: TruncateMessage(n.Namespace, MaxNameBytes),
		Name: TruncateMessage(n.Name, MaxNameBytes), Health: cutHealth(n.Health, MaxMessageBytes), Images: normalImages(n.Images),
	}
	for _, p := range n.ParentRefs {
		out.ParentRefs = append(out.ParentRefs, statusv1alpha1.ResourceRef{
			Group: TruncateMessage(p.Group, MaxNameBytes), Kind: TruncateMessage(p.Kind, MaxNameBytes),
			Namespace: TruncateMessage(p.Namespace, MaxNameBytes), Name: TruncateMessage(p.Name, MaxNameBytes),
		})
	}
	slices.SortFunc(out.ParentRefs, func(a, b statusv1alpha1.ResourceRef) int {
		return compareRefs(a.Group, a.Kind, a.Namespace, a.Name, b.Group, b.Kind, b.Namespace, b.Name)
	})
	if len(out.ParentRefs) > MaxParentRefsPerNode {
		out.ParentRefs = out.ParentRefs[:MaxParentRefsPerNode]
	}
	return out
}

// maxImageBytes cuts an image reference: a registry, a path and a digest.
const maxImageBytes = 512

func normalImages(images []string) []string {
	if len(images) == 0 {
		return nil
	}
	out := make([]string, 0, len(images))
	for _, image := range images {
		out = append(out, TruncateMessage(image, maxImageBytes))
	}
	slices.Sort(out)
	out = slices.Compact(out)
	if len(out) > MaxImagesPerResource {
		out = out[:MaxImagesPerResource]
	}
	return out
}

// EntrySize is the size of an entry as it counts against SliceTargetBytes and
// MaxSliceBytes: the length of its JSON encoding; of an entry of the hub's cache, which
// keeps less of it, the size of the entry as the agent wrote it (its Size).
func EntrySize(e statusv1alpha1.AppStatus) int {
	if e.Size > 0 {
		return e.Size
	}
	raw, err := json.Marshal(e)
	if err != nil {
		// An AppStatus always encodes; count it as too large if it ever does not.
		return MaxSliceBytes + 1
	}
	return len(raw)
}

// EntryDigest returns the EntrySize of e and a digest of its content but ObservedAt: two
// entries of one app with the same digest differ at most in ObservedAt. The agent keeps
// both, so that it neither re-encodes an unchanged app nor compares slices field by
// field at every publish.
func EntryDigest(e statusv1alpha1.AppStatus) (int, [sha256.Size]byte) {
	// Every time of the API's second precision encodes to the same width.
	e.ObservedAt = metav1.NewTime(sizeProbeTime.Time)
	raw, err := json.Marshal(e)
	if err != nil {
		return MaxSliceBytes + 1, [sha256.Size]byte{}
	}
	return len(raw), sha256.Sum256(raw)
}

// FitEntry returns the entry when it fits in MaxSliceBytes and its lists in their counts
// (MaxSliceResourcesPerApp, MaxSliceNodesPerApp, MaxSliceConditionsPerApp), and
// otherwise cuts it until it does: first each list to its count (problems first, as
// below), then, in this order, the tree's nodes (healthy ones first), the messages down
// to MinimalMessageBytes, then the resources (Synced and Healthy ones first), then the
// conditions (warnings first). It marks what it cut in Truncated. This is the only cut of
// the status channel.
func FitEntry(e statusv1alpha1.AppStatus) statusv1alpha1.AppStatus {
	e = fitCounts(e)
	if EntrySize(e) <= MaxSliceBytes {
		return e
	}
	if len(e.Diffs) > 0 {
		e = fitDiffs(e)
		if EntrySize(e) <= MaxSliceBytes {
			return e
		}
	}
	cut := &statusv1alpha1.Truncation{Reason: statusv1alpha1.TruncationExceedsSliceLimit}
	if e.Truncated != nil {
		*cut = *e.Truncated
	}
	countedNodes, countedResources, countedConditions := cut.NodesOmitted, cut.ResourcesOmitted, cut.ConditionsOmitted
	out := e
	out.Truncated = cut

	// Keep the nodes that are not Healthy first, then as many of the rest as fit.
	nodes := problemsFirst(e.Nodes, nodeProblem)
	keepNodes := fitCount(len(nodes), func(n int) bool {
		out.Nodes = sortedNodes(nodes[:n])
		cut.NodesOmitted = countedNodes + int32(len(nodes)-n)
		return EntrySize(out) <= MaxSliceBytes
	})
	out.Nodes, cut.NodesOmitted = sortedNodes(nodes[:keepNodes]), countedNodes+int32(len(nodes)-keepNodes)
	if EntrySize(out) <= MaxSliceBytes {
		return out
	}

	// Then the sync results: those whose sync did not simply succeed first.
	if out.Operation != nil && out.Operation.SyncResult != nil && len(out.Operation.SyncResult.Resources) > 0 {
		op, result := *out.Operation, *out.Operation.SyncResult
		results := problemsFirst(result.Resources, resultProblem)
		counted := cut.SyncResultsOmitted
		op.SyncResult = &result
		out.Operation = &op
		keep := fitCount(len(results), func(n int) bool {
			result.Resources = results[:n]
			return EntrySize(out) <= MaxSliceBytes
		})
		result.Resources, cut.SyncResultsOmitted = results[:keep], counted+int32(len(results)-keep)
		if EntrySize(out) <= MaxSliceBytes {
			return out
		}
	}

	cut.MessagesShortened = true
	out.Health = cutHealth(out.Health, MinimalMessageBytes)
	if out.Operation != nil {
		op := *out.Operation
		op.Message = TruncateMessage(op.Message, MinimalMessageBytes)
		if op.SyncResult != nil {
			result := *op.SyncResult
			result.Resources = slices.Clone(result.Resources)
			for i := range result.Resources {
				result.Resources[i].Message = TruncateMessage(result.Resources[i].Message, MinimalMessageBytes)
			}
			op.SyncResult = &result
		}
		out.Operation = &op
	}
	out.Conditions = slices.Clone(out.Conditions)
	for i := range out.Conditions {
		out.Conditions[i].Message = TruncateMessage(out.Conditions[i].Message, MinimalMessageBytes)
	}
	resources := slices.Clone(e.Resources)
	for i := range resources {
		resources[i].Health = cutHealth(resources[i].Health, MinimalMessageBytes)
	}
	out.Resources = resources
	for i := range out.Nodes {
		out.Nodes[i].Health = cutHealth(out.Nodes[i].Health, MinimalMessageBytes)
	}
	if EntrySize(out) <= MaxSliceBytes {
		return out
	}

	out.Nodes, cut.NodesOmitted = nil, countedNodes+int32(len(nodes))
	ordered := problemsFirst(resources, resourceProblem)
	keep := fitCount(len(ordered), func(n int) bool {
		out.Resources = sortedResources(ordered[:n])
		return EntrySize(out) <= MaxSliceBytes
	})
	out.Resources, cut.ResourcesOmitted = sortedResources(ordered[:keep]), countedResources+int32(len(ordered)-keep)
	if EntrySize(out) <= MaxSliceBytes {
		return out
	}

	conditions := slices.Clone(out.Conditions) // errors first already
	keepConditions := fitCount(len(conditions), func(n int) bool {
		out.Conditions = conditions[:n]
		return EntrySize(out) <= MaxSliceBytes
	})
	out.Conditions, cut.ConditionsOmitted = conditions[:keepConditions], countedConditions+int32(len(conditions)-keepConditions)
	return out
}

// fitDiffs returns e with as many of its Diffs, in their order, as fit in MaxSliceBytes;
// those left out are counted in DiffsOmitted, and DiffsMessage says so. The diffs go
// before anything else of an app that exceeds a slice: they are the largest part of it,
// and the app's status stands without them.
func fitDiffs(e statusv1alpha1.AppStatus) statusv1alpha1.AppStatus {
	all := e.Diffs
	out := e
	out.DiffsMessage = TruncateMessage(strings.TrimSpace(fmt.Sprintf("The diff leaves out resources whose states do not fit in one ApplicationStatusSlice (%d KiB) with the rest of the application's status. %s",
		MaxSliceBytes/1024, e.DiffsMessage)), MaxMessageBytes)
	keep := fitCount(len(all), func(n int) bool {
		out.Diffs = all[:n]
		out.DiffsOmitted = e.DiffsOmitted + int32(len(all)-n)
		return EntrySize(out) <= MaxSliceBytes
	})
	out.Diffs, out.DiffsOmitted = all[:keep], e.DiffsOmitted+int32(len(all)-keep)
	if len(out.Diffs) == 0 {
		out.Diffs = nil
	}
	return out
}

// fitCounts cuts the lists of e to their counts, the problems first as FitEntry keeps
// them, and marks what it cut in Truncated; e itself when nothing is cut.
func fitCounts(e statusv1alpha1.AppStatus) statusv1alpha1.AppStatus {
	if len(e.Resources) <= MaxSliceResourcesPerApp && len(e.Nodes) <= MaxSliceNodesPerApp && len(e.Conditions) <= MaxSliceConditionsPerApp &&
		len(syncResults(e)) <= MaxSliceResourcesPerApp {
		return e
	}
	cut := &statusv1alpha1.Truncation{Reason: statusv1alpha1.TruncationExceedsSliceLimit}
	if e.Truncated != nil {
		*cut = *e.Truncated
	}
	out := e
	out.Truncated = cut
	if n := len(e.Resources); n > MaxSliceResourcesPerApp {
		ordered := problemsFirst(e.Resources, resourceProblem)
		out.Resources = sortedResources(ordered[:MaxSliceResourcesPerApp])
		cut.ResourcesOmitted += int32(n - MaxSliceResourcesPerApp)
	}
	if n := len(e.Nodes); n > MaxSliceNodesPerApp {
		ordered := problemsFirst(e.Nodes, nodeProblem)
		out.Nodes = sortedNodes(ordered[:MaxSliceNodesPerApp])
		cut.NodesOmitted += int32(n - MaxSliceNodesPerApp)
	}
	if n := len(e.Conditions); n > MaxSliceConditionsPerApp {
		out.Conditions = slices.Clone(e.Conditions[:MaxSliceConditionsPerApp]) // errors first already
		cut.ConditionsOmitted += int32(n - MaxSliceConditionsPerApp)
	}
	if n := len(syncResults(e)); n > MaxSliceResourcesPerApp {
		op, result := *e.Operation, *e.Operation.SyncResult
		result.Resources = problemsFirst(result.Resources, resultProblem)[:MaxSliceResourcesPerApp]
		op.SyncResult = &result
		out.Operation = &op
		cut.SyncResultsOmitted += int32(n - MaxSliceResourcesPerApp)
	}
	return out
}

// syncResults returns the resources of e's sync result; none without one.
func syncResults(e statusv1alpha1.AppStatus) []statusv1alpha1.ResourceResult {
	if e.Operation == nil || e.Operation.SyncResult == nil {
		return nil
	}
	return e.Operation.SyncResult.Resources
}

// resultProblem reports whether the sync of a resource did not succeed (SyncFailed,
// PruneSkipped: what Argo CD's CLI reports).
func resultProblem(r statusv1alpha1.ResourceResult) bool {
	return r.Status != "Synced" && r.Status != "Pruned"
}

// problemsFirst returns a copy of items, those with a problem first, in their order
// otherwise.
func problemsFirst[T any](items []T, problem func(T) bool) []T {
	out := slices.Clone(items)
	slices.SortStableFunc(out, func(a, b T) int { return cmp.Compare(rank(problem(a)), rank(problem(b))) })
	return out
}

// rank orders problems (true) before the rest.
func rank(problem bool) int {
	if problem {
		return 0
	}
	return 1
}

func nodeProblem(n statusv1alpha1.ResourceNode) bool {
	return n.Health != nil && n.Health.Status != argoapp.HealthHealthy
}

func resourceProblem(r statusv1alpha1.ResourceStatus) bool {
	return r.Status != argoapp.SyncSynced || (r.Health != nil && r.Health.Status != "" && r.Health.Status != argoapp.HealthHealthy)
}

func sortedNodes(nodes []statusv1alpha1.ResourceNode) []statusv1alpha1.ResourceNode {
	return sortedByRef(nodes, func(n statusv1alpha1.ResourceNode) objectRef {
		return objectRef{n.Group, n.Kind, n.Namespace, n.Name, n.Version}
	})
}

func sortedResources(resources []statusv1alpha1.ResourceStatus) []statusv1alpha1.ResourceStatus {
	return sortedByRef(resources, func(r statusv1alpha1.ResourceStatus) objectRef {
		return objectRef{r.Group, r.Kind, r.Namespace, r.Name, r.Version}
	})
}

// objectRef is what orders the nodes and the resources of an entry.
type objectRef struct{ group, kind, namespace, name, version string }

// sortedByRef returns a copy of items sorted by group, kind, namespace, name, then
// version; nil when there are none.
func sortedByRef[T any](items []T, refOf func(T) objectRef) []T {
	out := slices.Clone(items)
	slices.SortFunc(out, func(a, b T) int {
		x, y := refOf(a), refOf(b)
		return cmp.Or(compareRefs(x.group, x.kind, x.namespace, x.name, y.group, y.kind, y.namespace, y.name), strings.Compare(x.version, y.version))
	})
	if len(out) == 0 {
		return nil
	}
	return out
}

// fitCount returns the largest n in [0, total] for which fits(n) holds, assuming fits
// holds for every n below one for which it holds (a binary search).
func fitCount(total int, fits func(n int) bool) int {
	lo, hi := 0, total
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if fits(mid) {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}

// EntryKey returns the AppKey of an entry.
func EntryKey(e statusv1alpha1.AppStatus) string {
	return AppKey(e.Namespace, e.Name)
}

// Slice is the content of one ApplicationStatusSlice: its name and its apps, sorted by
// namespace and name.
type Slice struct {
	Name string
	Apps []statusv1alpha1.AppStatus
}

// SliceName returns the name of slice n of an addon: "<addon>-<n>".
func SliceName(addonName string, n int) string {
	return addonName + "-" + strconv.Itoa(n)
}

// PlanSlices assigns apps to slices, and returns the slices that must exist, by name,
// each with its apps sorted. onHub are the slices on the hub (their names and which apps
// they hold); apps are the current entries, each already fitted (FitEntry).
//
// The assignment is stable, so that one app's change rewrites one slice: an app stays
// in the slice that holds it; a slice whose apps grew past SliceTargetBytes keeps the
// apps that did not grow, then those that did, each in key order, as long as each fits
// (the first always) and the slice holds at most MaxAppsPerSlice, and hands the others on;
// apps without a slice go, in key order, to the first slice by name that stays within
// SliceFillBytes and MaxAppsPerSlice with them, else to a new slice with the lowest free number. A slice of the hub that is not
// returned is to be deleted. Slices are not repacked.
func PlanSlices(addonName string, onHub []Slice, apps []statusv1alpha1.AppStatus) []Slice {
	return PlanSlicesSized(addonName, onHub, apps, nil, nil)
}

// PlanSlicesSized is PlanSlices with the EntrySize of the apps by key (sizes), and of
// the apps of each slice on the hub by slice name and key (hubSizes), where the caller
// knows them; the others are computed.
func PlanSlicesSized(addonName string, onHub []Slice, apps []statusv1alpha1.AppStatus, sizes map[string]int, hubSizes map[string]map[string]int) []Slice {
	byKey := make(map[string]statusv1alpha1.AppStatus, len(apps))
	for _, e := range apps {
		byKey[EntryKey(e)] = e
	}
	known := make(map[string]int, len(apps))
	size := func(key string) int {
		if s, ok := known[key]; ok {
			return s
		}
		s, ok := sizes[key]
		if !ok {
			s = EntrySize(byKey[key])
		}
		known[key] = s
		return s
	}
	hubSize := func(slice string, e statusv1alpha1.AppStatus) int {
		if s, ok := hubSizes[slice][EntryKey(e)]; ok {
			return s
		}
		return EntrySize(e)
	}

	type plan struct {
		name  string
		keys  []string
		bytes int
	}
	hub := slices.Clone(onHub)
	slices.SortFunc(hub, func(a, b Slice) int { return compareSliceNames(a.Name, b.Name) })
	assigned := make(map[string]bool, len(apps))
	var plans []*plan
	var homeless []string
	for _, s := range hub {
		p := &plan{name: s.Name}
		var keys []string
		grew := map[string]bool{}
		for _, e := range s.Apps {
			if key := EntryKey(e); !assigned[key] {
				if _, ok := byKey[key]; ok {
					keys = append(keys, key)
					assigned[key] = true
					grew[key] = size(key) > hubSize(s.Name, e)
				}
			}
		}
		// The apps that did not grow first: when the slice overflows, an app that grew
		// moves, not its neighbours.
		slices.SortFunc(keys, func(a, b string) int {
			if grew[a] != grew[b] {
				if grew[b] {
					return -1
				}
				return 1
			}
			return strings.Compare(a, b)
		})
		for _, key := range keys {
			if len(p.keys) == 0 || (p.bytes+size(key) <= SliceTargetBytes && len(p.keys) < MaxAppsPerSlice) {
				p.keys, p.bytes = append(p.keys, key), p.bytes+size(key)
			} else {
				homeless = append(homeless, key)
			}
		}
		plans = append(plans, p)
	}
	for key := range byKey {
		if !assigned[key] {
			homeless = append(homeless, key)
		}
	}
	slices.Sort(homeless)
	for _, key := range homeless {
		placed := false
		for _, p := range plans {
			if len(p.keys) == 0 || (p.bytes+size(key) <= SliceFillBytes && len(p.keys) < MaxAppsPerSlice) {
				p.keys, p.bytes = append(p.keys, key), p.bytes+size(key)
				placed = true
				break
			}
		}
		if !placed {
			taken := make(map[string]bool, len(plans))
			for _, p := range plans {
				taken[p.name] = true
			}
			n := 0
			for taken[SliceName(addonName, n)] {
				n++
			}
			plans = append(plans, &plan{name: SliceName(addonName, n), keys: []string{key}, bytes: size(key)})
			slices.SortFunc(plans, func(a, b *plan) int { return compareSliceNames(a.name, b.name) })
		}
	}

	var out []Slice
	for _, p := range plans {
		if len(p.keys) == 0 {
			continue
		}
		slices.Sort(p.keys)
		s := Slice{Name: p.name}
		for _, key := range p.keys {
			s.Apps = append(s.Apps, byKey[key])
		}
		out = append(out, s)
	}
	return out
}

// compareSliceNames orders "<addon>-<n>" names by n, and other names after them by name.
func compareSliceNames(a, b string) int {
	na, errA := sliceNumber(a)
	nb, errB := sliceNumber(b)
	switch {
	case errA == nil && errB == nil:
		return cmp.Or(cmp.Compare(na, nb), strings.Compare(a, b))
	case errA == nil:
		return -1
	case errB == nil:
		return 1
	}
	return strings.Compare(a, b)
}

func sliceNumber(name string) (int, error) {
	i := strings.LastIndexByte(name, '-')
	if i < 0 {
		return 0, errors.New("no number")
	}
	return strconv.Atoi(name[i+1:])
}

// SliceObject returns the ApplicationStatusSlice of s for the agent of addon (its
// ManagedClusterAddOn, which owns the slice) to apply.
func SliceObject(addon *addonv1beta1.ManagedClusterAddOn, s Slice) *statusv1alpha1.ApplicationStatusSlice {
	return &statusv1alpha1.ApplicationStatusSlice{
		TypeMeta: metav1.TypeMeta{APIVersion: statusv1alpha1.GroupVersion.String(), Kind: statusv1alpha1.Kind},
		ObjectMeta: metav1.ObjectMeta{
			Name:      s.Name,
			Namespace: addon.Namespace,
			Labels:    map[string]string{statusv1alpha1.LabelAddon: addon.Name},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: addonv1beta1.GroupVersion.String(), Kind: "ManagedClusterAddOn",
				Name: addon.Name, UID: addon.UID,
			}},
		},
		FormatVersion: SliceFormatVersion,
		AppCount:      int32(len(s.Apps)),
		Apps:          s.Apps,
	}
}

// SameSlice reports whether the slice on the hub already is what SliceObject returns for
// desired: same apps, format, label and owner. It ignores everything the apiserver sets.
func SameSlice(onHub, desired *statusv1alpha1.ApplicationStatusSlice) bool {
	if onHub == nil || desired == nil {
		return onHub == desired
	}
	return onHub.FormatVersion == desired.FormatVersion && onHub.AppCount == desired.AppCount &&
		onHub.Labels[statusv1alpha1.LabelAddon] == desired.Labels[statusv1alpha1.LabelAddon] &&
		ownedBy(onHub, desired.OwnerReferences[0].UID) &&
		equality.Semantic.DeepEqual(onHub.Apps, desired.Apps)
}

func ownedBy(obj *statusv1alpha1.ApplicationStatusSlice, uid types.UID) bool {
	return slices.ContainsFunc(obj.OwnerReferences, func(r metav1.OwnerReference) bool { return r.UID == uid })
}

// KeepObservedAt returns the entries with the ObservedAt of the same app on the hub when
// its content did not change, so that an unchanged app encodes to identical bytes, also
// across an agent restart.
func KeepObservedAt(entries []statusv1alpha1.AppStatus, onHub []Slice) []statusv1alpha1.AppStatus {
	previous := map[string]statusv1alpha1.AppStatus{}
	for _, s := range onHub {
		for _, e := range s.Apps {
			previous[EntryKey(e)] = e
		}
	}
	out := slices.Clone(entries)
	for i := range out {
		p, ok := previous[EntryKey(out[i])]
		if !ok {
			continue
		}
		p.ObservedAt = out[i].ObservedAt
		if equality.Semantic.DeepEqual(p, out[i]) {
			out[i].ObservedAt = previous[EntryKey(out[i])].ObservedAt
		}
	}
	return out
}

// SliceDecodeError is a slice the hub cannot read.
type SliceDecodeError struct {
	Slice  string
	Reason error
	Detail string
}

func (e *SliceDecodeError) Error() string {
	return fmt.Sprintf("ApplicationStatusSlice %s: %v: %s", e.Slice, e.Reason, e.Detail)
}

func (e *SliceDecodeError) Unwrap() error { return e.Reason }

// DecodeSlices returns the apps of a cluster's slices by key. A slice of an unknown
// format version, over MaxSliceBytes or MaxAppsPerSlice, or with an app without identity is rejected whole
// (a *SliceDecodeError wrapping ErrUnsupportedVersion, ErrTooLarge or ErrMalformed). An
// app in two slices (an agent that stopped between two writes) is taken from the one
// observed last.
func DecodeSlices(objs []statusv1alpha1.ApplicationStatusSlice) (map[string]statusv1alpha1.AppStatus, error) {
	out := map[string]statusv1alpha1.AppStatus{}
	var errs []error
	for i := range objs {
		s := &objs[i]
		if s.FormatVersion != SliceFormatVersion {
			errs = append(errs, &SliceDecodeError{Slice: s.Name, Reason: ErrUnsupportedVersion, Detail: fmt.Sprintf("format version %d", s.FormatVersion)})
			continue
		}
		bytes := 0
		malformed := ""
		for _, e := range s.Apps {
			bytes += EntrySize(e)
			if e.Namespace == "" || e.Name == "" {
				malformed = "an app without namespace or name"
			}
		}
		if malformed != "" {
			errs = append(errs, &SliceDecodeError{Slice: s.Name, Reason: ErrMalformed, Detail: malformed})
			continue
		}
		if bytes > MaxSliceBytes {
			errs = append(errs, &SliceDecodeError{Slice: s.Name, Reason: ErrTooLarge, Detail: fmt.Sprintf("%d bytes of apps, more than %d", bytes, MaxSliceBytes)})
			continue
		}
		if len(s.Apps) > MaxAppsPerSlice {
			errs = append(errs, &SliceDecodeError{Slice: s.Name, Reason: ErrTooLarge, Detail: fmt.Sprintf("%d apps, more than %d", len(s.Apps), MaxAppsPerSlice)})
			continue
		}
		for _, e := range s.Apps {
			key := EntryKey(e)
			if previous, ok := out[key]; ok && previous.ObservedAt.After(e.ObservedAt.Time) {
				continue
			}
			out[key] = e
		}
	}
	return out, errors.Join(errs...)
}
