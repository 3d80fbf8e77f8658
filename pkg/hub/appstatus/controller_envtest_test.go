package appstatus

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	addonv1beta1 "open-cluster-management.io/api/addon/v1beta1"
	workv1 "open-cluster-management.io/api/work/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/clusterreport"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/hubcache"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/observed"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/statusslices"
	"github.com/ocm-gitops/argocd-pull-addon/test/testenv"
)

// The suite plays the propagation controller (it creates the works), the work agent (it
// writes their feedback) and the spoke agent (it writes the report on the addon).

// shared is the package's apiserver, started by the first envtest test.
var shared testenv.Shared

func TestMain(m *testing.M) { os.Exit(testenv.RunTests(m, &shared)) }

// startMirrorWithSlices runs the status mirror with opts in a manager as pkg/hub.Run
// builds it, reading the agents' reports through the slices reader as pkg/hub wires it;
// writes counts its writes.
func startMirrorWithSlices(t *testing.T, env *testenv.Env, opts Options, writes *testenv.WriteLog) {
	t.Helper()
	testenv.StartManager(t, env, hubcache.Scope{AddonName: opts.AddonName, ArgoCDNamespace: "argocd"}, writes,
		func(mgr ctrl.Manager, c client.Client) error {
			decoder := observed.NewDecoder().WithSlices(statusslices.NewReader(c, opts.AddonName))
			return Setup(mgr, c, decoder, opts)
		})
}

// startSliceMirror starts a test of the status mirror with opts and the slices reader
// (startMirrorWithSlices; writes counts its writes) for the hub app web of appNamespace,
// which targets cluster: it creates their namespaces and the app. It returns the shared
// apiserver, the test's view of the hub (its apps in appNamespace) and the app.
func startSliceMirror(t *testing.T, appNamespace, cluster string, opts Options, writes *testenv.WriteLog) (*testenv.Env, *testenv.Hub, *unstructured.Unstructured) {
	t.Helper()
	env := shared.Get(t)
	hub := testenv.NewHub(t, env, appNamespace)
	hub.CreateNamespace(appNamespace)
	hub.CreateNamespace(cluster)
	startMirrorWithSlices(t, env, opts, writes)
	app := hub.Application("web", cluster)
	hub.Create(app)
	return env, hub, app
}

// mirrorOptions returns the options of the status mirror in the tests with the slices
// reader: the default addon, and a short Progressing hold.
func mirrorOptions() Options {
	return Options{AddonName: clusterreport.DefaultAddonName, Concurrency: 4, Settings: Settings{ProgressingHold: 100 * time.Millisecond}}
}

// getApp reads the hub Application key.
func getApp(ctx context.Context, g gomega.Gomega, c client.Client, key types.NamespacedName) *unstructured.Unstructured {
	app := &unstructured.Unstructured{}
	app.SetGroupVersionKind(argoapp.ApplicationGVK)
	g.Expect(c.Get(ctx, key, app)).To(gomega.Succeed())
	return app
}

// watchApps watches every version of the hub Applications of namespace from now on; the
// caller stops the watch.
func watchApps(ctx context.Context, g gomega.Gomega, env *testenv.Env, namespace string) watch.Interface {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(argoapp.GroupVersion.WithKind("ApplicationList"))
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	w, err := wc.Watch(ctx, list, client.InNamespace(namespace))
	g.Expect(err).NotTo(gomega.HaveOccurred())
	return w
}

