package appsetreport

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	appsv1alpha1 "github.com/ocm-gitops/argocd-pull-addon/pkg/apis/apps/v1alpha1"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/clusterreport"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/observed"
)

// fuzzApps builds the apps of an ApplicationSet from the fuzz input: each byte of data is
// a choice, the first for how many apps, then for each app its cluster, status, stale
// cluster, conditions and resources; text fills the messages and names. Each (cluster,
// hub app) pair is distinct, as the controller's are.
func fuzzApps(data []byte, text string) []ClusterApp {
	next := func(n int) int {
		if len(data) == 0 || n <= 1 {
			return 0
		}
		b := data[0]
		data = data[1:]
		return int(b) % n
	}
	pick := func(options ...string) string { return options[next(len(options))] }
	long := strings.Repeat(text, 1+MaxConditionMessageBytes/max(len(text), 1))
	var apps []ClusterApp
	for i := range next(40) {
		cluster := pick("cluster1", "cluster2", "cluster3")
		a := ClusterApp{
			Cluster:      cluster,
			HubApp:       fmt.Sprintf("guestbook-%d", i),
			ManifestWork: fmt.Sprintf("guestbook-%d-3f2a9", i),
			State: observed.State{
				SyncStatus:   pick("Synced", "OutOfSync", "", text),
				HealthStatus: pick("Healthy", "Progressing", "Degraded", "", text),
				Reported:     true,
			},
		}
		if next(4) == 0 {
			a.Stale = &observed.Staleness{Since: metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)), Status: metav1.ConditionUnknown, Reason: "Lease"}
		}
		for range next(9) {
			a.State.Conditions = append(a.State.Conditions, argoapp.Condition{
				Type:    pick("SyncError", "ComparisonError", "OrphanedResourceWarning"),
				Message: pick("", text, long),
			})
		}
		for j := range next(200) {
			a.State.Resources = append(a.State.Resources, argoapp.ResourceStatus{
				Group: pick("apps", ""), Version: "v1", Kind: pick("Deployment", "Service"),
				Namespace: "guestbook", Name: fmt.Sprintf("%s-%d", pick("web", text), next(8)*j),
				Health: argoapp.HealthStatus{Status: pick("Healthy", HealthMissing, "")},
			})
		}
		apps = append(apps, a)
	}
	return apps
}

// FuzzRenderStatuses checks the bounds of a MulticlusterApplicationSetReport: one entry
// per app, sorted, each with at most MaxConditionsPerCluster errors (and the stale
// warning), in order, cut to MaxConditionMessageBytes as prefixes that stay valid UTF-8;
// the resources deduplicated, sorted, without the Missing ones and capped at
// MaxResources; a summary that adds up; and the same report for the apps in any order.
func FuzzRenderStatuses(f *testing.F) {
	f.Add([]byte{}, "")
	f.Add([]byte{3, 0, 0, 0, 1, 8, 0, 0, 1, 1, 2, 0, 10}, "Failed sync attempt: services is forbidden")
	f.Add([]byte{39, 1, 1, 1, 1, 8, 1, 1, 2, 2, 199, 1, 1, 0, 0, 1, 1, 2}, "日本語のメッセージ")
	f.Add([]byte{20, 2, 2, 2, 2, 5, 0, 1, 2, 1, 150}, strings.Repeat("é", 300))
	f.Fuzz(func(t *testing.T, data []byte, text string) {
		apps := fuzzApps(data, text)
		got := RenderStatuses("openshift-gitops", apps)

		shuffled := slices.Clone(apps)
		slices.Reverse(shuffled)
		if again := RenderStatuses("openshift-gitops", shuffled); !equalStatuses(again, got) {
			t.Fatal("RenderStatuses depends on the order of the apps")
		}
		if len(got.ClusterConditions) != len(apps) {
			t.Fatalf("%d entries for %d apps", len(got.ClusterConditions), len(apps))
		}
		if !slices.IsSortedFunc(got.ClusterConditions, func(a, b appsv1alpha1.ClusterCondition) int {
			return strings.Compare(a.Cluster+"\x00"+a.App, b.Cluster+"\x00"+b.App)
		}) {
			t.Fatal("entries are not sorted by cluster and app")
		}
		synced, healthy, stale := 0, 0, 0
		for _, a := range apps {
			field := AppField("openshift-gitops", a.HubApp, a.Cluster, a.ManifestWork)
			i := slices.IndexFunc(got.ClusterConditions, func(c appsv1alpha1.ClusterCondition) bool { return c.App == field })
			if i < 0 {
				t.Fatalf("no entry for %s", field)
			}
			checkClusterCondition(t, a, got.ClusterConditions[i])
			if got.ClusterConditions[i].SyncStatus == "Synced" {
				synced++
			}
			if got.ClusterConditions[i].HealthStatus == "Healthy" {
				healthy++
			}
			if a.Stale != nil {
				stale++
			}
		}
		s := got.Summary
		if s.Clusters != strconv.Itoa(len(apps)) || s.Synced != strconv.Itoa(synced) || s.NotSynced != strconv.Itoa(len(apps)-synced) ||
			s.Healthy != strconv.Itoa(healthy) || s.NotHealthy != strconv.Itoa(len(apps)-healthy) || s.Stale != strconv.Itoa(stale) {
			t.Fatalf("summary %+v does not add up: %d apps, %d synced, %d healthy, %d stale", s, len(apps), synced, healthy, stale)
		}

		deployed := map[appsv1alpha1.ResourceRef]bool{}
		for _, a := range apps {
			for _, r := range a.State.Resources {
				if r.Health.Status != HealthMissing {
					deployed[resourceRef(r)] = true
				}
			}
		}
		if len(got.Resources) != min(len(deployed), MaxResources) {
			t.Fatalf("%d resources for %d deployed ones", len(got.Resources), len(deployed))
		}
		for i, r := range got.Resources {
			if !deployed[r] {
				t.Fatalf("resource %+v was not deployed by any app", r)
			}
			if i > 0 && compareRefs(got.Resources[i-1], r) >= 0 {
				t.Fatalf("resources not sorted or not unique at %d: %+v, %+v", i, got.Resources[i-1], r)
			}
		}
	})
}

