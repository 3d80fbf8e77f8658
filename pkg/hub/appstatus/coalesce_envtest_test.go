package appstatus

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	statusv1alpha1 "github.com/ocm-gitops/argocd-pull-addon/pkg/apis/argocdpull/v1alpha1"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/clusterreport"
	"github.com/ocm-gitops/argocd-pull-addon/test/testenv"
)

// coalesceFixture is one pulled hub app, its work and its cluster's status slice, with
// the real status mirror (slices reader as pkg/hub wires it) on a real apiserver. The
// test plays the work agent (the work's feedback) and the spoke agent (the slice).
type coalesceFixture struct {
	t      *testing.T
	ctx    context.Context
	g      *gomega.WithT
	c      client.Client
	hub    *testenv.Hub
	key    types.NamespacedName
	work   *workv1.ManifestWork
	slice  *statusv1alpha1.ApplicationStatusSlice
	writes *testenv.WriteLog
	// versions are the hub app's versions that a watch saw, from the start.
	versions *versionLog
}

// versionLog is what the fixture's watch of the hub app saw, shared by its subtests.
type versionLog struct {
	mu   sync.Mutex
	seen []appVersion
}

// sub returns the fixture for a subtest: the same app and watch, failing the subtest.
func (f *coalesceFixture) sub(t *testing.T) *coalesceFixture {
	s := *f
	s.t, s.hub = t, f.hub.Sub(t)
	s.g = s.hub.G
	return &s
}

// appVersion is a version of the hub app as a watch saw it, and when.
type appVersion struct {
	at       time.Time
	revision string // status.sync.revision: from the work's feedback
	message  string // status.health.message: from the agent's slice
	health   string // status.health.status
}

// newCoalesceFixture starts the fixture with the mirror's coalescing window and settle
// wait (zero: the default).
func newCoalesceFixture(t *testing.T, namespace, cluster string, window, settle time.Duration) *coalesceFixture {
	opts := mirrorOptions()
	opts.CoalesceWindow, opts.SettleWait = window, settle
	writes := &testenv.WriteLog{}
	env, hub, app := startSliceMirror(t, namespace, cluster, opts, writes)
	ctx, g := hub.Ctx, hub.G
	f := &coalesceFixture{t: t, ctx: ctx, g: g, c: hub.C, hub: hub, writes: writes, key: client.ObjectKeyFromObject(app), versions: &versionLog{}}
	addon := hub.EnableAddon(cluster, opts.AddonName)
	f.work = testenv.PropagatedWork(app, cluster, opts.AddonName)
	g.Expect(f.c.Create(ctx, f.work)).To(gomega.Succeed())
	f.slice = clusterreport.SliceObject(addon, clusterreport.Slice{Name: "argocd-pull-0", Apps: []statusv1alpha1.AppStatus{f.entry("none")}})
	g.Expect(f.c.Create(ctx, f.slice)).To(gomega.Succeed())

	w := watchApps(ctx, g, env, namespace)
	t.Cleanup(w.Stop)
	go func() {
		for e := range w.ResultChan() {
			u, ok := e.Object.(*unstructured.Unstructured)
			if !ok || e.Type != watch.Modified || u.GetName() != f.key.Name {
				continue
			}
			v := appVersion{at: time.Now()}
			v.revision, _, _ = unstructured.NestedString(u.Object, "status", "sync", "revision")
			v.message, _, _ = unstructured.NestedString(u.Object, "status", "health", "message")
			v.health, _, _ = unstructured.NestedString(u.Object, "status", "health", "status")
			f.versions.mu.Lock()
			f.versions.seen = append(f.versions.seen, v)
			f.versions.mu.Unlock()
		}
	}()
	return f
}

// entry is the agent's entry of the app: its health message says which change it is.
func (f *coalesceFixture) entry(change string) statusv1alpha1.AppStatus {
	return statusv1alpha1.AppStatus{
		Namespace: "argocd", Name: f.key.Name, ManifestWork: f.work.Name, ObservedAt: metav1.NewTime(time.Now().Truncate(time.Second)),
		Sync:       statusv1alpha1.SyncStatus{Status: "OutOfSync", Revision: change},
		Health:     &statusv1alpha1.Health{Status: "Degraded", Message: change},
		TreeSource: statusv1alpha1.TreeSourceArgoCDCache,
		Resources: []statusv1alpha1.ResourceStatus{{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "web", Name: "web",
			Status: "OutOfSync", Health: &statusv1alpha1.Health{Status: "Degraded", Message: change}}},
	}
}

// feedBack plays the work agent: the work's feedback says revision change.
func (f *coalesceFixture) feedBack(change string) {
	f.hub.UpdateWorkStatus(client.ObjectKeyFromObject(f.work), func(cur *workv1.ManifestWork) {
		cur.Status.ResourceStatus.Manifests = []workv1.ManifestCondition{testenv.ApplicationFeedback("argocd", f.key.Name, map[string]string{
			argoapp.FeedbackHealthStatus: "Degraded", argoapp.FeedbackSyncStatus: "OutOfSync", argoapp.FeedbackSyncRevision: change,
		})}
	})
}

// publish plays the spoke agent: its slice's entry says change.
func (f *coalesceFixture) publish(change string) {
	f.hub.UpdateSlice(client.ObjectKeyFromObject(f.slice), func(cur *statusv1alpha1.ApplicationStatusSlice) {
		cur.Apps = []statusv1alpha1.AppStatus{f.entry(change)}
	})
}

