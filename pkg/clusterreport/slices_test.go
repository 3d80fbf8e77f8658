package clusterreport

import (
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	addonv1beta1 "open-cluster-management.io/api/addon/v1beta1"

	statusv1alpha1 "github.com/ocm-gitops/argocd-pull-addon/pkg/apis/argocdpull/v1alpha1"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
)

var sliceTestTime = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// appWithResources returns an app of n ConfigMaps, Synced and Healthy.
func appWithResources(name string, n int) App {
	app := App{Namespace: "argocd", Name: name, Sync: argoapp.SyncStatus{Status: "Synced", Revision: "abc"},
		Health: argoapp.HealthStatus{Status: "Healthy"}, ObservedAt: sliceTestTime}
	for i := range n {
		app.Resources = append(app.Resources, argoapp.ResourceStatus{
			Version: "v1", Kind: "ConfigMap", Namespace: "apps", Name: fmt.Sprintf("%s-config-%04d", name, i), Status: "Synced",
		})
	}
	return app
}

func TestEntryCarriesTheTree(t *testing.T) {
	app := App{
		Namespace: "argocd", Name: "web", ObservedAt: sliceTestTime,
		Sync:      argoapp.SyncStatus{Status: "Synced", Revisions: []string{"r1", "r2"}},
		Health:    argoapp.HealthStatus{Status: "Degraded", Message: "Deployment does not have minimum availability"},
		Operation: argoapp.OperationState{Phase: "Succeeded", StartedAt: "2026-01-01T00:00:00Z", FinishedAt: "2026-01-01T00:00:05Z", Message: "ok"},
		Conditions: []argoapp.Condition{
			{Type: "SharedResourceWarning", Message: "shared"},
			{Type: "SyncError", Message: "boom"},
		},
		Resources: []argoapp.ResourceStatus{
			{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "web", Name: "web", Status: "Synced"},
			{Version: "v1", Kind: "Service", Namespace: "web", Name: "web", Status: "Synced",
				Health: argoapp.HealthStatus{Status: "Healthy"}}, // persisted health wins
		},
	}
	tree := Tree{Nodes: []statusv1alpha1.ResourceNode{
		{Version: "v1", Kind: "Pod", Namespace: "web", Name: "web-5d9c-x2x",
			ParentRefs: []statusv1alpha1.ResourceRef{{Group: "apps", Kind: "ReplicaSet", Namespace: "web", Name: "web-5d9c"}},
			Health:     &statusv1alpha1.Health{Status: "Degraded", Message: `Back-off pulling image "fail:1"`}, Images: []string{"fail:1"}},
		{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "web", Name: "web",
			Health: &statusv1alpha1.Health{Status: "Degraded", Message: "Deployment does not have minimum availability"}, Images: []string{"fail:1"}},
		{Group: "apps", Version: "v1", Kind: "ReplicaSet", Namespace: "web", Name: "web-5d9c",
			ParentRefs: []statusv1alpha1.ResourceRef{{Group: "apps", Kind: "Deployment", Namespace: "web", Name: "web"}},
			Health:     &statusv1alpha1.Health{Status: "Progressing"}},
		{Version: "v1", Kind: "Service", Namespace: "web", Name: "web", Health: &statusv1alpha1.Health{Status: "Suspended"}},
	}}
	e := Entry(app, tree)

	if e.TreeSource != statusv1alpha1.TreeSourceArgoCDCache || e.TreeMessage != "" {
		t.Errorf("tree source %q %q", e.TreeSource, e.TreeMessage)
	}
	// Sorted by group, kind, namespace, name: the core group ("") first.
	if len(e.Resources) != 2 || e.Resources[0].Kind != "Service" || e.Resources[1].Kind != "Deployment" {
		t.Fatalf("resources %+v", e.Resources)
	}
	deployment, service := e.Resources[1], e.Resources[0]
	if h := deployment.Health; h == nil || h.Status != "Degraded" || h.Message != "Deployment does not have minimum availability" {
		t.Errorf("the Deployment's health comes from the tree: %+v", h)
	}
	if got := deployment.Images; len(got) != 1 || got[0] != "fail:1" {
		t.Errorf("images %v", got)
	}
	if h := service.Health; h == nil || h.Status != "Healthy" {
		t.Errorf("a persisted health is kept: %+v", h)
	}
	if len(e.Nodes) != 2 || e.Nodes[0].Kind != "Pod" || e.Nodes[1].Kind != "ReplicaSet" {
		t.Fatalf("nodes: the tree's children only, sorted: %+v", e.Nodes)
	}
	pod, rs := e.Nodes[0], e.Nodes[1]
	if pod.Health == nil || pod.Health.Status != "Degraded" || pod.Health.Message != `Back-off pulling image "fail:1"` ||
		pod.ParentRefs[0].Name != "web-5d9c" || pod.Images[0] != "fail:1" {
		t.Errorf("pod %+v", pod)
	}
	if rs.ParentRefs[0].Kind != "Deployment" || rs.Health.Status != "Progressing" {
		t.Errorf("replicaset %+v", rs)
	}
	if e.Conditions[0].Type != "SyncError" || e.Conditions[1].Type != "SharedResourceWarning" {
		t.Errorf("conditions, errors first: %+v", e.Conditions)
	}
	if e.Operation == nil || e.Operation.FinishedAt != "2026-01-01T00:00:05Z" || len(e.Sync.Revisions) != 2 {
		t.Errorf("operation %+v, sync %+v", e.Operation, e.Sync)
	}

	bare := Entry(app, Tree{Unavailable: "dial tcp: connection refused"})
	if bare.TreeSource != statusv1alpha1.TreeSourceNone || bare.TreeMessage != "dial tcp: connection refused" || len(bare.Nodes) != 0 {
		t.Errorf("without a tree: %q %q %v", bare.TreeSource, bare.TreeMessage, bare.Nodes)
	}
	if bare.Resources[1].Health != nil {
		t.Errorf("without a tree, no invented health: %+v", bare.Resources[0].Health)
	}
}