// checkClusterCondition checks the entry of one app.
func checkClusterCondition(t *testing.T, a ClusterApp, c appsv1alpha1.ClusterCondition) {
	t.Helper()
	if c.Cluster != a.Cluster || c.SyncStatus != cmpOr(a.State.SyncStatus, observed.StatusUnknown) ||
		c.HealthStatus != cmpOr(a.State.HealthStatus, observed.StatusUnknown) {
		t.Fatalf("entry %+v does not say the state of %+v", c, a)
	}
	var errs []argoapp.Condition
	for _, cond := range a.State.Conditions {
		if clusterreport.IsErrorCondition(cond.Type) {
			errs = append(errs, cond)
		}
	}
	conditions := c.Conditions
	if a.Stale != nil {
		if len(conditions) == 0 || conditions[len(conditions)-1].Type != observed.ConditionStale {
			t.Fatalf("entry of a stale cluster without the stale warning last: %+v", conditions)
		}
		conditions = conditions[:len(conditions)-1]
	}
	if len(conditions) != min(len(errs), MaxConditionsPerCluster) {
		t.Fatalf("%d conditions kept of %d errors", len(conditions), len(errs))
	}
	for i, cond := range conditions {
		in := errs[i]
		if cond.Type != in.Type || len(cond.Message) > MaxConditionMessageBytes {
			t.Fatalf("condition %d: %q (%d bytes) for %q", i, cond.Type, len(cond.Message), in.Type)
		}
		kept, cut := strings.CutSuffix(cond.Message, clusterreport.Ellipsis)
		if cond.Message != in.Message && (!cut || !strings.HasPrefix(in.Message, kept)) {
			t.Fatalf("condition %d: message %q is not a cut of %q", i, cond.Message, in.Message)
		}
		if utf8.ValidString(in.Message) && !utf8.ValidString(cond.Message) {
			t.Fatalf("condition %d: message %q is not valid UTF-8", i, cond.Message)
		}
	}
}

// cmpOr returns s, or def when s is empty.
func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// compareRefs orders resources as the report does.
func compareRefs(a, b appsv1alpha1.ResourceRef) int {
	return strings.Compare(a.APIVersion+"\x00"+a.Kind+"\x00"+a.Namespace+"\x00"+a.Name, b.APIVersion+"\x00"+b.Kind+"\x00"+b.Namespace+"\x00"+b.Name)
}

// equalStatuses reports whether two renderings are the same.
func equalStatuses(a, b appsv1alpha1.AppConditions) bool {
	return fmt.Sprintf("%+v", a) == fmt.Sprintf("%+v", b)
}

