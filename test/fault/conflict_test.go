package fault

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/ocm-gitops/argocd-pull-addon/pkg/apis/apps/v1alpha1"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/test/sim"
)

// What the other writer of the conflict storm writes on each hub Application: fields
// the pull model does not own.
const (
	otherLabel      = "fault.example.com/other-writer"
	otherAnnotation = "fault.example.com/other-writer-note"
	otherCondition  = "fault.example.com/OtherWriter"
)

// otherWriter plays another controller that writes the same hub Applications as fast as
// it can, with optimistic locking: Update, or a merge patch that carries the
// resourceVersion. It sets a label, an annotation, status.summary.externalURLs and a
// condition of its own type, all to one value per write, and remembers the last value it
// wrote to each app.
type otherWriter struct {
	c client.Client
	// Writes and Conflicts count its writes and the conflicts it retried.
	Writes, Conflicts atomic.Int64

	mu   sync.Mutex
	last map[string]string
}

// lastValue returns the value of the last write to app name, "" before the first.
func (w *otherWriter) lastValue(name string) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last[name]
}

// run writes apps in turn until storm ends, and each of them at least once however slow
// the apiserver is: every app must then show the writer's last values. Its requests go
// with ctx.
func (w *otherWriter) run(ctx, storm context.Context, id int, apps []string) error {
	for n := 0; n < len(apps) || storm.Err() == nil; n++ {
		name := apps[n%len(apps)]
		value := fmt.Sprintf("w%d-%d", id, n)
		if err := w.write(ctx, name, value, n%2 == 0); err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
	}
	return nil
}