func TestEntryKeepsEveryResource(t *testing.T) {
	e := Entry(appWithResources("big", 1000), Tree{})
	if len(e.Resources) != 1000 {
		t.Fatalf("%d resources, want all 1000", len(e.Resources))
	}
	if FitEntry(e).Truncated != nil {
		t.Errorf("an app of 1000 resources fits a slice: %d bytes", EntrySize(e))
	}
}

func TestFitEntryCutsOnlyBeyondASliceAndSaysSo(t *testing.T) {
	app := appWithResources("huge", 6000)
	for i := range 50 {
		app.Resources[i].Status = "OutOfSync"
	}
	var tree Tree
	for i := range 3000 {
		tree.Nodes = append(tree.Nodes, statusv1alpha1.ResourceNode{Version: "v1", Kind: "Pod", Namespace: "apps", Name: fmt.Sprintf("pod-%05d", i),
			Health: &statusv1alpha1.Health{Status: "Healthy", Message: strings.Repeat("m", 300)}, Images: []string{"registry.example/app:1"}})
	}
	e := Entry(app, tree)
	if EntrySize(e) <= MaxSliceBytes {
		t.Fatalf("the test app must exceed a slice: %d bytes", EntrySize(e))
	}
	fitted := FitEntry(e)
	if size := EntrySize(fitted); size > MaxSliceBytes {
		t.Fatalf("fitted entry takes %d bytes, more than %d", size, MaxSliceBytes)
	}
	cut := fitted.Truncated
	if cut == nil || cut.Reason != statusv1alpha1.TruncationExceedsSliceLimit {
		t.Fatalf("a cut entry is marked: %+v", cut)
	}
	if int(cut.NodesOmitted)+len(fitted.Nodes) != 3000 || int(cut.ResourcesOmitted)+len(fitted.Resources) != 6000 {
		t.Errorf("counts: %d+%d nodes, %d+%d resources", cut.NodesOmitted, len(fitted.Nodes), cut.ResourcesOmitted, len(fitted.Resources))
	}
	outOfSync := 0
	for _, r := range fitted.Resources {
		if r.Status == "OutOfSync" {
			outOfSync++
		}
	}
	if outOfSync != 50 {
		t.Errorf("resources that are not Synced are kept first: %d of 50", outOfSync)
	}
}

// planOf returns the plan and the slices as the hub would hold them afterwards.
func applyPlan(onHub []Slice, apps []statusv1alpha1.AppStatus) []Slice {
	return PlanSlices("argocd-pull", onHub, apps)
}

