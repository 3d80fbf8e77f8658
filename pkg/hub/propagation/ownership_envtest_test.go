package propagation

import (
	"testing"

	"github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
)

// foreignFieldManager stands for Red Hat ACM's pull controller.
const foreignFieldManager = "multicloud-integrations-pull"

// applyWorkAs server-side applies the work that the manager would render for app, as
// fieldManager, without the manager's addon label: what another pull controller, or an
// earlier version of this manager, leaves on the hub.
func (f *fixture) applyWorkAs(app string, fieldManager string) *workv1.ManifestWork {
	f.t.Helper()
	work, err := RenderManifestWork(f.getApp(app), RenderOptions{})
	f.g.Expect(err).NotTo(gomega.HaveOccurred())
	obj, err := applyConfiguration(work)
	f.g.Expect(err).NotTo(gomega.HaveOccurred())
	f.g.Expect(f.c.Apply(f.ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner(fieldManager), client.ForceOwnership)).To(gomega.Succeed())
	live := &workv1.ManifestWork{}
	f.g.Expect(f.c.Get(f.ctx, client.ObjectKeyFromObject(work), live)).To(gomega.Succeed())
	return live
}

// A work that another controller made for a pulled Application is never touched: not
// on a cluster where the addon is off, not where it is on; the Application says why.
func TestEnvtestForeignWorksAreLeftAlone(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	g := f.g
	enabled := f.readyCluster("east")
	disabled := f.createCluster("west", false)
	f.bind(f.ns, disabled)

	for _, tc := range []struct{ app, cluster string }{{"on-enabled", enabled}, {"on-disabled", disabled}} {
		// The other controller is first: its work exists before the app is reconciled.
		app := f.application(tc.app, tc.cluster)
		app.SetLabels(map[string]string{argoapp.LabelPullToOCMManagedCluster: "false"})
		f.create(app)
		foreign := f.applyWorkAs(tc.app, foreignFieldManager)
		f.updateApp(tc.app, func(app *unstructured.Unstructured) {
			app.SetLabels(map[string]string{argoapp.LabelPullToOCMManagedCluster: "true"})
		})
		f.expectProblem(tc.app, ReasonServedByAnotherController)
		g.Eventually(func() []string { return f.eventReasons(f.ns, tc.app, corev1.EventTypeWarning) }).
			Should(gomega.ContainElement(ReasonServedByAnotherController))
		g.Consistently(func() string {
			live := &workv1.ManifestWork{}
			g.Expect(f.c.Get(f.ctx, client.ObjectKeyFromObject(foreign), live)).To(gomega.Succeed())
			return live.ResourceVersion
		}, "1s").Should(gomega.Equal(foreign.ResourceVersion), "the manager wrote another controller's work")
		g.Expect(hasFinalizer(f.getApp(tc.app), argoapp.FinalizerManifestWorkCleanup)).To(gomega.BeFalse())
	}
}

// A work that an earlier version of this manager made (no addon label) is the
// manager's: it is labelled on the next apply, and managed as before.
func TestEnvtestUnlabelledWorksOfThisManagerAreAdopted(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	g := f.g
	cluster := f.readyCluster("east")
	// The work is there before the manager acts on the app (paused meanwhile).
	f.setPause("true")
	f.create(f.application("legacy", cluster))
	legacy := f.applyWorkAs("legacy", FieldManager)
	f.setPause("false")
	g.Eventually(func() string { return f.waitForWork("legacy", cluster).Labels[argoapp.LabelAddon] }).Should(gomega.Equal(f.opts.AddonName))
	g.Expect(f.waitForWork("legacy", cluster).UID).To(gomega.Equal(legacy.UID))
	g.Expect(f.condition("legacy")).To(gomega.BeEmpty())
}

// With TakeOverForeignWorks, another controller's work is adopted: labelled, and
// deleted with its Application.
func TestEnvtestTakeOverForeignWorks(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(o *Options) { o.TakeOverForeignWorks = true })
	g := f.g
	cluster := f.readyCluster("east")
	f.setPause("true")
	f.create(f.application("adopted", cluster))
	foreign := f.applyWorkAs("adopted", foreignFieldManager)
	f.setPause("false")
	g.Eventually(func() string { return f.waitForWork("adopted", cluster).Labels[argoapp.LabelAddon] }).Should(gomega.Equal(f.opts.AddonName))
	g.Expect(f.waitForWork("adopted", cluster).UID).To(gomega.Equal(foreign.UID))

	g.Expect(f.c.Delete(f.ctx, f.getApp("adopted"))).To(gomega.Succeed())
	g.Eventually(func() error {
		return f.c.Get(f.ctx, types.NamespacedName{Namespace: foreign.Namespace, Name: foreign.Name}, &workv1.ManifestWork{})
	}).ShouldNot(gomega.Succeed())
}
