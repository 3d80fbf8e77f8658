package e2e

// The setup that the suites over time share: clusters opted in and labelled for a
// Placement, tenant namespaces on the hub, pulled Applications, and the reads of their
// works, conditions and Events.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	addonclient "open-cluster-management.io/api/client/addon/clientset/versioned"
	clusterclient "open-cluster-management.io/api/client/cluster/clientset/versioned"
	workclient "open-cluster-management.io/api/client/work/clientset/versioned"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/test/fleet"
)

var (
	worksGVR          = schema.GroupVersionResource{Group: "work.open-cluster-management.io", Version: "v1", Resource: "manifestworks"}
	reportsGVR        = schema.GroupVersionResource{Group: "apps.open-cluster-management.io", Version: "v1alpha1", Resource: "multiclusterapplicationsetreports"}
	appSetsGVR        = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "applicationsets"}
	placementsGVR     = schema.GroupVersionResource{Group: "cluster.open-cluster-management.io", Version: "v1beta1", Resource: "placements"}
	managedClusterGVR = schema.GroupVersionResource{Group: "cluster.open-cluster-management.io", Version: "v1", Resource: "managedclusters"}
)

// hubClients are the hub clients of the suites over time, as the fleet's administrator.
type hubClients struct {
	dyn      dynamic.Interface
	works    workclient.Interface
	addons   addonclient.Interface
	clusters clusterclient.Interface
	applier  *fleet.Applier
}

func newHubClients() hubClients {
	var c hubClients
	var err error
	c.dyn, err = dynamic.NewForConfig(theFleet.Hub.Config)
	Expect(err).NotTo(HaveOccurred())
	c.works, err = workclient.NewForConfig(theFleet.Hub.Config)
	Expect(err).NotTo(HaveOccurred())
	c.addons, err = addonclient.NewForConfig(theFleet.Hub.Config)
	Expect(err).NotTo(HaveOccurred())
	c.clusters, err = clusterclient.NewForConfig(theFleet.Hub.Config)
	Expect(err).NotTo(HaveOccurred())
	c.applier, err = fleet.NewApplier(theFleet.Hub.Config)
	Expect(err).NotTo(HaveOccurred())
	return c
}

// apps is the hub's Applications in namespace.
func (c hubClients) apps(namespace string) dynamic.ResourceInterface {
	return c.dyn.Resource(fleet.ApplicationGVR).Namespace(namespace)
}

// optIn enables the addon on the clusters with clusteradm; at the end of the container
// it disables it again and waits until the agent is gone, as it was before.
func (c hubClients) optIn(ctx context.Context, clusters ...*fleet.ManagedCluster) {
	for _, mc := range clusters {
		enableAddonForSpec(ctx, mc)
	}
}

// setClusterLabel sets (value non-empty) or removes (empty) a label of a ManagedCluster.
func (c hubClients) setClusterLabel(ctx context.Context, cluster, key, value string) {
	var v any = value
	if value == "" {
		v = nil
	}
	patch := fmt.Appendf(nil, `{"metadata":{"labels":{%q:%s}}}`, key, jsonValue(v))
	_, err := c.clusters.ClusterV1().ManagedClusters().Patch(ctx, cluster, types.MergePatchType, patch, metav1.PatchOptions{})
	Expect(err).NotTo(HaveOccurred())
}

// labelClusters labels the clusters key=true until the end of the container.
func (c hubClients) labelClusters(ctx context.Context, key string, clusters ...*fleet.ManagedCluster) {
	for _, mc := range clusters {
		c.setClusterLabel(ctx, mc.Name, key, "true")
		DeferCleanup(func(ctx SpecContext) { c.setClusterLabel(ctx, mc.Name, key, "") })
	}
}

func jsonValue(v any) string {
	if v == nil {
		return "null"
	}
	return fmt.Sprintf("%q", v)
}