// write writes value to app name, and retries conflicts from a fresh read.
func (w *otherWriter) write(ctx context.Context, name, value string, update bool) error {
	for {
		app := argoapp.NewApplication()
		if err := w.c.Get(ctx, client.ObjectKey{Namespace: sim.AppNamespace, Name: name}, app); err != nil {
			return err
		}
		before := app.DeepCopy()
		labels := app.GetLabels()
		labels[otherLabel] = value
		app.SetLabels(labels)
		annotations := app.GetAnnotations()
		annotations[otherAnnotation] = "written by the other writer: " + value
		app.SetAnnotations(annotations)
		if err := unstructured.SetNestedStringSlice(app.Object, []string{otherURL(value)}, "status", "summary", "externalURLs"); err != nil {
			return err
		}
		if err := setOtherCondition(app, value); err != nil {
			return err
		}
		var err error
		if update {
			err = w.c.Update(ctx, app)
		} else {
			err = w.c.Patch(ctx, app, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
		}
		if apierrors.IsConflict(err) {
			w.Conflicts.Add(1)
			continue
		}
		if err != nil {
			return err
		}
		w.Writes.Add(1)
		w.mu.Lock()
		w.last[name] = value
		w.mu.Unlock()
		return nil
	}
}

func otherURL(value string) string { return "https://dashboards.example.com/" + value }

// setOtherCondition sets the other writer's condition in the app's status.conditions,
// leaving the others as they are.
func setOtherCondition(app *unstructured.Unstructured, value string) error {
	items, _, _ := unstructured.NestedSlice(app.Object, "status", "conditions")
	entry := map[string]any{"type": otherCondition, "message": value, "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}
	replaced := false
	for i, item := range items {
		if c, _ := item.(map[string]any); c["type"] == otherCondition {
			items[i], replaced = entry, true
		}
	}
	if !replaced {
		items = append(items, entry)
	}
	return unstructured.SetNestedSlice(app.Object, items, "status", "conditions")
}

// injection is the Argo CD condition a cluster's agent reports for an app, or none.
type injection struct {
	cluster, app string
	conditions   []argoapp.Condition
}

func TestConflictStorm(t *testing.T) {
	const clusters, appSets, writers, storm = 20, 5, 4, 15 * time.Second
	f := startFleet(t, clusters, appSets)
	g := gomega.NewWithT(t)
	manager := f.startManager()
	keys, err := f.hub.CreateApplications(f.ctx, f.appSets, f.clusters, parallelWrites)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	f.expectWorksCorrect(g, 2*time.Minute)
	f.expectStatusSettled(g, 2*time.Minute)

	// The storm: the other writer on every app, the agents changing their reports of
	// one app in five.
	var names []string
	for _, key := range keys {
		names = append(names, key.Name)
	}
	var reported []injection
	for i, appSet := range f.appSets {
		for j, cluster := range f.clusters {
			if (i+j)%5 == 0 {
				reported = append(reported, injection{cluster: cluster, app: sim.ApplicationName(appSet.GetName(), cluster)})
			}
		}
	}
	before, err := f.hub.RequestCounts(f.ctx)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	other := &otherWriter{c: f.hub.Client, last: map[string]string{}}
	ctx, cancel := context.WithTimeout(f.ctx, storm)
	defer cancel()
	// The writers' requests, which go on until each app was written once, have a
	// deadline of their own: a stuck write fails the test instead of hanging it.
	writeCtx, cancelWrites := context.WithTimeout(f.ctx, storm+2*time.Minute)
	defer cancelWrites()
	errs := make(chan error, writers)
	for id := range writers {
		var share []string
		for i, name := range names {
			if i%writers == id {
				share = append(share, name)
			}
		}
		go func() { errs <- other.run(writeCtx, ctx, id, share) }()
	}
	injections := 0
	for n := 0; ctx.Err() == nil; n++ {
		r := &reported[n%len(reported)]
		r.conditions = nil
		if n%7 != 6 { // now and then the error clears
			r.conditions = []argoapp.Condition{{Type: "SyncError", Message: fmt.Sprintf("storm change %d: the sync failed", n)}}
		}
		f.standIns.Inject(r.cluster, r.app, r.conditions...)
		injections++
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
	for range writers {
		g.Expect(<-errs).To(gomega.Succeed())
	}
	stormEnd := time.Now()
	during, err := f.hub.RequestCounts(f.ctx)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	t.Logf("storm of %s: the other writer wrote %d times and retried %d conflicts; %d report changes injected",
		storm, other.Writes.Load(), other.Conflicts.Load(), injections)
	t.Logf("writes during the storm (all writers): %v", during.WritesSince(before))

	// No lost status, no lost foreign field: every app shows the other writer's last
	// label, annotation, status field and condition, and exactly what its agent
	// reported last.
	want := map[string][]argoapp.Condition{}
	for _, r := range reported {
		want[r.app] = r.conditions
	}
	g.Eventually(func(g gomega.Gomega) {
		list := argoapp.NewApplicationList()
		g.Expect(f.hub.Client.List(f.ctx, list, client.InNamespace(sim.AppNamespace))).To(gomega.Succeed())
		g.Expect(list.Items).To(gomega.HaveLen(len(names)))
		for i := range list.Items {
			app := &list.Items[i]
			last := other.lastValue(app.GetName())
			g.Expect(last).NotTo(gomega.BeEmpty(), "the other writer wrote %s", app.GetName())
			g.Expect(app.GetLabels()).To(gomega.HaveKeyWithValue(otherLabel, last), app.GetName())
			g.Expect(app.GetAnnotations()).To(gomega.HaveKeyWithValue(otherAnnotation, "written by the other writer: "+last), app.GetName())
			urls, _, _ := unstructured.NestedStringSlice(app.Object, "status", "summary", "externalURLs")
			g.Expect(urls).To(gomega.Equal([]string{otherURL(last)}), app.GetName())
			message, _, err := argoapp.FindCondition(app, otherCondition)
			g.Expect(err).NotTo(gomega.HaveOccurred(), app.GetName())
			g.Expect(message).To(gomega.Equal(last), app.GetName())
			g.Expect(app.GetFinalizers()).NotTo(gomega.ContainElement(argoapp.FinalizerManifestWorkCleanup), app.GetName())
			syncStatus, _, _ := unstructured.NestedString(app.Object, "status", "sync", "status")
			health, _, _ := unstructured.NestedString(app.Object, "status", "health", "status")
			g.Expect([]string{syncStatus, health}).To(gomega.Equal([]string{"Synced", "Healthy"}), app.GetName())
			if conditions := want[app.GetName()]; len(conditions) > 0 {
				g.Expect(agentConditions(app)).To(gomega.Equal(conditions), app.GetName())
			} else {
				g.Expect(agentConditions(app)).To(gomega.BeEmpty(), app.GetName())
			}
		}
		// And each ApplicationSet's report, whose writes are paced (a report written
		// during the storm takes the last change a pace later).
		reports := &appsv1alpha1.MulticlusterApplicationSetReportList{}
		g.Expect(f.hub.Client.List(f.ctx, reports, client.InNamespace(sim.AppNamespace))).To(gomega.Succeed())
		g.Expect(reports.Items).To(gomega.HaveLen(len(f.appSets)))
		for _, report := range reports.Items {
			g.Expect(report.Statuses.ClusterConditions).To(gomega.HaveLen(len(f.clusters)), report.Name)
			for _, entry := range report.Statuses.ClusterConditions {
				// App is <ApplicationSet namespace>/<hub Application>/<cluster>/<work>.
				parts := strings.Split(entry.App, "/")
				g.Expect(parts).To(gomega.HaveLen(4), report.Name)
				var conditions []argoapp.Condition
				for _, c := range entry.Conditions {
					conditions = append(conditions, argoapp.Condition{Type: c.Type, Message: c.Message})
				}
				g.Expect(conditions).To(gomega.Equal(want[parts[1]]), "report %s, %s", report.Name, entry.App)
			}
		}
		check, err := sim.CheckWorks(f.ctx, f.hub.Client)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(check.OK()).To(gomega.BeTrue(), "%v", check)
	}).WithTimeout(time.Minute).WithPolling(250 * time.Millisecond).Should(gomega.Succeed())
	settled := time.Now()
	t.Logf("every app and report showed the last change %s after the storm", settled.Sub(stormEnd).Round(10*time.Millisecond))

	// No hot loop: the writes stop (the leader's Lease renewals aside) and stay stopped.
	const quietFor = 10 * time.Second
	previous, err := f.hub.RequestCounts(f.ctx)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	lastWrite, lastWrites := settled, sim.Requests{}
	g.Eventually(func(g gomega.Gomega) {
		now, err := f.hub.RequestCounts(f.ctx)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		writes := now.WritesSince(previous).Without(isLease)
		previous = now
		if writes.Total() > 0 {
			lastWrite, lastWrites = time.Now(), writes
		}
		g.Expect(time.Since(lastWrite)).To(gomega.BeNumerically(">=", quietFor), "the last writes: %v", lastWrites)
	}).WithTimeout(time.Minute).WithPolling(500 * time.Millisecond).Should(gomega.Succeed())
	t.Logf("writes stopped %s after every app and report showed the last change (%s after the storm), and stayed 0 for %s; the last ones: %v",
		lastWrite.Sub(settled).Round(10*time.Millisecond), lastWrite.Sub(stormEnd).Round(10*time.Millisecond), quietFor, lastWrites)
	g.Expect(lastWrite.Sub(settled)).To(gomega.BeNumerically("<", 5*time.Second), "writes went on after every app and report showed the last change")

	exited, exitErr := manager.Exited()
	g.Expect(exited).To(gomega.BeFalse(), "the manager exited: %v", exitErr)
	f.expectNoPanic(g)
}

// isLease picks the leader's Lease renewals.
func isLease(key string) bool { return strings.HasSuffix(key, " leases") }

// agentConditions returns the conditions of a hub Application that come from its
// cluster: all but the propagation controller's and the other writer's.
func agentConditions(app *unstructured.Unstructured) []argoapp.Condition {
	items, _, _ := unstructured.NestedSlice(app.Object, "status", "conditions")
	var out []argoapp.Condition
	for _, item := range items {
		c, _ := item.(map[string]any)
		t, _ := c["type"].(string)
		m, _ := c["message"].(string)
		if t != argoapp.ConditionOCMPropagationError && t != otherCondition {
			out = append(out, argoapp.Condition{Type: t, Message: m})
		}
	}
	return out
}
