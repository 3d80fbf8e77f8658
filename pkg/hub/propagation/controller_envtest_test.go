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
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	addonv1beta1 "open-cluster-management.io/api/addon/v1beta1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	statusv1alpha1 "github.com/ocm-gitops/argocd-pull-addon/pkg/apis/argocdpull/v1alpha1"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/clusterreport"
	"github.com/ocm-gitops/argocd-pull-addon/test/testenv"
)

// Point 1: selection.

func TestEnvtestPullsSelectedApplication(t *testing.T) {
	f, cluster := startEast(t, nil)
	g := f.G

	app := f.Application("guestbook", cluster)
	f.Create(app)
	work := f.WaitForWork("guestbook", cluster)

	// The work is the render of the Application, marked as the manager's.
	want, err := RenderManifestWork(f.GetApp("guestbook"), RenderOptions{})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	want.Labels[argoapp.LabelAddon] = f.opts.AddonName
	g.Expect(workUpToDate(work, want)).To(gomega.BeTrue(), "the work is not the render of the application")
	g.Expect(testenv.Payload(t, work).GetNamespace()).To(gomega.Equal(f.Namespace))
	g.Eventually(func() bool { return hasFinalizer(f.GetApp("guestbook"), argoapp.FinalizerManifestWorkCleanup) }).Should(gomega.BeTrue())
	g.Expect(f.Condition("guestbook", argoapp.ConditionOCMPropagationError)).To(gomega.BeEmpty())
	// A routine apply records no Event: a log line only.
	g.Consistently(func() []string { return f.EventReasons(f.Namespace, "guestbook", corev1.EventTypeNormal) }, "1s").
		Should(gomega.BeEmpty(), "a routine apply recorded an Event")

	// A status-only update does not touch the work: no write, not even a no-op apply.
	resourceVersion, generation := work.ResourceVersion, work.Generation
	applies := f.writes.Count("apply", "ManifestWork", cluster, work.Name)
	g.Expect(applies).To(gomega.Equal(1))
	f.UpdateApp("guestbook", func(app *unstructured.Unstructured) {
		app.Object["status"] = map[string]any{"sync": map[string]any{"status": "Synced"}, "health": map[string]any{"status": "Healthy"}}
	})
	g.Consistently(func() string {
		return f.WaitForWork("guestbook", cluster).ResourceVersion
	}).Should(gomega.Equal(resourceVersion), "a status-only update rewrote the work")
	g.Expect(f.writes.Count("apply", "ManifestWork", cluster, work.Name)).To(gomega.Equal(applies), "a status-only update re-applied the work")
	// Nor does a restart: the work read back from the apiserver is up to date.
	g.Expect(workUpToDate(f.WaitForWork("guestbook", cluster), want)).To(gomega.BeTrue())

	// A spec change does.
	f.UpdateApp("guestbook", func(app *unstructured.Unstructured) {
		g.Expect(unstructured.SetNestedField(app.Object, "v2", "spec", "source", "targetRevision")).To(gomega.Succeed())
	})
	g.Eventually(func() string {
		revision, _, _ := unstructured.NestedString(testenv.Payload(t, f.WaitForWork("guestbook", cluster)).Object, "spec", "source", "targetRevision")
		return revision
	}).Should(gomega.Equal("v2"))
	g.Expect(f.WaitForWork("guestbook", cluster).Generation).To(gomega.Equal(generation + 1))

	// Neither a false label nor an absent one is pulled.
	off := f.Application("off", cluster)
	off.SetLabels(map[string]string{argoapp.LabelPullToOCMManagedCluster: "false"})
	f.Create(off)
	unlabelled := f.Application("unlabelled", cluster)
	unlabelled.SetLabels(nil)
	f.Create(unlabelled)
	g.Consistently(func() []string { return append(f.WorkKeys("off"), f.WorkKeys("unlabelled")...) }).Should(gomega.BeEmpty())
	g.Expect(f.Condition("off", argoapp.ConditionOCMPropagationError)).To(gomega.BeEmpty())
	g.Expect(hasFinalizer(f.GetApp("off"), argoapp.FinalizerManifestWorkCleanup)).To(gomega.BeFalse())
}

func TestEnvtestWatchNamespaces(t *testing.T) {
	f, cluster := startEast(t, nil) // watches f.Namespace only
	g := f.G
	other := "other-" + f.id
	f.CreateNamespace(other)
	f.bind(other, cluster)

	outside := f.Application("outside", cluster)
	outside.SetNamespace(other)
	f.Create(outside)
	f.Create(f.Application("inside", cluster))

	f.WaitForWork("inside", cluster)
	g.Consistently(func() []workv1.ManifestWork {
		works := &workv1.ManifestWorkList{}
		g.Expect(f.C.List(f.Ctx, works, client.InNamespace(cluster))).To(gomega.Succeed())
		return slices.DeleteFunc(works.Items, func(w workv1.ManifestWork) bool {
			return w.Annotations[argoapp.AnnotationHubApplicationNamespace] != other
		})
	}).Should(gomega.BeEmpty(), "an application outside the watched namespaces was pulled")
	outsideApp := argoapp.NewApplication()
	g.Expect(f.C.Get(f.Ctx, client.ObjectKeyFromObject(outside), outsideApp)).To(gomega.Succeed())
	g.Expect(outsideApp.GetFinalizers()).To(gomega.BeEmpty())
}

// TestEnvtestAllNamespaces runs alone, before the parallel tests start: a manager that
// watches every namespace would act on the other tests' Applications.
func TestEnvtestAllNamespaces(t *testing.T) {
	f := newFixture(t, func(o *Options) { o.WatchNamespaces = nil })
	cluster := f.readyCluster("east")
	f.propagate("anywhere", cluster)
}

// Point 3: per-cluster opt-in.

func TestEnvtestClusterNotFoundThenCreated(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	g := f.G
	cluster := f.clusterName("late")
	f.Create(f.Application("guestbook", cluster))

	f.ExpectPropagationError("guestbook", ReasonClusterNotFound)
	g.Expect(f.Condition("guestbook", argoapp.ConditionOCMPropagationError)).To(gomega.ContainSubstring(cluster))
	g.Expect(f.WorkKeys("guestbook")).To(gomega.BeEmpty())

	f.createCluster("late", true)
	f.bind(f.Namespace, cluster)
	f.WaitForWork("guestbook", cluster)
	f.ExpectNoPropagationError("guestbook")
}