func entries(apps ...App) []statusv1alpha1.AppStatus {
	var out []statusv1alpha1.AppStatus
	for _, a := range apps {
		out = append(out, FitEntry(Entry(a, Tree{})))
	}
	return out
}

// changedSlices returns the names of the slices that differ between two plans, with
// those created and deleted.
func changedSlices(before, after []Slice) []string {
	old := map[string]Slice{}
	for _, s := range before {
		old[s.Name] = s
	}
	var changed []string
	for _, s := range after {
		if o, ok := old[s.Name]; !ok || !equality.Semantic.DeepEqual(o.Apps, s.Apps) {
			changed = append(changed, s.Name)
		}
		delete(old, s.Name)
	}
	for name := range old {
		changed = append(changed, name+" (deleted)")
	}
	return changed
}

func TestPlanSlicesIsBoundedAndStable(t *testing.T) {
	// 40 apps of 100 resources: the fleet scenario, about 12 KiB each.
	var apps []App
	for i := range 40 {
		apps = append(apps, appWithResources(fmt.Sprintf("app-%02d", i), 100))
	}
	plan := applyPlan(nil, entries(apps...))
	if len(plan) < 2 {
		t.Fatalf("40 apps of 100 resources need several slices, got %d", len(plan))
	}
	seen := map[string]bool{}
	for i, s := range plan {
		if s.Name != SliceName("argocd-pull", i) {
			t.Errorf("slice %d is named %s", i, s.Name)
		}
		size := 0
		for _, e := range s.Apps {
			size += EntrySize(e)
			if seen[EntryKey(e)] {
				t.Errorf("%s is in two slices", EntryKey(e))
			}
			seen[EntryKey(e)] = true
			if len(e.Resources) != 100 {
				t.Errorf("%s carries %d resources", EntryKey(e), len(e.Resources))
			}
		}
		if size > SliceTargetBytes {
			t.Errorf("slice %s holds %d bytes, more than %d", s.Name, size, SliceTargetBytes)
		}
	}
	if len(seen) != 40 {
		t.Fatalf("%d apps in the slices, want 40", len(seen))
	}

	// The same apps in another order: the same slices.
	shuffled := entries(apps...)
	rand.New(rand.NewSource(1)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	if again := applyPlan(plan, shuffled); len(changedSlices(plan, again)) != 0 {
		t.Errorf("an unchanged state rewrites %v", changedSlices(plan, again))
	}

	// One app changes: one slice.
	changed := slicesCloneApps(apps)
	changed[17].Health = argoapp.HealthStatus{Status: "Degraded", Message: "pods not ready"}
	next := applyPlan(plan, entries(changed...))
	if got := changedSlices(plan, next); len(got) != 1 {
		t.Errorf("one app's change rewrites %v, want one slice", got)
	}

	// One app goes: its slice only. A new app: one slice.
	gone := append(slicesCloneApps(apps[:5]), apps[6:]...)
	if got := changedSlices(plan, applyPlan(plan, entries(gone...))); len(got) != 1 {
		t.Errorf("deleting one app rewrites %v", got)
	}
	added := append(slicesCloneApps(apps), appWithResources("zz-new", 3))
	if got := changedSlices(plan, applyPlan(plan, entries(added...))); len(got) != 1 {
		t.Errorf("adding one app rewrites %v", got)
	}

	// Every app of slice 0 goes: the slice is deleted, the others untouched.
	var rest []App
	inFirst := map[string]bool{}
	for _, e := range plan[0].Apps {
		inFirst[EntryKey(e)] = true
	}
	for _, a := range apps {
		if !inFirst[a.Key()] {
			rest = append(rest, a)
		}
	}
	if got := changedSlices(plan, applyPlan(plan, entries(rest...))); len(got) != 1 || got[0] != "argocd-pull-0 (deleted)" {
		t.Errorf("emptying a slice: %v, want it deleted and nothing else", got)
	}

	// An app grows past its slice's room: its slice and one other change.
	grown := slicesCloneApps(apps)
	grown[0] = appWithResources("app-00", 900)
	next = applyPlan(plan, entries(grown...))
	if got := changedSlices(plan, next); len(got) > 2 {
		t.Errorf("one app's growth rewrites %v, want at most two slices", got)
	}
	home := map[string]string{}
	for _, s := range plan {
		for _, e := range s.Apps {
			home[EntryKey(e)] = s.Name
		}
	}
	for _, s := range next {
		for _, e := range s.Apps {
			if home[EntryKey(e)] != s.Name && e.Name != "app-00" {
				t.Errorf("%s moved from %s to %s: only the app that grew may move", EntryKey(e), home[EntryKey(e)], s.Name)
			}
		}
	}
	for _, s := range next {
		size := 0
		for _, e := range s.Apps {
			size += EntrySize(e)
		}
		if size > SliceTargetBytes && len(s.Apps) > 1 {
			t.Errorf("slice %s holds %d apps in %d bytes", s.Name, len(s.Apps), size)
		}
	}
}

func slicesCloneApps(apps []App) []App {
	return append([]App(nil), apps...)
}

func TestPlanSlicesGivesALargeAppItsOwnSlice(t *testing.T) {
	apps := entries(appWithResources("a", 10), appWithResources("b", 1500), appWithResources("c", 10))
	if EntrySize(apps[1]) <= SliceTargetBytes {
		t.Fatalf("b must exceed the target: %d", EntrySize(apps[1]))
	}
	plan := applyPlan(nil, apps)
	for _, s := range plan {
		for _, e := range s.Apps {
			if e.Name == "b" && len(s.Apps) != 1 {
				t.Errorf("the large app shares slice %s with %d apps", s.Name, len(s.Apps)-1)
			}
		}
	}
}

func TestSliceObjectAndDecode(t *testing.T) {
	addon := &addonv1beta1.ManagedClusterAddOn{ObjectMeta: metav1.ObjectMeta{Name: "argocd-pull", Namespace: "cluster1", UID: "u1"}}
	plan := applyPlan(nil, entries(appWithResources("a", 2), appWithResources("b", 2)))
	obj := SliceObject(addon, plan[0])
	if obj.Namespace != "cluster1" || obj.Labels[statusv1alpha1.LabelAddon] != "argocd-pull" || obj.OwnerReferences[0].UID != "u1" ||
		obj.OwnerReferences[0].Kind != "ManagedClusterAddOn" || obj.FormatVersion != SliceFormatVersion || obj.AppCount != 2 {
		t.Errorf("slice object %+v", obj)
	}
	if !SameSlice(obj.DeepCopy(), obj) {
		t.Error("a slice is the same as its copy")
	}
	other := obj.DeepCopy()
	other.Apps[1].Health = &statusv1alpha1.Health{Status: "Degraded"}
	if SameSlice(other, obj) {
		t.Error("a changed app makes another slice")
	}

	newer := obj.DeepCopy()
	newer.Name = "argocd-pull-1"
	newer.Apps = newer.Apps[:1]
	newer.Apps[0].ObservedAt = metav1.NewTime(sliceTestTime.Add(time.Minute))
	newer.Apps[0].Sync.Status = "OutOfSync"
	unknown := obj.DeepCopy()
	unknown.Name = "argocd-pull-2"
	unknown.FormatVersion = 2
	apps, err := DecodeSlices([]statusv1alpha1.ApplicationStatusSlice{*obj, *newer, *unknown})
	if len(apps) != 2 || apps["argocd/a"].Sync.Status != "OutOfSync" {
		t.Errorf("decoded %v: an app in two slices is taken from the newer", apps)
	}
	var de *SliceDecodeError
	if !errors.As(err, &de) || !errors.Is(err, ErrUnsupportedVersion) || de.Slice != "argocd-pull-2" {
		t.Errorf("unknown format version: %v", err)
	}
}

func TestKeepObservedAt(t *testing.T) {
	before := entries(appWithResources("a", 2), appWithResources("b", 2))
	onHub := applyPlan(nil, before)
	later := appWithResources("a", 2)
	later.ObservedAt = sliceTestTime.Add(time.Hour)
	changed := appWithResources("b", 3)
	changed.ObservedAt = sliceTestTime.Add(time.Hour)
	got := KeepObservedAt(entries(later, changed), onHub)
	if !got[0].ObservedAt.Time.Equal(sliceTestTime) {
		t.Errorf("an unchanged app keeps its time: %v", got[0].ObservedAt)
	}
	if !got[1].ObservedAt.Time.Equal(sliceTestTime.Add(time.Hour)) {
		t.Errorf("a changed app takes the new time: %v", got[1].ObservedAt)
	}
}
