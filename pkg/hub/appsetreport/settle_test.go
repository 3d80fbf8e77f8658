package appsetreport

import (
	"crypto/sha256"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/observed"
)

// TestSettleWait: a report waits while one of its apps passes and nothing it carries that
// must not wait changed since its last write; not before its first write, not once no app
// passes, not for an error, a new app, a stale cluster, or a report that is gone or that
// another writer changed.
func TestSettleWait(t *testing.T) {
	const wait = 5 * time.Second
	key := types.NamespacedName{Namespace: "argocd", Name: "guestbook"}
	t0 := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	app := func(cluster, health string, passing bool, conditions ...argoapp.Condition) ClusterApp {
		return ClusterApp{Cluster: cluster, HubApp: "guestbook-" + cluster, ManifestWork: "guestbook-1a2b3",
			State: observed.State{HealthStatus: health, Conditions: conditions}, Passing: passing}
	}
	stale := func(a ClusterApp, status metav1.ConditionStatus) ClusterApp {
		a.Stale = &observed.Staleness{Since: metav1.NewTime(t0.Add(-time.Minute)), Status: status, Reason: "ManagedClusterAddOnLeaseUpdated"}
		return a
	}
	news := func(apps []ClusterApp) [sha256.Size]byte {
		return newsOf(RenderStatuses("argocd", apps).ClusterConditions)
	}
	rolling := []ClusterApp{app("east", "Progressing", true), app("west", "Healthy", false)}
	written := news([]ClusterApp{app("west", "Healthy", false), app("east", "Missing", true)})
	if news(rolling) != written {
		t.Fatal("the news of a report change with its apps' sync and health, or their order")
	}
	if news([]ClusterApp{stale(rolling[1], metav1.ConditionFalse)}) == news([]ClusterApp{stale(rolling[1], metav1.ConditionUnknown)}) {
		t.Fatal("the news of a report do not change with the note of a stale cluster, as the report shows it")
	}
	for _, tc := range []struct {
		name      string
		asWritten bool
		written   bool
		apps      []ClusterApp
		want      time.Duration
	}{
		{"an app passing", true, true, rolling, wait},
		{"before the first write", true, false, rolling, 0},
		{"no app passing", true, true, []ClusterApp{app("east", "Healthy", false), app("west", "Healthy", false)}, 0},
		{"an error", true, true, []ClusterApp{app("east", "Progressing", true, argoapp.Condition{Type: "SyncError", Message: "forbidden"}), app("west", "Healthy", false)}, 0},
		{"a new app", true, true, append(rolling, app("north", "Progressing", true)), 0},
		{"a cluster gone stale", true, true, []ClusterApp{rolling[0], stale(rolling[1], metav1.ConditionFalse)}, 0},
		{"the report gone, or changed by another writer", false, true, rolling, 0},
	} {
		r := &reconciler{opts: Options{Settings: Settings{SettleWait: wait}}, news: map[types.NamespacedName][sha256.Size]byte{}}
		if tc.written {
			r.wroteNews(key, written)
		}
		if got := r.settleWait(key, tc.asWritten, tc.apps, news(tc.apps), t0); got != tc.want {
			t.Errorf("%s: settleWait = %v; want %v", tc.name, got, tc.want)
		}
	}
}