// placeByLabel applies, in namespace, the default ManagedClusterSetBinding and a Placement
// called name of the clusters labelled key=true, waits until its PlacementDecisions name
// exactly labelled, and deletes the Placement at the end of the container. What reads the
// decisions next need not race the placement controller: an ApplicationSet generated from
// a Placement not decided yet retries only after 3 minutes.
func (c hubClients) placeByLabel(ctx context.Context, namespace, name, key string, labelled ...*fleet.ManagedCluster) {
	Expect(c.applier.ApplyYAML(ctx, namespace, fleet.PlacementYAML(name, map[string]string{key: "true"}))).To(Succeed())
	DeferCleanup(func(ctx SpecContext) {
		err := c.dyn.Resource(placementsGVR).Namespace(namespace).Delete(ctx, name, metav1.DeleteOptions{})
		Expect(ignoreNotFound(err)).To(Succeed())
	})
	var names []string
	for _, mc := range labelled {
		names = append(names, mc.Name)
	}
	eventually(ctx, func(ctx context.Context) ([]string, error) {
		return c.applier.DecidedClusters(ctx, namespace, name)
	}).Should(ConsistOf(names), "the PlacementDecisions of %s/%s", namespace, name)
}

// tenantNamespace creates a hub namespace for Applications, bound to the clusters
// labelled key=true, labelled, by a Placement "tenant": the tenant gate's
// PlacementDecision. The namespace goes at the end of the container.
func (c hubClients) tenantNamespace(ctx context.Context, namespace, key string, labelled ...*fleet.ManagedCluster) {
	_, err := theFleet.Hub.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func(ctx SpecContext) {
		Expect(theFleet.Hub.Kube.CoreV1().Namespaces().Delete(ctx, namespace, metav1.DeleteOptions{})).To(Succeed())
	})
	c.placeByLabel(ctx, namespace, "tenant", key, labelled...)
}