// mirrorWrites counts the status mirror's writes of the hub app.
func (f *coalesceFixture) mirrorWrites() int {
	return f.writes.Count("patch", argoapp.KindApplication, f.key.Namespace, f.key.Name) +
		f.writes.Count("update", argoapp.KindApplication, f.key.Namespace, f.key.Name)
}

// shows waits until the hub app shows revision (feedback) and message (slice).
func (f *coalesceFixture) shows(revision, message string) {
	f.g.Eventually(func(g gomega.Gomega) {
		app := argoapp.NewApplication()
		g.Expect(f.c.Get(f.ctx, f.key, app)).To(gomega.Succeed())
		r, _, _ := unstructured.NestedString(app.Object, "status", "sync", "revision")
		m, _, _ := unstructured.NestedString(app.Object, "status", "health", "message")
		g.Expect([]string{r, m}).To(gomega.Equal([]string{revision, message}))
	}, 10*time.Second, 20*time.Millisecond).Should(gomega.Succeed())
}

func (f *coalesceFixture) seen() []appVersion {
	f.versions.mu.Lock()
	defer f.versions.mu.Unlock()
	return append([]appVersion(nil), f.versions.seen...)
}

// TestOneWritePerBurst feeds bursts of changes of one app on both channels, the work's
// feedback and the agent's slice, three of each, interleaved and well within the
// coalescing window. The status mirror writes the hub app once per burst, with the
// burst's last value of each channel; no version that a watch sees shows a value that
// a newer one had replaced before the write.
func TestOneWritePerBurst(t *testing.T) {
	f := newCoalesceFixture(t, "apps-burst", "cluster-burst", time.Second, 0)
	f.feedBack("start")
	f.publish("start")
	f.shows("start", "start")
	time.Sleep(2 * time.Second) // settled: the mirror's own write's event was reconciled

	var want []string
	for burst := 1; burst <= 3; burst++ {
		before := f.mirrorWrites()
		var last string
		for i := 1; i <= 3; i++ {
			last = fmt.Sprintf("burst%d-change%d", burst, i)
			f.feedBack(last)
			f.publish(last)
		}
		f.shows(last, last)
		time.Sleep(2 * time.Second) // a window and more: anything left would be written by now
		t.Logf("burst %d: %d writes of the hub app", burst, f.mirrorWrites()-before)
		if got := f.mirrorWrites() - before; got != 1 {
			t.Errorf("burst %d: the mirror wrote the hub app %d times; want 1", burst, got)
		}
		want = append(want, last+"/"+last)
	}
	var shown []string
	for _, v := range f.seen() {
		if v.revision == "start" {
			continue
		}
		shown = append(shown, v.revision+"/"+v.message)
	}
	f.g.Expect(shown).To(gomega.Equal(want), "the versions of the hub app after the start")
}

// TestStreamWrittenWithinTheWindow changes one app without a pause longer than the
// window, on both channels, for several windows: the mirror does not wait for the stream
// to stop, but writes every window or two, and each write carries the latest of both
// channels; far fewer writes than changes (at most one per window).
func TestStreamWrittenWithinTheWindow(t *testing.T) {
	const window, every, changes = 500 * time.Millisecond, 50 * time.Millisecond, 60 // 3 s
	// slack is what a loaded machine may add to a window: the reconcile, the patch, the
	// watch event.
	const slack = 700 * time.Millisecond
	// The two channels never agree in this stream (each says its own change), which the
	// settle wait would hold up to its end (TestRolloutWrittenOnceSettled): one shorter
	// than the window leaves the window to be measured.
	f := newCoalesceFixture(t, "apps-stream", "cluster-stream", window, window/10)
	f.feedBack("start")
	f.publish("start")
	f.shows("start", "start")
	time.Sleep(2 * window)

	start := time.Now()
	var fed, published string
	for i := 1; i <= changes; i++ {
		change := fmt.Sprintf("change%d", i)
		if i%2 == 1 {
			fed = change
			f.feedBack(change)
		} else {
			published = change
			f.publish(change)
		}
		time.Sleep(every)
	}
	end := time.Now()
	f.shows(fed, published)

	var during []time.Time
	for _, v := range f.seen() {
		if v.revision != "start" {
			during = append(during, v.at)
		}
	}
	f.g.Expect(during).NotTo(gomega.BeEmpty())
	t.Logf("%d changes in %v: %d writes of the hub app", changes, end.Sub(start).Round(time.Millisecond), len(during))
	f.g.Expect(during[0].Sub(start)).To(gomega.BeNumerically("<=", window+slack), "the first write after the stream began")
	// During the stream, a write follows the one before within two windows: the mirror
	// writes while the stream goes on (its changes arrive less than a window apart, and
	// a loaded machine delays the feeding too: one run here took 6 s for the 3 s stream,
	// and a write came 1.37 s after the one before).
	for i := 1; i < len(during); i++ {
		if during[i-1].Before(end) {
			f.g.Expect(during[i].Sub(during[i-1])).To(gomega.BeNumerically("<=", 2*window+slack), "a write during the stream, after the one before")
		}
	}
	f.g.Expect(during[len(during)-1].Sub(end)).To(gomega.BeNumerically("<=", window+slack), "the last write after the stream ended")
	// One write per window, and the one after the stream.
	f.g.Expect(len(during)).To(gomega.BeNumerically("<=", int(end.Sub(start)/window)+2))
}
