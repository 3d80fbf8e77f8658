package propagation

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	addonv1beta1 "open-cluster-management.io/api/addon/v1beta1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
)

// Point 1: selection.

func TestEnvtestPullsSelectedApplication(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	g := f.g
	cluster := f.readyCluster("east")

	app := f.application("guestbook", cluster)
	f.create(app)
	work := f.waitForWork("guestbook", cluster)

	// The work is the render of the Application, marked as the manager's.
	want, err := RenderManifestWork(f.getApp("guestbook"), RenderOptions{})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	want.Labels[argoapp.LabelAddon] = f.opts.AddonName
	g.Expect(workUpToDate(work, want)).To(gomega.BeTrue(), "the work is not the render of the application")
	g.Expect(payload(t, work).GetNamespace()).To(gomega.Equal(f.ns))
	g.Eventually(func() bool { return hasFinalizer(f.getApp("guestbook"), argoapp.FinalizerManifestWorkCleanup) }).Should(gomega.BeTrue())
	g.Expect(f.condition("guestbook")).To(gomega.BeEmpty())
	g.Eventually(func() []string { return f.eventReasons(f.ns, "guestbook", corev1.EventTypeNormal) }).
		Should(gomega.ContainElement(ReasonManifestWorkApplied))

	// A status-only update does not touch the work: no write, not even a no-op apply.
	resourceVersion, generation := work.ResourceVersion, work.Generation
	applies := f.writeCount("apply", "ManifestWork", cluster, work.Name)
	g.Expect(applies).To(gomega.Equal(1))
	f.updateApp("guestbook", func(app *unstructured.Unstructured) {
		app.Object["status"] = map[string]any{"sync": map[string]any{"status": "Synced"}, "health": map[string]any{"status": "Healthy"}}
	})
	g.Consistently(func() string {
		return f.waitForWork("guestbook", cluster).ResourceVersion
	}).Should(gomega.Equal(resourceVersion), "a status-only update rewrote the work")
	g.Expect(f.writeCount("apply", "ManifestWork", cluster, work.Name)).To(gomega.Equal(applies), "a status-only update re-applied the work")
	// Nor does a restart: the work read back from the apiserver is up to date.
	g.Expect(workUpToDate(f.waitForWork("guestbook", cluster), want)).To(gomega.BeTrue())

	// A spec change does.
	f.updateApp("guestbook", func(app *unstructured.Unstructured) {
		g.Expect(unstructured.SetNestedField(app.Object, "v2", "spec", "source", "targetRevision")).To(gomega.Succeed())
	})
	g.Eventually(func() string {
		revision, _, _ := unstructured.NestedString(payload(t, f.waitForWork("guestbook", cluster)).Object, "spec", "source", "targetRevision")
		return revision
	}).Should(gomega.Equal("v2"))
	g.Expect(f.waitForWork("guestbook", cluster).Generation).To(gomega.Equal(generation + 1))

	// Neither a false label nor an absent one is pulled.
	off := f.application("off", cluster)
	off.SetLabels(map[string]string{argoapp.LabelPullToOCMManagedCluster: "false"})
	f.create(off)
	unlabelled := f.application("unlabelled", cluster)
	unlabelled.SetLabels(nil)
	f.create(unlabelled)
	g.Consistently(func() []string { return append(f.workKeys("off"), f.workKeys("unlabelled")...) }).Should(gomega.BeEmpty())
	g.Expect(f.condition("off")).To(gomega.BeEmpty())
	g.Expect(hasFinalizer(f.getApp("off"), argoapp.FinalizerManifestWorkCleanup)).To(gomega.BeFalse())
}

func TestEnvtestWatchNamespaces(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil) // watches f.ns only
	g := f.g
	cluster := f.readyCluster("east")
	other := "other-" + f.id
	f.createNamespace(other)
	f.bind(other, cluster)

	outside := f.application("outside", cluster)
	outside.SetNamespace(other)
	f.create(outside)
	f.create(f.application("inside", cluster))

	f.waitForWork("inside", cluster)
	g.Consistently(func() []workv1.ManifestWork {
		works := &workv1.ManifestWorkList{}
		g.Expect(f.c.List(f.ctx, works, client.InNamespace(cluster))).To(gomega.Succeed())
		return slices.DeleteFunc(works.Items, func(w workv1.ManifestWork) bool {
			return w.Annotations[argoapp.AnnotationHubApplicationNamespace] != other
		})
	}).Should(gomega.BeEmpty(), "an application outside the watched namespaces was pulled")
	outsideApp := argoapp.NewApplication()
	g.Expect(f.c.Get(f.ctx, client.ObjectKeyFromObject(outside), outsideApp)).To(gomega.Succeed())
	g.Expect(outsideApp.GetFinalizers()).To(gomega.BeEmpty())
}

// TestEnvtestAllNamespaces runs alone, before the parallel tests start: a manager that
// watches every namespace would act on the other tests' Applications.
func TestEnvtestAllNamespaces(t *testing.T) {
	f := newFixture(t, func(o *Options) { o.WatchNamespaces = nil })
	cluster := f.readyCluster("east")
	f.create(f.application("anywhere", cluster))
	f.waitForWork("anywhere", cluster)
}

// Point 3: per-cluster opt-in.

