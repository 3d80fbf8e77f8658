package propagation

import (
	"testing"

	"github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
)

// An Application that an ApplicationSet generates gets no finalizer: the ApplicationSet
// controller would remove it at once, and both would write forever. Its work is still
// deleted when it goes, through the not-found path.
func TestEnvtestGeneratedApplicationHasNoFinalizer(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	g := f.g
	cluster := f.readyCluster("east")
	appSet := argoapp.NewApplicationSet()
	appSet.SetNamespace(f.ns)
	appSet.SetName("guestbook")
	appSet.Object["spec"] = map[string]any{"generators": []any{}, "template": map[string]any{
		"metadata": map[string]any{}, "spec": map[string]any{"project": "default", "destination": map[string]any{}},
	}}
	f.create(appSet)
	app := f.application("generated", cluster)
	app.SetOwnerReferences([]metav1.OwnerReference{{
		APIVersion: argoapp.ApplicationSetGVK.GroupVersion().String(), Kind: argoapp.KindApplicationSet,
		Name: appSet.GetName(), UID: appSet.GetUID(), Controller: ptr.To(true),
	}})
	f.create(app)
	f.waitForWork("generated", cluster)

	appWrites := func() int { return f.writeCount("PATCH", "Application", f.ns, "generated") }
	g.Consistently(func() bool { return hasFinalizer(f.getApp("generated"), argoapp.FinalizerManifestWorkCleanup) }).Should(gomega.BeFalse())
	g.Expect(appWrites()).To(gomega.BeZero(), "the controller patched a generated application")

	g.Expect(f.c.Delete(f.ctx, f.getApp("generated"))).To(gomega.Succeed())
	g.Eventually(func() []string { return f.workKeys("generated") }).Should(gomega.BeEmpty())
}

// The hub's own cluster is never a pull target: by name (HubClusterName) or by the
// local-cluster label.
func TestEnvtestLocalClusterIsRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(o *Options) { o.HubClusterName = "hub-" + randomID() })
	g := f.g
	byName := f.opts.HubClusterName
	g.Expect(f.c.Create(f.ctx, &clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: byName}})).To(gomega.Succeed())
	f.createNamespace(byName)
	f.enableAddon(byName)
	f.bind(f.ns, byName)
	byLabel := f.readyCluster("local")
	g.Eventually(func() error {
		cluster := &clusterv1.ManagedCluster{}
		if err := f.c.Get(f.ctx, types.NamespacedName{Name: byLabel}, cluster); err != nil {
			return err
		}
		cluster.Labels = map[string]string{LabelLocalCluster: "true"}
		return f.c.Update(f.ctx, cluster)
	}).Should(gomega.Succeed())

	f.create(f.application("by-name", byName))
	f.create(f.application("by-label", byLabel))
	for _, name := range []string{"by-name", "by-label"} {
		f.expectProblem(name, ReasonLocalClusterNotSupported)
		g.Eventually(func() []string { return f.eventReasons(f.ns, name, corev1.EventTypeWarning) }).
			Should(gomega.ContainElement(ReasonLocalClusterNotSupported))
		g.Consistently(func() []string { return f.workKeys(name) }).Should(gomega.BeEmpty())
	}
}

// Two hub Applications that would write one spoke Application: the first keeps it, the
// second is refused, and takes over once the first goes.
func TestEnvtestSpokeApplicationConflict(t *testing.T) {
	t.Parallel()
	other := "tenant-b-" + randomID()
	f := newFixture(t, func(o *Options) { o.WatchNamespaces = append(o.WatchNamespaces, other) })
	g := f.g
	cluster := f.readyCluster("east")
	f.createNamespace(other)
	f.bind(other, cluster)

	sameTarget := func(namespace string) *unstructured.Unstructured {
		app := f.application("guestbook", cluster)
		app.SetNamespace(namespace)
		setAnnotation(app, argoapp.AnnotationOCMManagedClusterAppNamespace, "argocd")
		return app
	}
	f.create(sameTarget(f.ns))
	first := f.waitForWork("guestbook", cluster)
	f.create(sameTarget(other))
	second := f.sub(t)
	second.ns = other
	second.expectProblem("guestbook", ReasonSpokeApplicationConflict)
	g.Expect(second.condition("guestbook")).To(gomega.ContainSubstring(f.ns + "/guestbook"))
	g.Eventually(func() []string { return second.eventReasons(other, "guestbook", corev1.EventTypeWarning) }).
		Should(gomega.ContainElement(ReasonSpokeApplicationConflict))
	g.Consistently(func() []string { return second.workKeys("guestbook") }).Should(gomega.BeEmpty())
	g.Expect(f.waitForWork("guestbook", cluster).UID).To(gomega.Equal(first.UID))

	// The first one goes: the second one pulls the spoke Application.
	g.Expect(f.c.Delete(f.ctx, f.getApp("guestbook"))).To(gomega.Succeed())
	g.Eventually(func() error {
		work := &workv1.ManifestWork{}
		return f.c.Get(f.ctx, client.ObjectKeyFromObject(first), work)
	}).ShouldNot(gomega.Succeed())
	second.waitForWork("guestbook", cluster)
	g.Eventually(func() string { return second.condition("guestbook") }).Should(gomega.BeEmpty())
}

// A hub AppProject ships only to an Application whose namespace it permits, as the hub
// Argo CD decides it.
func TestEnvtestAppProjectNotPermitted(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	g := f.g
	cluster := f.readyCluster("east")
	project := argoapp.NewAppProject()
	project.SetNamespace(f.opts.ArgoCDNamespace)
	project.SetName("platform")
	project.Object["spec"] = map[string]any{"sourceRepos": []any{"*"}, "sourceNamespaces": []any{"platform-*"}}
	f.create(project)

	app := f.application("guestbook", cluster)
	g.Expect(unstructured.SetNestedField(app.Object, "platform", "spec", "project")).To(gomega.Succeed())
	f.create(app)
	f.expectProblem("guestbook", ReasonAppProjectNotPermitted)
	g.Consistently(func() []string { return f.workKeys("guestbook") }).Should(gomega.BeEmpty())

	g.Eventually(func() error {
		current := argoapp.NewAppProject()
		if err := f.c.Get(f.ctx, client.ObjectKeyFromObject(project), current); err != nil {
			return err
		}
		current.Object["spec"] = map[string]any{"sourceRepos": []any{"*"}, "sourceNamespaces": []any{"platform-*", f.ns}}
		return f.c.Update(f.ctx, current)
	}).Should(gomega.Succeed())
	f.waitForWork("guestbook", cluster)
	g.Eventually(func() string { return f.condition("guestbook") }).Should(gomega.BeEmpty())
}

// An Application moved to a cluster that is not a target keeps nothing on its old
// cluster: the grace period protects what runs on the target cluster, not a work the
// user moved away from.
func TestEnvtestMovedToAnUnboundCluster(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	g := f.g
	east := f.readyCluster("east")
	west := f.createCluster("west", true) // not bound to the namespace
	f.create(f.application("guestbook", east))
	f.waitForWork("guestbook", east)

	f.updateApp("guestbook", func(app *unstructured.Unstructured) { setAnnotation(app, argoapp.AnnotationOCMManagedCluster, west) })
	f.expectProblem("guestbook", ReasonClusterNotBoundToNamespace)
	g.Eventually(func() []string { return f.workKeys("guestbook") }).Should(gomega.BeEmpty())
}
