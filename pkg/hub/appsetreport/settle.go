package appsetreport

// This file holds a report back while the apps of its ApplicationSet pass through states
// that their clusters leave on their own (a rollout), so that a rollout writes the report
// when it settles, or once per SettleWait while it lasts, rather than at each step of each
// app. What must not wait (news) goes at once.

import (
	"crypto/sha256"
	"encoding/json"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"

	appsv1alpha1 "github.com/ocm-gitops/argocd-pull-addon/pkg/apis/apps/v1alpha1"
)

// newsOf is the digest of what a report's entries (RenderStatuses, in its order) carry
// that must not wait: which apps of which clusters they are, and their conditions as the
// report shows them (Argo CD's errors; the hub's notes that it cannot tell their state:
// an unavailable addon, since when, a rejected or missing report). An app's sync and
// health are not news while another app of the report is passing: the report is the
// ApplicationSet's view, and each hub Application shows its own at once.
func newsOf(entries []appsv1alpha1.ClusterCondition) [sha256.Size]byte {
	type appNews struct {
		Cluster, App string
		Conditions   []appsv1alpha1.Condition
	}
	news := make([]appNews, 0, len(entries))
	for _, e := range entries {
		news = append(news, appNews{Cluster: e.Cluster, App: e.App, Conditions: e.Conditions})
	}
	encoded, _ := json.Marshal(news) // plain strings: it cannot fail
	return sha256.Sum256(encoded)
}

// settleWait returns how much longer the write of the report key may wait: while the
// report is as this controller wrote it (asWritten: it exists, and no other writer
// changed its statuses since), one of its apps is passing (ClusterApp.Passing) and its
// news are those this controller last wrote, for at most SettleWait from the first change
// it held. Once no app passes, the report is written at once. Zero or less: write now, as
// for a report this process has not written yet.
func (r *reconciler) settleWait(key types.NamespacedName, asWritten bool, apps []ClusterApp, news [sha256.Size]byte, now time.Time) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	written, ok := r.news[key]
	mayWait := asWritten && ok && written == news && slices.ContainsFunc(apps, func(a ClusterApp) bool { return a.Passing })
	return r.held.Wait(key, mayWait, r.opts.SettleWait, now)
}

// wroteNews records the news of the report key as written.
func (r *reconciler) wroteNews(key types.NamespacedName, news [sha256.Size]byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.news[key] = news
	r.held.Forget(key)
}