func TestEnvtestAddonEnablement(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	g := f.G
	cluster := f.createCluster("east", false)
	f.bind(f.Namespace, cluster)
	f.Create(f.Application("guestbook", cluster))

	f.ExpectPropagationError("guestbook", ReasonAddonNotEnabled)
	g.Expect(f.Condition("guestbook", argoapp.ConditionOCMPropagationError)).To(gomega.ContainSubstring(f.opts.AddonName))
	f.ExpectNoWorksStay("guestbook")

	// The addon appears: propagation starts on its own.
	f.enableAddon(cluster)
	f.WaitForWork("guestbook", cluster)
	f.ExpectNoPropagationError("guestbook")

	// The addon goes for a while (an install strategy re-creating it, say): the work is
	// kept, within the opt-out grace period, and said so.
	work := f.WaitForWork("guestbook", cluster)
	f.disableAddon(cluster)
	f.ExpectPropagationError("guestbook", ReasonAddonNotEnabled)
	g.Expect(f.Condition("guestbook", argoapp.ConditionOCMPropagationError)).To(gomega.ContainSubstring("kept until"))
	g.Consistently(func() types.UID { return f.WaitForWork("guestbook", cluster).UID }).Should(gomega.Equal(work.UID))

	// It comes back: the same work, and the condition goes.
	f.enableAddon(cluster)
	f.ExpectNoPropagationError("guestbook")
	g.Expect(f.WaitForWork("guestbook", cluster).UID).To(gomega.Equal(work.UID))
}

// A deliberate opt-out cleans up once the grace period has passed: the work goes, and
// the finalizer with it.
func TestEnvtestOptOutGracePeriod(t *testing.T) {
	f, cluster := startEast(t, func(o *Options) { o.OptOutGracePeriod = 3 * time.Second })
	g := f.G
	work := f.propagate("guestbook", cluster)

	f.disableAddon(cluster)
	f.ExpectPropagationError("guestbook", ReasonAddonNotEnabled)
	g.Consistently(func() types.UID { return f.WaitForWork("guestbook", cluster).UID }, "1s").Should(gomega.Equal(work.UID))
	f.ExpectNoWorks("guestbook")
	g.Eventually(func() bool { return hasFinalizer(f.GetApp("guestbook"), argoapp.FinalizerManifestWorkCleanup) }).Should(gomega.BeFalse())
	f.ExpectPropagationError("guestbook", ReasonAddonNotEnabled)
}

func TestEnvtestClusterDeleted(t *testing.T) {
	f, cluster := startEast(t, func(o *Options) { o.OptOutGracePeriod = 0 })
	g := f.G
	f.propagate("guestbook", cluster)

	g.Expect(f.C.Delete(f.Ctx, &clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: cluster}})).To(gomega.Succeed())
	f.ExpectNoWorks("guestbook")
	f.ExpectPropagationError("guestbook", ReasonClusterNotFound)
}

// Point 4: the tenant gate.

func TestEnvtestTenantGate(t *testing.T) {
	f, cluster := startUnboundEast(t, nil)
	g := f.G
	// A decision in another namespace does not bind the cluster to this one.
	other := "other-" + f.id
	f.CreateNamespace(other)
	f.bind(other, cluster)
	f.Create(f.Application("guestbook", cluster))

	f.ExpectPropagationError("guestbook", ReasonClusterNotBoundToNamespace)
	g.Expect(f.Condition("guestbook", argoapp.ConditionOCMPropagationError)).To(gomega.ContainSubstring(f.Namespace))
	f.ExpectNoWorksStay("guestbook")

	// A decision of the namespace that selects another cluster does not either; once it
	// selects this one, the app propagates.
	name := f.bind(f.Namespace, f.clusterName("elsewhere"))
	decision := &clusterv1beta1.PlacementDecision{}
	g.Expect(f.C.Get(f.Ctx, types.NamespacedName{Namespace: f.Namespace, Name: name}, decision)).To(gomega.Succeed())
	g.Consistently(func() []string { return f.WorkKeys("guestbook") }, "500ms").Should(gomega.BeEmpty())
	f.setDecisions(decision, f.clusterName("elsewhere"), cluster)
	f.WaitForWork("guestbook", cluster)
	f.ExpectNoPropagationError("guestbook")

	// The placement drops the cluster for a moment (a decision page rewritten, the
	// cluster unreachable): the work is kept, and said so.
	work := f.WaitForWork("guestbook", cluster)
	f.setDecisions(decision, f.clusterName("elsewhere"))
	f.ExpectPropagationError("guestbook", ReasonClusterNotBoundToNamespace)
	g.Consistently(func() types.UID { return f.WaitForWork("guestbook", cluster).UID }, "1s").Should(gomega.Equal(work.UID))
	f.setDecisions(decision, f.clusterName("elsewhere"), cluster)
	f.ExpectNoPropagationError("guestbook")
	g.Expect(f.WaitForWork("guestbook", cluster).UID).To(gomega.Equal(work.UID))
}

// A PlacementDecision that no Placement owns (written by hand) binds nothing.
func TestEnvtestTenantGateIgnoresForgedDecisions(t *testing.T) {
	f, cluster := startUnboundEast(t, nil)
	forged := &clusterv1beta1.PlacementDecision{ObjectMeta: metav1.ObjectMeta{
		Name: "forged", Namespace: f.Namespace, Labels: map[string]string{clusterv1beta1.PlacementLabel: "forged"},
	}}
	f.Create(forged)
	f.setDecisions(forged, cluster)
	f.Create(f.Application("guestbook", cluster))
	f.ExpectPropagationError("guestbook", ReasonClusterNotBoundToNamespace)
	f.ExpectNoWorksStay("guestbook")

	f.bind(f.Namespace, cluster)
	f.WaitForWork("guestbook", cluster)
}