func TestEnvtestClusterNotFoundThenCreated(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	g := f.g
	cluster := f.clusterName("late")
	f.create(f.application("guestbook", cluster))

	f.expectProblem("guestbook", ReasonClusterNotFound)
	g.Expect(f.condition("guestbook")).To(gomega.ContainSubstring(cluster))
	g.Expect(f.workKeys("guestbook")).To(gomega.BeEmpty())

	f.createCluster("late", true)
	f.bind(f.ns, cluster)
	f.waitForWork("guestbook", cluster)
	g.Eventually(func() string { return f.condition("guestbook") }).Should(gomega.BeEmpty())
}

func TestEnvtestAddonEnablement(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	g := f.g
	cluster := f.createCluster("east", false)
	f.bind(f.ns, cluster)
	f.create(f.application("guestbook", cluster))

	f.expectProblem("guestbook", ReasonAddonNotEnabled)
	g.Expect(f.condition("guestbook")).To(gomega.ContainSubstring(f.opts.AddonName))
	g.Consistently(func() []string { return f.workKeys("guestbook") }).Should(gomega.BeEmpty())

	// The addon appears: propagation starts on its own.
	f.enableAddon(cluster)
	f.waitForWork("guestbook", cluster)
	g.Eventually(func() string { return f.condition("guestbook") }).Should(gomega.BeEmpty())

	// The addon goes for a while (an install strategy re-creating it, say): the work is
	// kept, within the opt-out grace period, and said so.
	work := f.waitForWork("guestbook", cluster)
	f.disableAddon(cluster)
	f.expectProblem("guestbook", ReasonAddonNotEnabled)
	g.Expect(f.condition("guestbook")).To(gomega.ContainSubstring("kept until"))
	g.Consistently(func() types.UID { return f.waitForWork("guestbook", cluster).UID }).Should(gomega.Equal(work.UID))

	// It comes back: the same work, and the condition goes.
	f.enableAddon(cluster)
	g.Eventually(func() string { return f.condition("guestbook") }).Should(gomega.BeEmpty())
	g.Expect(f.waitForWork("guestbook", cluster).UID).To(gomega.Equal(work.UID))
}

// A deliberate opt-out cleans up once the grace period has passed: the work goes, and
// the finalizer with it.
func TestEnvtestOptOutGracePeriod(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(o *Options) { o.OptOutGracePeriod = 3 * time.Second })
	g := f.g
	cluster := f.readyCluster("east")
	f.create(f.application("guestbook", cluster))
	work := f.waitForWork("guestbook", cluster)

	f.disableAddon(cluster)
	f.expectProblem("guestbook", ReasonAddonNotEnabled)
	g.Consistently(func() types.UID { return f.waitForWork("guestbook", cluster).UID }, "1s").Should(gomega.Equal(work.UID))
	g.Eventually(func() []string { return f.workKeys("guestbook") }).Should(gomega.BeEmpty())
	g.Eventually(func() bool { return hasFinalizer(f.getApp("guestbook"), argoapp.FinalizerManifestWorkCleanup) }).Should(gomega.BeFalse())
	f.expectProblem("guestbook", ReasonAddonNotEnabled)
}

func TestEnvtestClusterDeleted(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(o *Options) { o.OptOutGracePeriod = 0 })
	g := f.g
	cluster := f.readyCluster("east")
	f.create(f.application("guestbook", cluster))
	f.waitForWork("guestbook", cluster)

	g.Expect(f.c.Delete(f.ctx, &clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: cluster}})).To(gomega.Succeed())
	g.Eventually(func() []string { return f.workKeys("guestbook") }).Should(gomega.BeEmpty())
	f.expectProblem("guestbook", ReasonClusterNotFound)
}

// Point 4: the tenant gate.

func TestEnvtestTenantGate(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	g := f.g
	cluster := f.createCluster("east", true)
	// A decision in another namespace does not bind the cluster to this one.
	other := "other-" + f.id
	f.createNamespace(other)
	f.bind(other, cluster)
	f.create(f.application("guestbook", cluster))

	f.expectProblem("guestbook", ReasonClusterNotBoundToNamespace)
	g.Expect(f.condition("guestbook")).To(gomega.ContainSubstring(f.ns))
	g.Consistently(func() []string { return f.workKeys("guestbook") }).Should(gomega.BeEmpty())

	// A decision of the namespace that selects another cluster does not either; once it
	// selects this one, the app propagates.
	name := f.bind(f.ns, f.clusterName("elsewhere"))
	decision := &clusterv1beta1.PlacementDecision{}
	g.Expect(f.c.Get(f.ctx, types.NamespacedName{Namespace: f.ns, Name: name}, decision)).To(gomega.Succeed())
	g.Consistently(func() []string { return f.workKeys("guestbook") }, "500ms").Should(gomega.BeEmpty())
	f.setDecisions(decision, f.clusterName("elsewhere"), cluster)
	f.waitForWork("guestbook", cluster)
	g.Eventually(func() string { return f.condition("guestbook") }).Should(gomega.BeEmpty())

	// The placement drops the cluster for a moment (a decision page rewritten, the
	// cluster unreachable): the work is kept, and said so.
	work := f.waitForWork("guestbook", cluster)
	f.setDecisions(decision, f.clusterName("elsewhere"))
	f.expectProblem("guestbook", ReasonClusterNotBoundToNamespace)
	g.Consistently(func() types.UID { return f.waitForWork("guestbook", cluster).UID }, "1s").Should(gomega.Equal(work.UID))
	f.setDecisions(decision, f.clusterName("elsewhere"), cluster)
	g.Eventually(func() string { return f.condition("guestbook") }).Should(gomega.BeEmpty())
	g.Expect(f.waitForWork("guestbook", cluster).UID).To(gomega.Equal(work.UID))
}

