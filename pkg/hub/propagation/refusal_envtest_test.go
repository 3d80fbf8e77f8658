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
	"github.com/ocm-gitops/argocd-pull-addon/test/testenv"
)

// An Application that an ApplicationSet generates gets no finalizer: the ApplicationSet
// controller would remove it at once, and both would write forever. Its work is still
// deleted when it goes, through the not-found path.
func TestEnvtestGeneratedApplicationHasNoFinalizer(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	g := f.G
	cluster := f.readyCluster("east")
	appSet := argoapp.NewApplicationSet()
	appSet.SetNamespace(f.Namespace)
	appSet.SetName("guestbook")
	appSet.Object["spec"] = map[string]any{"generators": []any{}, "template": map[string]any{
		"metadata": map[string]any{}, "spec": map[string]any{"project": "default", "destination": map[string]any{}},
	}}
	f.Create(appSet)
	app := f.Application("generated", cluster)
	app.SetOwnerReferences([]metav1.OwnerReference{{
		APIVersion: argoapp.ApplicationSetGVK.GroupVersion().String(), Kind: argoapp.KindApplicationSet,
		Name: appSet.GetName(), UID: appSet.GetUID(), Controller: ptr.To(true),
	}})
	f.Create(app)
	f.WaitForWork("generated", cluster)

	appWrites := func() int { return f.writes.Count("PATCH", "Application", f.Namespace, "generated") }
	g.Consistently(func() bool { return hasFinalizer(f.GetApp("generated"), argoapp.FinalizerManifestWorkCleanup) }).Should(gomega.BeFalse())
	g.Expect(appWrites()).To(gomega.BeZero(), "the controller patched a generated application")

	g.Expect(f.C.Delete(f.Ctx, f.GetApp("generated"))).To(gomega.Succeed())
	g.Eventually(func() []string { return f.WorkKeys("generated") }).Should(gomega.BeEmpty())
}

// The hub's own cluster is never a pull target: by name (HubClusterName) or by the
// local-cluster label.
func TestEnvtestLocalClusterIsRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(o *Options) { o.HubClusterName = "hub-" + testenv.RandomID() })
	g := f.G
	byName := f.opts.HubClusterName
	g.Expect(f.C.Create(f.Ctx, &clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: byName}})).To(gomega.Succeed())
	f.CreateNamespace(byName)
	f.enableAddon(byName)
	f.bind(f.Namespace, byName)
	byLabel := f.readyCluster("local")
	g.Eventually(func() error {
		cluster := &clusterv1.ManagedCluster{}
		if err := f.C.Get(f.Ctx, types.NamespacedName{Name: byLabel}, cluster); err != nil {
			return err
		}
		cluster.Labels = map[string]string{LabelLocalCluster: "true"}
		return f.C.Update(f.Ctx, cluster)
	}).Should(gomega.Succeed())

	f.Create(f.Application("by-name", byName))
	f.Create(f.Application("by-label", byLabel))
	for _, name := range []string{"by-name", "by-label"} {
		f.ExpectPropagationError(name, ReasonLocalClusterNotSupported)
		g.Eventually(func() []string { return f.EventReasons(f.Namespace, name, corev1.EventTypeWarning) }).
			Should(gomega.ContainElement(ReasonLocalClusterNotSupported))
		g.Consistently(func() []string { return f.WorkKeys(name) }).Should(gomega.BeEmpty())
	}
}