// A PlacementDecision whose owner reference names a Placement by kind and name, but not
// its UID, binds nothing: neither a Placement of that name that does not exist, nor one
// that does but is not the owner (the decision was written by hand, copying the name).
// The Placement's own decision binds; once the Placement is gone, it no longer does.
func TestEnvtestTenantGateMatchesThePlacementUID(t *testing.T) {
	f, cluster := startUnboundEast(t, nil)
	g := f.G
	f.Create(&clusterv1beta1.Placement{ObjectMeta: metav1.ObjectMeta{Name: "real", Namespace: f.Namespace}})
	placementGVK := schema.GroupVersionKind{Group: clusterv1beta1.GroupName, Version: "v1beta1", Kind: "Placement"}
	for _, owner := range []struct{ placement, uid string }{
		{"ghost", "6f0c3f3e-0000-4000-8000-000000000001"}, // no such Placement
		{"real", "6f0c3f3e-0000-4000-8000-000000000002"},  // its name, another UID
	} {
		forged := &clusterv1beta1.PlacementDecision{ObjectMeta: metav1.ObjectMeta{
			Name: owner.placement + "-forged", Namespace: f.Namespace,
			Labels: map[string]string{clusterv1beta1.PlacementLabel: owner.placement},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(&clusterv1beta1.Placement{ObjectMeta: metav1.ObjectMeta{
				Name: owner.placement, UID: types.UID(owner.uid)}}, placementGVK)},
		}}
		f.Create(forged)
		f.setDecisions(forged, cluster)
	}
	f.Create(f.Application("guestbook", cluster))
	f.ExpectPropagationError("guestbook", ReasonClusterNotBoundToNamespace)
	f.ExpectNoWorksStay("guestbook")

	// The decision the Placement owns binds.
	placement := "placement-" + testenv.RandomID()
	_, err := testenv.CreatePlacementDecision(f.Ctx, f.C, f.Namespace, placement, 1, cluster)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	f.WaitForWork("guestbook", cluster)
	f.ExpectNoPropagationError("guestbook")

	// Its Placement deleted (envtest has no garbage collector to take the decision with
	// it): the decision binds no more.
	g.Expect(f.C.Delete(f.Ctx, &clusterv1beta1.Placement{ObjectMeta: metav1.ObjectMeta{Name: placement, Namespace: f.Namespace}})).To(gomega.Succeed())
	f.ExpectPropagationError("guestbook", ReasonClusterNotBoundToNamespace)
}

func TestEnvtestTenantGateOff(t *testing.T) {
	f, cluster := startUnboundEast(t, func(o *Options) { o.RequirePlacementBinding = false }) // no PlacementDecision anywhere
	f.propagate("guestbook", cluster)
	f.G.Expect(f.Condition("guestbook", argoapp.ConditionOCMPropagationError)).To(gomega.BeEmpty())
}

// Point 5: deletion and re-targeting.

func TestEnvtestDeletion(t *testing.T) {
	f, cluster := startEast(t, nil)

	t.Run("with the Argo CD resources finalizer", func(t *testing.T) {
		f := f.sub(t)
		g := f.G
		work := f.propagate("with-finalizer", cluster, argoapp.ResourcesFinalizer)
		g.Expect(testenv.Payload(t, work).GetFinalizers()).To(gomega.Equal([]string{argoapp.ResourcesFinalizer}))

		f.deleteApp("with-finalizer")
		f.ExpectNoWorks("with-finalizer")
		// Both finalizers are released: the hub app does not hang.
		f.expectAppGone("with-finalizer")
	})

	t.Run("without a finalizer of its own", func(t *testing.T) {
		f := f.sub(t)
		f.propagate("plain", cluster)
		f.deleteApp("plain")
		f.ExpectNoWorks("plain")
		f.expectAppGone("plain")
	})

	t.Run("waits until the work agent has deleted the work", func(t *testing.T) {
		f := f.sub(t)
		g := f.G
		work := f.propagate("slow", cluster, argoapp.ResourcesFinalizer)
		// Play the work agent, which holds the work until the spoke app is gone.
		const agentFinalizer = "cluster.open-cluster-management.io/manifest-work-cleanup"
		work.Finalizers = append(work.Finalizers, agentFinalizer)
		g.Expect(f.C.Update(f.Ctx, work)).To(gomega.Succeed())

		f.deleteApp("slow")
		g.Eventually(func() bool { return f.WaitForWork("slow", cluster).DeletionTimestamp != nil }).Should(gomega.BeTrue())
		g.Consistently(func() []string { return f.GetApp("slow").GetFinalizers() }).
			Should(gomega.ConsistOf(argoapp.ResourcesFinalizer, argoapp.FinalizerManifestWorkCleanup))

		work = f.WaitForWork("slow", cluster)
		work.Finalizers = nil
		g.Expect(f.C.Update(f.Ctx, work)).To(gomega.Succeed())
		f.expectAppGone("slow")
	})

	t.Run("the work does not exist", func(t *testing.T) {
		f := f.sub(t)
		// Never propagated (the addon is not enabled on its cluster): no work, and the
		// resources finalizer that nobody on the hub would remove.
		disabled := f.createCluster("disabled", false)
		f.bind(f.Namespace, disabled)
		app := f.Application("never", disabled)
		app.SetFinalizers([]string{argoapp.ResourcesFinalizer, argoapp.FinalizerManifestWorkCleanup})
		f.Create(app)
		f.ExpectPropagationError("never", ReasonAddonNotEnabled)
		f.deleteApp("never")
		f.expectAppGone("never")
	})

	t.Run("a push application keeps its Argo CD finalizer for the hub Argo CD", func(t *testing.T) {
		f := f.sub(t)
		g := f.G
		// Pulled, then turned into a push application: its work is kept, and goes with it.
		f.propagate("push", cluster, argoapp.ResourcesFinalizer)
		f.UpdateApp("push", func(app *unstructured.Unstructured) {
			annotations := app.GetAnnotations()
			delete(annotations, argoapp.AnnotationSkipReconcile)
			app.SetAnnotations(annotations)
		})
		f.ExpectPropagationError("push", ReasonMissingSkipReconcile)
		f.WaitForWork("push", cluster)
		f.deleteApp("push")
		f.ExpectNoWorks("push")
		g.Eventually(func() []string { return f.GetApp("push").GetFinalizers() }).Should(gomega.Equal([]string{argoapp.ResourcesFinalizer}))
		// Play the hub Argo CD.
		f.UpdateApp("push", func(app *unstructured.Unstructured) { app.SetFinalizers(nil) })
	})

	t.Run("an application deleted behind the controller's back", func(t *testing.T) {
		f := f.sub(t)
		g := f.G
		// A work of the manager whose hub application does not exist.
		orphan := &workv1.ManifestWork{ObjectMeta: metav1.ObjectMeta{
			Name: "ghost-12345", Namespace: cluster,
			Labels: map[string]string{argoapp.LabelPullToOCMManagedCluster: "true", argoapp.LabelAddon: f.opts.AddonName},
			Annotations: map[string]string{
				argoapp.AnnotationHubApplicationNamespace: f.Namespace,
				argoapp.AnnotationHubApplicationName:      "ghost",
			},
		}}
		f.Create(orphan)
		g.Eventually(func() bool {
			return apierrors.IsNotFound(f.C.Get(f.Ctx, client.ObjectKeyFromObject(orphan), &workv1.ManifestWork{}))
		}).Should(gomega.BeTrue(), "the orphaned work was not deleted")
	})
}