// FuzzHostingApplicationSetLabelValue checks the label of a report: for an
// ApplicationSet's namespace and name it is a valid label value, and for any input at
// most 63 characters, a prefix of "<namespace>.<name>", that prefix itself when it fits,
// and stable.
func FuzzHostingApplicationSetLabelValue(f *testing.F) {
	f.Add("openshift-gitops", "guestbook")
	f.Add(strings.Repeat("n", 63), strings.Repeat("a", 253))
	f.Add("ns", strings.Repeat("a", 61)+"-.b")
	f.Add("", "")
	f.Add("日本", "語")
	f.Fuzz(func(t *testing.T, namespace, name string) {
		got := HostingApplicationSetLabelValue(namespace, name)
		full := namespace + "." + name
		if len(got) > maxLabelValueLength || !strings.HasPrefix(full, got) || strings.ContainsAny(got[max(len(got)-1, 0):], "-_.") {
			t.Fatalf("HostingApplicationSetLabelValue(%q, %q) = %q", namespace, name, got)
		}
		if got != HostingApplicationSetLabelValue(namespace, name) {
			t.Fatal("not stable")
		}
		valid := len(validation.IsDNS1123Label(namespace)) == 0 && len(validation.IsDNS1123Subdomain(name)) == 0
		if !valid {
			return
		}
		if errs := validation.IsValidLabelValue(got); len(errs) > 0 {
			t.Fatalf("HostingApplicationSetLabelValue(%q, %q) = %q is not a label value: %v", namespace, name, got, errs)
		}
		if len(full) <= maxLabelValueLength && got != full {
			t.Fatalf("HostingApplicationSetLabelValue(%q, %q) = %q, want %q", namespace, name, got, full)
		}
	})
}

// FuzzCutToBudget checks the cut of a report to its byte budget, at any budget from
// nothing to the full size: the counts stay exact; the report fits, or is as small as the
// cut makes it; every entry kept is its full entry with less detail, in order; the
// summary counts what was cut; the steps come in their order (cutSteps); and the same
// apps in another order give the same report.
func FuzzCutToBudget(f *testing.F) {
	f.Add([]byte{3, 0, 0, 0, 1, 8, 0, 0, 1, 1, 2, 0, 10}, "Failed sync attempt: services is forbidden", uint8(128))
	f.Add([]byte{39, 1, 1, 1, 1, 8, 1, 1, 2, 2, 199, 1, 1, 0, 0, 1, 1, 2}, "日本語のメッセージ", uint8(10))
	f.Add([]byte{20, 2, 2, 2, 2, 5, 0, 1, 2, 1, 150}, strings.Repeat("é", 300), uint8(200))
	f.Add([]byte{30, 0, 0, 1, 0, 8, 2, 2, 0, 1, 0, 0, 1}, `<&"quoted">`, uint8(0))
	f.Fuzz(func(t *testing.T, data []byte, text string, fraction uint8) {
		apps := fuzzApps(data, text)
		full := RenderStatuses("openshift-gitops", apps)
		full.LastUpdateTime = ptr.To(metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)))
		fullBytes := statusesBytes(full)
		limit := fullBytes * int(fraction) / 255
		budget := Budget{Bytes: int64(limit + 20000), Envelope: 20000}
		got := CutToBudget(full, budget)

		shuffled := slices.Clone(apps)
		slices.Reverse(shuffled)
		again := RenderStatuses("openshift-gitops", shuffled)
		again.LastUpdateTime = full.LastUpdateTime
		if !equality.Semantic.DeepEqual(CutToBudget(again, budget), got) {
			t.Fatal("CutToBudget depends on the order of the apps")
		}
		if withoutTruncation(got.Summary) != full.Summary {
			t.Fatalf("summary %+v, want the exact %+v", got.Summary, full.Summary)
		}
		tr := got.Summary.Truncated
		if fullBytes <= limit {
			if tr != nil || !equality.Semantic.DeepEqual(got, full) {
				t.Fatal("a report that fits was changed")
			}
			return
		}
		if tr == nil || tr.BudgetBytes != budget.Bytes || len(tr.Message) > maxTruncationMessageBytes {
			t.Fatalf("truncated = %+v", tr)
		}
		if size := statusesBytes(got); size > limit && (len(got.ClusterConditions) > 0 || len(got.Resources) > 0) {
			t.Fatalf("%d bytes over the limit of %d, with entries or resources left to cut", size, limit)
		}
		if len(got.Resources) > len(full.Resources) || !slices.Equal(got.Resources, full.Resources[:len(got.Resources)]) {
			t.Fatal("the resources are not the first of the full list")
		}
		checkCut(t, full, got)
	})
}

