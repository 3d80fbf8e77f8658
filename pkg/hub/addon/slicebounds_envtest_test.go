package addon

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	statusv1alpha1 "github.com/ocm-gitops/argocd-pull-addon/pkg/apis/argocdpull/v1alpha1"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/clusterreport"
	"github.com/ocm-gitops/argocd-pull-addon/test/testenv"
)

// TestAgentCannotFillTheHub impersonates a cluster's agent (the user and groups of its
// KubeClient registration, bound to HubRole by grantHubPermissions) against a real
// apiserver with the generated CRD: the apiserver refuses a slice with a message or a
// list beyond the encoder's bounds, accepts the largest slices the agent's encoder
// (pkg/clusterreport) writes, and refuses a slice beyond the cluster's quota.
//
// envtest runs no kube-controller-manager: the test plays its resourcequota controller
// once, writing the quota's status (hard, and the slices counted, none), from which the
// apiserver's quota admission counts each create, as on a real hub.
func TestAgentCannotFillTheHub(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	admin := kubernetes.NewForConfigOrDie(env.Config)
	const cluster, addonName, quota = "c1", "argocd-pull", 7
	createNamespaces(ctx, t, env, cluster)
	mca := createMCA(ctx, t, env, cluster, addonName)
	a := &AgentAddon{opts: Options{AddonName: addonName, Settings: Settings{MaxStatusSlicesPerCluster: quota}}, hubKube: admin}
	grantAgent(ctx, t, a, mca)

	// The quota the addon keeps: owned by the addon (disabling it removes the quota), and
	// counted as the resourcequota controller would.
	q, err := admin.CoreV1().ResourceQuotas(cluster).Get(ctx, SliceQuotaName(addonName), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the addon keeps no slice quota in the cluster namespace: %v", err)
	}
	if hard := q.Spec.Hard[SliceQuotaResource]; hard.Value() != quota {
		t.Errorf("the quota bounds %s to %s, want %d", SliceQuotaResource, hard.String(), quota)
	}
	if len(q.OwnerReferences) != 1 || q.OwnerReferences[0].UID != mca.UID {
		t.Errorf("the quota's owners %v, want the ManagedClusterAddOn %s", q.OwnerReferences, mca.UID)
	}
	q.Status = corev1.ResourceQuotaStatus{Hard: q.Spec.Hard, Used: corev1.ResourceList{SliceQuotaResource: resource.MustParse("0")}}
	if _, err := admin.CoreV1().ResourceQuotas(cluster).UpdateStatus(ctx, q, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The agent of c1, exactly as its client certificate presents it.
	slicesOf := dynamic.NewForConfigOrDie(agentConfig(env, cluster, addonName)).Resource(schema.GroupVersionResource{
		Group: statusv1alpha1.GroupVersion.Group, Version: statusv1alpha1.GroupVersion.Version, Resource: statusv1alpha1.Resource,
	}).Namespace(cluster)
	apply := func(s *statusv1alpha1.ApplicationStatusSlice) error {
		content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(s)
		if err != nil {
			t.Fatal(err)
		}
		_, err = slicesOf.Apply(ctx, s.Name, &unstructured.Unstructured{Object: content}, metav1.ApplyOptions{FieldManager: "argocd-pull-agent", Force: true})
		return err
	}
	sliceOf := func(name string, apps ...statusv1alpha1.AppStatus) *statusv1alpha1.ApplicationStatusSlice {
		return clusterreport.SliceObject(mca, clusterreport.Slice{Name: name, Apps: apps})
	}
	observed := time.Date(2026, 11, 27, 23, 0, 0, 0, time.UTC)
	small := func(name string) statusv1alpha1.AppStatus {
		return clusterreport.FitEntry(clusterreport.Entry(clusterreport.App{Namespace: "argocd", Name: name,
			Sync: argoapp.SyncStatus{Status: "Synced"}, Health: argoapp.HealthStatus{Status: "Healthy"}, ObservedAt: observed}, clusterreport.Tree{}))
	}

	t.Run("a slice beyond the encoder's bounds is refused", func(t *testing.T) {
		huge := strings.Repeat("x", 900*1000) // 0.9 MB
		for what, change := range map[string]func(e *statusv1alpha1.AppStatus){
			"a condition message of 0.9 MB": func(e *statusv1alpha1.AppStatus) {
				e.Conditions = []statusv1alpha1.Condition{{Type: "SyncError", Message: huge}}
			},
			"a health message of 0.9 MB":    func(e *statusv1alpha1.AppStatus) { e.Health.Message = huge },
			"an operation message of 2 KiB": func(e *statusv1alpha1.AppStatus) { e.Operation = &statusv1alpha1.OperationState{Message: huge[:2048]} },
			"a resource name of 254 characters": func(e *statusv1alpha1.AppStatus) {
				e.Resources = []statusv1alpha1.ResourceStatus{{Version: "v1", Kind: "ConfigMap", Name: huge[:254]}}
			},
			"a resource health message of 0.9 MB": func(e *statusv1alpha1.AppStatus) {
				e.Resources = []statusv1alpha1.ResourceStatus{{Version: "v1", Kind: "ConfigMap", Name: "c", Health: &statusv1alpha1.Health{Message: huge}}}
			},
			"a tree message of 0.9 MB":     func(e *statusv1alpha1.AppStatus) { e.TreeSource, e.TreeMessage = statusv1alpha1.TreeSourceNone, huge },
			"a tree source of its own":     func(e *statusv1alpha1.AppStatus) { e.TreeSource = "Forged" },
			"a condition type of 65 bytes": func(e *statusv1alpha1.AppStatus) { e.Conditions = []statusv1alpha1.Condition{{Type: huge[:65]}} },
			"more conditions than the encoder writes": func(e *statusv1alpha1.AppStatus) {
				e.Conditions = make([]statusv1alpha1.Condition, clusterreport.MaxSliceConditionsPerApp+1)
			},
			"a diff's state longer than an app's diff budget": func(e *statusv1alpha1.AppStatus) {
				e.Diffs = []statusv1alpha1.ResourceDiff{{Kind: "ConfigMap", Name: "c", LiveState: strings.Repeat("x", clusterreport.MaxDiffBytesPerApp+1)}}
			},
			"more diffs than the encoder writes": func(e *statusv1alpha1.AppStatus) {
				e.Diffs = make([]statusv1alpha1.ResourceDiff, clusterreport.MaxDiffsPerApp+1)
			},
			"a diffs message of 2 KiB": func(e *statusv1alpha1.AppStatus) { e.DiffsMessage = huge[:2048] },
			"more history than the encoder writes": func(e *statusv1alpha1.AppStatus) {
				e.History = make([]statusv1alpha1.RevisionHistory, clusterreport.MaxHistoryEntries+1)
			},
			"a history source's details of 4,097 characters": func(e *statusv1alpha1.AppStatus) {
				e.History = []statusv1alpha1.RevisionHistory{{Source: &statusv1alpha1.HistorySource{RepoURL: "r", Details: huge[:clusterreport.MaxHistorySourceDetailsBytes+1]}}}
			},
			"a history source's repoURL of 1,025 characters": func(e *statusv1alpha1.AppStatus) {
				e.History = []statusv1alpha1.RevisionHistory{{Sources: []statusv1alpha1.HistorySource{{RepoURL: huge[:clusterreport.MaxHistorySourceBytes+1]}}}}
			},
			"a history initiator of 254 characters": func(e *statusv1alpha1.AppStatus) {
				e.History = []statusv1alpha1.RevisionHistory{{InitiatedBy: &statusv1alpha1.HistoryInitiator{Username: huge[:254]}}}
			},
			"more images than the encoder writes": func(e *statusv1alpha1.AppStatus) {
				e.Resources = []statusv1alpha1.ResourceStatus{{Kind: "Pod", Name: "p", Images: make([]string, clusterreport.MaxImagesPerResource+1)}}
			},
		} {
			e := small("hostile")
			change(&e)
			if err := apply(sliceOf(clusterreport.SliceName(addonName, 0), e)); !apierrors.IsInvalid(err) {
				t.Errorf("a slice with %s: %v, want Invalid", what, err)
			}
		}
		apps := make([]statusv1alpha1.AppStatus, 0, clusterreport.MaxAppsPerSlice+1)
		for i := range clusterreport.MaxAppsPerSlice + 1 {
			apps = append(apps, small(fmt.Sprintf("app-%04d", i)))
		}
		if err := apply(sliceOf(clusterreport.SliceName(addonName, 0), apps...)); !apierrors.IsInvalid(err) {
			t.Errorf("a slice of %d apps: %v, want Invalid", len(apps), err)
		}
	})

	written := 0
	t.Run("the largest slices the encoder writes are accepted", func(t *testing.T) {
		var entries []statusv1alpha1.AppStatus
		// Every string past its bound, and every list past its count: the encoder cuts
		// each, then the whole to MaxSliceBytes.
		entries = append(entries, clusterreport.FitEntry(clusterreport.Entry(longestApp("longest", observed), longestTree())))
		// The most resources an app keeps: tiny ones (no sync status), within MaxSliceBytes.
		many := clusterreport.App{Namespace: "argocd", Name: "many-resources", Sync: argoapp.SyncStatus{Status: "Synced"}, ObservedAt: observed}
		for i := range clusterreport.MaxSliceResourcesPerApp + 10 {
			many.Resources = append(many.Resources, argoapp.ResourceStatus{Version: "v1", Kind: "C", Name: fmt.Sprintf("r%d", i)})
		}
		entries = append(entries, clusterreport.FitEntry(clusterreport.Entry(many, clusterreport.Tree{})))
		if got := len(entries[1].Resources); got != clusterreport.MaxSliceResourcesPerApp {
			t.Errorf("the app keeps %d resources, want the most, %d", got, clusterreport.MaxSliceResourcesPerApp)
		}
		// The most tree nodes and conditions an app keeps.
		nodes := clusterreport.App{Namespace: "argocd", Name: "many-nodes", Sync: argoapp.SyncStatus{Status: "Synced"}, ObservedAt: observed}
		for i := range clusterreport.MaxSliceConditionsPerApp + 10 {
			nodes.Conditions = append(nodes.Conditions, argoapp.Condition{Type: "SharedResourceWarning", Message: fmt.Sprintf("w%d", i)})
		}
		var tree clusterreport.Tree
		for i := range clusterreport.MaxSliceNodesPerApp + 10 {
			tree.Nodes = append(tree.Nodes, statusv1alpha1.ResourceNode{Version: "v1", Kind: "P", Name: fmt.Sprintf("n%d", i)})
		}
		entries = append(entries, clusterreport.FitEntry(clusterreport.Entry(nodes, tree)))
		if got := len(entries[2].Nodes); got != clusterreport.MaxSliceNodesPerApp {
			t.Errorf("the app keeps %d nodes, want the most, %d", got, clusterreport.MaxSliceNodesPerApp)
		}
		if got := len(entries[2].Conditions); got != clusterreport.MaxSliceConditionsPerApp {
			t.Errorf("the app keeps %d conditions, want the most, %d", got, clusterreport.MaxSliceConditionsPerApp)
		}
		// The longest state the encoder carries: one that takes an app's whole diff
		// budget; the next OutOfSync resource's states are left out, and counted.
		differing := clusterreport.App{Namespace: "argocd", Name: "most-diffs", Sync: argoapp.SyncStatus{Status: "OutOfSync"}, ObservedAt: observed}
		var states clusterreport.States
		for _, name := range []string{"a", "b"} {
			differing.Resources = append(differing.Resources, argoapp.ResourceStatus{Version: "v1", Kind: "ConfigMap", Namespace: "web", Name: name, Status: "OutOfSync"})
			state := `{"kind":"ConfigMap","data":{"k":"` + strings.Repeat("x", clusterreport.MaxDiffBytesPerApp) + `"}}`
			states.Diffs = append(states.Diffs, statusv1alpha1.ResourceDiff{Kind: "ConfigMap", Namespace: "web", Name: name, LiveState: state[:clusterreport.MaxDiffBytesPerApp-3] + `"}}`})
		}
		entries = append(entries, clusterreport.FitEntry(clusterreport.Entry(differing, clusterreport.Tree{States: states})))
		if d := entries[3]; len(d.Diffs) != 1 || len(d.Diffs[0].LiveState) != clusterreport.MaxDiffBytesPerApp || d.DiffsOmitted != 1 {
			t.Errorf("the app keeps %d diffs (%d omitted), want one state of %d bytes", len(d.Diffs), d.DiffsOmitted, clusterreport.MaxDiffBytesPerApp)
		}
		// The most apps a slice holds: the smallest entries the encoder writes (about 100
		// bytes), planned as the agent does.
		for i := range clusterreport.MaxAppsPerSlice + 1 {
			entries = append(entries, clusterreport.FitEntry(clusterreport.Entry(clusterreport.App{Namespace: "a", Name: fmt.Sprint(i), ObservedAt: observed}, clusterreport.Tree{})))
		}
		plan := clusterreport.PlanSlices(addonName, nil, entries)
		fullest := 0
		for _, s := range plan {
			fullest = max(fullest, len(s.Apps))
		}
		if fullest < 900 {
			t.Errorf("the fullest slice holds %d apps, want the most that fit in %d bytes, more than 900", fullest, clusterreport.SliceFillBytes)
		}
		for _, s := range plan {
			bytes := 0
			for _, e := range s.Apps {
				bytes += clusterreport.EntrySize(e)
			}
			if err := apply(clusterreport.SliceObject(mca, s)); err != nil {
				t.Errorf("the agent's slice %s (%d apps, %d bytes) is refused: %v", s.Name, len(s.Apps), bytes, err)
				continue
			}
			written++
		}
		if entries[0].Truncated == nil {
			t.Error("the longest app was not cut")
		}
		if h := entries[0].History; len(h) < 2 || h[len(h)-1].Source == nil || h[len(h)-1].Source.Details == "" {
			t.Errorf("the longest app carries %d history entries, the newest without its source at its bounds", len(h))
		}
	})

	t.Run("a slice beyond the cluster's quota is refused", func(t *testing.T) {
		for n := written; n < quota; n++ {
			if err := apply(sliceOf(fmt.Sprintf("extra-%d", n), small("extra"))); err != nil {
				t.Fatalf("slice %d of %d: %v", n+1, quota, err)
			}
		}
		err := apply(sliceOf("one-too-many", small("extra")))
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "exceeded quota") {
			t.Errorf("slice %d of a quota of %d: %v, want Forbidden: exceeded quota", quota+1, quota, err)
		}
		// An update of a slice it holds is no new object: the quota does not refuse it.
		if err := apply(sliceOf(fmt.Sprintf("extra-%d", quota-1), small("extra"), small("extra-2"))); err != nil {
			t.Errorf("an update of a slice within the quota: %v", err)
		}
	})
}

