package statusslices_test

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	statusv1alpha1 "github.com/ocm-gitops/argocd-pull-addon/pkg/apis/argocdpull/v1alpha1"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/clusterreport"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/appstatus"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/hubcache"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/observed"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/statusslices"
	"github.com/ocm-gitops/argocd-pull-addon/test/testenv"
)

// addonName names the addon's ManagedClusterAddOns, and labels its agents' slices.
const addonName = clusterreport.DefaultAddonName

// shared is the package's apiserver, started by the first envtest test.
var shared testenv.Shared

func TestMain(m *testing.M) { os.Exit(testenv.RunTests(m, &shared)) }

// TestHubMirrorsTheSlices runs the real status mirror (pkg/hub/appstatus) with the
// slices reader on a real apiserver: an app whose resource list the agent's
// ManagedClusterAddOn report had to drop shows all its resources, with their health
// messages, from the agent's slice; a change of the slice reaches the hub app; an app the
// agent had to cut says so in a condition.
func TestHubMirrorsTheSlices(t *testing.T) {
	env := shared.Get(t)
	ctx, g := testenv.Begin(t, env, "apps", "cluster1")
	c := env.Client

	// The manager as pkg/hub.Run builds it (its scheme, and its cache, which keeps the
	// slices without the tree's nodes), and the decoder with the slices reader, as
	// pkg/hub.SetupControllers hands it to the status mirror.
	opts := appstatus.Options{AddonName: addonName, Concurrency: 4, Settings: appstatus.Settings{ProgressingHold: 100 * time.Millisecond}}
	var mgrCache cache.Cache
	testenv.StartManager(t, env, hubcache.Scope{AddonName: addonName, ArgoCDNamespace: "argocd"}, &testenv.WriteLog{},
		func(mgr ctrl.Manager, c client.Client) error {
			mgrCache = mgr.GetCache()
			decoder := observed.NewDecoder().WithSlices(statusslices.NewReader(c, addonName))
			return appstatus.Setup(mgr, c, decoder, opts)
		})

	// The hub app, its work with the feedback, and the agent's addon with a report that
	// had to leave the app's resources out.
	app := testenv.PulledApplication("apps", "web", "cluster1")
	g.Expect(c.Create(ctx, app)).To(gomega.Succeed())
	hub := testenv.NewHub(t, env, "apps")
	work := hub.CreateFedWork(app, "cluster1", addonName, map[string]string{
		argoapp.FeedbackHealthStatus: "Degraded", argoapp.FeedbackSyncStatus: "Synced", argoapp.FeedbackSyncRevision: "rev1",
	})
	addon := hub.EnableAddon("cluster1", addonName)
	enc, err := clusterreport.Encode(clusterreport.Report{Apps: []clusterreport.App{{
		Namespace: "argocd", Name: "web", ManifestWork: work.Name, Sync: argoapp.SyncStatus{Status: "Synced", Revision: "rev1"},
		Health: argoapp.HealthStatus{Status: "Degraded"}, ResourcesOmitted: 150, ObservedAt: time.Now(),
	}}})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	for i := range enc.Conditions {
		enc.Conditions[i].LastTransitionTime = metav1.Now()
	}
	addon.Status.Conditions = enc.Conditions
	g.Expect(c.Status().Update(ctx, addon)).To(gomega.Succeed())

	// The agent's slice: every resource, one Pod never Ready.
	entry := statusv1alpha1.AppStatus{
		Namespace: "argocd", Name: "web", ManifestWork: work.Name, ObservedAt: metav1.NewTime(time.Now().Truncate(time.Second)),
		Sync:       statusv1alpha1.SyncStatus{Status: "Synced", Revision: "rev1"},
		Health:     &statusv1alpha1.Health{Status: "Degraded", Message: "Deployment \"web-000\" exceeded its progress deadline"},
		TreeSource: statusv1alpha1.TreeSourceArgoCDCache,
		Nodes: []statusv1alpha1.ResourceNode{{Version: "v1", Kind: "Pod", Namespace: "web", Name: "web-000-x",
			ParentRefs: []statusv1alpha1.ResourceRef{{Group: "apps", Kind: "ReplicaSet", Namespace: "web", Name: "web-000-5d9c"}},
			Health:     &statusv1alpha1.Health{Status: "Degraded", Message: "Back-off pulling image"}}},
	}
	for i := range 150 {
		r := statusv1alpha1.ResourceStatus{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "web", Name: fmt.Sprintf("web-%03d", i),
			Status: "Synced", Health: &statusv1alpha1.Health{Status: "Healthy"}}
		if i == 0 {
			r.Health = &statusv1alpha1.Health{Status: "Degraded", Message: "Deployment \"web-000\" exceeded its progress deadline"}
		}
		entry.Resources = append(entry.Resources, r)
	}
	slice := clusterreport.SliceObject(addon, clusterreport.Slice{Name: "argocd-pull-0", Apps: []statusv1alpha1.AppStatus{entry}})
	g.Expect(c.Create(ctx, slice)).To(gomega.Succeed())

	get := func() *unstructured.Unstructured {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(argoapp.ApplicationGVK)
		g.Expect(c.Get(ctx, types.NamespacedName{Namespace: "apps", Name: "web"}, got)).To(gomega.Succeed())
		return got
	}
	g.Eventually(func(g gomega.Gomega) {
		resources, _, _ := unstructured.NestedSlice(get().Object, "status", "resources")
		g.Expect(resources).To(gomega.HaveLen(150))
		first := resources[0].(map[string]any)
		g.Expect(first["name"]).To(gomega.Equal("web-000"))
		g.Expect(first["health"]).To(gomega.Equal(map[string]any{"status": "Degraded", "message": "Deployment \"web-000\" exceeded its progress deadline"}))
		message, _, _ := unstructured.NestedString(get().Object, "status", "health", "message")
		g.Expect(message).To(gomega.Equal("Deployment \"web-000\" exceeded its progress deadline"))
	}).Should(gomega.Succeed())

	// The manager's cache keeps no tree.
	cached := &statusv1alpha1.ApplicationStatusSliceList{}
	g.Expect(mgrCache.List(ctx, cached, client.InNamespace("cluster1"))).To(gomega.Succeed())
	g.Expect(cached.Items).To(gomega.HaveLen(1))
	g.Expect(cached.Items[0].Apps[0].Nodes).To(gomega.BeEmpty())
	g.Expect(cached.Items[0].ManagedFields).To(gomega.BeEmpty())

	// A change of the slice reaches the hub app, and an app the agent had to cut says so.
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(slice), slice)).To(gomega.Succeed())
	slice.Apps[0].Resources = slice.Apps[0].Resources[:100]
	slice.Apps[0].Truncated = &statusv1alpha1.Truncation{Reason: statusv1alpha1.TruncationExceedsSliceLimit, ResourcesOmitted: 50, NodesOmitted: 400}
	g.Expect(c.Update(ctx, slice)).To(gomega.Succeed())
	g.Eventually(func(g gomega.Gomega) {
		got := get()
		resources, _, _ := unstructured.NestedSlice(got.Object, "status", "resources")
		g.Expect(resources).To(gomega.HaveLen(100))
		conditions, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		var truncated string
		for _, item := range conditions {
			cond := item.(map[string]any)
			if cond["type"] == statusslices.ConditionTruncated {
				truncated, _ = cond["message"].(string)
			}
		}
		g.Expect(truncated).To(gomega.ContainSubstring("left out 50 resources, 400 resource tree nodes"))
	}).Should(gomega.Succeed())

	// The slice goes (an agent of the old format takes over): the report on the addon is
	// used again.
	g.Expect(c.Delete(ctx, slice)).To(gomega.Succeed())
	g.Eventually(func(g gomega.Gomega) {
		resources, _, _ := unstructured.NestedSlice(get().Object, "status", "resources")
		g.Expect(resources).To(gomega.BeEmpty())
	}).Should(gomega.Succeed())
}
