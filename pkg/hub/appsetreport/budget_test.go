package appsetreport

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	appsv1alpha1 "github.com/ocm-gitops/argocd-pull-addon/pkg/apis/apps/v1alpha1"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/clusterreport"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/observed"
)

// defaultBudgetBytes is DefaultSettings().BudgetBytes, as a constant.
const defaultBudgetBytes = 1 << 20

// etcdObjectLimit is etcd's default --max-request-bytes, the most one object may take.
const etcdObjectLimit = 3 << 19 // 1.5 MiB

// longError returns an Argo CD error message of about n bytes, distinct per cluster.
func longError(kind, cluster string, n int) string {
	msg := "Failed sync attempt to 8f2c1e5d9a7b6c4d3e2f1a0b9c8d7e6f5a4b3c2d on " + cluster + " (" + kind + "): one or more objects failed to apply, reason: "
	for i := 0; len(msg) < n; i++ {
		msg += fmt.Sprintf(`configmaps "web-%d" is forbidden: User "system:serviceaccount:argocd:argocd-application-controller" cannot create resource "configmaps" in API group "" in the namespace "guestbook", `, i)
	}
	return msg
}

// fleetApps returns the apps of an ApplicationSet on n clusters: those for which
// failing says so fail to sync with two errors of 4 KiB and a warning; the others are
// Synced and Healthy. Each app deploys the same 20 resources and one of its own.
func fleetApps(n int, failing func(i int) bool) []ClusterApp {
	apps := make([]ClusterApp, 0, n)
	for i := range n {
		cluster := fmt.Sprintf("cluster-%04d", i)
		hubApp := "guestbook-" + cluster
		s := observed.State{
			SyncStatus: "Synced", HealthStatus: "Healthy", SyncRevision: "8f2c1e5d9a7b6c4d3e2f1a0b9c8d7e6f5a4b3c2d",
			OperationPhase: "Succeeded", OperationStart: "2026-01-01T00:00:00Z", Reported: true,
		}
		for j := range 20 {
			s.Resources = append(s.Resources, argoapp.ResourceStatus{Group: "apps", Version: "v1", Kind: "Deployment",
				Namespace: "guestbook", Name: fmt.Sprintf("web-%d", j), Status: "Synced", Health: argoapp.HealthStatus{Status: "Healthy"}})
		}
		s.Resources = append(s.Resources, argoapp.ResourceStatus{Version: "v1", Kind: "ConfigMap", Namespace: "guestbook",
			Name: "settings-" + cluster, Status: "Synced", Health: argoapp.HealthStatus{Status: "Healthy"}})
		if failing(i) {
			s.SyncStatus, s.HealthStatus, s.OperationPhase = "OutOfSync", "Degraded", "Failed"
			s.Conditions = []argoapp.Condition{
				{Type: "SyncError", Message: longError("sync", cluster, 4096)},
				{Type: "ComparisonError", Message: longError("comparison", cluster, 4096)},
				{Type: "OrphanedResourceWarning", Message: "1 orphaned resource"},
			}
		}
		apps = append(apps, ClusterApp{Cluster: cluster, HubApp: hubApp,
			ManifestWork: argoapp.ManifestWorkName(hubApp, types.UID(fmt.Sprintf("%08x-1111-2222-3333-444455556666", i))), State: s})
	}
	return apps
}

// lowered is e after the steps lower.
func lowered(e appsv1alpha1.ClusterCondition, lower ...func(*appsv1alpha1.ClusterCondition) bool) appsv1alpha1.ClusterCondition {
	for _, l := range lower {
		l(&e)
	}
	return e
}

// testAppSet is the ApplicationSet that owns the reports of these tests.
func testAppSet() *unstructured.Unstructured {
	appSet := argoapp.NewApplicationSet()
	appSet.SetNamespace("openshift-gitops")
	appSet.SetName("guestbook")
	appSet.SetUID("6f1c2b3a-1111-2222-3333-444455556666")
	return appSet
}

// renderForBudget renders the report of apps at a fixed write time, and the budget
// of bytes for the report of testAppSet.
func renderForBudget(t testing.TB, apps []ClusterApp, bytes int64) (appsv1alpha1.AppConditions, Budget) {
	t.Helper()
	appSet := testAppSet()
	statuses := RenderStatuses(appSet.GetNamespace(), apps)
	statuses.LastUpdateTime = ptr.To(metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)))
	envelope, err := reportEnvelopeBytes(types.NamespacedName{Namespace: appSet.GetNamespace(), Name: appSet.GetName()}, appSet)
	if err != nil {
		t.Fatal(err)
	}
	return statuses, Budget{Bytes: bytes, Envelope: envelope}
}