// checkCut checks each entry of the cut report got against its entry in full, the
// counts of summary.truncated, and the order of the steps.
func checkCut(t *testing.T, full, got appsv1alpha1.AppConditions) {
	t.Helper()
	want := appsv1alpha1.ReportTruncation{BudgetBytes: got.Summary.Truncated.BudgetBytes, Message: got.Summary.Truncated.Message,
		Resources: int32(len(full.Resources) - len(got.Resources))}
	// What the cut did to each class: dropped entries, lowered ones, messages at most
	// n bytes, at most one condition, no details.
	type done struct{ dropped, lowered, allShort, allShortest, allOneCondition, allNoDetails, kept bool }
	classes := map[entryClass]*done{classHealthy: {allShort: true, allShortest: true, allOneCondition: true, allNoDetails: true},
		classOther:   {allShort: true, allShortest: true, allOneCondition: true, allNoDetails: true},
		classFailing: {allShort: true, allShortest: true, allOneCondition: true, allNoDetails: true}}
	next := 0
	for _, f := range full.ClusterConditions {
		d := classes[classOf(f)]
		if next == len(got.ClusterConditions) || got.ClusterConditions[next].App != f.App {
			d.dropped = true
			want.Clusters++
			continue
		}
		e := got.ClusterConditions[next]
		next++
		d.kept = true
		if e.Cluster != f.Cluster || e.SyncStatus != f.SyncStatus || e.HealthStatus != f.HealthStatus {
			t.Fatalf("entry %+v does not say the state of %+v", e, f)
		}
		if hasDetails(e) && (e.SyncRevision != f.SyncRevision || !slices.Equal(e.SyncRevisions, f.SyncRevisions) ||
			e.OperationStatePhase != f.OperationStatePhase || e.OperationStateStartedAt != f.OperationStateStartedAt) {
			t.Fatalf("entry %+v: its details are not those of %+v", e, f)
		}
		if hasDetails(f) && !hasDetails(e) {
			want.Details++
		}
		if len(e.Conditions) > len(f.Conditions) || (len(e.Conditions) < len(f.Conditions) && len(e.Conditions) > 1) {
			t.Fatalf("entry %s keeps %d of %d conditions", e.App, len(e.Conditions), len(f.Conditions))
		}
		want.Conditions += int32(len(f.Conditions) - len(e.Conditions))
		for j, c := range e.Conditions {
			in := f.Conditions[j]
			if c.Message != in.Message {
				want.Messages++
				kept, cut := strings.CutSuffix(c.Message, clusterreport.Ellipsis)
				if c.Type != in.Type || !cut || !strings.HasPrefix(in.Message, kept) || len(c.Message) > ShortMessageBytes {
					t.Fatalf("entry %s: condition %+v is not a cut of %+v", e.App, c, in)
				}
			}
			d.allShort = d.allShort && len(c.Message) <= ShortMessageBytes
			d.allShortest = d.allShortest && len(c.Message) <= ShortestMessageBytes
		}
		d.allOneCondition = d.allOneCondition && len(e.Conditions) <= 1
		d.allNoDetails = d.allNoDetails && !hasDetails(e)
		d.lowered = d.lowered || !equality.Semantic.DeepEqual(e, f)
	}
	if next != len(got.ClusterConditions) {
		t.Fatal("the entries are not those of the full report, in order")
	}
	if *got.Summary.Truncated != want {
		t.Fatalf("truncated %+v, want %+v", *got.Summary.Truncated, want)
	}
	healthy, other, failing := classes[classHealthy], classes[classOther], classes[classFailing]
	if (healthy.lowered || healthy.dropped || other.lowered || other.dropped || failing.lowered || failing.dropped) && len(got.Resources) > 0 {
		t.Fatal("entries were cut before the resource list")
	}
	if (other.lowered || failing.lowered || healthy.dropped) && healthy.kept && !(healthy.allOneCondition && healthy.allNoDetails && healthy.allShortest) {
		t.Fatal("other entries were cut before the healthy ones lost their conditions and details")
	}
	if failing.lowered && !other.allShort {
		t.Fatal("failing entries were cut before the others' messages were shortened")
	}
	for _, d := range []*done{other, failing} {
		if healthy.dropped && !(d.allShortest && d.allOneCondition) {
			t.Fatal("healthy entries were left out before the others' messages and conditions were cut")
		}
		if (other.dropped || failing.dropped) && !d.allNoDetails {
			t.Fatal("entries were left out before the others lost their details")
		}
	}
	if (other.dropped || failing.dropped) && healthy.kept {
		t.Fatal("other entries were left out before the healthy ones")
	}
	if failing.dropped && other.kept {
		t.Fatal("failing entries were left out before the other ones")
	}
}
