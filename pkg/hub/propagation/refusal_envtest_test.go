package propagation

import (
	"testing"
	"time"

	"github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	addonv1beta1 "open-cluster-management.io/api/addon/v1beta1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	statusv1alpha1 "github.com/ocm-gitops/argocd-pull-addon/pkg/apis/argocdpull/v1alpha1"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/clusterreport"
	"github.com/ocm-gitops/argocd-pull-addon/test/testenv"
)

// An Application that an ApplicationSet generates gets no finalizer: the ApplicationSet
// controller would remove it at once, and both would write forever. Its work is still
// deleted when it goes, through the not-found path.
func TestEnvtestGeneratedApplicationHasNoFinalizer(t *testing.T) {
	f, cluster := startEast(t, nil)
	g := f.G
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

	f.deleteApp("generated")
	f.ExpectNoWorks("generated")
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
	f.UpdateCluster(byLabel, func(cluster *clusterv1.ManagedCluster) {
		cluster.Labels = map[string]string{LabelLocalCluster: "true"}
	})

	f.Create(f.Application("by-name", byName))
	f.Create(f.Application("by-label", byLabel))
	for _, name := range []string{"by-name", "by-label"} {
		f.ExpectPropagationError(name, ReasonLocalClusterNotSupported)
		g.Eventually(func() []string { return f.EventReasons(f.Namespace, name, corev1.EventTypeWarning) }).
			Should(gomega.ContainElement(ReasonLocalClusterNotSupported))
		f.ExpectNoWorksStay(name)
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
	second.ExpectNoWorksStay("guestbook")
	g.Expect(f.WaitForWork("guestbook", cluster).UID).To(gomega.Equal(first.UID))

	// The first one goes: the second one pulls the spoke Application.
	f.deleteApp("guestbook")
	g.Eventually(func() error {
		work := &workv1.ManifestWork{}
		return f.C.Get(f.Ctx, client.ObjectKeyFromObject(first), work)
	}).ShouldNot(gomega.Succeed())
	second.WaitForWork("guestbook", cluster)
	second.ExpectNoPropagationError("guestbook")
}

// A hub AppProject ships only to an Application whose namespace it permits, as the hub
// Argo CD decides it.
func TestEnvtestAppProjectNotPermitted(t *testing.T) {
	f, cluster := startEast(t, nil)
	g := f.G
	project := testenv.AppProject(f.opts.ArgoCDNamespace, "platform", "platform-*")
	f.Create(project)

	app := f.Application("guestbook", cluster)
	g.Expect(unstructured.SetNestedField(app.Object, "platform", "spec", "project")).To(gomega.Succeed())
	f.Create(app)
	f.ExpectPropagationError("guestbook", ReasonAppProjectNotPermitted)
	f.ExpectNoWorksStay("guestbook")

	g.Eventually(func() error {
		current := argoapp.NewAppProject()
		if err := f.C.Get(f.Ctx, client.ObjectKeyFromObject(project), current); err != nil {
			return err
		}
		if err := unstructured.SetNestedStringSlice(current.Object, []string{"platform-*", f.Namespace}, "spec", "sourceNamespaces"); err != nil {
			return err
		}
		return f.C.Update(f.Ctx, current)
	}).Should(gomega.Succeed())
	f.WaitForWork("guestbook", cluster)
	f.ExpectNoPropagationError("guestbook")
}

// An Application moved to a cluster that is not a target keeps nothing on its old
// cluster: the grace period protects what runs on the target cluster, not a work the
// user moved away from.
func TestEnvtestMovedToAnUnboundCluster(t *testing.T) {
	f, east := startEast(t, nil)
	west := f.createCluster("west", true) // not bound to the namespace
	f.propagate("guestbook", east)

	f.UpdateApp("guestbook", func(app *unstructured.Unstructured) {
		testenv.SetAnnotation(app, argoapp.AnnotationOCMManagedCluster, west)
	})
	f.ExpectPropagationError("guestbook", ReasonClusterNotBoundToNamespace)
	f.ExpectNoWorks("guestbook")
}

// A tenant's Application (outside the hub Argo CD's namespace) gets Argo CD's own rules
// before it leaves the hub, the default project included: a project that exists on the
// hub, lists the namespace, and permits the source repositories and the destination;
// and no inline manifests, which only the override permission may sync. Each refusal is a
// condition and a Warning Event, creates no work, and keeps an existing one as it is.
// An Application in the Argo CD namespace is the hub admin's: a project the hub lacks
// must be on the managed cluster.
func TestEnvtestTenancyRules(t *testing.T) {
	f, cluster := startEast(t, func(o *Options) { o.WatchNamespaces = append(o.WatchNamespaces, o.ArgoCDNamespace) })
	g := f.G
	setProject := func(name string, change func(spec map[string]any)) {
		g.Eventually(func() error {
			current := argoapp.NewAppProject()
			if err := f.C.Get(f.Ctx, types.NamespacedName{Namespace: f.opts.ArgoCDNamespace, Name: name}, current); err != nil {
				return err
			}
			change(current.Object["spec"].(map[string]any))
			return f.C.Update(f.Ctx, current)
		}).Should(gomega.Succeed())
	}
	refused := func(name, reason string, words ...string) {
		t.Helper()
		f.ExpectPropagationError(name, reason, words...)
		g.Eventually(func() []string { return f.EventReasons(f.Namespace, name, corev1.EventTypeWarning) }).Should(gomega.ContainElement(reason))
		f.ExpectNoWorksStay(name)
	}

	t.Run("the default project that does not list the namespace", func(t *testing.T) {
		setProject(argoapp.DefaultProject, func(spec map[string]any) { spec["sourceNamespaces"] = []any{"platform-*"} })
		f.Create(f.Application("on-default", cluster))
		refused("on-default", ReasonAppProjectNotPermitted, "default", "spec.sourceNamespaces")
		setProject(argoapp.DefaultProject, func(spec map[string]any) { spec["sourceNamespaces"] = []any{"platform-*", f.Namespace} })
		f.WaitForWork("on-default", cluster)
	})
	t.Run("a project the hub does not have", func(t *testing.T) {
		app := f.Application("on-missing", cluster)
		g.Expect(unstructured.SetNestedField(app.Object, "missing", "spec", "project")).To(gomega.Succeed())
		f.Create(app)
		refused("on-missing", ReasonAppProjectNotFound, "missing", "does not exist on the hub")
	})
	t.Run("a source repository the project does not permit", func(t *testing.T) {
		setProject(argoapp.DefaultProject, func(spec map[string]any) { spec["sourceRepos"] = []any{"https://git.example.com/team/*"} })
		f.Create(f.Application("from-elsewhere", cluster)) // https://git.example.com/apps.git
		refused("from-elsewhere", ReasonAppProjectNotPermitted, "https://git.example.com/apps.git", "spec.sourceRepos")
		setProject(argoapp.DefaultProject, func(spec map[string]any) { spec["sourceRepos"] = []any{"*"} })
		f.WaitForWork("from-elsewhere", cluster)
	})
	t.Run("a destination the project does not permit", func(t *testing.T) {
		setProject(argoapp.DefaultProject, func(spec map[string]any) {
			spec["destinations"] = []any{map[string]any{"server": "*", "namespace": "team-*"}}
		})
		f.Create(f.Application("to-kube-system", cluster)) // namespace guestbook
		refused("to-kube-system", ReasonAppProjectNotPermitted, "guestbook", "spec.destinations")
		setProject(argoapp.DefaultProject, func(spec map[string]any) {
			spec["destinations"] = []any{map[string]any{"server": "*", "namespace": "*"}}
		})
		f.WaitForWork("to-kube-system", cluster)
	})
	t.Run("inline manifests, with the existing work kept", func(t *testing.T) {
		before := f.propagate("inline", cluster)
		f.UpdateApp("inline", func(app *unstructured.Unstructured) {
			app.Object["operation"] = map[string]any{"sync": map[string]any{
				"manifests": []any{"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: injected, namespace: kube-system}"},
			}}
		})
		f.ExpectPropagationError("inline", ReasonOverrideNotPermitted, "override permission")
		g.Consistently(func() string { return f.WaitForWork("inline", cluster).ResourceVersion }).Should(gomega.Equal(before.ResourceVersion))
	})
	t.Run("a rollback to a source outside the project, with the existing work kept", func(t *testing.T) {
		setProject(argoapp.DefaultProject, func(spec map[string]any) { spec["sourceRepos"] = []any{"https://git.example.com/*"} })
		defer setProject(argoapp.DefaultProject, func(spec map[string]any) { spec["sourceRepos"] = []any{"*"} })
		before := f.propagate("rollback", cluster)
		f.UpdateApp("rollback", func(app *unstructured.Unstructured) {
			app.Object["operation"] = map[string]any{"sync": map[string]any{"revision": "abc",
				"source": map[string]any{"repoURL": "https://evil.example.com/x.git", "path": "p"}}}
		})
		f.ExpectPropagationError("rollback", ReasonOverrideNotPermitted, "https://evil.example.com/x.git")
		g.Consistently(func() string { return f.WaitForWork("rollback", cluster).ResourceVersion }).Should(gomega.Equal(before.ResourceVersion))
		f.UpdateApp("rollback", func(app *unstructured.Unstructured) {
			app.Object["operation"] = map[string]any{"sync": map[string]any{"revision": "abc",
				"source": map[string]any{"repoURL": "https://git.example.com/old.git", "path": "p"}}}
		})
		g.Eventually(func() string { return f.WaitForWork("rollback", cluster).ResourceVersion }).ShouldNot(gomega.Equal(before.ResourceVersion))
	})
	t.Run("the Argo CD namespace's own app, on a project the hub lacks", func(t *testing.T) {
		admin := f.sub(t)
		admin.Namespace = f.opts.ArgoCDNamespace
		f.bind(admin.Namespace, cluster)
		app := admin.Application("platform", cluster)
		g.Expect(unstructured.SetNestedField(app.Object, "spoke-only", "spec", "project")).To(gomega.Succeed())
		admin.Create(app)
		admin.WaitForWork("platform", cluster)
	})
}

// An Application that the managed cluster already has, and that its agent reports as
// another hub Application's (its work gone) or as made on the cluster (by identity
// alone), is never taken over silently: the hub Application of its name is refused until
// it opts in to adopt it. One that the same hub Application pulled before (its work
// gone, as after an uninstall that orphaned it) is its own.
func TestEnvtestSpokeApplicationNotPulled(t *testing.T) {
	f, cluster := startEast(t, nil)
	g := f.G
	addon := &addonv1beta1.ManagedClusterAddOn{}
	g.Expect(f.C.Get(f.Ctx, types.NamespacedName{Namespace: cluster, Name: f.opts.AddonName}, addon)).To(gomega.Succeed())
	reported := func(name string, hub *statusv1alpha1.ObjectRef) statusv1alpha1.AppStatus {
		return statusv1alpha1.AppStatus{Namespace: f.Namespace, Name: name, Hub: hub,
			ObservedAt: metav1.NewTime(time.Now().Truncate(time.Second)), Sync: statusv1alpha1.SyncStatus{Status: "Synced"}}
	}
	g.Expect(f.C.Create(f.Ctx, clusterreport.SliceObject(addon, clusterreport.Slice{Name: "argocd-pull-0", Apps: []statusv1alpha1.AppStatus{
		reported("local", &statusv1alpha1.ObjectRef{Namespace: "another-team", Name: "local"}),
		reported("orphaned", &statusv1alpha1.ObjectRef{Namespace: f.Namespace, Name: "orphaned"}),
		clusterreport.SpokeLocalEntry(f.Namespace, "hand-made", time.Now()),
	}}))).To(gomega.Succeed())

	f.Create(f.Application("hand-made", cluster))
	f.ExpectPropagationError("hand-made", ReasonSpokeApplicationNotPulled, cluster, "no hub Application pulled it")
	f.ExpectNoWorksStay("hand-made")

	f.Create(f.Application("local", cluster))
	f.ExpectPropagationError("local", ReasonSpokeApplicationNotPulled, cluster, argoapp.AnnotationAdoptSpokeApplication)
	g.Eventually(func() []string { return f.EventReasons(f.Namespace, "local", corev1.EventTypeWarning) }).
		Should(gomega.ContainElement(ReasonSpokeApplicationNotPulled))
	f.ExpectNoWorksStay("local")

	f.UpdateApp("local", func(app *unstructured.Unstructured) {
		testenv.SetAnnotation(app, argoapp.AnnotationAdoptSpokeApplication, "true")
	})
	work := f.WaitForWork("local", cluster)
	g.Expect(testenv.Payload(t, work).GetAnnotations()).NotTo(gomega.HaveKey(argoapp.AnnotationAdoptSpokeApplication))
	f.ExpectNoPropagationError("local")

	f.propagate("orphaned", cluster)
}