// Two hub Applications that would write one spoke Application: the first keeps it, the
// second is refused, and takes over once the first goes.
func TestEnvtestSpokeApplicationConflict(t *testing.T) {
	t.Parallel()
	other := "tenant-b-" + testenv.RandomID()
	f := newFixture(t, func(o *Options) { o.WatchNamespaces = append(o.WatchNamespaces, other) })
	g := f.G
	cluster := f.readyCluster("east")
	f.CreateNamespace(other)
	f.bind(other, cluster)

	sameTarget := func(namespace string) *unstructured.Unstructured {
		app := f.Application("guestbook", cluster)
		app.SetNamespace(namespace)
		testenv.SetAnnotation(app, argoapp.AnnotationOCMManagedClusterAppNamespace, "argocd")
		return app
	}
	f.Create(sameTarget(f.Namespace))
	first := f.WaitForWork("guestbook", cluster)
	f.Create(sameTarget(other))
	second := f.sub(t)
	second.Namespace = other
	second.ExpectPropagationError("guestbook", ReasonSpokeApplicationConflict)
	g.Expect(second.Condition("guestbook", argoapp.ConditionOCMPropagationError)).To(gomega.ContainSubstring(f.Namespace + "/guestbook"))
	g.Eventually(func() []string { return second.EventReasons(other, "guestbook", corev1.EventTypeWarning) }).
		Should(gomega.ContainElement(ReasonSpokeApplicationConflict))
	g.Consistently(func() []string { return second.WorkKeys("guestbook") }).Should(gomega.BeEmpty())
	g.Expect(f.WaitForWork("guestbook", cluster).UID).To(gomega.Equal(first.UID))

	// The first one goes: the second one pulls the spoke Application.
	g.Expect(f.C.Delete(f.Ctx, f.GetApp("guestbook"))).To(gomega.Succeed())
	g.Eventually(func() error {
		work := &workv1.ManifestWork{}
		return f.C.Get(f.Ctx, client.ObjectKeyFromObject(first), work)
	}).ShouldNot(gomega.Succeed())
	second.WaitForWork("guestbook", cluster)
	g.Eventually(func() string { return second.Condition("guestbook", argoapp.ConditionOCMPropagationError) }).Should(gomega.BeEmpty())
}

// A hub AppProject ships only to an Application whose namespace it permits, as the hub
// Argo CD decides it.
func TestEnvtestAppProjectNotPermitted(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	g := f.G
	cluster := f.readyCluster("east")
	project := argoapp.NewAppProject()
	project.SetNamespace(f.opts.ArgoCDNamespace)
	project.SetName("platform")
	project.Object["spec"] = map[string]any{"sourceRepos": []any{"*"}, "sourceNamespaces": []any{"platform-*"}}
	f.Create(project)

	app := f.Application("guestbook", cluster)
	g.Expect(unstructured.SetNestedField(app.Object, "platform", "spec", "project")).To(gomega.Succeed())
	f.Create(app)
	f.ExpectPropagationError("guestbook", ReasonAppProjectNotPermitted)
	g.Consistently(func() []string { return f.WorkKeys("guestbook") }).Should(gomega.BeEmpty())

	g.Eventually(func() error {
		current := argoapp.NewAppProject()
		if err := f.C.Get(f.Ctx, client.ObjectKeyFromObject(project), current); err != nil {
			return err
		}
		current.Object["spec"] = map[string]any{"sourceRepos": []any{"*"}, "sourceNamespaces": []any{"platform-*", f.Namespace}}
		return f.C.Update(f.Ctx, current)
	}).Should(gomega.Succeed())
	f.WaitForWork("guestbook", cluster)
	g.Eventually(func() string { return f.Condition("guestbook", argoapp.ConditionOCMPropagationError) }).Should(gomega.BeEmpty())
}

// An Application moved to a cluster that is not a target keeps nothing on its old
// cluster: the grace period protects what runs on the target cluster, not a work the
// user moved away from.
func TestEnvtestMovedToAnUnboundCluster(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	g := f.G
	east := f.readyCluster("east")
	west := f.createCluster("west", true) // not bound to the namespace
	f.Create(f.Application("guestbook", east))
	f.WaitForWork("guestbook", east)

	f.UpdateApp("guestbook", func(app *unstructured.Unstructured) {
		testenv.SetAnnotation(app, argoapp.AnnotationOCMManagedCluster, west)
	})
	f.ExpectPropagationError("guestbook", ReasonClusterNotBoundToNamespace)
	g.Eventually(func() []string { return f.WorkKeys("guestbook") }).Should(gomega.BeEmpty())
}