// reportBytes is the size of the report of testAppSet with statuses as the controller
// applies it, plus the reserve for what the apiserver adds: what the budget bounds.
func reportBytes(t testing.TB, statuses appsv1alpha1.AppConditions) int {
	t.Helper()
	appSet := testAppSet()
	digest, err := statusesDigest(statuses)
	if err != nil {
		t.Fatal(err)
	}
	data, err := reportApplyBody(types.NamespacedName{Namespace: appSet.GetNamespace(), Name: appSet.GetName()}, appSet, statuses,
		digest, statuses.Summary.Truncated != nil)
	if err != nil {
		t.Fatal(err)
	}
	return len(data) + MetadataReserveBytes
}

// withoutTruncation is the summary without summary.truncated: the counts.
func withoutTruncation(s appsv1alpha1.ReportSummary) appsv1alpha1.ReportSummary {
	s.Truncated = nil
	return s
}

// TestReportOfTwoThousandClustersWithLongErrorsStaysWithinItsBudget is the issue's
// case: 2,000 clusters, each failing with two errors of 4 KiB. At full detail the report
// is past etcd's limit; cut, it fits 1 MiB with exact counts, every cluster keeps its
// entry and its first error, and the summary says what was cut. Half of them failing:
// the healthy clusters lose their revisions and operation state first, and keep their
// entries; the failing ones keep their first error, their revisions and operation state.
func TestReportOfTwoThousandClustersWithLongErrorsStaysWithinItsBudget(t *testing.T) {
	tests := []struct {
		name    string
		failing func(i int) bool
		// oneError keeps only the first error of each app, the case.
		oneError bool
		check    func(t *testing.T, full, cut appsv1alpha1.AppConditions)
	}{
		{"every cluster failing with one error", func(int) bool { return true }, true, func(t *testing.T, full, cut appsv1alpha1.AppConditions) {
			tr := cut.Summary.Truncated
			if tr.Clusters != 0 || tr.Conditions != 0 || tr.Details != 0 || tr.Messages != 2000 || tr.Resources != 1000 {
				t.Errorf("truncated %+v: want the 2,000 messages shortened and the 1,000 resources left out, nothing else", tr)
			}
			for i, e := range cut.ClusterConditions {
				f := full.ClusterConditions[i]
				if !equality.Semantic.DeepEqual(lowered(f, shortenMessages(ShortMessageBytes)), e) &&
					!equality.Semantic.DeepEqual(lowered(f, shortenMessages(ShortestMessageBytes)), e) {
					t.Fatalf("entry %s: %+v, want it whole but its message, shortened to %d or %d bytes", e.Cluster, e, ShortMessageBytes, ShortestMessageBytes)
				}
			}
		}},
		{"every cluster failing", func(int) bool { return true }, false, func(t *testing.T, full, cut appsv1alpha1.AppConditions) {
			tr := cut.Summary.Truncated
			if tr.Clusters != 0 || tr.Conditions != 2000 || tr.Details != 0 || tr.Resources != 1000 {
				t.Errorf("truncated %+v: want no entry left out, the 2,000 conditions after each first error and the 1,000 resources", tr)
			}
			for i, e := range cut.ClusterConditions {
				first := full.ClusterConditions[i].Conditions[0]
				if len(e.Conditions) != 1 || e.Conditions[0].Type != "SyncError" || len(e.Conditions[0].Message) < ShortestMessageBytes ||
					!strings.HasPrefix(first.Message, strings.TrimSuffix(e.Conditions[0].Message, clusterreport.Ellipsis)) {
					t.Fatalf("entry %s: conditions %+v, want its SyncError, shortened to at least %d bytes", e.Cluster, e.Conditions, ShortestMessageBytes)
				}
			}
		}},
		{"half failing: the healthy lose detail first", func(i int) bool { return i%2 == 0 }, false, func(t *testing.T, full, cut appsv1alpha1.AppConditions) {
			tr := cut.Summary.Truncated
			if tr.Clusters != 0 || tr.Details != 1000 || tr.Resources != 1000 {
				t.Errorf("truncated %+v: want no entry left out, the details of the 1,000 healthy entries and the 1,000 resources cut", tr)
			}
			for i, e := range cut.ClusterConditions {
				wanted := full.ClusterConditions[i]
				if e.HealthStatus == "Healthy" {
					wanted.SyncRevision, wanted.OperationStatePhase, wanted.OperationStateStartedAt = "", "", ""
					if !equality.Semantic.DeepEqual(e, wanted) {
						t.Fatalf("healthy entry %s: %+v, want it without its details", e.Cluster, e)
					}
					continue
				}
				if !hasDetails(e) || len(e.Conditions) == 0 || e.Conditions[0].Type != "SyncError" || len(e.Conditions[0].Message) < ShortMessageBytes {
					t.Fatalf("failing entry %s: %+v, want its details and its SyncError of at least %d bytes", e.Cluster, e, ShortMessageBytes)
				}
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			apps := fleetApps(2000, tt.failing)
			for i := range apps {
				if tt.oneError && len(apps[i].State.Conditions) > 0 {
					apps[i].State.Conditions = apps[i].State.Conditions[:1]
				}
			}
			full, budget := renderForBudget(t, apps, defaultBudgetBytes)
			cut := CutToBudget(full, budget)
			fullBytes, cutBytes := reportBytes(t, full), reportBytes(t, cut)
			t.Logf("2,000 clusters: %d bytes at full detail, %d bytes cut to the budget of %d: %s",
				fullBytes, cutBytes, budget.Bytes, cut.Summary.Truncated.Message)

			if fullBytes <= etcdObjectLimit {
				t.Fatalf("the full report takes %d bytes; the test needs one past etcd's limit (%d)", fullBytes, etcdObjectLimit)
			}
			if cutBytes > defaultBudgetBytes {
				t.Fatalf("the cut report takes %d bytes, over its budget of %d", cutBytes, defaultBudgetBytes)
			}
			if got, want := withoutTruncation(cut.Summary), full.Summary; got != want {
				t.Errorf("summary %+v, want the exact counts %+v", got, want)
			}
			if cut.Summary.Clusters != "2000" || len(cut.ClusterConditions) != 2000 {
				t.Errorf("%s clusters counted, %d entries; want 2000 and 2000", cut.Summary.Clusters, len(cut.ClusterConditions))
			}
			tr := cut.Summary.Truncated
			if tr == nil || tr.BudgetBytes != defaultBudgetBytes || !strings.Contains(tr.Message, "budget of 1048576 bytes") ||
				!strings.Contains(tr.Message, "The summary counts every cluster") {
				t.Fatalf("truncated = %+v", tr)
			}
			tt.check(t, full, cut)

			// Deterministic: the apps in another order give the same report.
			shuffled := slices.Clone(apps)
			slices.Reverse(shuffled)
			again, _ := renderForBudget(t, shuffled, defaultBudgetBytes)
			if !equality.Semantic.DeepEqual(CutToBudget(again, budget), cut) {
				t.Fatal("the cut depends on the order of the apps")
			}
		})
	}
}

// TestCutToBudgetOrder checks the order of the cut on a small report: for each step,
// the budget is the size of the report as that step leaves it, so the cut must stop
// there, every earlier step done and no later one begun.
func TestCutToBudgetOrder(t *testing.T) {
	apps := []ClusterApp{
		{Cluster: "a-healthy", HubApp: "x", ManifestWork: "x-1", State: observed.State{SyncStatus: "Synced", HealthStatus: "Healthy",
			SyncRevision: "abc", OperationPhase: "Succeeded", OperationStart: "2026-01-01T00:00:00Z"},
			Stale: &observed.Staleness{Since: metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)), Status: metav1.ConditionUnknown, Reason: "Lease"}},
		{Cluster: "b-failing", HubApp: "y", ManifestWork: "y-1", State: observed.State{SyncStatus: "OutOfSync", HealthStatus: "Degraded",
			SyncRevision: "abc", OperationPhase: "Failed", Conditions: []argoapp.Condition{
				{Type: "SyncError", Message: longError("sync", "b", 600)}, {Type: "ComparisonError", Message: longError("comparison", "b", 600)}}}},
		{Cluster: "c-progressing", HubApp: "z", ManifestWork: "z-1", State: observed.State{SyncStatus: "Synced", HealthStatus: "Progressing",
			SyncRevision: "abc", OperationPhase: "Running"},
			NotReported: &observed.Absence{Reason: observed.ReasonNoAgentReport, Cluster: "c-progressing", Addon: "argocd-pull", Namespace: "argocd", Name: "z"}},
	}
	for i := range 10 {
		apps[0].State.Resources = append(apps[0].State.Resources, argoapp.ResourceStatus{Version: "v1", Kind: "ConfigMap", Namespace: "guestbook",
			Name: "configmap-with-a-long-name-for-the-budget-test-" + strconv.Itoa(i)})
	}
	full, budget := renderForBudget(t, apps, 0)
	h, f, p := full.ClusterConditions[0], full.ClusterConditions[1], full.ClusterConditions[2]
	if len(p.Conditions) != 1 || len(p.Conditions[0].Message) <= ShortMessageBytes || len(f.Conditions) != 2 {
		t.Fatalf("the progressing entry needs one message over %d bytes, the failing one two errors: %+v, %+v", ShortMessageBytes, p, f)
	}
	short, shortest := shortenMessages(ShortMessageBytes), shortenMessages(ShortestMessageBytes)
	h1 := lowered(h, dropConditionsAndDetails)
	f1, f2 := lowered(f, short), lowered(f, short, keepFirstCondition)
	f3 := lowered(f2, shortest)
	p1 := lowered(p, short)
	p3 := lowered(p1, shortest)
	entries := func(e ...appsv1alpha1.ClusterCondition) []appsv1alpha1.ClusterCondition { return e }
	tests := []struct {
		name      string
		resources int
		entries   []appsv1alpha1.ClusterCondition
		// truncation: nil when the report fits as rendered.
		truncation *appsv1alpha1.ReportTruncation
		says       string
	}{
		{"fits: as rendered", 10, entries(h, f, p), nil, ""},
		// Its 6 resources take more than summary.truncated.
		{"the resource list first, from its end", 4, entries(h, f, p),
			&appsv1alpha1.ReportTruncation{Resources: 6}, "the report leaves out 6 resources."},
		{"then the conditions and details of the Synced and Healthy entries", 0, entries(h1, f, p),
			&appsv1alpha1.ReportTruncation{Resources: 10, Conditions: 1, Details: 1},
			"leaves out 1 conditions and 10 resources and omits the revisions and operation state of 1 entries"},
		{"then the messages to 256 bytes, the other entries first", 0, entries(h1, f, p1),
			&appsv1alpha1.ReportTruncation{Resources: 10, Conditions: 1, Details: 1, Messages: 1}, "shortens 1 condition messages"},
		{"then the failing entries' messages", 0, entries(h1, f1, p1),
			&appsv1alpha1.ReportTruncation{Resources: 10, Conditions: 1, Details: 1, Messages: 3}, ""},
		{"then the conditions after the first", 0, entries(h1, f2, p1),
			&appsv1alpha1.ReportTruncation{Resources: 10, Conditions: 2, Details: 1, Messages: 2}, ""},
		{"then the messages to 128 bytes, the other entries first", 0, entries(h1, f2, p3),
			&appsv1alpha1.ReportTruncation{Resources: 10, Conditions: 2, Details: 1, Messages: 2}, ""},
		{"then the failing entries' messages to 128 bytes", 0, entries(h1, f3, p3),
			&appsv1alpha1.ReportTruncation{Resources: 10, Conditions: 2, Details: 1, Messages: 2}, ""},
		{"then the Synced and Healthy entries", 0, entries(f3, p3),
			&appsv1alpha1.ReportTruncation{Resources: 10, Clusters: 1, Conditions: 1, Messages: 2}, "leaves out 1 of its 3 cluster entries"},
		{"then the details of the others, the other entries first", 0, entries(f3, lowered(p3, dropDetails)),
			&appsv1alpha1.ReportTruncation{Resources: 10, Clusters: 1, Conditions: 1, Messages: 2, Details: 1}, ""},
		{"then the failing entries' details", 0, entries(lowered(f3, dropDetails), lowered(p3, dropDetails)),
			&appsv1alpha1.ReportTruncation{Resources: 10, Clusters: 1, Conditions: 1, Messages: 2, Details: 2}, ""},
		{"then the other entries", 0, entries(lowered(f3, dropDetails)),
			&appsv1alpha1.ReportTruncation{Resources: 10, Clusters: 2, Conditions: 1, Messages: 1, Details: 1}, ""},
		{"the failing entries last", 0, nil,
			&appsv1alpha1.ReportTruncation{Resources: 10, Clusters: 3}, "leaves out 3 of its 3 cluster entries and 10 resources"},
	}
	// The budgets below have 5 digits, as the largest summary.truncated of this one.
	cutter := newCutter(full, Budget{Bytes: 99999, Envelope: budget.Envelope})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := full
			want.Resources, want.ClusterConditions = full.Resources[:tt.resources], tt.entries
			// The budget that this step's report just fits.
			limit := statusesBytes(want)
			if tt.truncation != nil {
				limit = cutter.base + listBytes("resources", tt.resources, jsonBytes(want.Resources)-2-max(tt.resources-1, 0)) +
					listBytes("clusterConditions", len(tt.entries), jsonBytes(tt.entries)-2-max(len(tt.entries)-1, 0))
			}
			b := budget
			b.Bytes = int64(limit + b.Envelope)
			if len(strconv.FormatInt(b.Bytes, 10)) != 5 {
				t.Fatalf("a budget of %d bytes: the test counts summary.truncated with 5 digits", b.Bytes)
			}
			got := CutToBudget(full, b)
			if size := statusesBytes(got); size > limit {
				t.Errorf("%d bytes, over the limit of %d", size, limit)
			}
			if withoutTruncation(got.Summary) != full.Summary {
				t.Errorf("summary %+v, want the exact %+v", got.Summary, full.Summary)
			}
			tr := got.Summary.Truncated
			got.Summary.Truncated = nil
			if !equality.Semantic.DeepEqual(got, want) {
				t.Errorf("resources %d, entries\n%+v\nwant %d,\n%+v", len(got.Resources), got.ClusterConditions, tt.resources, tt.entries)
			}
			if tt.truncation == nil {
				if tr != nil {
					t.Errorf("truncated %+v for a report that fits", tr)
				}
				return
			}
			if tr == nil {
				t.Fatal("no summary.truncated")
			}
			wantTr := *tt.truncation
			wantTr.BudgetBytes, wantTr.Message = b.Bytes, tr.Message
			if *tr != wantTr {
				t.Errorf("truncated %+v, want %+v", *tr, wantTr)
			}
			if !strings.Contains(tr.Message, tt.says) || !strings.HasPrefix(tr.Message, fmt.Sprintf("To stay within its budget of %d bytes, ", b.Bytes)) {
				t.Errorf("message %q does not say %q", tr.Message, tt.says)
			}
		})
	}
}