// A PlacementDecision that no Placement owns (written by hand) binds nothing.
func TestEnvtestTenantGateIgnoresForgedDecisions(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	g := f.g
	cluster := f.createCluster("east", true)
	forged := &clusterv1beta1.PlacementDecision{ObjectMeta: metav1.ObjectMeta{
		Name: "forged", Namespace: f.ns, Labels: map[string]string{clusterv1beta1.PlacementLabel: "forged"},
	}}
	f.create(forged)
	f.setDecisions(forged, cluster)
	f.create(f.application("guestbook", cluster))
	f.expectProblem("guestbook", ReasonClusterNotBoundToNamespace)
	g.Consistently(func() []string { return f.workKeys("guestbook") }).Should(gomega.BeEmpty())

	f.bind(f.ns, cluster)
	f.waitForWork("guestbook", cluster)
}

func TestEnvtestTenantGateOff(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(o *Options) { o.RequirePlacementBinding = false })
	cluster := f.createCluster("east", true) // no PlacementDecision anywhere
	f.create(f.application("guestbook", cluster))
	f.waitForWork("guestbook", cluster)
	f.g.Expect(f.condition("guestbook")).To(gomega.BeEmpty())
}

// Point 5: deletion and re-targeting.

func TestEnvtestDeletion(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	cluster := f.readyCluster("east")

	t.Run("with the Argo CD resources finalizer", func(t *testing.T) {
		f := f.sub(t)
		g := f.g
		app := f.application("with-finalizer", cluster)
		app.SetFinalizers([]string{argoapp.ResourcesFinalizer})
		f.create(app)
		work := f.waitForWork("with-finalizer", cluster)
		g.Expect(payload(t, work).GetFinalizers()).To(gomega.Equal([]string{argoapp.ResourcesFinalizer}))

		g.Expect(f.c.Delete(f.ctx, f.getApp("with-finalizer"))).To(gomega.Succeed())
		g.Eventually(func() []string { return f.workKeys("with-finalizer") }).Should(gomega.BeEmpty())
		// Both finalizers are released: the hub app does not hang.
		g.Eventually(func() *unstructured.Unstructured { return f.getApp("with-finalizer") }).Should(gomega.BeNil())
	})

	t.Run("without a finalizer of its own", func(t *testing.T) {
		f := f.sub(t)
		g := f.g
		f.create(f.application("plain", cluster))
		f.waitForWork("plain", cluster)
		g.Expect(f.c.Delete(f.ctx, f.getApp("plain"))).To(gomega.Succeed())
		g.Eventually(func() []string { return f.workKeys("plain") }).Should(gomega.BeEmpty())
		g.Eventually(func() *unstructured.Unstructured { return f.getApp("plain") }).Should(gomega.BeNil())
	})

	t.Run("waits until the work agent has deleted the work", func(t *testing.T) {
		f := f.sub(t)
		g := f.g
		app := f.application("slow", cluster)
		app.SetFinalizers([]string{argoapp.ResourcesFinalizer})
		f.create(app)
		work := f.waitForWork("slow", cluster)
		// Play the work agent, which holds the work until the spoke app is gone.
		const agentFinalizer = "cluster.open-cluster-management.io/manifest-work-cleanup"
		work.Finalizers = append(work.Finalizers, agentFinalizer)
		g.Expect(f.c.Update(f.ctx, work)).To(gomega.Succeed())

		g.Expect(f.c.Delete(f.ctx, f.getApp("slow"))).To(gomega.Succeed())
		g.Eventually(func() bool { return f.waitForWork("slow", cluster).DeletionTimestamp != nil }).Should(gomega.BeTrue())
		g.Consistently(func() []string { return f.getApp("slow").GetFinalizers() }).
			Should(gomega.ConsistOf(argoapp.ResourcesFinalizer, argoapp.FinalizerManifestWorkCleanup))

		work = f.waitForWork("slow", cluster)
		work.Finalizers = nil
		g.Expect(f.c.Update(f.ctx, work)).To(gomega.Succeed())
		g.Eventually(func() *unstructured.Unstructured { return f.getApp("slow") }).Should(gomega.BeNil())
	})

	t.Run("the work does not exist", func(t *testing.T) {
		f := f.sub(t)
		g := f.g
		// Never propagated (the addon is not enabled on its cluster): no work, and the
		// resources finalizer that nobody on the hub would remove.
		disabled := f.createCluster("disabled", false)
		f.bind(f.ns, disabled)
		app := f.application("never", disabled)
		app.SetFinalizers([]string{argoapp.ResourcesFinalizer, argoapp.FinalizerManifestWorkCleanup})
		f.create(app)
		f.expectProblem("never", ReasonAddonNotEnabled)
		g.Expect(f.c.Delete(f.ctx, f.getApp("never"))).To(gomega.Succeed())
		g.Eventually(func() *unstructured.Unstructured { return f.getApp("never") }).Should(gomega.BeNil())
	})

	t.Run("a push application keeps its Argo CD finalizer for the hub Argo CD", func(t *testing.T) {
		f := f.sub(t)
		g := f.g
		// Pulled, then turned into a push application: its work is kept, and goes with it.
		app := f.application("push", cluster)
		app.SetFinalizers([]string{argoapp.ResourcesFinalizer})
		f.create(app)
		f.waitForWork("push", cluster)
		f.updateApp("push", func(app *unstructured.Unstructured) {
			annotations := app.GetAnnotations()
			delete(annotations, argoapp.AnnotationSkipReconcile)
			app.SetAnnotations(annotations)
		})
		f.expectProblem("push", ReasonMissingSkipReconcile)
		f.waitForWork("push", cluster)
		g.Expect(f.c.Delete(f.ctx, f.getApp("push"))).To(gomega.Succeed())
		g.Eventually(func() []string { return f.workKeys("push") }).Should(gomega.BeEmpty())
		g.Eventually(func() []string { return f.getApp("push").GetFinalizers() }).Should(gomega.Equal([]string{argoapp.ResourcesFinalizer}))
		// Play the hub Argo CD.
		f.updateApp("push", func(app *unstructured.Unstructured) { app.SetFinalizers(nil) })
	})

	t.Run("an application deleted behind the controller's back", func(t *testing.T) {
		f := f.sub(t)
		g := f.g
		// A work of the manager whose hub application does not exist.
		orphan := &workv1.ManifestWork{ObjectMeta: metav1.ObjectMeta{
			Name: "ghost-12345", Namespace: cluster,
			Labels: map[string]string{argoapp.LabelPullToOCMManagedCluster: "true", argoapp.LabelAddon: f.opts.AddonName},
			Annotations: map[string]string{
				argoapp.AnnotationHubApplicationNamespace: f.ns,
				argoapp.AnnotationHubApplicationName:      "ghost",
			},
		}}
		f.create(orphan)
		g.Eventually(func() bool {
			return apierrors.IsNotFound(f.c.Get(f.ctx, client.ObjectKeyFromObject(orphan), &workv1.ManifestWork{}))
		}).Should(gomega.BeTrue(), "the orphaned work was not deleted")
	})
}

