// Package appsetreport keeps one MulticlusterApplicationSetReport per ApplicationSet that
// has pulled Applications: the status of each of its Applications on its cluster, the
// union of the resources they deployed, and a summary (docs/pull-model.md, section 5).
// It is event-driven: a change to a ManifestWork's feedback, to an agent's
// report, to the ApplicationSet's Applications or to a cluster's availability re-renders
// the affected reports only, coalesced per report, and a report is written only when its
// content changed.
package appsetreport

import (
	"cmp"
	"container/heap"
	"slices"
	"strconv"
	"strings"

	appsv1alpha1 "github.com/ocm-gitops/argocd-pull-addon/pkg/apis/apps/v1alpha1"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/clusterreport"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/observed"
)

// Bounds of a report, so that an ApplicationSet over many clusters stays far below the
// object size limit of etcd.
const (
	// MaxConditionMessageBytes cuts each error message of a cluster entry; a cut message
	// ends in "...".
	MaxConditionMessageBytes = 512
	// MaxConditionsPerCluster caps the error conditions of one cluster entry.
	MaxConditionsPerCluster = 5
	// MaxResources caps the union of the resources.
	MaxResources = 1000
	// maxLabelValueLength is the API's limit on a label value.
	maxLabelValueLength = 63
)

// HealthMissing is Argo CD's health of a resource that does not exist on the cluster:
// one that failed to deploy. Such a resource is left out of the report's resources.
const HealthMissing = "Missing"

// ClusterApp is what the report knows of one pulled Application of the ApplicationSet.
type ClusterApp struct {
	// Cluster is the managed cluster, whose namespace holds the ManifestWork.
	Cluster string
	// HubApp is the hub Application's name, in the ApplicationSet's namespace.
	HubApp string
	// ManifestWork is the work's name.
	ManifestWork string
	// State is the merged feedback and agent report.
	State observed.State
	// Stale is non-nil when the cluster's addon is unavailable.
	Stale *observed.Staleness
	// Rejected is non-nil when the cluster's latest report of the app could not be
	// decoded; State then holds the last good one.
	Rejected *observed.Rejection
	// NotReported is non-nil when the agent's report has no entry for the app although
	// its work is applied; State then holds the feedback only.
	NotReported *observed.Absence
	// Passing: the app is in a state that its cluster leaves on its own
	// (argoapp.PassingState), and no one on the hub waits for it (the hub Application
	// holds no operation). The report's write may wait for it (settleWait).
	Passing bool
}

// AppField returns the `app` field of a cluster entry:
// "<ApplicationSet namespace>/<hub app>/<cluster namespace>/<ManifestWork>".
func AppField(appSetNamespace, hubApp, cluster, work string) string {
	return appSetNamespace + "/" + hubApp + "/" + cluster + "/" + work
}

// HostingApplicationSetLabelValue returns "<namespace>.<name>" cut to 63 characters, the
// value of the report's hosting-applicationset label. A cut value that would end in a
// character a label value cannot end in loses it.
func HostingApplicationSetLabelValue(namespace, name string) string {
	v := namespace + "." + name
	if len(v) > maxLabelValueLength {
		v = v[:maxLabelValueLength]
	}
	return strings.TrimRight(v, "-_.")
}

// RenderStatuses renders the report's content from the ApplicationSet's apps. The
// result is deterministic: entries sorted by cluster and app, resources sorted.
func RenderStatuses(appSetNamespace string, apps []ClusterApp) appsv1alpha1.AppConditions {
	out := appsv1alpha1.AppConditions{ClusterConditions: make([]appsv1alpha1.ClusterCondition, 0, len(apps))}
	for _, a := range apps {
		out.ClusterConditions = append(out.ClusterConditions, clusterCondition(appSetNamespace, a))
	}
	slices.SortFunc(out.ClusterConditions, func(a, b appsv1alpha1.ClusterCondition) int {
		return cmp.Or(cmp.Compare(a.Cluster, b.Cluster), cmp.Compare(a.App, b.App))
	})
	out.Resources = firstResources(apps, MaxResources)
	out.Summary = CountSummary(out.ClusterConditions, apps)
	return out
}

// firstResources returns the first max resources, in their order (compareResources), of
// the union of the resources that apps deployed. Each app usually deploys its own (in a
// namespace of its own), so the union grows with the clusters, far past max: it keeps
// the max first ones seen so far in a heap, the last of them on top, and never holds or
// sorts more.
func firstResources(apps []ClusterApp, max int) []appsv1alpha1.ResourceRef {
	if max <= 0 {
		return nil
	}
	var first resourceHeap
	kept := map[appsv1alpha1.ResourceRef]struct{}{}
	apiVersions := map[[2]string]string{}
	for _, a := range apps {
		for _, r := range a.State.Resources {
			if r.Health.Status == HealthMissing {
				continue // failed to deploy: its cluster's error says why
			}
			apiVersion, ok := apiVersions[[2]string{r.Group, r.Version}]
			if !ok {
				apiVersion = resourceRef(r).APIVersion
				apiVersions[[2]string{r.Group, r.Version}] = apiVersion
			}
			ref := appsv1alpha1.ResourceRef{APIVersion: apiVersion, Kind: r.Kind, Namespace: r.Namespace, Name: r.Name}
			if _, ok := kept[ref]; ok {
				continue
			}
			switch {
			case len(first) < max:
				heap.Push(&first, ref)
			case compareResources(ref, first[0]) < 0:
				// A resource once dropped is after every one kept since: it is not kept again.
				delete(kept, first[0])
				first[0] = ref
				heap.Fix(&first, 0)
			default:
				continue
			}
			kept[ref] = struct{}{}
		}
	}
	slices.SortFunc(first, compareResources)
	return first
}