// TestSizesAddUp checks the arithmetic of the cut against the encoder: the statuses'
// size is that of their parts, and the report's that of its envelope and statuses.
func TestSizesAddUp(t *testing.T) {
	for _, n := range []int{0, 1, 3} {
		full, budget := renderForBudget(t, fleetApps(n, func(i int) bool { return i == 1 }), defaultBudgetBytes)
		c := newCutter(full, budget)
		bare := full
		bare.Resources, bare.ClusterConditions = nil, nil
		if got, want := statusesBytes(bare)+listBytes("resources", c.resources, c.resourcesSum)+listBytes("clusterConditions", c.entriesN, c.entriesSum),
			statusesBytes(full); got != want {
			t.Errorf("%d apps: the parts add up to %d bytes, the statuses take %d", n, got, want)
		}
		// The envelope counts the annotation of a cut report, which one at full detail lacks.
		uncut := len(`,"` + AnnotationTruncated + `":"true"`)
		if got, want := reportBytes(t, full), budget.Envelope+statusesBytes(full)-uncut; got != want {
			t.Errorf("%d apps: the report takes %d bytes, envelope and statuses less the cut's annotation %d", n, got, want)
		}
		if c.total() < statusesBytes(full) {
			t.Errorf("%d apps: the cut counts %d bytes for statuses of %d: the largest summary.truncated is left out", n, c.total(), statusesBytes(full))
		}
	}
}

// BenchmarkCutToBudget measures the cut of the report of 2,000 failing clusters, which
// the controller pays at most once per write interval of the report.
func BenchmarkCutToBudget(b *testing.B) {
	full, budget := renderForBudget(b, fleetApps(2000, func(int) bool { return true }), defaultBudgetBytes)
	b.ReportAllocs()
	for b.Loop() {
		CutToBudget(full, budget)
	}
}