func TestEnvtestRetargeting(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	east := f.readyCluster("east")
	west := f.readyCluster("west")

	t.Run("label removed", func(t *testing.T) {
		f := f.sub(t)
		g := f.g
		f.create(f.application("unlabel", east))
		f.waitForWork("unlabel", east)
		f.updateApp("unlabel", func(app *unstructured.Unstructured) { app.SetLabels(nil) })
		g.Eventually(func() []string { return f.workKeys("unlabel") }).Should(gomega.BeEmpty())
		g.Eventually(func() bool { return hasFinalizer(f.getApp("unlabel"), argoapp.FinalizerManifestWorkCleanup) }).Should(gomega.BeFalse())
		g.Expect(f.condition("unlabel")).To(gomega.BeEmpty())
	})

	t.Run("label set to false", func(t *testing.T) {
		f := f.sub(t)
		g := f.g
		f.create(f.application("off", east))
		f.waitForWork("off", east)
		f.updateApp("off", func(app *unstructured.Unstructured) {
			app.SetLabels(map[string]string{argoapp.LabelPullToOCMManagedCluster: "false"})
		})
		g.Eventually(func() []string { return f.workKeys("off") }).Should(gomega.BeEmpty())
	})

	t.Run("cluster annotation changed", func(t *testing.T) {
		f := f.sub(t)
		g := f.g
		f.create(f.application("move", east))
		f.waitForWork("move", east)
		f.updateApp("move", func(app *unstructured.Unstructured) {
			annotations := app.GetAnnotations()
			annotations[argoapp.AnnotationOCMManagedCluster] = west
			app.SetAnnotations(annotations)
		})
		f.waitForWork("move", west)
		g.Consistently(func() []string { return f.workKeys("move") }).Should(gomega.HaveLen(1))
	})

	t.Run("moved back while its old work is still being deleted", func(t *testing.T) {
		f := f.sub(t)
		g := f.g
		f.create(f.application("back", east))
		first := f.waitForWork("back", east)
		// Play the work agent, which holds the work until the spoke app is gone.
		first.Finalizers = []string{"cluster.open-cluster-management.io/manifest-work-cleanup"}
		g.Expect(f.c.Update(f.ctx, first)).To(gomega.Succeed())
		retarget := func(cluster string) {
			f.updateApp("back", func(app *unstructured.Unstructured) { setAnnotation(app, argoapp.AnnotationOCMManagedCluster, cluster) })
		}
		retarget(west)
		f.g.Eventually(func() []string { return f.workKeys("back") }).Should(gomega.ConsistOf(east+"/"+first.Name, west+"/"+first.Name))
		retarget(east)
		// The west work goes; the east one, still being deleted, is not written to.
		g.Eventually(func() []string { return f.workKeys("back") }).Should(gomega.Equal([]string{east + "/" + first.Name}))
		g.Expect(f.waitForWork("back", east).DeletionTimestamp).NotTo(gomega.BeNil())
		// Once the agent lets it go, it is created anew.
		stuck := f.waitForWork("back", east)
		stuck.Finalizers = nil
		g.Expect(f.c.Update(f.ctx, stuck)).To(gomega.Succeed())
		g.Eventually(func() bool {
			works := f.worksOf("back")
			return len(works) == 1 && works[0].Namespace == east && works[0].DeletionTimestamp == nil && works[0].UID != first.UID
		}).Should(gomega.BeTrue())
	})

	t.Run("re-created with a new UID", func(t *testing.T) {
		f := f.sub(t)
		g := f.g
		f.create(f.application("again", east))
		first := f.waitForWork("again", east)
		g.Expect(f.c.Delete(f.ctx, f.getApp("again"))).To(gomega.Succeed())
		g.Eventually(func() *unstructured.Unstructured { return f.getApp("again") }).Should(gomega.BeNil())
		f.create(f.application("again", east))
		second := f.waitForWork("again", east)
		g.Expect(second.Name).NotTo(gomega.Equal(first.Name))
		g.Consistently(func() []string { return f.workKeys("again") }).Should(gomega.HaveLen(1))
	})

	t.Run("a work of an earlier UID is removed", func(t *testing.T) {
		f := f.sub(t)
		g := f.g
		f.create(f.application("stale", east))
		current := f.waitForWork("stale", east)
		// A work left by an earlier Application of the same name, in another cluster.
		leftover := current.DeepCopy()
		leftover.ObjectMeta = metav1.ObjectMeta{
			Name: ManifestWorkName("stale", "00000-old"), Namespace: west,
			Labels: current.Labels, Annotations: current.Annotations,
		}
		f.create(leftover)
		g.Eventually(func() []string { return f.workKeys("stale") }).Should(gomega.Equal([]string{east + "/" + current.Name}))
	})
}