func TestStatusMirror(t *testing.T) {
	env := shared.Get(t)
	ctx, g := testenv.Begin(t, env, "apps", "cluster1")
	c := env.Client
	// The manager as pkg/hub.Run builds it (its scheme and cache); writes counts the
	// controller's writes. A long grace: an absence shown at once is one the agent's
	// scope explains.
	writes := &testenv.WriteLog{}
	decoder := observed.NewDecoder().WithAbsenceGrace(time.Minute)
	opts := Options{AddonName: clusterreport.DefaultAddonName, Concurrency: 4, Settings: Settings{ProgressingHold: 300 * time.Millisecond}}
	scope := hubcache.Scope{AddonName: opts.AddonName, ArgoCDNamespace: "argocd", WatchNamespaces: opts.WatchNamespaces}
	testenv.StartManager(t, env, scope, writes, func(mgr ctrl.Manager, c client.Client) error {
		return Setup(mgr, c, decoder, opts)
	})

	hub := testenv.NewHub(t, env, "apps")
	addon := hub.EnableAddon("cluster1", opts.AddonName)

	newApp := func(name string, multi bool) *unstructured.Unstructured {
		app := testenv.PulledApplication("apps", name, "cluster1")
		spec := map[string]any{"project": "default", "destination": map[string]any{"server": argoapp.InClusterServer, "namespace": "x"}}
		if multi {
			spec["sources"] = []any{map[string]any{"repoURL": "https://a"}, map[string]any{"repoURL": "https://b"}}
		} else {
			spec["source"] = map[string]any{"repoURL": "https://a"}
		}
		app.Object["spec"] = spec
		g.Expect(c.Create(ctx, app)).To(gomega.Succeed())
		// The propagation controller's OCMPropagationError must survive.
		_, _ = argoapp.SetCondition(app, argoapp.ConditionOCMPropagationError, "keep me", time.Now())
		g.Expect(c.Update(ctx, app)).To(gomega.Succeed())
		return app
	}
	newWork := func(app *unstructured.Unstructured) *workv1.ManifestWork {
		w := testenv.PropagatedWork(app, "cluster1", opts.AddonName)
		g.Expect(c.Create(ctx, w)).To(gomega.Succeed())
		return w
	}
	setFeedback := func(w *workv1.ManifestWork, health, sync string) {
		hub.UpdateWorkStatus(client.ObjectKeyFromObject(w), func(cur *workv1.ManifestWork) {
			cur.Status.ResourceStatus.Manifests = []workv1.ManifestCondition{testenv.ApplicationFeedback("apps", "x", map[string]string{
				argoapp.FeedbackHealthStatus: health, argoapp.FeedbackSyncStatus: sync, argoapp.FeedbackSyncRevision: "rev1",
				argoapp.FeedbackOperationStatePhase: "Succeeded", argoapp.FeedbackOperationStateStartedAt: "2026-01-01T00:00:00Z",
			})}
		})
	}
	var reportMu sync.Mutex
	// setScopedReport plays an agent that publishes its scope; nil plays an older one.
	setScopedReport := func(apps []clusterreport.App, scope *clusterreport.Scope, available metav1.ConditionStatus) {
		reportMu.Lock()
		defer reportMu.Unlock()
		enc, err := clusterreport.Encode(clusterreport.Report{Apps: apps, Scope: scope})
		g.Expect(err).NotTo(gomega.HaveOccurred())
		conds := enc.Conditions
		for i := range conds {
			conds[i].LastTransitionTime = metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		}
		conds = append(conds, metav1.Condition{Type: "Available", Status: available, Reason: "Lease",
			LastTransitionTime: metav1.NewTime(time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC))})
		hub.UpdateAddonStatus(client.ObjectKeyFromObject(addon), func(cur *addonv1beta1.ManagedClusterAddOn) { cur.Status.Conditions = conds })
	}
	setReport := func(apps []clusterreport.App, available metav1.ConditionStatus) {
		setScopedReport(apps, nil, available)
	}
	get := func(name string) *unstructured.Unstructured {
		return getApp(ctx, g, c, types.NamespacedName{Namespace: "apps", Name: name})
	}
	str := func(app *unstructured.Unstructured, path ...string) string {
		s, _, _ := unstructured.NestedString(app.Object, path...)
		return s
	}

	// healthHistory returns, once an app's health settles at Healthy, the health statuses
	// that a watch saw it take, each once in a row.
	healthHistory := func(t *testing.T, app *unstructured.Unstructured, work *workv1.ManifestWork) []string {
		w := watchApps(ctx, g, env, "apps")
		defer w.Stop()
		setFeedback(work, "Healthy", "Synced")
		var seen []string
		g.Eventually(func() string {
			for {
				select {
				case e := <-w.ResultChan():
					if e.Type != watch.Modified {
						continue
					}
					u := e.Object.(*unstructured.Unstructured)
					if u.GetName() != app.GetName() {
						continue
					}
					h := str(u, "status", "health", "status")
					if h != "" && (len(seen) == 0 || seen[len(seen)-1] != h) {
						seen = append(seen, h)
					}
				default:
					if len(seen) == 0 {
						return ""
					}
					return seen[len(seen)-1]
				}
			}
		}).Should(gomega.Equal(argoapp.HealthHealthy))
		got := get(app.GetName())
		g.Expect(str(got, "status", "sync", "status")).To(gomega.Equal("Synced"))
		g.Expect(str(got, "status", "sync", "revision")).To(gomega.Equal("rev1"))
		g.Expect(str(got, "status", "operationState", "phase")).To(gomega.Equal("Succeeded"))
		g.Expect(str(got, "status", "reconciledAt")).NotTo(gomega.BeEmpty())
		return seen
	}
	// ownedBy makes app one that the ApplicationSet name generated, of the given strategy.
	ownedBy := func(app *unstructured.Unstructured, name string, strategy map[string]any) {
		appSet := argoapp.NewApplicationSet()
		appSet.SetNamespace("apps")
		appSet.SetName(name)
		appSet.Object["spec"] = map[string]any{
			"generators": []any{map[string]any{"list": map[string]any{"elements": []any{}}}},
			"template": map[string]any{"metadata": map[string]any{}, "spec": map[string]any{
				"project": "default", "destination": map[string]any{"server": argoapp.InClusterServer, "namespace": "x"},
			}},
		}
		if strategy != nil {
			appSet.Object["spec"].(map[string]any)["strategy"] = strategy
		}
		g.Expect(c.Create(ctx, appSet)).To(gomega.Succeed())
		g.Eventually(func() error {
			cur := get(app.GetName())
			cur.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: argoapp.GroupVersion.String(), Kind: argoapp.KindApplicationSet,
				Name: name, UID: appSet.GetUID(), Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}})
			return c.Update(ctx, cur)
		}).Should(gomega.Succeed())
	}

	t.Run("an app of a RollingSync ApplicationSet: Progressing then Healthy, observed through a watch", func(t *testing.T) {
		app := newApp("rolling", false)
		ownedBy(app, "rolling", map[string]any{"type": argoapp.StrategyRollingSync, "rollingSync": map[string]any{"steps": []any{
			map[string]any{"matchExpressions": []any{map[string]any{"key": "env", "operator": "In", "values": []any{"dev"}}}},
		}}})
		work := newWork(app)
		g.Expect(healthHistory(t, app, work)).To(gomega.Equal([]string{"Progressing", "Healthy"}))
	})

	t.Run("a standalone app, and one of an ApplicationSet without progressive syncs: Healthy at once", func(t *testing.T) {
		app := newApp("standalone", false)
		work := newWork(app)
		g.Expect(healthHistory(t, app, work)).To(gomega.Equal([]string{"Healthy"}))

		app = newApp("all-at-once", false)
		ownedBy(app, "all-at-once", nil)
		work = newWork(app)
		g.Expect(healthHistory(t, app, work)).To(gomega.Equal([]string{"Healthy"}))
	})

	// expectNotMirrored creates the app name and its work, changes them with change
	// (retried until it succeeds), and checks that the work's feedback never reaches the
	// app.
	expectNotMirrored := func(name string, change func(work *workv1.ManifestWork) error) {
		work := newWork(newApp(name, false))
		g.Eventually(func() error { return change(work) }).Should(gomega.Succeed())
		setFeedback(work, "Healthy", "Synced")
		g.Consistently(func() string { return str(get(name), "status", "health", "status") }, "2s").Should(gomega.BeEmpty())
	}

	t.Run("another controller's work is not mirrored", func(t *testing.T) {
		// Red Hat ACM's pull controller names and annotates its works as this addon does,
		// but without this addon's label; it writes the status itself.
		expectNotMirrored("served-by-acm", func(work *workv1.ManifestWork) error {
			cur := &workv1.ManifestWork{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(work), cur); err != nil {
				return err
			}
			delete(cur.Labels, argoapp.LabelAddon)
			return c.Update(ctx, cur)
		})
	})

	t.Run("an app the hub Argo CD reconciles (no skip-reconcile) is not mirrored", func(t *testing.T) {
		// Its work was made while it skipped the hub Argo CD; propagation keeps it, refused.
		expectNotMirrored("not-skipped", func(*workv1.ManifestWork) error {
			cur := get("not-skipped")
			annotations := cur.GetAnnotations()
			delete(annotations, argoapp.AnnotationSkipReconcile)
			cur.SetAnnotations(annotations)
			return c.Update(ctx, cur)
		})
	})

	t.Run("multi-source revisions, resources and conditions from the agent; stale; zero writes", func(t *testing.T) {
		app := newApp("multi", true)
		work := newWork(app)
		setFeedback(work, "Degraded", "OutOfSync")
		agentApp := clusterreport.App{
			Namespace: "apps", Name: "multi", ManifestWork: work.Name,
			Sync:       argoapp.SyncStatus{Status: "OutOfSync", Revisions: []string{"r1", "r2"}},
			Health:     argoapp.HealthStatus{Status: "Degraded", Message: "not enough replicas"},
			Resources:  []argoapp.ResourceStatus{{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "x", Name: "web", Status: "OutOfSync", Health: argoapp.HealthStatus{Status: "Missing"}}},
			Conditions: []argoapp.Condition{{Type: "SyncError", Message: "services is forbidden"}},
			ObservedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
		}
		setReport([]clusterreport.App{agentApp}, metav1.ConditionTrue)
		g.Eventually(func(g gomega.Gomega) {
			got := get("multi")
			revs, _, _ := unstructured.NestedStringSlice(got.Object, "status", "sync", "revisions")
			g.Expect(revs).To(gomega.Equal([]string{"r1", "r2"}))
			g.Expect(str(got, "status", "health", "message")).To(gomega.Equal("not enough replicas"))
			res, _, _ := unstructured.NestedSlice(got.Object, "status", "resources")
			g.Expect(res).To(gomega.HaveLen(1))
			conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
			var types []string
			for _, c := range conds {
				types = append(types, c.(map[string]any)["type"].(string))
			}
			g.Expect(types).To(gomega.Equal([]string{argoapp.ConditionOCMPropagationError, "SyncError"}))
		}).Should(gomega.Succeed())

		// Stale: the addon's lease expired.
		setReport([]clusterreport.App{agentApp}, metav1.ConditionUnknown)
		g.Eventually(func(g gomega.Gomega) {
			conds, _, _ := unstructured.NestedSlice(get("multi").Object, "status", "conditions")
			g.Expect(conds).To(gomega.HaveLen(3))
			g.Expect(conds[2].(map[string]any)["type"]).To(gomega.Equal("StaleStatusWarning"))
			g.Expect(conds[2].(map[string]any)["message"]).To(gomega.ContainSubstring("since 2026-02-01T00:00:00Z"))
		}).Should(gomega.Succeed())
		g.Expect(str(get("multi"), "status", "health", "status")).To(gomega.Equal("Degraded"), "stale data is kept")

		// Nothing changes: re-apply identical inputs and touch the apps; no write.
		time.Sleep(500 * time.Millisecond)
		before := int64(writes.Matching("patch "))
		setReport([]clusterreport.App{agentApp}, metav1.ConditionUnknown)
		setFeedback(work, "Degraded", "OutOfSync")
		a := get("multi")
		a.SetLabels(map[string]string{argoapp.LabelPullToOCMManagedCluster: "true", "touched": "yes"})
		g.Expect(c.Update(ctx, a)).To(gomega.Succeed())
		gomega.NewWithT(t).Consistently(func() int64 { return int64(writes.Matching("patch ")) }, 2*time.Second, 100*time.Millisecond).Should(gomega.Equal(before))
	})

	// setApplied plays the work agent: the work applied its Application to namespace at
	// appliedAt, and feeds back its sync and health.
	setApplied := func(w *workv1.ManifestWork, name, namespace string, appliedAt time.Time) {
		hub.UpdateWorkStatus(client.ObjectKeyFromObject(w), func(cur *workv1.ManifestWork) {
			val := func(name, v string) workv1.FeedbackValue {
				return workv1.FeedbackValue{Name: name, Value: workv1.FieldValue{Type: workv1.String, String: ptr.To(v)}}
			}
			cur.Status.ResourceStatus.Manifests = []workv1.ManifestCondition{{
				ResourceMeta: workv1.ManifestResourceMeta{Group: argoapp.Group, Version: "v1alpha1", Kind: "Application", Resource: "applications", Name: name, Namespace: namespace},
				StatusFeedbacks: workv1.StatusFeedbackResult{Values: []workv1.FeedbackValue{
					val(argoapp.FeedbackHealthStatus, "Degraded"), val(argoapp.FeedbackSyncStatus, "OutOfSync"), val(argoapp.FeedbackSyncRevision, "r1"),
				}},
				Conditions: []metav1.Condition{},
			}}
			cur.Status.Conditions = []metav1.Condition{{Type: workv1.WorkApplied, Status: metav1.ConditionTrue, Reason: "AppliedManifestWorkComplete",
				LastTransitionTime: metav1.NewTime(appliedAt.Truncate(time.Second))}}
		})
	}
	notReported := func(g gomega.Gomega, name string) (string, bool) {
		conds, _, _ := unstructured.NestedSlice(get(name).Object, "status", "conditions")
		for _, item := range conds {
			if m := item.(map[string]any); m["type"] == observed.ConditionNotReported {
				return m["message"].(string), true
			}
		}
		return "", false
	}
	warnings := func(g gomega.Gomega, name, reason string) []string {
		events := &eventsv1.EventList{}
		g.Expect(c.List(ctx, events, client.InNamespace("apps"))).To(gomega.Succeed())
		var notes []string
		for _, e := range events.Items {
			if e.Regarding.Name == name && e.Regarding.Kind == "Application" && e.Reason == reason && e.Type == corev1.EventTypeWarning {
				notes = append(notes, e.Note)
			}
		}
		return notes
	}
	argocd := &clusterreport.Scope{WatchNamespaces: []string{"argocd"}}
	entryOf := func(name, work string) clusterreport.App {
		return clusterreport.App{
			Namespace: "argocd", Name: name, ManifestWork: work,
			Sync:       argoapp.SyncStatus{Status: "OutOfSync", Revisions: []string{"r1", "r2"}},
			Health:     argoapp.HealthStatus{Status: "Degraded", Message: "not enough replicas"},
			Resources:  []argoapp.ResourceStatus{{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "x", Name: "web", Status: "OutOfSync"}},
			Conditions: []argoapp.Condition{{Type: "SyncError", Message: "services is forbidden"}},
			ObservedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
		}
	}

	t.Run("an app missing from the agent's report: its data goes, a condition says why, and it all comes back", func(t *testing.T) {
		app := newApp("absent", true)
		work := newWork(app)
		setApplied(work, "absent", "argocd", time.Now().Add(-time.Hour))
		absent := entryOf("absent", work.Name)
		setScopedReport([]clusterreport.App{absent}, argocd, metav1.ConditionTrue)
		g.Eventually(func(g gomega.Gomega) {
			got := get("absent")
			revs, _, _ := unstructured.NestedStringSlice(got.Object, "status", "sync", "revisions")
			g.Expect(revs).To(gomega.Equal([]string{"r1", "r2"}))
			res, _, _ := unstructured.NestedSlice(got.Object, "status", "resources")
			g.Expect(res).To(gomega.HaveLen(1))
		}).Should(gomega.Succeed())

		// The agent stops reporting it (the grace is long past: the work was applied an
		// hour ago).
		setScopedReport(nil, argocd, metav1.ConditionTrue)
		g.Eventually(func(g gomega.Gomega) {
			got := get("absent")
			msg, ok := notReported(g, "absent")
			g.Expect(ok).To(gomega.BeTrue())
			g.Expect(msg).To(gomega.ContainSubstring("The agent of cluster cluster1 reports applications, but not this one (argocd/absent"))
			g.Expect(msg).To(gomega.ContainSubstring("the hub shows only the sync, health and operation status from the ManifestWork"))
			_, found, _ := unstructured.NestedFieldNoCopy(got.Object, "status", "resources")
			g.Expect(found).To(gomega.BeFalse(), "resources of an entry that is gone")
			_, found, _ = unstructured.NestedFieldNoCopy(got.Object, "status", "sync", "revisions")
			g.Expect(found).To(gomega.BeFalse())
			g.Expect(str(got, "status", "health", "message")).To(gomega.BeEmpty())
			conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
			for _, item := range conds {
				g.Expect(item.(map[string]any)["type"]).NotTo(gomega.Equal("SyncError"), "an error of an entry that is gone")
			}
			g.Expect(str(got, "status", "sync", "status")).To(gomega.Equal("OutOfSync"), "the feedback stays")
			g.Expect(str(got, "status", "health", "status")).To(gomega.Equal("Degraded"))
			g.Expect(warnings(g, "absent", observed.ReasonNotInAgentReport)).NotTo(gomega.BeEmpty())
		}).Should(gomega.Succeed())

		// Settled: the same inputs again write nothing.
		time.Sleep(500 * time.Millisecond)
		before := int64(writes.Matching("patch "))
		setScopedReport(nil, argocd, metav1.ConditionTrue)
		setApplied(work, "absent", "argocd", time.Now().Add(-time.Hour))
		gomega.NewWithT(t).Consistently(func() int64 { return int64(writes.Matching("patch ")) }, 2*time.Second, 100*time.Millisecond).Should(gomega.Equal(before))

		// It comes back.
		setScopedReport([]clusterreport.App{absent}, argocd, metav1.ConditionTrue)
		g.Eventually(func(g gomega.Gomega) {
			_, ok := notReported(g, "absent")
			g.Expect(ok).To(gomega.BeFalse())
			got := get("absent")
			revs, _, _ := unstructured.NestedStringSlice(got.Object, "status", "sync", "revisions")
			g.Expect(revs).To(gomega.Equal([]string{"r1", "r2"}))
			res, _, _ := unstructured.NestedSlice(got.Object, "status", "resources")
			g.Expect(res).To(gomega.HaveLen(1))
			g.Expect(str(got, "status", "health", "message")).To(gomega.Equal("not enough replicas"))
		}).Should(gomega.Succeed())
		g.Expect(c.Delete(ctx, app)).To(gomega.Succeed())
	})

	t.Run("an app delivered to a namespace the agent does not watch: said at once, with the namespaces", func(t *testing.T) {
		app := newApp("elsewhere", false)
		work := newWork(app)
		setScopedReport(nil, argocd, metav1.ConditionTrue)
		setApplied(work, "elsewhere", "openshift-gitops", time.Now()) // within the grace
		g.Eventually(func(g gomega.Gomega) {
			msg, ok := notReported(g, "elsewhere")
			g.Expect(ok).To(gomega.BeTrue())
			g.Expect(msg).To(gomega.HavePrefix("The agent of cluster cluster1 watches the namespaces [argocd]; this application was delivered to namespace openshift-gitops, so the agent does not see it"))
			g.Expect(msg).To(gomega.ContainSubstring("chart value agent.watchNamespaces"))
			g.Expect(warnings(g, "elsewhere", observed.ReasonNamespaceNotWatched)).To(gomega.ConsistOf(msg))
		}, 10*time.Second).Should(gomega.Succeed())

		// The agent is reconfigured to watch it, and reports it: the condition goes.
		both := &clusterreport.Scope{WatchNamespaces: []string{"argocd", "openshift-gitops"}}
		entry := entryOf("elsewhere", work.Name)
		entry.Namespace = "openshift-gitops"
		setScopedReport([]clusterreport.App{entry}, both, metav1.ConditionTrue)
		g.Eventually(func(g gomega.Gomega) {
			_, ok := notReported(g, "elsewhere")
			g.Expect(ok).To(gomega.BeFalse())
			res, _, _ := unstructured.NestedSlice(get("elsewhere").Object, "status", "resources")
			g.Expect(res).To(gomega.HaveLen(1))
		}).Should(gomega.Succeed())
		g.Expect(c.Delete(ctx, app)).To(gomega.Succeed())
	})

	t.Run("an older agent that does not publish its namespaces: no false alarm, only what it can tell", func(t *testing.T) {
		reportedApp, missingApp := newApp("legacy-reported", false), newApp("legacy-missing", false)
		reportedWork, missingWork := newWork(reportedApp), newWork(missingApp)
		entry := entryOf("legacy-reported", reportedWork.Name)
		entry.Namespace = "openshift-gitops"
		setScopedReport([]clusterreport.App{entry}, nil, metav1.ConditionTrue)
		setApplied(reportedWork, "legacy-reported", "openshift-gitops", time.Now())
		setApplied(missingWork, "legacy-missing", "openshift-gitops", time.Now().Add(-time.Hour))
		// The missing one, past the grace: absent, without a claim about namespaces the
		// agent did not publish.
		g.Eventually(func(g gomega.Gomega) {
			msg, ok := notReported(g, "legacy-missing")
			g.Expect(ok).To(gomega.BeTrue())
			g.Expect(msg).To(gomega.HavePrefix("The agent of cluster cluster1 reports applications, but not this one (openshift-gitops/legacy-missing"))
			g.Expect(msg).To(gomega.ContainSubstring("this agent does not publish the namespaces it watches"))
			g.Expect(msg).NotTo(gomega.ContainSubstring("watches the namespaces ["))
			res, _, _ := unstructured.NestedSlice(get("legacy-reported").Object, "status", "resources")
			g.Expect(res).To(gomega.HaveLen(1))
		}).Should(gomega.Succeed())
		gomega.NewWithT(t).Consistently(func(g gomega.Gomega) {
			_, ok := notReported(g, "legacy-reported")
			g.Expect(ok).To(gomega.BeFalse(), "reported in a namespace the older agent does not name")
		}, 2*time.Second, 100*time.Millisecond).Should(gomega.Succeed())
	})
}