func TestEnvtestRetargeting(t *testing.T) {
	f, east := startEast(t, nil)
	west := f.readyCluster("west")

	t.Run("label removed", func(t *testing.T) {
		f := f.sub(t)
		g := f.G
		f.propagate("unlabel", east)
		f.UpdateApp("unlabel", func(app *unstructured.Unstructured) { app.SetLabels(nil) })
		f.ExpectNoWorks("unlabel")
		g.Eventually(func() bool { return hasFinalizer(f.GetApp("unlabel"), argoapp.FinalizerManifestWorkCleanup) }).Should(gomega.BeFalse())
		g.Expect(f.Condition("unlabel", argoapp.ConditionOCMPropagationError)).To(gomega.BeEmpty())
	})

	t.Run("label set to false", func(t *testing.T) {
		f := f.sub(t)
		f.propagate("off", east)
		f.UpdateApp("off", func(app *unstructured.Unstructured) {
			app.SetLabels(map[string]string{argoapp.LabelPullToOCMManagedCluster: "false"})
		})
		f.ExpectNoWorks("off")
	})

	t.Run("cluster annotation changed", func(t *testing.T) {
		f := f.sub(t)
		g := f.G
		f.propagate("move", east)
		f.UpdateApp("move", func(app *unstructured.Unstructured) {
			annotations := app.GetAnnotations()
			annotations[argoapp.AnnotationOCMManagedCluster] = west
			app.SetAnnotations(annotations)
		})
		f.WaitForWork("move", west)
		g.Consistently(func() []string { return f.WorkKeys("move") }).Should(gomega.HaveLen(1))
	})

	t.Run("moved back while its old work is still being deleted", func(t *testing.T) {
		f := f.sub(t)
		g := f.G
		first := f.propagate("back", east)
		// Play the work agent, which holds the work until the spoke app is gone.
		first.Finalizers = []string{"cluster.open-cluster-management.io/manifest-work-cleanup"}
		g.Expect(f.C.Update(f.Ctx, first)).To(gomega.Succeed())
		retarget := func(cluster string) {
			f.UpdateApp("back", func(app *unstructured.Unstructured) {
				testenv.SetAnnotation(app, argoapp.AnnotationOCMManagedCluster, cluster)
			})
		}
		retarget(west)
		f.G.Eventually(func() []string { return f.WorkKeys("back") }).Should(gomega.ConsistOf(east+"/"+first.Name, west+"/"+first.Name))
		retarget(east)
		// The west work goes; the east one, still being deleted, is not written to.
		g.Eventually(func() []string { return f.WorkKeys("back") }).Should(gomega.Equal([]string{east + "/" + first.Name}))
		g.Expect(f.WaitForWork("back", east).DeletionTimestamp).NotTo(gomega.BeNil())
		// Once the agent lets it go, it is created anew.
		stuck := f.WaitForWork("back", east)
		stuck.Finalizers = nil
		g.Expect(f.C.Update(f.Ctx, stuck)).To(gomega.Succeed())
		g.Eventually(func() bool {
			works := f.WorksOf("back")
			return len(works) == 1 && works[0].Namespace == east && works[0].DeletionTimestamp == nil && works[0].UID != first.UID
		}).Should(gomega.BeTrue())
	})

	t.Run("re-created with a new UID", func(t *testing.T) {
		f := f.sub(t)
		g := f.G
		first := f.propagate("again", east)
		f.deleteApp("again")
		f.expectAppGone("again")
		second := f.propagate("again", east)
		g.Expect(second.Name).NotTo(gomega.Equal(first.Name))
		g.Consistently(func() []string { return f.WorkKeys("again") }).Should(gomega.HaveLen(1))
	})

	t.Run("a work of an earlier UID is removed", func(t *testing.T) {
		f := f.sub(t)
		g := f.G
		current := f.propagate("stale", east)
		// A work left by an earlier Application of the same name, in another cluster.
		leftover := current.DeepCopy()
		leftover.ObjectMeta = metav1.ObjectMeta{
			Name: argoapp.ManifestWorkName("stale", "00000-old"), Namespace: west,
			Labels: current.Labels, Annotations: current.Annotations,
		}
		f.Create(leftover)
		g.Eventually(func() []string { return f.WorkKeys("stale") }).Should(gomega.Equal([]string{east + "/" + current.Name}))
	})
}

// Point 6: manual sync and refresh.