// Point 6: manual sync and refresh.

func TestEnvtestOperationAndRefresh(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	g := f.g
	cluster := f.readyCluster("east")
	f.create(f.application("guestbook", cluster))
	work := f.waitForWork("guestbook", cluster)
	// The spoke Application ran an operation before: its state is the baseline.
	f.setOperationFeedback(client.ObjectKeyFromObject(work), "Succeeded", "2026-01-01T00:00:00Z")

	operation := map[string]any{
		"sync":        map[string]any{"revision": "main", "prune": true},
		"initiatedBy": map[string]any{"username": "alice"},
	}
	f.updateApp("guestbook", func(app *unstructured.Unstructured) {
		app.Object["operation"] = operation
		annotations := app.GetAnnotations()
		annotations[argoapp.AnnotationRefresh] = "hard"
		app.SetAnnotations(annotations)
	})

	// Both reach the work's payload, which marks the operation's baseline, and stay on
	// the hub until the work is applied.
	g.Eventually(func() bool {
		work = f.waitForWork("guestbook", cluster)
		spoke := payload(t, work)
		return spoke.GetAnnotations()[argoapp.AnnotationRefresh] == "hard" && spoke.Object["operation"] != nil
	}).Should(gomega.BeTrue())
	g.Expect(payload(t, work).Object["operation"]).To(gomega.Equal(operation))
	g.Expect(work.Annotations).To(gomega.HaveKeyWithValue(argoapp.AnnotationOperationBaseline, "2026-01-01T00:00:00Z"))
	g.Consistently(func() bool {
		app := f.getApp("guestbook")
		return app.GetAnnotations()[argoapp.AnnotationRefresh] == "hard" && app.Object["operation"] != nil
	}, "1s").Should(gomega.BeTrue(), "removed from the hub before the work agent applied it")

	// The work agent applies an older generation: nothing happens yet.
	stale := work.DeepCopy()
	meta.SetStatusCondition(&stale.Status.Conditions, metav1.Condition{
		Type: workv1.WorkApplied, Status: metav1.ConditionTrue, Reason: "AppliedManifestWorkComplete", ObservedGeneration: work.Generation - 1,
	})
	g.Expect(f.c.Status().Update(f.ctx, stale)).To(gomega.Succeed())
	g.Consistently(func() string { return f.getApp("guestbook").GetAnnotations()[argoapp.AnnotationRefresh] }, "1s").Should(gomega.Equal("hard"))

	// It applies the current one: the refresh has reached the spoke and leaves the hub
	// app and the payload. The operation has not run yet: it stays on both.
	f.markApplied(client.ObjectKeyFromObject(work))
	g.Eventually(func() bool {
		_, refresh := f.getApp("guestbook").GetAnnotations()[argoapp.AnnotationRefresh]
		return refresh
	}).Should(gomega.BeFalse())
	g.Eventually(func() bool {
		_, refresh := payload(t, f.waitForWork("guestbook", cluster)).GetAnnotations()[argoapp.AnnotationRefresh]
		return refresh
	}).Should(gomega.BeFalse())
	hasOperation := func() bool { return f.getApp("guestbook").Object["operation"] != nil }
	g.Consistently(hasOperation, "1s").Should(gomega.BeTrue(), "the operation left the hub before the spoke ran it")
	g.Expect(payload(t, f.waitForWork("guestbook", cluster)).Object["operation"]).To(gomega.Equal(operation))

	// The spoke starts it, and runs it: it stays while it runs.
	key := client.ObjectKeyFromObject(work)
	f.markApplied(key)
	f.setOperationFeedback(key, "Running", "2026-01-01T00:10:00Z")
	g.Consistently(hasOperation, "1s").Should(gomega.BeTrue(), "the operation left the hub while the spoke ran it")

	// It completes: the operation stays until the hub app's status shows the result
	// (the status mirror's write), then leaves the hub app, the payload and its baseline.
	f.setOperationFeedback(key, "Succeeded", "2026-01-01T00:10:00Z")
	g.Consistently(hasOperation, "1s").Should(gomega.BeTrue(), "the operation left the hub before its status showed the result")
	f.updateApp("guestbook", func(app *unstructured.Unstructured) {
		g.Expect(unstructured.SetNestedMap(app.Object, map[string]any{"phase": "Succeeded", "startedAt": "2026-01-01T00:10:00Z", "operation": map[string]any{}},
			"status", "operationState")).To(gomega.Succeed())
	})
	g.Eventually(hasOperation).Should(gomega.BeFalse())
	g.Eventually(func() bool {
		work := f.waitForWork("guestbook", cluster)
		_, baseline := work.Annotations[argoapp.AnnotationOperationBaseline]
		return payload(t, work).Object["operation"] != nil || baseline
	}).Should(gomega.BeFalse())
	g.Eventually(func() []string { return f.eventReasons(f.ns, "guestbook", corev1.EventTypeNormal) }).
		Should(gomega.ContainElements(ReasonRefreshDelivered, ReasonOperationCompleted))
}