// compareResources orders the resources of a report: by apiVersion, kind, namespace
// and name.
func compareResources(a, b appsv1alpha1.ResourceRef) int {
	return cmp.Or(cmp.Compare(a.APIVersion, b.APIVersion), cmp.Compare(a.Kind, b.Kind),
		cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
}

// resourceHeap is a heap of resources whose top is the last one (compareResources).
type resourceHeap []appsv1alpha1.ResourceRef

func (h resourceHeap) Len() int           { return len(h) }
func (h resourceHeap) Less(i, j int) bool { return compareResources(h[i], h[j]) > 0 }
func (h resourceHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *resourceHeap) Push(x any)        { *h = append(*h, x.(appsv1alpha1.ResourceRef)) }
func (h *resourceHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// clusterCondition renders one cluster entry.
func clusterCondition(appSetNamespace string, a ClusterApp) appsv1alpha1.ClusterCondition {
	s := a.State
	return appsv1alpha1.ClusterCondition{
		Cluster:                 a.Cluster,
		App:                     AppField(appSetNamespace, a.HubApp, a.Cluster, a.ManifestWork),
		SyncStatus:              cmp.Or(s.SyncStatus, observed.StatusUnknown),
		HealthStatus:            cmp.Or(s.HealthStatus, observed.StatusUnknown),
		SyncRevision:            s.SyncRevision,
		SyncRevisions:           slices.Clone(s.SyncRevisions),
		OperationStatePhase:     s.OperationPhase,
		OperationStateStartedAt: s.OperationStart,
		Conditions:              reportedConditions(a),
	}
}

// reportedConditions are the conditions of a's entry in the report: Argo CD's errors, at
// most MaxConditionsPerCluster, each cut to MaxConditionMessageBytes, then the hub's
// notes that the cluster's state is stale, or its report rejected or missing the app.
func reportedConditions(a ClusterApp) []appsv1alpha1.Condition {
	var conditions []appsv1alpha1.Condition
	for _, cond := range a.State.Conditions {
		if !clusterreport.IsErrorCondition(cond.Type) || len(conditions) == MaxConditionsPerCluster {
			continue
		}
		conditions = append(conditions, appsv1alpha1.Condition{
			Type: cond.Type, Message: clusterreport.TruncateMessage(cond.Message, MaxConditionMessageBytes),
		})
	}
	if a.Stale != nil {
		stale := a.Stale.Condition(a.Cluster)
		conditions = append(conditions, appsv1alpha1.Condition{Type: stale.Type, Message: stale.Message})
	}
	if a.Rejected != nil {
		invalid := a.Rejected.Condition(a.Cluster)
		conditions = append(conditions, appsv1alpha1.Condition{Type: invalid.Type, Message: invalid.Message})
	}
	if a.NotReported != nil {
		absent := a.NotReported.Condition()
		conditions = append(conditions, appsv1alpha1.Condition{Type: absent.Type, Message: absent.Message})
	}
	return conditions
}

// resourceRef names a resource the way the report does.
func resourceRef(r argoapp.ResourceStatus) appsv1alpha1.ResourceRef {
	apiVersion := r.Version
	if r.Group != "" {
		apiVersion = r.Group + "/" + r.Version
	}
	return appsv1alpha1.ResourceRef{APIVersion: apiVersion, Kind: r.Kind, Name: r.Name, Namespace: r.Namespace}
}

// CountSummary counts the entries by the reference's rules: synced counts Synced,
// notSynced every other sync status; healthy counts Healthy, notHealthy every other
// health status (Progressing and Unknown included); inProgress counts Progressing. stale
// counts the entries of unavailable clusters.
func CountSummary(conditions []appsv1alpha1.ClusterCondition, apps []ClusterApp) appsv1alpha1.ReportSummary {
	var synced, healthy, inProgress, stale int
	for _, c := range conditions {
		if c.SyncStatus == argoapp.SyncSynced {
			synced++
		}
		if c.HealthStatus == argoapp.HealthHealthy {
			healthy++
		}
		if c.HealthStatus == argoapp.HealthProgressing {
			inProgress++
		}
	}
	for _, a := range apps {
		if a.Stale != nil {
			stale++
		}
	}
	n := len(conditions)
	return appsv1alpha1.ReportSummary{
		Clusters:   strconv.Itoa(n),
		Synced:     strconv.Itoa(synced),
		NotSynced:  strconv.Itoa(n - synced),
		Healthy:    strconv.Itoa(healthy),
		NotHealthy: strconv.Itoa(n - healthy),
		InProgress: strconv.Itoa(inProgress),
		Stale:      strconv.Itoa(stale),
	}
}
