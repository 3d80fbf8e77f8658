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
	f.T.Helper()
	work, err := RenderManifestWork(f.GetApp(app), RenderOptions{})
	f.G.Expect(err).NotTo(gomega.HaveOccurred())
	applied, err := newAppliedConfiguration(work)
	f.G.Expect(err).NotTo(gomega.HaveOccurred())
	f.G.Expect(f.C.Apply(f.Ctx, client.ApplyConfigurationFromUnstructured(applied.object), client.FieldOwner(fieldManager), client.ForceOwnership)).To(gomega.Succeed())
	live := &workv1.ManifestWork{}
	f.G.Expect(f.C.Get(f.Ctx, client.ObjectKeyFromObject(work), live)).To(gomega.Succeed())
	return live
}

// expectAdopted creates the Application app of cluster with its work already there,
// applied by fieldManager before the manager acts on the app (paused meanwhile), and
// waits until the manager adopted the work: the same work, labelled as the manager's. It
// returns the work as it was applied.
func (f *fixture) expectAdopted(app, cluster, fieldManager string) *workv1.ManifestWork {
	f.T.Helper()
	f.setPause("true")
	f.Create(f.Application(app, cluster))
	work := f.applyWorkAs(app, fieldManager)
	f.setPause("false")
	f.G.Eventually(func() string { return f.WaitForWork(app, cluster).Labels[argoapp.LabelAddon] }).Should(gomega.Equal(f.opts.AddonName))
	f.G.Expect(f.WaitForWork(app, cluster).UID).To(gomega.Equal(work.UID))
	return work
}

// A work that another controller made for a pulled Application is never touched: not
// on a cluster where the addon is off, not where it is on; the Application says why.
func TestEnvtestForeignWorksAreLeftAlone(t *testing.T) {
	f, enabled := startEast(t, nil)
	g := f.G
	disabled := f.createCluster("west", false)
	f.bind(f.Namespace, disabled)

	for _, tc := range []struct{ app, cluster string }{{"on-enabled", enabled}, {"on-disabled", disabled}} {
		// The other controller is first: its work exists before the app is reconciled.
		app := f.Application(tc.app, tc.cluster)
		app.SetLabels(map[string]string{argoapp.LabelPullToOCMManagedCluster: "false"})
		f.Create(app)
		foreign := f.applyWorkAs(tc.app, foreignFieldManager)
		f.UpdateApp(tc.app, func(app *unstructured.Unstructured) {
			app.SetLabels(map[string]string{argoapp.LabelPullToOCMManagedCluster: "true"})
		})
		f.ExpectPropagationError(tc.app, argoapp.ReasonServedByAnotherController)
		g.Eventually(func() []string { return f.EventReasons(f.Namespace, tc.app, corev1.EventTypeWarning) }).
			Should(gomega.ContainElement(argoapp.ReasonServedByAnotherController))
		g.Consistently(func() string {
			live := &workv1.ManifestWork{}
			g.Expect(f.C.Get(f.Ctx, client.ObjectKeyFromObject(foreign), live)).To(gomega.Succeed())
			return live.ResourceVersion
		}, "1s").Should(gomega.Equal(foreign.ResourceVersion), "the manager wrote another controller's work")
		g.Expect(hasFinalizer(f.GetApp(tc.app), argoapp.FinalizerManifestWorkCleanup)).To(gomega.BeFalse())
	}
}

// A work that an earlier version of this manager made (no addon label) is the
// manager's: it is labelled on the next apply, and managed as before.
func TestEnvtestUnlabelledWorksOfThisManagerAreAdopted(t *testing.T) {
	f, cluster := startEast(t, nil)
	f.expectAdopted("legacy", cluster, FieldManager)
	f.G.Expect(f.Condition("legacy", argoapp.ConditionOCMPropagationError)).To(gomega.BeEmpty())
}

// With TakeOverForeignWorks, another controller's work is adopted: labelled, and
// deleted with its Application.
func TestEnvtestTakeOverForeignWorks(t *testing.T) {
	f, cluster := startEast(t, func(o *Options) { o.TakeOverForeignWorks = true })
	g := f.G
	foreign := f.expectAdopted("adopted", cluster, foreignFieldManager)

	f.deleteApp("adopted")
	g.Eventually(func() error {
		return f.C.Get(f.Ctx, types.NamespacedName{Namespace: foreign.Namespace, Name: foreign.Name}, &workv1.ManifestWork{})
	}).ShouldNot(gomega.Succeed())
}
