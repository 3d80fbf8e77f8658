package appsetreport

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	appsv1alpha1 "github.com/ocm-gitops/argocd-pull-addon/pkg/apis/apps/v1alpha1"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/observed"
)

func state(sync, health string) observed.State {
	return observed.State{SyncStatus: sync, HealthStatus: health}
}

func TestCountSummary(t *testing.T) {
	tests := []struct {
		name   string
		states []observed.State
		want   appsv1alpha1.ReportSummary
	}{
		{"none", nil, appsv1alpha1.ReportSummary{Clusters: "0", Synced: "0", NotSynced: "0", Healthy: "0", NotHealthy: "0", InProgress: "0", Stale: "0"}},
		{"three clusters: one SyncError, two Synced and Progressing",
			[]observed.State{state("OutOfSync", "Missing"), state("Synced", "Progressing"), state("Synced", "Progressing")},
			appsv1alpha1.ReportSummary{Clusters: "3", Synced: "2", NotSynced: "1", Healthy: "0", NotHealthy: "3", InProgress: "2", Stale: "0"}},
		{"not reported counts as Unknown: not synced, not healthy",
			[]observed.State{{}, state("Synced", "Healthy")},
			appsv1alpha1.ReportSummary{Clusters: "2", Synced: "1", NotSynced: "1", Healthy: "1", NotHealthy: "1", InProgress: "0", Stale: "0"}},
		{"Degraded, Suspended and OutOfSync are not healthy / not synced",
			[]observed.State{state("OutOfSync", "Degraded"), state("Synced", "Suspended"), state("Unknown", "Healthy")},
			appsv1alpha1.ReportSummary{Clusters: "3", Synced: "1", NotSynced: "2", Healthy: "1", NotHealthy: "2", InProgress: "0", Stale: "0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var apps []ClusterApp
			for i, s := range tt.states {
				apps = append(apps, ClusterApp{Cluster: string(rune('a' + i)), HubApp: "app", ManifestWork: "w", State: s})
			}
			got := RenderStatuses("ns", apps).Summary
			if got != tt.want {
				t.Errorf("summary = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestThreeClustersOneSyncError(t *testing.T) {
	forbidden := "Failed sync attempt: one or more objects failed to apply, reason: services is forbidden: User \"system:serviceaccount:argocd:argocd-application-controller\" cannot create resource \"services\" in API group \"\" in the namespace \"guestbook\"," + strings.Repeat("deployments.apps is forbidden ", 40)
	deployed := []argoapp.ResourceStatus{
		{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "guestbook", Name: "web", Status: "Synced", Health: argoapp.HealthStatus{Status: "Progressing"}},
		{Version: "v1", Kind: "Service", Namespace: "guestbook", Name: "web", Status: "Synced", Health: argoapp.HealthStatus{Status: "Healthy"}},
	}
	failed := observed.State{
		SyncStatus: "OutOfSync", HealthStatus: "Missing", SyncRevision: "abc", OperationPhase: "Failed", OperationStart: "2026-01-01T00:00:00Z",
		Reported: true,
		Resources: []argoapp.ResourceStatus{
			{Version: "v1", Kind: "Service", Namespace: "guestbook", Name: "web", Status: "OutOfSync", Health: argoapp.HealthStatus{Status: "Missing"}},
			{Version: "v1", Kind: "ConfigMap", Namespace: "guestbook", Name: "only-east", Status: "Synced"},
		},
		Conditions: []argoapp.Condition{{Type: "SyncError", Message: forbidden}, {Type: "OrphanedResourceWarning", Message: "w"}},
	}
	progressing := observed.State{SyncStatus: "Synced", HealthStatus: "Progressing", SyncRevision: "abc", Reported: true, Resources: deployed}
	apps := []ClusterApp{
		{Cluster: "west", HubApp: "west-guestbook", ManifestWork: "west-guestbook-1a2b3", State: progressing},
		{Cluster: "east", HubApp: "east-guestbook", ManifestWork: "east-guestbook-4c5d6", State: failed},
		{Cluster: "north", HubApp: "north-guestbook", ManifestWork: "north-guestbook-7e8f9", State: progressing},
	}
	got := RenderStatuses("openshift-gitops", apps)

	wantSummary := appsv1alpha1.ReportSummary{Clusters: "3", Synced: "2", NotSynced: "1", Healthy: "0", NotHealthy: "3", InProgress: "2", Stale: "0"}
	if got.Summary != wantSummary {
		t.Errorf("summary = %+v, want %+v", got.Summary, wantSummary)
	}
	wantResources := []appsv1alpha1.ResourceRef{
		{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "guestbook", Name: "web"},
		{APIVersion: "v1", Kind: "ConfigMap", Namespace: "guestbook", Name: "only-east"},
		{APIVersion: "v1", Kind: "Service", Namespace: "guestbook", Name: "web"}, // deployed on west and north
	}
	if !equality.Semantic.DeepEqual(got.Resources, wantResources) {
		t.Errorf("resources = %+v, want %+v", got.Resources, wantResources)
	}
	if len(got.ClusterConditions) != 3 || got.ClusterConditions[0].Cluster != "east" {
		t.Fatalf("cluster conditions not sorted by cluster: %+v", got.ClusterConditions)
	}
	east := got.ClusterConditions[0]
	if east.App != "openshift-gitops/east-guestbook/east/east-guestbook-4c5d6" {
		t.Errorf("app = %q", east.App)
	}
	if east.SyncStatus != "OutOfSync" || east.HealthStatus != "Missing" || east.OperationStatePhase != "Failed" ||
		east.SyncRevision != "abc" || east.OperationStateStartedAt != "2026-01-01T00:00:00Z" {
		t.Errorf("east = %+v", east)
	}
	if len(east.Conditions) != 1 || east.Conditions[0].Type != "SyncError" {
		t.Fatalf("east conditions = %+v, want the SyncError only", east.Conditions)
	}
	msg := east.Conditions[0].Message
	if len(msg) != MaxConditionMessageBytes || !strings.HasSuffix(msg, "...") || !strings.HasPrefix(msg, "Failed sync attempt") {
		t.Errorf("message of %d bytes not cut to %d with ...: %q", len(msg), MaxConditionMessageBytes, msg)
	}
}

func TestAppField(t *testing.T) {
	if got := AppField("argocd", "c1-app", "c1", "c1-app-abcde"); got != "argocd/c1-app/c1/c1-app-abcde" {
		t.Errorf("AppField = %q", got)
	}
}

func TestUnreportedIsUnknownAndStaleIsMarked(t *testing.T) {
	since := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	got := RenderStatuses("ns", []ClusterApp{
		{Cluster: "a", HubApp: "x", ManifestWork: "x-1", State: observed.State{}},
		{Cluster: "b", HubApp: "y", ManifestWork: "y-1", State: state("Synced", "Healthy"),
			Stale: &observed.Staleness{Since: since, Status: metav1.ConditionUnknown, Reason: "Lease expired"}},
	})
	a, b := got.ClusterConditions[0], got.ClusterConditions[1]
	if a.SyncStatus != "Unknown" || a.HealthStatus != "Unknown" {
		t.Errorf("unreported = %+v, want Unknown", a)
	}
	if b.SyncStatus != "Synced" || len(b.Conditions) != 1 || b.Conditions[0].Type != observed.ConditionStale ||
		!strings.Contains(b.Conditions[0].Message, "2026-01-02T03:04:05Z") {
		t.Errorf("stale entry = %+v", b)
	}
	if got.Summary.Stale != "1" {
		t.Errorf("stale count = %q", got.Summary.Stale)
	}
}

func TestRejectedReportIsMarked(t *testing.T) {
	got := RenderStatuses("ns", []ClusterApp{
		{Cluster: "a", HubApp: "x", ManifestWork: "x-1", State: state("Synced", "Healthy"),
			Rejected: &observed.Rejection{Err: errors.New("decode report: report too large"), LastGood: true}},
		{Cluster: "b", HubApp: "y", ManifestWork: "y-1", State: state("Synced", "Healthy")},
	})
	a, b := got.ClusterConditions[0], got.ClusterConditions[1]
	if a.SyncStatus != "Synced" || len(a.Conditions) != 1 || a.Conditions[0].Type != observed.ConditionInvalidReport ||
		!strings.Contains(a.Conditions[0].Message, "report too large") || !strings.Contains(a.Conditions[0].Message, "last good") {
		t.Errorf("rejected entry = %+v", a)
	}
	if len(b.Conditions) != 0 {
		t.Errorf("another cluster's entry = %+v", b)
	}
}

func TestHostingApplicationSetLabelValue(t *testing.T) {
	tests := []struct{ ns, name, want string }{
		{"openshift-gitops", "guestbook", "openshift-gitops.guestbook"},
		{"ns", strings.Repeat("a", 70), "ns." + strings.Repeat("a", 60)},
		{strings.Repeat("n", 61), "-x", strings.Repeat("n", 61)}, // "<61 n>.-" loses its ending
	}
	for _, tt := range tests {
		got := HostingApplicationSetLabelValue(tt.ns, tt.name)
		if got != tt.want || len(got) > 63 {
			t.Errorf("HostingApplicationSetLabelValue(%q, %q) = %q, want %q", tt.ns, tt.name, got, tt.want)
		}
	}
}

func TestNotReportedIsMarked(t *testing.T) {
	got := RenderStatuses("ns", []ClusterApp{
		{Cluster: "a", HubApp: "x", ManifestWork: "x-1", State: state("OutOfSync", "Degraded"),
			NotReported: &observed.Absence{Reason: observed.ReasonNamespaceNotWatched, Cluster: "a", Addon: "argocd-pull",
				Namespace: "openshift-gitops", Name: "x", ManifestWork: "x-1", WatchNamespaces: []string{"argocd"}}},
		{Cluster: "b", HubApp: "y", ManifestWork: "y-1", State: state("Synced", "Healthy")},
	})
	a, b := got.ClusterConditions[0], got.ClusterConditions[1]
	if a.SyncStatus != "OutOfSync" || len(a.Conditions) != 1 || a.Conditions[0].Type != observed.ConditionNotReported ||
		!strings.HasPrefix(a.Conditions[0].Message, "The agent of cluster a watches the namespaces [argocd]; this application was delivered to namespace openshift-gitops") {
		t.Errorf("entry of an app its agent does not see = %+v", a)
	}
	if len(b.Conditions) != 0 {
		t.Errorf("another cluster's entry = %+v", b)
	}
}

// TestFirstResources: the report's resources are the first MaxResources of the union
// that the apps deployed, in order, each once, whatever the order of the apps and
// resources; the Missing ones are left out.
func TestFirstResources(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var apps []ClusterApp
	union := map[appsv1alpha1.ResourceRef]bool{}
	for c := range 300 {
		var resources []argoapp.ResourceStatus
		for i := range 8 {
			// Every app its own namespace, some resources shared by every app, some Missing.
			r := argoapp.ResourceStatus{Group: []string{"", "apps", "rbac.authorization.k8s.io"}[i%3], Version: "v1", Kind: []string{"ConfigMap", "Deployment", "Role"}[i%3],
				Namespace: fmt.Sprintf("app-%03d", rng.IntN(300)), Name: fmt.Sprintf("r-%d", i)}
			if i == 7 {
				r.Namespace = "shared"
			}
			if rng.IntN(10) == 0 {
				r.Health.Status = HealthMissing
			} else {
				union[resourceRef(r)] = true
			}
			resources = append(resources, r)
		}
		rng.Shuffle(len(resources), func(i, j int) { resources[i], resources[j] = resources[j], resources[i] })
		apps = append(apps, ClusterApp{Cluster: fmt.Sprintf("cluster-%03d", c), State: observed.State{Resources: resources}})
	}
	var want []appsv1alpha1.ResourceRef
	for r := range union {
		want = append(want, r)
	}
	slices.SortFunc(want, compareResources)
	if len(want) <= MaxResources {
		t.Fatalf("the union has %d resources: the test needs more than %d", len(want), MaxResources)
	}
	want = want[:MaxResources]
	for range 3 {
		if got := firstResources(apps, MaxResources); !slices.Equal(got, want) {
			t.Fatalf("%d resources, want the first %d of %d:\n%v\nwant\n%v", len(got), len(want), len(union), got[:5], want[:5])
		}
		rng.Shuffle(len(apps), func(i, j int) { apps[i], apps[j] = apps[j], apps[i] })
	}
	if got := firstResources(nil, MaxResources); got != nil {
		t.Errorf("no apps: %v", got)
	}
}

// BenchmarkRenderStatuses measures the render of the report of 1,000 clusters whose apps
// deploy 20 resources each in namespaces of their own (20,000 resources in the union, of
// which the report keeps MaxResources), which the controller pays at most once per write
// interval of the report.
func BenchmarkRenderStatuses(b *testing.B) {
	var apps []ClusterApp
	for c := range 1000 {
		var resources []argoapp.ResourceStatus
		for i := range 20 {
			resources = append(resources, argoapp.ResourceStatus{Version: "v1", Kind: "ConfigMap", Namespace: fmt.Sprintf("app-%04d", c), Name: fmt.Sprintf("config-%02d", i), Status: "Synced"})
		}
		apps = append(apps, ClusterApp{Cluster: fmt.Sprintf("cluster-%04d", c), HubApp: "app", ManifestWork: "work",
			State: observed.State{SyncStatus: "Synced", HealthStatus: "Healthy", Resources: resources}})
	}
	b.ReportAllocs()
	for b.Loop() {
		RenderStatuses("argocd", apps)
	}
}