func TestEnvtestOperationAndRefresh(t *testing.T) {
	f, cluster := startEast(t, nil)
	g := f.G
	work := f.propagate("guestbook", cluster)
	// The spoke Application ran an operation before, of no hub's.
	f.setOperationFeedback(client.ObjectKeyFromObject(work), "Succeeded", "2026-01-01T00:00:00Z", "")

	operation := map[string]any{
		"sync":        map[string]any{"revision": "main", "prune": true},
		"initiatedBy": map[string]any{"username": "alice"},
		// A number, as RollingSync's retry limit: it comes back from the payload as a
		// float, and the operation is still the same one.
		"retry": map[string]any{"limit": int64(5)},
		// An id that a user wrote does not survive: the manager gives its own.
		"info": []any{map[string]any{"name": argoapp.OperationInfoID, "value": "forged"}},
	}
	f.UpdateApp("guestbook", func(app *unstructured.Unstructured) {
		app.Object["operation"] = operation
		annotations := app.GetAnnotations()
		annotations[argoapp.AnnotationRefresh] = "hard"
		annotations[argoapp.AnnotationOperationTerminate] = "forged"
		app.SetAnnotations(annotations)
	})

	// Both reach the work's payload: the refresh as is, the operation as a request with
	// an id for the agent, not as .operation (which the work agent would apply again
	// after the spoke ran it); both stay on the hub until the work is applied.
	requestOf := func(work *workv1.ManifestWork) (map[string]any, string) {
		value, ok := testenv.Payload(t, work).GetAnnotations()[argoapp.AnnotationOperationRequest]
		if !ok {
			return nil, ""
		}
		request, id, err := argoapp.DecodeOperationRequest(value)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		return request, id
	}
	g.Eventually(func() bool {
		work = f.WaitForWork("guestbook", cluster)
		_, id := requestOf(work)
		return testenv.Payload(t, work).GetAnnotations()[argoapp.AnnotationRefresh] == "hard" && id != ""
	}).Should(gomega.BeTrue())
	request, id := requestOf(work)
	g.Expect(id).NotTo(gomega.Equal("forged"))
	g.Expect(request["sync"]).To(gomega.Equal(operation["sync"]))
	g.Expect(request["retry"]).To(gomega.Equal(map[string]any{"limit": float64(5)}))
	g.Expect(work.Annotations).To(gomega.HaveKeyWithValue(argoapp.AnnotationOperationID, id))
	g.Expect(testenv.Payload(t, work).Object).NotTo(gomega.HaveKey("operation"))
	g.Expect(testenv.Payload(t, work).GetAnnotations()).NotTo(gomega.HaveKey(argoapp.AnnotationOperationTerminate))
	g.Consistently(func() bool {
		app := f.GetApp("guestbook")
		return app.GetAnnotations()[argoapp.AnnotationRefresh] == "hard" && app.Object["operation"] != nil
	}, "1s").Should(gomega.BeTrue(), "removed from the hub before the work agent applied it")

	// The work agent applies an older generation: nothing happens yet.
	stale := work.DeepCopy()
	meta.SetStatusCondition(&stale.Status.Conditions, metav1.Condition{
		Type: workv1.WorkApplied, Status: metav1.ConditionTrue, Reason: "AppliedManifestWorkComplete", ObservedGeneration: work.Generation - 1,
	})
	g.Expect(f.C.Status().Update(f.Ctx, stale)).To(gomega.Succeed())
	g.Consistently(func() string { return f.GetApp("guestbook").GetAnnotations()[argoapp.AnnotationRefresh] }, "1s").Should(gomega.Equal("hard"))

	// It applies the current one. The refresh stays on the hub, and in the payload with
	// its id, until the spoke has refreshed (the status mirror removes it, with the
	// refreshed status); the operation has not run yet: it stays too, with its id.
	f.MarkApplied(client.ObjectKeyFromObject(work))
	refreshID := testenv.Payload(t, f.WaitForWork("guestbook", cluster)).GetAnnotations()[argoapp.AnnotationRefreshID]
	g.Expect(refreshID).NotTo(gomega.BeEmpty(), "the payload's refresh has no id")
	g.Consistently(func() string { return f.GetApp("guestbook").GetAnnotations()[argoapp.AnnotationRefresh] }, "1s").
		Should(gomega.Equal("hard"), "the refresh left the hub before the spoke refreshed")
	g.Expect(testenv.Payload(t, f.WaitForWork("guestbook", cluster)).GetAnnotations()[argoapp.AnnotationRefreshID]).To(gomega.Equal(refreshID))
	// The agent reports it done, and asked again before the status mirror removed it from
	// the hub (a user's second refresh), it is a new refresh, with a new id: the spoke
	// refreshes again.
	addon := &addonv1beta1.ManagedClusterAddOn{}
	g.Expect(f.C.Get(f.Ctx, types.NamespacedName{Namespace: cluster, Name: f.opts.AddonName}, addon)).To(gomega.Succeed())
	g.Expect(f.C.Create(f.Ctx, clusterreport.SliceObject(addon, clusterreport.Slice{Name: "argocd-pull-0", Apps: []statusv1alpha1.AppStatus{{
		Namespace: f.Namespace, Name: "guestbook", Hub: &statusv1alpha1.ObjectRef{Namespace: f.Namespace, Name: "guestbook"},
		ManifestWork: work.Name, Refreshed: refreshID, ObservedAt: metav1.NewTime(time.Now().Truncate(time.Second)),
	}}}))).To(gomega.Succeed())
	f.UpdateApp("guestbook", func(app *unstructured.Unstructured) { testenv.SetAnnotation(app, "example.com/again", "yes") })
	g.Eventually(func() string {
		return testenv.Payload(t, f.WaitForWork("guestbook", cluster)).GetAnnotations()[argoapp.AnnotationRefreshID]
	}).ShouldNot(gomega.Or(gomega.BeEmpty(), gomega.Equal(refreshID)))
	// The status mirror removes it from the hub: it leaves the payload.
	f.UpdateApp("guestbook", func(app *unstructured.Unstructured) {
		annotations := app.GetAnnotations()
		delete(annotations, argoapp.AnnotationRefresh)
		app.SetAnnotations(annotations)
	})
	g.Eventually(func() []string {
		annotations := testenv.Payload(t, f.WaitForWork("guestbook", cluster)).GetAnnotations()
		return []string{annotations[argoapp.AnnotationRefresh], annotations[argoapp.AnnotationRefreshID]}
	}).Should(gomega.Equal([]string{"", ""}))
	hasOperation := func() bool { return f.GetApp("guestbook").Object["operation"] != nil }
	g.Consistently(hasOperation, "1s").Should(gomega.BeTrue(), "the operation left the hub before the spoke ran it")
	_, kept := requestOf(f.WaitForWork("guestbook", cluster))
	g.Expect(kept).To(gomega.Equal(id), "a new render gave the same operation a new id: the agent would run it again")

	// The spoke runs another operation (its own auto-sync), which ends: not the hub's.
	key := client.ObjectKeyFromObject(work)
	f.MarkApplied(key)
	f.setOperationFeedback(key, "Succeeded", "2026-01-01T00:05:00Z", "")
	g.Consistently(hasOperation, "1s").Should(gomega.BeTrue(), "the operation left the hub on another operation's result")

	// A hub user terminates it (argocd-server sets Terminating): the payload asks the
	// agent to terminate it.
	f.UpdateApp("guestbook", func(app *unstructured.Unstructured) {
		g.Expect(unstructured.SetNestedMap(app.Object, map[string]any{"phase": argoapp.OperationTerminating, "startedAt": "2026-01-01T00:05:00Z", "operation": map[string]any{}},
			"status", "operationState")).To(gomega.Succeed())
	})
	g.Eventually(func() string {
		return testenv.Payload(t, f.WaitForWork("guestbook", cluster)).GetAnnotations()[argoapp.AnnotationOperationTerminate]
	}).Should(gomega.Equal(id))

	// The spoke starts it, and runs it: it stays while it runs.
	f.setOperationFeedback(key, "Running", "2026-01-01T00:10:00Z", id)
	g.Consistently(hasOperation, "1s").Should(gomega.BeTrue(), "the operation left the hub while the spoke ran it")

	// It completes: the operation stays until the hub app's status shows the result
	// (the status mirror's write), then leaves the hub app, the payload and the work.
	f.setOperationFeedback(key, "Failed", "2026-01-01T00:10:00Z", id)
	g.Consistently(hasOperation, "1s").Should(gomega.BeTrue(), "the operation left the hub before its status showed the result")
	f.UpdateApp("guestbook", func(app *unstructured.Unstructured) {
		g.Expect(unstructured.SetNestedMap(app.Object, map[string]any{"phase": "Failed", "startedAt": "2026-01-01T00:10:00Z", "operation": map[string]any{}},
			"status", "operationState")).To(gomega.Succeed())
	})
	g.Eventually(hasOperation).Should(gomega.BeFalse())
	g.Eventually(func() bool {
		work := f.WaitForWork("guestbook", cluster)
		_, delivering := work.Annotations[argoapp.AnnotationOperationID]
		annotations := testenv.Payload(t, work).GetAnnotations()
		_, requested := annotations[argoapp.AnnotationOperationRequest]
		_, terminated := annotations[argoapp.AnnotationOperationTerminate]
		return delivering || requested || terminated
	}).Should(gomega.BeFalse())
	g.Eventually(func() []string { return f.EventReasons(f.Namespace, "guestbook", corev1.EventTypeNormal) }).
		Should(gomega.ContainElement(ReasonOperationCompleted))

	// The same operation asked again is a new one, with a new id.
	f.UpdateApp("guestbook", func(app *unstructured.Unstructured) { app.Object["operation"] = operation })
	g.Eventually(func() string {
		_, again := requestOf(f.WaitForWork("guestbook", cluster))
		return again
	}).ShouldNot(gomega.Or(gomega.BeEmpty(), gomega.Equal(id)))
}