// Point 8: pause.

func TestEnvtestPause(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	g := f.g
	cluster := f.readyCluster("east")
	f.create(f.application("existing", cluster))
	f.create(f.application("doomed", cluster))
	existing := f.waitForWork("existing", cluster)
	doomed := f.waitForWork("doomed", cluster)

	pausedCondition := func() *metav1.Condition {
		addon := &addonv1beta1.ManagedClusterAddOn{}
		g.Expect(f.c.Get(f.ctx, types.NamespacedName{Namespace: cluster, Name: f.opts.AddonName}, addon)).To(gomega.Succeed())
		return meta.FindStatusCondition(addon.Status.Conditions, ConditionPropagationPaused)
	}
	conditionStatus := func() metav1.ConditionStatus {
		if c := pausedCondition(); c != nil {
			return c.Status
		}
		return ""
	}
	g.Eventually(conditionStatus).Should(gomega.Equal(metav1.ConditionFalse))

	// Another writer's condition on the same status survives ours (server-side apply).
	addon := &addonv1beta1.ManagedClusterAddOn{}
	g.Expect(f.c.Get(f.ctx, types.NamespacedName{Namespace: cluster, Name: f.opts.AddonName}, addon)).To(gomega.Succeed())
	meta.SetStatusCondition(&addon.Status.Conditions, metav1.Condition{Type: "Available", Status: metav1.ConditionTrue, Reason: "Test", Message: "framework"})
	g.Expect(f.c.Status().Update(f.ctx, addon)).To(gomega.Succeed())

	f.setPause("true")
	g.Eventually(conditionStatus).Should(gomega.Equal(metav1.ConditionTrue))
	writesBeforePause := f.workWrites()
	g.Expect(pausedCondition().Reason).To(gomega.Equal(ReasonPauseAnnotationSet))
	g.Eventually(func() []string { return f.eventReasons(cluster, f.opts.AddonName, corev1.EventTypeNormal) }).
		Should(gomega.ContainElement(ReasonPropagationPaused))

	// Nothing is written to works: no creation, no update, no deletion.
	f.create(f.application("new", cluster))
	f.updateApp("existing", func(app *unstructured.Unstructured) {
		g.Expect(unstructured.SetNestedField(app.Object, "v2", "spec", "source", "targetRevision")).To(gomega.Succeed())
	})
	g.Expect(f.c.Delete(f.ctx, f.getApp("doomed"))).To(gomega.Succeed())
	g.Consistently(func() []string { return f.workKeys("new") }).Should(gomega.BeEmpty())
	g.Expect(f.workWrites()).To(gomega.Equal(writesBeforePause), "a work was written while paused")
	g.Expect(f.waitForWork("existing", cluster).ResourceVersion).To(gomega.Equal(existing.ResourceVersion))
	g.Expect(f.waitForWork("doomed", cluster).ResourceVersion).To(gomega.Equal(doomed.ResourceVersion))
	g.Expect(f.getApp("doomed")).NotTo(gomega.BeNil(), "the deleted app was released while paused")
	g.Eventually(func() []string { return f.eventReasons(f.ns, "existing", corev1.EventTypeNormal) }).
		Should(gomega.ContainElement(ReasonPropagationPaused))

	// A value that is not a boolean stays paused, and says why.
	f.setPause("yes")
	g.Eventually(func() string { return pausedCondition().Reason }).Should(gomega.Equal(ReasonPauseAnnotationInvalid))
	g.Expect(conditionStatus()).To(gomega.Equal(metav1.ConditionTrue))
	g.Consistently(func() []string { return f.workKeys("new") }, "500ms").Should(gomega.BeEmpty())

	// Resume: everything that waited happens.
	f.setPause("")
	g.Eventually(conditionStatus).Should(gomega.Equal(metav1.ConditionFalse))
	f.waitForWork("new", cluster)
	g.Eventually(func() int64 { return f.waitForWork("existing", cluster).Generation }).Should(gomega.Equal(existing.Generation + 1))
	g.Eventually(func() *unstructured.Unstructured { return f.getApp("doomed") }).Should(gomega.BeNil())
	g.Expect(f.workKeys("doomed")).To(gomega.BeEmpty())
	g.Eventually(func() []string { return f.eventReasons(cluster, f.opts.AddonName, corev1.EventTypeNormal) }).
		Should(gomega.ContainElement(ReasonPropagationResumed))

	g.Expect(f.c.Get(f.ctx, types.NamespacedName{Namespace: cluster, Name: f.opts.AddonName}, addon)).To(gomega.Succeed())
	g.Expect(meta.FindStatusCondition(addon.Status.Conditions, "Available")).NotTo(gomega.BeNil(), "the framework's condition was clobbered")
}

// Bad input: an Event, a condition, no hot requeue.