// longestApp is an app whose every string is longer than the encoder keeps, and whose
// every list is longer than a slice holds.
func longestApp(name string, observed time.Time) clusterreport.App {
	long := strings.Repeat("é", 3000) // 6,000 bytes
	app := clusterreport.App{
		Namespace: "argocd", Name: name, HubNamespace: long, HubName: long, ApplicationSet: long, ManifestWork: long,
		Sync:       argoapp.SyncStatus{Status: long, Revision: long},
		Health:     argoapp.HealthStatus{Status: long, Message: long},
		Operation:  argoapp.OperationState{Phase: long, StartedAt: long, FinishedAt: long, Message: long},
		ObservedAt: observed,
	}
	for i := range clusterreport.MaxRevisions + 1 {
		app.Sync.Revisions = append(app.Sync.Revisions, fmt.Sprint(i)+long)
	}
	for i := range clusterreport.MaxSliceConditionsPerApp + 1 {
		app.Conditions = append(app.Conditions, argoapp.Condition{Type: fmt.Sprint(i) + long + "Error", Message: long})
	}
	for i := range 100 {
		app.Resources = append(app.Resources, argoapp.ResourceStatus{
			Group: long, Version: long, Kind: long, Namespace: long, Name: fmt.Sprint(i) + long, Status: long,
			Health: argoapp.HealthStatus{Status: long, Message: long},
		})
	}
	// The history: more entries than it carries, the shown strings too long, and sources
	// (one per entry, or many) at their bounds, which it carries whole.
	atBound := func(n int) string { return strings.Repeat("é", n/2) + strings.Repeat("x", n%2) }
	source := argoapp.HistorySource{
		RepoURL: atBound(clusterreport.MaxHistorySourceBytes), Path: atBound(clusterreport.MaxHistorySourceBytes),
		Chart: atBound(clusterreport.MaxHistorySourceBytes), TargetRevision: atBound(clusterreport.MaxNameBytes),
		Ref: atBound(clusterreport.MaxNameBytes), Name: atBound(clusterreport.MaxNameBytes), Details: atBound(clusterreport.MaxHistorySourceDetailsBytes),
	}
	for i := range clusterreport.MaxHistoryEntries + 1 {
		h := argoapp.RevisionHistory{ID: int64(i), DeployedAt: long, DeployStartedAt: long, InitiatedBy: argoapp.OperationInitiator{Username: long}}
		if i%2 == 0 {
			h.Revision, h.Source = atBound(clusterreport.MaxNameBytes), &source
		} else {
			for range clusterreport.MaxRevisions {
				h.Revisions = append(h.Revisions, atBound(clusterreport.MaxNameBytes))
				h.Sources = append(h.Sources, source)
			}
		}
		app.History = append(app.History, h)
	}
	return app
}

// longestTree is a tree of nodes with every string longer than the encoder keeps, and
// more parents and images than a slice holds.
func longestTree() clusterreport.Tree {
	long := strings.Repeat("é", 3000)
	var tree clusterreport.Tree
	for i := range 20 {
		n := statusv1alpha1.ResourceNode{Group: long, Version: long, Kind: long, Namespace: long, Name: fmt.Sprint(i) + long,
			Health: &statusv1alpha1.Health{Status: long, Message: long}}
		for j := range clusterreport.MaxParentRefsPerNode + 1 {
			n.ParentRefs = append(n.ParentRefs, statusv1alpha1.ResourceRef{Group: long, Kind: long, Namespace: long, Name: fmt.Sprint(j) + long})
		}
		for j := range clusterreport.MaxImagesPerResource + 1 {
			n.Images = append(n.Images, fmt.Sprint(j)+long)
		}
		tree.Nodes = append(tree.Nodes, n)
	}
	return tree
}