// worksOf returns the ManifestWorks, in every cluster namespace, that point back to the
// hub Application namespace/name.
func (c hubClients) worksOf(ctx context.Context, namespace, name string) ([]workv1.ManifestWork, error) {
	list, err := c.works.WorkV1().ManifestWorks(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []workv1.ManifestWork
	for _, w := range list.Items {
		if pointsTo(&w.ObjectMeta, namespace, name) {
			out = append(out, w)
		}
	}
	return out, nil
}

func pointsTo(meta metav1.Object, namespace, name string) bool {
	a := meta.GetAnnotations()
	return a[argoapp.AnnotationHubApplicationNamespace] == namespace && a[argoapp.AnnotationHubApplicationName] == name
}

// propagationError returns the message of the hub Application's OCMPropagationError
// condition, or "" without one.
func (c hubClients) propagationError(ctx context.Context, namespace, name string) (string, error) {
	u, err := c.apps(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	return propagationErrorOf(u)
}

func propagationErrorOf(u *unstructured.Unstructured) (string, error) {
	st, err := argoapp.DecodeStatus(u)
	if err != nil {
		return "", err
	}
	for _, c := range st.Conditions {
		if c.Type == argoapp.ConditionOCMPropagationError {
			return c.Message, nil
		}
	}
	return "", nil
}

// warningReasons returns the reasons of the Warning Events about the hub Application.
func warningReasons(ctx context.Context, namespace, name string) ([]string, error) {
	list, err := theFleet.Hub.Kube.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{
		FieldSelector: "involvedObject.name=" + name + ",type=" + corev1.EventTypeWarning})
	if err != nil {
		return nil, err
	}
	var reasons []string
	for _, e := range list.Items {
		if e.InvolvedObject.Kind == argoapp.KindApplication {
			reasons = append(reasons, e.Reason)
		}
	}
	return reasons, nil
}

// expectRefused waits until the hub Application shows the refusal: the condition
// OCMPropagationError whose message starts with reason, and a Warning Event of that
// reason; and it has no ManifestWork. The manager decides within seconds.
func (c hubClients) expectRefused(ctx context.Context, namespace, name, reason string) {
	eventually(ctx, func(ctx context.Context) (string, error) {
		return c.propagationError(ctx, namespace, name)
	}).WithTimeout(time.Minute).Should(HavePrefix(reason+": "), "the condition %s of %s/%s", argoapp.ConditionOCMPropagationError, namespace, name)
	eventually(ctx, func(ctx context.Context) ([]string, error) {
		return warningReasons(ctx, namespace, name)
	}).WithTimeout(time.Minute).Should(ContainElement(reason), "a Warning Event %s on %s/%s", reason, namespace, name)
	works, err := c.worksOf(ctx, namespace, name)
	Expect(err).NotTo(HaveOccurred())
	Expect(works).To(BeEmpty(), "no ManifestWork for the refused %s/%s", namespace, name)
}

// pulledApp is a pulled guestbook Application in the hub namespace for cluster, as
// the reference shows it: pull label, cluster annotation, skip-reconcile, the spoke's
// Argo CD namespace, and the resources finalizer so that deleting it prunes the
// spoke. Its resources go to destNamespace; automated says whether it syncs by itself.
func pulledApp(namespace, name, cluster, destNamespace string, automated bool) *unstructured.Unstructured {
	app := fleet.GuestbookApplication(name, theFleet.Git.URL())
	app.SetNamespace(namespace)
	app.SetLabels(map[string]string{argoapp.LabelPullToOCMManagedCluster: "true"})
	app.SetAnnotations(map[string]string{
		argoapp.AnnotationOCMManagedCluster:             cluster,
		argoapp.AnnotationOCMManagedClusterAppNamespace: fleet.ArgoCDNamespace,
		argoapp.AnnotationSkipReconcile:                 "true",
	})
	app.SetFinalizers([]string{argoapp.ResourcesFinalizer})
	Expect(unstructured.SetNestedField(app.Object, destNamespace, "spec", "destination", "namespace")).To(Succeed())
	if !automated {
		unstructured.RemoveNestedField(app.Object, "spec", "syncPolicy", "automated")
	}
	return app
}

// createApp creates the hub Application; at the end of the spec it deletes it and waits
// until it is gone, that is until the spoke is clean.
func (c hubClients) createApp(ctx context.Context, app *unstructured.Unstructured) {
	_, err := c.apps(app.GetNamespace()).Create(ctx, app, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func(ctx SpecContext) {
		c.deleteAndWait(ctx, c.apps(app.GetNamespace()), app.GetName())
	})
}

// deleteAndWait deletes an object and waits until it is gone.
func (c hubClients) deleteAndWait(ctx context.Context, ri dynamic.ResourceInterface, name string) {
	Expect(ignoreNotFound(ri.Delete(ctx, name, metav1.DeleteOptions{}))).To(Succeed())
	eventually(ctx, objectGone(ri, name)).Should(BeTrue(), "%s deleted", name)
}

// settledStandalone waits until a pulled standalone Application synced the git head by
// itself, and its work's feedback and the hub Application show the spoke's last state, so
// that nothing is left to write; it returns the work.
func (c hubClients) settledStandalone(ctx context.Context, namespace, name string, mc *fleet.ManagedCluster) *workv1.ManifestWork {
	head, err := theFleet.Git.Head()
	Expect(err).NotTo(HaveOccurred())
	want := "Synced/" + head + "/" + settledHealth(ctx)
	var spoke map[string]string
	eventually(ctx, func(ctx context.Context) (map[string]string, error) {
		u, err := spokeApps(mc).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		spoke, err = feedbackView(u)
		return spoke, err
	}).Should(And(HaveKeyWithValue("state", want), HaveKeyWithValue(argoapp.FeedbackOperationStatePhase, "Succeeded")),
		"the spoke Application on %s synced by itself", mc.Name)
	work := c.workShows(ctx, namespace, name, spoke)
	eventually(ctx, func(ctx context.Context) (map[string]string, error) {
		u, err := c.apps(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return feedbackView(u)
	}).Should(Equal(spoke), "the hub Application shows the spoke's state")
	return work
}

// workShows waits until the one work of the hub Application namespace/name carries spoke,
// the feedbackView of its spoke Application, in its status feedback; it returns the work.
func (c hubClients) workShows(ctx context.Context, namespace, name string, spoke map[string]string) *workv1.ManifestWork {
	var work *workv1.ManifestWork
	eventually(ctx, func(ctx context.Context) (map[string]string, error) {
		works, err := c.worksOf(ctx, namespace, name)
		if err != nil || len(works) != 1 {
			return nil, err
		}
		work = &works[0]
		got := map[string]string{"state": spoke["state"]}
		for _, n := range []string{argoapp.FeedbackSyncStatus, argoapp.FeedbackHealthStatus, argoapp.FeedbackSyncRevision,
			argoapp.FeedbackOperationStatePhase, argoapp.FeedbackOperationStateStartedAt} {
			got[n], _ = fleet.FeedbackValue(work, 0, n)
		}
		return got, nil
	}).Should(Equal(spoke), "the work's feedback shows the spoke's state")
	return work
}

// feedbackView is what the work's status feedback carries of an Application (the single
// source revision, as the feedback rule reads it), with its appState as "state".
func feedbackView(u *unstructured.Unstructured) (map[string]string, error) {
	st, err := argoapp.DecodeStatus(u)
	if err != nil {
		return nil, err
	}
	state, err := appState(u)
	return map[string]string{
		"state":                                 state,
		argoapp.FeedbackSyncStatus:              st.Sync.Status,
		argoapp.FeedbackHealthStatus:            st.Health.Status,
		argoapp.FeedbackSyncRevision:            st.Sync.Revision,
		argoapp.FeedbackOperationStatePhase:     st.OperationState.Phase,
		argoapp.FeedbackOperationStateStartedAt: st.OperationState.StartedAt,
	}, err
}

// spokeApps is the Argo CD Applications of a managed cluster, in its Argo CD namespace.
func spokeApps(mc *fleet.ManagedCluster) dynamic.ResourceInterface {
	dyn, err := dynamic.NewForConfig(mc.Config)
	Expect(err).NotTo(HaveOccurred())
	return dyn.Resource(fleet.ApplicationGVR).Namespace(fleet.ArgoCDNamespace)
}

// appState is what the hub, the spoke and the report agree on once an app settled:
// "<sync>/<revision(s)>/<health>".
func appState(u *unstructured.Unstructured) (string, error) {
	st, err := argoapp.DecodeStatus(u)
	if err != nil {
		return "", err
	}
	rev := st.Sync.Revision
	if len(st.Sync.Revisions) > 0 {
		rev = strings.Join(st.Sync.Revisions, ",")
	}
	return st.Sync.Status + "/" + rev + "/" + st.Health.Status, nil
}

// settledHealth is the health a synced guestbook settles at: Healthy when the fleet's
// managed clusters run Pods (they have Nodes), else Progressing for ever, since no Pod of
// its Deployment ever starts.
func settledHealth(ctx context.Context) string {
	nodes, err := theFleet.Clusters[0].Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	Expect(err).NotTo(HaveOccurred())
	if len(nodes.Items) > 0 {
		return "Healthy"
	}
	return "Progressing"
}

// appSetControllerFlag reports whether the hub's ApplicationSet controller runs with flag.
func appSetControllerFlag(flag string) bool {
	for _, pid := range theFleet.Pids() {
		cmdline, err := os.ReadFile(filepath.Join("/proc", fmt.Sprint(pid), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(cmdline), "\x00")
		isAppSet := false
		for _, a := range args {
			if strings.HasPrefix(a, "--webhook-addr=") { // only the ApplicationSet controller has it
				isAppSet = true
			}
		}
		if isAppSet {
			for _, a := range args {
				if a == flag || strings.HasPrefix(a, flag+"=") && !strings.HasSuffix(a, "=false") {
					return true
				}
			}
		}
	}
	return false
}

// sleep waits d, the fixed observation windows of the suites over time.
func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
		Expect(ctx.Err()).NotTo(HaveOccurred())
	case <-time.After(d):
	}
}