func TestEnvtestBadInput(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	g := f.g
	cluster := f.readyCluster("east")

	tests := []struct {
		name   string
		reason string
		change func(app *unstructured.Unstructured)
	}{
		{"malformed-label", ReasonMalformedLabel, func(app *unstructured.Unstructured) {
			app.SetLabels(map[string]string{argoapp.LabelPullToOCMManagedCluster: "yes"})
		}},
		{"no-cluster", ReasonMissingClusterAnnotation, func(app *unstructured.Unstructured) {
			setAnnotation(app, argoapp.AnnotationOCMManagedCluster, "")
		}},
		{"bad-cluster", ReasonInvalidClusterName, func(app *unstructured.Unstructured) {
			setAnnotation(app, argoapp.AnnotationOCMManagedCluster, "Not_A_Cluster")
		}},
		{"bad-app-namespace", ReasonInvalidAppNamespace, func(app *unstructured.Unstructured) {
			setAnnotation(app, argoapp.AnnotationOCMManagedClusterAppNamespace, "Bad_Namespace")
		}},
		{"two-destinations", ReasonInvalidDestination, func(app *unstructured.Unstructured) {
			setAnnotation(app, argoapp.AnnotationDestinationName, "remote")
			setAnnotation(app, argoapp.AnnotationDestinationServer, "https://remote.example.com")
		}},
		{"too-large", ReasonPayloadTooLarge, func(app *unstructured.Unstructured) {
			values := strings.Repeat("x", MaxManifestsSize)
			g.Expect(unstructured.SetNestedField(app.Object, map[string]any{"values": values}, "spec", "source", "helm")).To(gomega.Succeed())
		}},
	}
	for _, tt := range tests {
		app := f.application(tt.name, cluster)
		tt.change(app)
		f.create(app)
	}
	for _, tt := range tests {
		t.Run(tt.reason, func(t *testing.T) {
			f := f.sub(t)
			g := f.g
			f.expectProblem(tt.name, tt.reason)
			g.Expect(f.workKeys(tt.name)).To(gomega.BeEmpty())
		})
	}

	t.Run("MissingSkipReconcile refuses until the annotation is set", func(t *testing.T) {
		f := f.sub(t)
		g := f.g
		app := f.application("push-too", cluster)
		annotations := app.GetAnnotations()
		delete(annotations, argoapp.AnnotationSkipReconcile)
		app.SetAnnotations(annotations)
		f.create(app)
		f.expectProblem("push-too", ReasonMissingSkipReconcile)
		g.Eventually(func() []string { return f.eventReasons(f.ns, "push-too", corev1.EventTypeWarning) }).
			Should(gomega.ContainElement(ReasonMissingSkipReconcile))
		g.Consistently(func() []string { return f.workKeys("push-too") }).Should(gomega.BeEmpty())

		f.updateApp("push-too", func(app *unstructured.Unstructured) { setAnnotation(app, argoapp.AnnotationSkipReconcile, "true") })
		f.waitForWork("push-too", cluster)
		g.Eventually(func() string { return f.condition("push-too") }).Should(gomega.BeEmpty())
	})

	t.Run("broken input keeps the last good work, and the fix clears the condition", func(t *testing.T) {
		f := f.sub(t)
		g := f.g
		f.create(f.application("broken-later", cluster))
		work := f.waitForWork("broken-later", cluster)
		f.updateApp("broken-later", func(app *unstructured.Unstructured) {
			app.SetLabels(map[string]string{argoapp.LabelPullToOCMManagedCluster: "maybe"})
		})
		writes := f.workWrites()
		f.expectProblem("broken-later", ReasonMalformedLabel)
		g.Consistently(func() string { return f.waitForWork("broken-later", cluster).ResourceVersion }, "1s").
			Should(gomega.Equal(work.ResourceVersion))
		g.Expect(f.workWrites()).To(gomega.Equal(writes), "a work was written for broken input")

		f.updateApp("broken-later", func(app *unstructured.Unstructured) {
			app.SetLabels(map[string]string{argoapp.LabelPullToOCMManagedCluster: "true"})
		})
		g.Eventually(func() string { return f.condition("broken-later") }).Should(gomega.BeEmpty())
	})

	t.Run("conditions of other types are kept", func(t *testing.T) {
		f := f.sub(t)
		g := f.g
		app := f.application("shared-status", f.clusterName("absent"))
		f.create(app)
		f.expectProblem("shared-status", ReasonClusterNotFound)
		// Another controller adds its own condition next to ours.
		f.updateApp("shared-status", func(app *unstructured.Unstructured) {
			conditions, _, _ := unstructured.NestedSlice(app.Object, "status", "conditions")
			conditions = append(conditions, map[string]any{"type": "SyncError", "message": "spoke says no"})
			g.Expect(unstructured.SetNestedSlice(app.Object, conditions, "status", "conditions")).To(gomega.Succeed())
		})
		// Our condition changes (the cluster exists now, without the addon) and then goes.
		absent := f.createCluster("absent", false)
		f.bind(f.ns, absent)
		f.expectProblem("shared-status", ReasonAddonNotEnabled)
		f.enableAddon(absent)
		g.Eventually(func() string { return f.condition("shared-status") }).Should(gomega.BeEmpty())
		_, found, err := argoapp.FindCondition(f.getApp("shared-status"), "SyncError")
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(found).To(gomega.BeTrue(), "another writer's condition was clobbered")
	})
}

// The sweep is a safety net: it finds leftovers and hands them to the reconcile.