// Point 8: pause.

func TestEnvtestPause(t *testing.T) {
	f, cluster := startEast(t, nil)
	g := f.G
	f.Create(f.Application("existing", cluster))
	f.Create(f.Application("doomed", cluster))
	existing := f.WaitForWork("existing", cluster)
	doomed := f.WaitForWork("doomed", cluster)

	pausedCondition := func() *metav1.Condition {
		addon := &addonv1beta1.ManagedClusterAddOn{}
		g.Expect(f.C.Get(f.Ctx, types.NamespacedName{Namespace: cluster, Name: f.opts.AddonName}, addon)).To(gomega.Succeed())
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
	g.Expect(f.C.Get(f.Ctx, types.NamespacedName{Namespace: cluster, Name: f.opts.AddonName}, addon)).To(gomega.Succeed())
	meta.SetStatusCondition(&addon.Status.Conditions, metav1.Condition{Type: "Available", Status: metav1.ConditionTrue, Reason: "Test", Message: "framework"})
	g.Expect(f.C.Status().Update(f.Ctx, addon)).To(gomega.Succeed())

	f.setPause("true")
	g.Eventually(conditionStatus).Should(gomega.Equal(metav1.ConditionTrue))
	writesBeforePause := f.workWrites()
	g.Expect(pausedCondition().Reason).To(gomega.Equal(ReasonPauseAnnotationSet))
	g.Eventually(func() []string { return f.EventReasons(cluster, f.opts.AddonName, corev1.EventTypeNormal) }).
		Should(gomega.ContainElement(ReasonPropagationPaused))

	// Nothing is written to works: no creation, no update, no deletion.
	f.Create(f.Application("new", cluster))
	f.UpdateApp("existing", func(app *unstructured.Unstructured) {
		g.Expect(unstructured.SetNestedField(app.Object, "v2", "spec", "source", "targetRevision")).To(gomega.Succeed())
	})
	f.deleteApp("doomed")
	f.ExpectNoWorksStay("new")
	g.Expect(f.workWrites()).To(gomega.Equal(writesBeforePause), "a work was written while paused")
	g.Expect(f.WaitForWork("existing", cluster).ResourceVersion).To(gomega.Equal(existing.ResourceVersion))
	g.Expect(f.WaitForWork("doomed", cluster).ResourceVersion).To(gomega.Equal(doomed.ResourceVersion))
	g.Expect(f.GetApp("doomed")).NotTo(gomega.BeNil(), "the deleted app was released while paused")
	g.Eventually(func() []string { return f.EventReasons(f.Namespace, "existing", corev1.EventTypeNormal) }).
		Should(gomega.ContainElement(ReasonPropagationPaused))

	// A value that is not a boolean stays paused, and says why.
	f.setPause("yes")
	g.Eventually(func() string { return pausedCondition().Reason }).Should(gomega.Equal(ReasonPauseAnnotationInvalid))
	g.Expect(conditionStatus()).To(gomega.Equal(metav1.ConditionTrue))
	g.Consistently(func() []string { return f.WorkKeys("new") }, "500ms").Should(gomega.BeEmpty())

	// Resume: everything that waited happens.
	f.setPause("")
	g.Eventually(conditionStatus).Should(gomega.Equal(metav1.ConditionFalse))
	f.WaitForWork("new", cluster)
	g.Eventually(func() int64 { return f.WaitForWork("existing", cluster).Generation }).Should(gomega.Equal(existing.Generation + 1))
	f.expectAppGone("doomed")
	g.Expect(f.WorkKeys("doomed")).To(gomega.BeEmpty())
	g.Eventually(func() []string { return f.EventReasons(cluster, f.opts.AddonName, corev1.EventTypeNormal) }).
		Should(gomega.ContainElement(ReasonPropagationResumed))

	g.Expect(f.C.Get(f.Ctx, types.NamespacedName{Namespace: cluster, Name: f.opts.AddonName}, addon)).To(gomega.Succeed())
	g.Expect(meta.FindStatusCondition(addon.Status.Conditions, "Available")).NotTo(gomega.BeNil(), "the framework's condition was clobbered")
}

// Bad input: an Event, a condition, no hot requeue.

func TestEnvtestBadInput(t *testing.T) {
	f, cluster := startEast(t, nil)
	g := f.G

	tests := []struct {
		name   string
		reason string
		change func(app *unstructured.Unstructured)
	}{
		{"malformed-label", ReasonMalformedLabel, func(app *unstructured.Unstructured) {
			app.SetLabels(map[string]string{argoapp.LabelPullToOCMManagedCluster: "yes"})
		}},
		{"no-cluster", ReasonMissingClusterAnnotation, func(app *unstructured.Unstructured) {
			testenv.SetAnnotation(app, argoapp.AnnotationOCMManagedCluster, "")
		}},
		{"bad-cluster", ReasonInvalidClusterName, func(app *unstructured.Unstructured) {
			testenv.SetAnnotation(app, argoapp.AnnotationOCMManagedCluster, "Not_A_Cluster")
		}},
		{"bad-app-namespace", ReasonInvalidAppNamespace, func(app *unstructured.Unstructured) {
			testenv.SetAnnotation(app, argoapp.AnnotationOCMManagedClusterAppNamespace, "Bad_Namespace")
		}},
		{"two-destinations", ReasonInvalidDestination, func(app *unstructured.Unstructured) {
			testenv.SetAnnotation(app, argoapp.AnnotationDestinationName, "remote")
			testenv.SetAnnotation(app, argoapp.AnnotationDestinationServer, "https://remote.example.com")
		}},
		{"too-large", ReasonPayloadTooLarge, func(app *unstructured.Unstructured) {
			values := strings.Repeat("x", MaxManifestsSize)
			g.Expect(unstructured.SetNestedField(app.Object, map[string]any{"values": values}, "spec", "source", "helm")).To(gomega.Succeed())
		}},
	}
	for _, tt := range tests {
		app := f.Application(tt.name, cluster)
		tt.change(app)
		f.Create(app)
	}
	for _, tt := range tests {
		t.Run(tt.reason, func(t *testing.T) {
			f := f.sub(t)
			g := f.G
			f.ExpectPropagationError(tt.name, tt.reason)
			g.Expect(f.WorkKeys(tt.name)).To(gomega.BeEmpty())
		})
	}

	t.Run("MissingSkipReconcile refuses until the annotation is set", func(t *testing.T) {
		f := f.sub(t)
		g := f.G
		app := f.Application("push-too", cluster)
		annotations := app.GetAnnotations()
		delete(annotations, argoapp.AnnotationSkipReconcile)
		app.SetAnnotations(annotations)
		f.Create(app)
		f.ExpectPropagationError("push-too", ReasonMissingSkipReconcile)
		g.Eventually(func() []string { return f.EventReasons(f.Namespace, "push-too", corev1.EventTypeWarning) }).
			Should(gomega.ContainElement(ReasonMissingSkipReconcile))
		f.ExpectNoWorksStay("push-too")

		f.UpdateApp("push-too", func(app *unstructured.Unstructured) {
			testenv.SetAnnotation(app, argoapp.AnnotationSkipReconcile, "true")
		})
		f.WaitForWork("push-too", cluster)
		f.ExpectNoPropagationError("push-too")
	})

	t.Run("broken input keeps the last good work, and the fix clears the condition", func(t *testing.T) {
		f := f.sub(t)
		g := f.G
		work := f.propagate("broken-later", cluster)
		f.UpdateApp("broken-later", func(app *unstructured.Unstructured) {
			app.SetLabels(map[string]string{argoapp.LabelPullToOCMManagedCluster: "maybe"})
		})
		writes := f.workWrites()
		f.ExpectPropagationError("broken-later", ReasonMalformedLabel)
		g.Consistently(func() string { return f.WaitForWork("broken-later", cluster).ResourceVersion }, "1s").
			Should(gomega.Equal(work.ResourceVersion))
		g.Expect(f.workWrites()).To(gomega.Equal(writes), "a work was written for broken input")

		f.UpdateApp("broken-later", func(app *unstructured.Unstructured) {
			app.SetLabels(map[string]string{argoapp.LabelPullToOCMManagedCluster: "true"})
		})
		f.ExpectNoPropagationError("broken-later")
	})

	t.Run("conditions of other types are kept", func(t *testing.T) {
		f := f.sub(t)
		g := f.G
		app := f.Application("shared-status", f.clusterName("absent"))
		f.Create(app)
		f.ExpectPropagationError("shared-status", ReasonClusterNotFound)
		// Another controller adds its own condition next to ours.
		f.UpdateApp("shared-status", func(app *unstructured.Unstructured) {
			conditions, _, _ := unstructured.NestedSlice(app.Object, "status", "conditions")
			conditions = append(conditions, map[string]any{"type": "SyncError", "message": "spoke says no"})
			g.Expect(unstructured.SetNestedSlice(app.Object, conditions, "status", "conditions")).To(gomega.Succeed())
		})
		// Our condition changes (the cluster exists now, without the addon) and then goes.
		absent := f.createCluster("absent", false)
		f.bind(f.Namespace, absent)
		f.ExpectPropagationError("shared-status", ReasonAddonNotEnabled)
		f.enableAddon(absent)
		f.ExpectNoPropagationError("shared-status")
		_, found, err := argoapp.FindCondition(f.GetApp("shared-status"), "SyncError")
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(found).To(gomega.BeTrue(), "another writer's condition was clobbered")
	})
}

// The sweep is a safety net: it finds leftovers and hands them to the reconcile.

func TestEnvtestSweepFindsLeftovers(t *testing.T) {
	f, cluster := startEast(t, nil)
	g := f.G
	current := f.propagate("current", cluster)

	// A reconciler that runs no controller, so that the leftovers stay for the sweep. It
	// reads as the manager's does, from the cache, which keeps the Application frozen.
	r := &reconciler{client: f.cached, apiReader: f.C, opts: f.opts}
	g.Eventually(func() error {
		return f.cached.Get(f.Ctx, client.ObjectKeyFromObject(current), &workv1.ManifestWork{})
	}).Should(gomega.Succeed(), "the cache has the work")
	g.Expect(r.leftoverWorks(f.Ctx)).To(gomega.BeEmpty(), "the current work is no leftover: %s", current.Name)

	// Works the sweep must report, in a namespace the manager does not watch: one of an
	// app that is gone, and one of an earlier UID of an app.
	paused := f.opts
	paused.WatchNamespaces = []string{"swept-" + f.id}
	f.CreateNamespace(paused.WatchNamespaces[0])
	gone := workv1.ManifestWork{ObjectMeta: metav1.ObjectMeta{
		Name: "gone-abcde", Namespace: cluster,
		Labels: map[string]string{argoapp.LabelPullToOCMManagedCluster: "true"},
		Annotations: map[string]string{
			argoapp.AnnotationHubApplicationNamespace: paused.WatchNamespaces[0],
			argoapp.AnnotationHubApplicationName:      "gone",
		},
	}}
	f.Create(&gone)
	app := f.Application("moved", cluster)
	app.SetNamespace(paused.WatchNamespaces[0])
	f.Create(app)
	earlier := gone.DeepCopy()
	earlier.ObjectMeta = metav1.ObjectMeta{
		Name: argoapp.ManifestWorkName("moved", "fffff-earlier"), Namespace: cluster, Labels: gone.Labels,
	}
	earlier.Annotations = map[string]string{
		argoapp.AnnotationHubApplicationNamespace: paused.WatchNamespaces[0],
		argoapp.AnnotationHubApplicationName:      "moved",
	}
	f.Create(earlier)
	r = &reconciler{client: f.C, apiReader: f.C, opts: paused}
	g.Expect(r.leftoverWorks(f.Ctx)).To(gomega.ConsistOf(
		types.NamespacedName{Namespace: paused.WatchNamespaces[0], Name: "gone"},
		types.NamespacedName{Namespace: paused.WatchNamespaces[0], Name: "moved"},
	))
}

// A refresh or an operation that changed since it was rendered is never removed.
func TestEnvtestTestAndRemoveKeepsNewerValue(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(o *Options) { o.WatchNamespaces = []string{"unwatched"} })
	g := f.G
	app := f.Application("guestbook", f.clusterName("none"))
	testenv.SetAnnotation(app, argoapp.AnnotationRefresh, "hard")
	app.Object["operation"] = map[string]any{"sync": map[string]any{"revision": "new"}}
	f.Create(app)

	r := &reconciler{client: f.C, apiReader: f.C, opts: f.opts}
	path := argoapp.AnnotationPointer(argoapp.AnnotationRefresh)
	removed, err := r.testAndRemove(f.Ctx, f.GetApp("guestbook"), path, "normal")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(removed).To(gomega.BeFalse())
	removed, err = r.testAndRemove(f.Ctx, f.GetApp("guestbook"), "/operation", map[string]any{"sync": map[string]any{"revision": "old"}})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(removed).To(gomega.BeFalse())
	current := f.GetApp("guestbook")
	g.Expect(current.GetAnnotations()).To(gomega.HaveKeyWithValue(argoapp.AnnotationRefresh, "hard"))
	g.Expect(current.Object).To(gomega.HaveKey("operation"))

	removed, err = r.testAndRemove(f.Ctx, current, path, "hard")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(removed).To(gomega.BeTrue())
	g.Expect(f.GetApp("guestbook").GetAnnotations()).NotTo(gomega.HaveKey(argoapp.AnnotationRefresh))
}

// The work of an Application of another project than "default" carries the hub
// AppProject, and follows its changes.
func TestEnvtestShipsAppProject(t *testing.T) {
	f, cluster := startEast(t, nil)
	g := f.G
	project := testenv.AppProject(f.opts.ArgoCDNamespace, "team-a", f.Namespace)
	f.Create(project)

	app := f.Application("guestbook", cluster)
	g.Expect(unstructured.SetNestedField(app.Object, "team-a", "spec", "project")).To(gomega.Succeed())
	f.Create(app)
	projectRepos := func() []any {
		for _, manifest := range f.WaitForWork("guestbook", cluster).Spec.Workload.Manifests {
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
		if err := f.C.Get(f.Ctx, client.ObjectKeyFromObject(project), current); err != nil {
			return err
		}
		if err := unstructured.SetNestedStringSlice(current.Object, []string{"https://git.example.com/apps.git"}, "spec", "sourceRepos"); err != nil {
			return err
		}
		return f.C.Update(f.Ctx, current)
	}).Should(gomega.Succeed())
	g.Eventually(projectRepos).Should(gomega.Equal([]any{"https://git.example.com/apps.git"}))
}
