package appstatus

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	statusv1alpha1 "github.com/ocm-gitops/argocd-pull-addon/pkg/apis/argocdpull/v1alpha1"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/clusterreport"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/observed"
	"github.com/ocm-gitops/argocd-pull-addon/test/testenv"
)

// TestAgentCannotTakeTheManagersCondition runs the real status mirror, with the slices
// reader as pkg/hub wires it, on a real apiserver, against an agent whose slice carries
// a condition of the manager's own type OCMPropagationError and messages longer in bytes
// than the encoder writes (1,024 characters of 2 bytes, which the schema admits). Every
// version of the hub Application that a watch sees keeps the propagation controller's
// OCMPropagationError, its message and its lastTransitionTime (from which the opt-out
// grace period counts), and no other of that type; the agent's messages arrive
// shortened to clusterreport.MaxMessageBytes.
func TestAgentCannotTakeTheManagersCondition(t *testing.T) {
	const appNamespace, cluster = "apps-guarded", "cluster-hostile"
	opts := mirrorOptions()
	env, hub, app := startSliceMirror(t, appNamespace, cluster, opts, &testenv.WriteLog{})
	ctx, g, c := hub.Ctx, hub.G, hub.C

	// The hub app gets the propagation controller's condition of an opt-out that began
	// an hour ago: its grace period counts from then.
	optOut := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	const managers = "ClusterNotBoundToNamespace: the cluster is not bound; its ManifestWorks are kept until later"
	_, err := argoapp.SetCondition(app, argoapp.ConditionOCMPropagationError, managers, optOut)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(c.Update(ctx, app)).To(gomega.Succeed())

	work := hub.CreateFedWork(app, cluster, opts.AddonName, map[string]string{
		argoapp.FeedbackHealthStatus: "Degraded", argoapp.FeedbackSyncStatus: "OutOfSync", argoapp.FeedbackSyncRevision: "rev1",
	})
	addon := hub.EnableAddon(cluster, opts.AddonName)

	// Every version of the hub app from here on.
	w := watchApps(ctx, g, env, appNamespace)
	defer w.Stop()

	// The hostile agent's slice.
	long := strings.Repeat("é", clusterreport.MaxMessageBytes) // 1,024 characters, 2,048 bytes
	entry := statusv1alpha1.AppStatus{
		Namespace: "argocd", Name: "web", ManifestWork: work.Name, ObservedAt: metav1.NewTime(time.Now().Truncate(time.Second)),
		Sync:       statusv1alpha1.SyncStatus{Status: "OutOfSync", Revision: "rev1"},
		Health:     &statusv1alpha1.Health{Status: "Degraded", Message: long},
		TreeSource: statusv1alpha1.TreeSourceArgoCDCache,
		Conditions: []statusv1alpha1.Condition{
			{Type: argoapp.ConditionOCMPropagationError, Message: "ClusterNotBoundToNamespace: forged by the agent"},
			{Type: "SyncError", Message: long},
		},
		Resources: []statusv1alpha1.ResourceStatus{{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "web", Name: "web",
			Status: "OutOfSync", Health: &statusv1alpha1.Health{Status: "Degraded", Message: long}}},
	}
	slice := clusterreport.SliceObject(addon, clusterreport.Slice{Name: "argocd-pull-0", Apps: []statusv1alpha1.AppStatus{entry}})
	g.Expect(c.Create(ctx, slice)).To(gomega.Succeed())

	shortened := func(g gomega.Gomega, what, message string) {
		g.Expect(len(message)).To(gomega.BeNumerically("<=", observed.MaxAgentMessageBytes), what)
		g.Expect(message).To(gomega.HaveSuffix(clusterreport.Ellipsis), what)
		g.Expect(utf8.ValidString(message)).To(gomega.BeTrue(), what)
	}
	// The agent's status arrives, shortened.
	g.Eventually(func(g gomega.Gomega) {
		got := getApp(ctx, g, c, client.ObjectKeyFromObject(app))
		message, _, _ := unstructured.NestedString(got.Object, "status", "health", "message")
		shortened(g, "health message", message)
		resources, _, _ := unstructured.NestedSlice(got.Object, "status", "resources")
		g.Expect(resources).To(gomega.HaveLen(1))
		resourceMessage, _, _ := unstructured.NestedString(resources[0].(map[string]any), "health", "message")
		shortened(g, "resource health message", resourceMessage)
		syncError, found, _ := argoapp.FindCondition(got, "SyncError")
		g.Expect(found).To(gomega.BeTrue())
		shortened(g, "condition message", syncError)
	}).Should(gomega.Succeed())

	// No version the watch saw gave the agent the manager's condition, or moved its time.
	versions := 0
	for done := false; !done; {
		select {
		case e := <-w.ResultChan():
			if e.Type != watch.Added && e.Type != watch.Modified {
				continue
			}
			u := e.Object.(*unstructured.Unstructured)
			versions++
			conditions, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
			ours := 0
			for _, item := range conditions {
				if item.(map[string]any)["type"] == argoapp.ConditionOCMPropagationError {
					ours++
				}
			}
			message, since, found := argoapp.ConditionSince(u, argoapp.ConditionOCMPropagationError)
			if !found || ours != 1 || message != managers || !since.Equal(optOut) {
				t.Errorf("version %s: %d OCMPropagationError conditions, the first %q since %v; want the manager's one, %q since %v",
					u.GetResourceVersion(), ours, message, since, managers, optOut)
			}
		case <-time.After(2 * time.Second):
			done = true // quiet: the status mirror settled
		}
	}
	if versions == 0 {
		t.Error("the watch saw no version of the hub app")
	}
}