func TestEnvtestSweepFindsLeftovers(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	g := f.g
	cluster := f.readyCluster("east")
	f.create(f.application("current", cluster))
	current := f.waitForWork("current", cluster)

	// A reconciler that runs no controller, so that the leftovers stay for the sweep.
	r := &reconciler{client: f.c, apiReader: f.c, opts: f.opts}
	g.Expect(r.leftoverWorks(f.ctx)).To(gomega.BeEmpty(), "the current work is no leftover: %s", current.Name)

	// Works the sweep must report, in a namespace the manager does not watch: one of an
	// app that is gone, and one of an earlier UID of an app.
	paused := f.opts
	paused.WatchNamespaces = []string{"swept-" + f.id}
	f.createNamespace(paused.WatchNamespaces[0])
	gone := workv1.ManifestWork{ObjectMeta: metav1.ObjectMeta{
		Name: "gone-abcde", Namespace: cluster,
		Labels: map[string]string{argoapp.LabelPullToOCMManagedCluster: "true"},
		Annotations: map[string]string{
			argoapp.AnnotationHubApplicationNamespace: paused.WatchNamespaces[0],
			argoapp.AnnotationHubApplicationName:      "gone",
		},
	}}
	f.create(&gone)
	app := f.application("moved", cluster)
	app.SetNamespace(paused.WatchNamespaces[0])
	f.create(app)
	earlier := gone.DeepCopy()
	earlier.ObjectMeta = metav1.ObjectMeta{
		Name: ManifestWorkName("moved", "fffff-earlier"), Namespace: cluster, Labels: gone.Labels,
	}
	earlier.Annotations = map[string]string{
		argoapp.AnnotationHubApplicationNamespace: paused.WatchNamespaces[0],
		argoapp.AnnotationHubApplicationName:      "moved",
	}
	f.create(earlier)
	r = &reconciler{client: f.c, apiReader: f.c, opts: paused}
	g.Expect(r.leftoverWorks(f.ctx)).To(gomega.ConsistOf(
		types.NamespacedName{Namespace: paused.WatchNamespaces[0], Name: "gone"},
		types.NamespacedName{Namespace: paused.WatchNamespaces[0], Name: "moved"},
	))
}

// A refresh or an operation that changed since it was rendered is never removed.
func TestEnvtestTestAndRemoveKeepsNewerValue(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(o *Options) { o.WatchNamespaces = []string{"unwatched"} })
	g := f.g
	app := f.application("guestbook", f.clusterName("none"))
	setAnnotation(app, argoapp.AnnotationRefresh, "hard")
	app.Object["operation"] = map[string]any{"sync": map[string]any{"revision": "new"}}
	f.create(app)

	r := &reconciler{client: f.c, apiReader: f.c, opts: f.opts}
	path := "/metadata/annotations/" + escapeJSONPointer(argoapp.AnnotationRefresh)
	removed, err := r.testAndRemove(f.ctx, f.getApp("guestbook"), path, "normal")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(removed).To(gomega.BeFalse())
	removed, err = r.testAndRemove(f.ctx, f.getApp("guestbook"), "/operation", map[string]any{"sync": map[string]any{"revision": "old"}})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(removed).To(gomega.BeFalse())
	current := f.getApp("guestbook")
	g.Expect(current.GetAnnotations()).To(gomega.HaveKeyWithValue(argoapp.AnnotationRefresh, "hard"))
	g.Expect(current.Object).To(gomega.HaveKey("operation"))

	removed, err = r.testAndRemove(f.ctx, current, path, "hard")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(removed).To(gomega.BeTrue())
	g.Expect(f.getApp("guestbook").GetAnnotations()).NotTo(gomega.HaveKey(argoapp.AnnotationRefresh))
}

// The work of an Application of another project than "default" carries the hub
// AppProject, and follows its changes.
func TestEnvtestShipsAppProject(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	g := f.g
	cluster := f.readyCluster("east")
	project := argoapp.NewAppProject()
	project.SetNamespace(f.opts.ArgoCDNamespace)
	project.SetName("team-a")
	project.Object["spec"] = map[string]any{"sourceRepos": []any{"*"}, "sourceNamespaces": []any{f.ns}}
	f.create(project)

	app := f.application("guestbook", cluster)
	g.Expect(unstructured.SetNestedField(app.Object, "team-a", "spec", "project")).To(gomega.Succeed())
	f.create(app)
	projectRepos := func() []any {
		for _, manifest := range f.waitForWork("guestbook", cluster).Spec.Workload.Manifests {
			obj := &unstructured.Unstructured{}
			g.Expect(obj.UnmarshalJSON(manifest.Raw)).To(gomega.Succeed())
			if obj.GroupVersionKind() == argoapp.AppProjectGVK {
				repos, _, _ := unstructured.NestedSlice(obj.Object, "spec", "sourceRepos")
				return repos
			}
		}
		return nil
	}
	g.Eventually(projectRepos).Should(gomega.Equal([]any{"*"}))

	g.Eventually(func() error {
		current := argoapp.NewAppProject()
		if err := f.c.Get(f.ctx, client.ObjectKeyFromObject(project), current); err != nil {
			return err
		}
		current.Object["spec"] = map[string]any{"sourceRepos": []any{"https://git.example.com/apps.git"}, "sourceNamespaces": []any{f.ns}}
		return f.c.Update(f.ctx, current)
	}).Should(gomega.Succeed())
	g.Eventually(projectRepos).Should(gomega.Equal([]any{"https://git.example.com/apps.git"}))
}
