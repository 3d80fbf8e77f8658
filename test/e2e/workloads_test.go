package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"

	appsv1alpha1 "github.com/ocm-gitops/argocd-pull-addon/pkg/apis/apps/v1alpha1"
	statusv1alpha1 "github.com/ocm-gitops/argocd-pull-addon/pkg/apis/argocdpull/v1alpha1"
	"github.com/ocm-gitops/argocd-pull-addon/test/fleet"
)

// Workloads run on the fleet's managed clusters: kube-scheduler binds Pods to KWOK's fake
// Nodes and KWOK makes them Running and Ready, so an app's health on the hub is Argo CD's
// verdict on Pods that run, or that never become Ready.
var _ = Describe("Workloads on the managed clusters", Ordered, func() {
	const (
		placement = "workloads-placement"
		appSet    = "workloads-appset"
		slowPath  = "workloads/slow"
		slowNS    = "workloads-slow"
		failing   = "workloads-failing"
		failingNS = "workloads-failing"
		// readyAfter outlasts the settle wait (argoapp.DefaultSettleWait, 15 s) by 15 s:
		// the hub shows a Progressing that lasts that long.
		readyAfter = "30s"
	)
	var (
		hubDyn   dynamic.Interface
		target   *fleet.ManagedCluster
		spokeDyn dynamic.Interface
		head     string
	)
	BeforeAll(func(ctx SpecContext) {
		hubDyn = newHubClients().dyn
		// The pull suite uses this cluster too; each suite enables the addon and removes
		// it, agent included, before it ends.
		target = theFleet.Clusters[1]
		var err error
		spokeDyn, err = dynamic.NewForConfig(target.Config)
		Expect(err).NotTo(HaveOccurred())

		enableAddonForSpec(ctx, target)
		applyAddonPlacementForSpec(ctx, placement, target)

		// Two apps: the guestbook whose Pods take readyAfter to become Ready, as with a slow
		// image pull, and one whose image makes its Pods run but never become Ready.
		slow := strings.Replace(fleet.GuestbookDeployment, "      labels: {app: guestbook-ui}\n",
			"      labels: {app: guestbook-ui}\n      annotations: {"+fleet.ReadyAfterAnnotation+": "+readyAfter+"}\n", 1)
		Expect(slow).To(ContainSubstring(fleet.ReadyAfterAnnotation))
		broken := strings.Replace(fleet.GuestbookDeployment, "image: gcr.io/heptio-images/ks-guestbook-demo:0.2",
			"image: registry.example/guestbook:always-"+fleet.FailingImageMarker, 1)
		broken = strings.Replace(broken, "  replicas: 1\n", "  replicas: 1\n  progressDeadlineSeconds: 10\n", 1)
		Expect(broken).To(ContainSubstring("progressDeadlineSeconds: 10"))
		head, err = theFleet.Git.Commit("workloads: a slow guestbook and a failing one", map[string]string{
			slowPath + "/deployment.yaml":       slow,
			"workloads/failing/deployment.yaml": broken,
		})
		Expect(err).NotTo(HaveOccurred())
	})

	It("runs a pulled guestbook's Pods, and the hub app goes Progressing, then Healthy, and the report counts it healthy", func(ctx SpecContext) {
		hubApp := target.Name + "-" + appSet
		history := recordHealth(ctx, hubDyn, hubApp)

		applier, err := fleet.NewApplier(theFleet.Hub.Config)
		Expect(err).NotTo(HaveOccurred())
		Expect(applier.ApplyYAML(ctx, fleet.ArgoCDNamespace,
			fleet.PulledApplicationSetYAML(appSet, appSet, placement, theFleet.Git.URL(), slowPath, slowNS, fleet.AppTemplate{}))).To(Succeed())
		DeferCleanup(func(ctx SpecContext) {
			Expect(hubDyn.Resource(appSetsGVR).Namespace(fleet.ArgoCDNamespace).Delete(ctx, appSet, metav1.DeleteOptions{})).To(Succeed())
			eventually(ctx, objectGone(hubDyn.Resource(fleet.ApplicationGVR).Namespace(fleet.ArgoCDNamespace), hubApp)).Should(BeTrue(), "hub Application gone once the cluster is clean")
		})

		By("the hub Application ends Synced and Healthy, having been Progressing")
		eventually(ctx, func(ctx context.Context) (string, error) {
			st, err := applicationStatus(ctx, hubDyn.Resource(fleet.ApplicationGVR).Namespace(fleet.ArgoCDNamespace), hubApp)
			if err != nil {
				return "", err
			}
			return fmt.Sprintf("%s/%s/%s", st.Sync.Status, strings.Join(st.Sync.Revisions, ","), st.Health.Status), nil
		}).Should(Equal("Synced/" + head + "/Healthy"))
		eventually(ctx, history.statuses).Should(ContainElement("Healthy"), "the watch saw Healthy")
		seen := history.statuses()
		progressing := slices.Index(seen, "Progressing")
		Expect(progressing).To(BeNumerically(">=", 0), "the hub app was Progressing at some point: %v", seen)
		Expect(seen[progressing:]).To(ContainElement("Healthy"), "and Healthy after that: %v", seen)
		Expect(seen).NotTo(ContainElement("Degraded"), "never Degraded: %v", seen)

		By("on the spoke, the Pod was scheduled onto a KWOK Node and became Ready after its start-up time")
		pods, err := target.Kube.CoreV1().Pods(slowNS).List(ctx, metav1.ListOptions{LabelSelector: "app=guestbook-ui"})
		Expect(err).NotTo(HaveOccurred())
		Expect(pods.Items).To(HaveLen(1))
		pod := pods.Items[0]
		Expect(pod.Spec.NodeName).To(HavePrefix("kwok-node-"))
		Expect(pod.Status.Phase).To(BeEquivalentTo("Running"))
		var readySince time.Time
		for _, c := range pod.Status.Conditions {
			if c.Type == "Ready" && c.Status == "True" {
				readySince = c.LastTransitionTime.Time
			}
		}
		Expect(readySince).NotTo(BeZero(), "the Pod is Ready: %v", pod.Status.Conditions)
		wait, _ := time.ParseDuration(readyAfter)
		Expect(readySince.Sub(pod.CreationTimestamp.Time)).To(BeNumerically(">=", wait-time.Second), "Ready only after %s", readyAfter)
		d, err := target.Kube.AppsV1().Deployments(slowNS).Get(ctx, "guestbook-ui", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(d.Status.AvailableReplicas).To(BeEquivalentTo(1))

		By("the agent's report and the ApplicationSet report count it healthy")
		eventually(ctx, reportedSyncAndHealth(target.Name, hubApp)).Should(Equal("Synced/Healthy"))
		eventually(ctx, func(ctx context.Context) (string, error) {
			u, err := hubDyn.Resource(reportsGVR).Namespace(fleet.ArgoCDNamespace).Get(ctx, appSet, metav1.GetOptions{})
			if err != nil {
				return "", err
			}
			var report appsv1alpha1.MulticlusterApplicationSetReport
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &report); err != nil {
				return "", err
			}
			entry := "no entry for " + target.Name
			for _, c := range report.Statuses.ClusterConditions {
				if c.Cluster == target.Name {
					entry = c.SyncStatus + "/" + c.HealthStatus
				}
			}
			// Every cluster the placement picked counts as healthy.
			s := report.Statuses.Summary
			all := s.Healthy != "" && s.Healthy != "0" && s.Healthy == s.Clusters
			return fmt.Sprintf("%s; every cluster healthy: %v (%s of %s)", entry, all, s.Healthy, s.Clusters), nil
		}).Should(HavePrefix("Synced/Healthy; every cluster healthy: true"))
	})

	It("shows Degraded on the hub for an app whose Pods never become Ready", func(ctx SpecContext) {
		app := pulledApp(fleet.ArgoCDNamespace, failing, target.Name, failingNS, true)
		Expect(unstructured.SetNestedField(app.Object, "workloads/failing", "spec", "source", "path")).To(Succeed())
		newHubClients().createApp(ctx, app)

		By("on the spoke, the Pod runs but is not Ready, the Deployment misses its progress deadline, and Argo CD calls the app Degraded")
		eventually(ctx, func(ctx context.Context) (string, error) {
			st, err := applicationStatus(ctx, spokeDyn.Resource(fleet.ApplicationGVR).Namespace(fleet.ArgoCDNamespace), failing)
			return st.Sync.Status + "/" + st.Health.Status, err
		}).Should(Equal("Synced/Degraded"))
		// What Argo CD's verdict rests on: its message for the Deployment is `Deployment
		// "guestbook-ui" exceeded its progress deadline`. Argo CD 3 keeps resource health in
		// its cache, not in the Application (controller.resource.health.persist is false by
		// default), so the message itself is on no object.
		d, err := target.Kube.AppsV1().Deployments(failingNS).Get(ctx, "guestbook-ui", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(d.Status.Conditions).To(ContainElement(And(
			HaveField("Type", BeEquivalentTo("Progressing")), HaveField("Status", BeEquivalentTo("False")),
			HaveField("Reason", "ProgressDeadlineExceeded"))))
		Expect(d.Status.AvailableReplicas).To(BeZero())
		pods, err := target.Kube.CoreV1().Pods(failingNS).List(ctx, metav1.ListOptions{LabelSelector: "app=guestbook-ui"})
		Expect(err).NotTo(HaveOccurred())
		Expect(pods.Items).To(HaveLen(1))
		Expect(pods.Items[0].Spec.NodeName).To(HavePrefix("kwok-node-"))
		Expect(pods.Items[0].Status.Phase).To(BeEquivalentTo("Running"))
		Expect(pods.Items[0].Status.Conditions).To(ContainElement(And(
			HaveField("Type", BeEquivalentTo("Ready")), HaveField("Status", BeEquivalentTo("False")),
			HaveField("Message", "containers with unready status: [guestbook-ui]"))))

		By("the hub Application and the agent's report show it Degraded")
		eventually(ctx, func(ctx context.Context) (string, error) {
			st, err := applicationStatus(ctx, hubDyn.Resource(fleet.ApplicationGVR).Namespace(fleet.ArgoCDNamespace), failing)
			return st.Sync.Status + "/" + st.Health.Status, err
		}).Should(Equal("Synced/Degraded"))
		// The agent publishes on its own schedule: the work's status feedback may reach the
		// hub Application first.
		eventually(ctx, reportedSyncAndHealth(target.Name, failing)).Should(Equal("Synced/Degraded"))

		By("the hub Application shows Argo CD's health message for the Deployment, read by the agent from Argo CD's cache")
		eventually(ctx, func(ctx context.Context) (string, error) {
			st, err := applicationStatus(ctx, hubDyn.Resource(fleet.ApplicationGVR).Namespace(fleet.ArgoCDNamespace), failing)
			if err != nil {
				return "", err
			}
			for _, r := range st.Resources {
				if r.Kind == "Deployment" {
					return r.Health.Status + ": " + r.Health.Message, nil
				}
			}
			return "no Deployment", nil
		}).Should(Equal(`Degraded: Deployment "guestbook-ui" exceeded its progress deadline`))

		By("the agent's status slice carries the tree: the Pod under its ReplicaSet, with its image")
		eventually(ctx, func(ctx context.Context) (string, error) {
			list, err := hubDyn.Resource(statusv1alpha1.GroupVersion.WithResource(statusv1alpha1.Resource)).Namespace(target.Name).List(ctx, metav1.ListOptions{})
			if err != nil {
				return "", err
			}
			for _, item := range list.Items {
				var slice statusv1alpha1.ApplicationStatusSlice
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(item.Object, &slice); err != nil {
					return "", err
				}
				for _, e := range slice.Apps {
					if e.Name != failing {
						continue
					}
					for _, n := range e.Nodes {
						if n.Kind == "Pod" && len(n.ParentRefs) == 1 && n.Health != nil {
							return fmt.Sprintf("%s %s under %s, %v", e.TreeSource, n.Health.Status, n.ParentRefs[0].Kind, n.Images), nil
						}
					}
					return fmt.Sprintf("%s %s: no Pod in %d nodes", e.TreeSource, e.TreeMessage, len(e.Nodes)), nil
				}
			}
			return "not in a slice", nil
		}).Should(MatchRegexp(`^ArgoCDCache \w+ under ReplicaSet, \[registry.example/guestbook:always-fail\]$`))
	})
})

// healthHistory is every health status a hub Application showed, in order, from a watch:
// a status that a later Get would miss is kept. Repeats in a row are kept once.
type healthHistory struct {
	mu   sync.Mutex
	seen []string
}

func (h *healthHistory) add(status string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if status != "" && (len(h.seen) == 0 || h.seen[len(h.seen)-1] != status) {
		h.seen = append(h.seen, status)
	}
}

func (h *healthHistory) statuses() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.seen)
}

// recordHealth watches the hub Application called name until ctx ends, from before it
// exists if need be, and records its health statuses.
func recordHealth(ctx context.Context, hubDyn dynamic.Interface, name string) *healthHistory {
	h := &healthHistory{}
	apps := hubDyn.Resource(fleet.ApplicationGVR).Namespace(fleet.ArgoCDNamespace)
	started := make(chan struct{})
	go func() {
		defer GinkgoRecover()
		rv, first := "", true
		for ctx.Err() == nil {
			w, err := apps.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name, ResourceVersion: rv})
			if first {
				first = false
				close(started)
			}
			if err != nil {
				select {
				case <-ctx.Done():
				case <-time.After(time.Second):
				}
				continue
			}
			for ev := range w.ResultChan() {
				if ev.Type == watch.Error {
					rv = "" // expired: watch again from the current state
					continue
				}
				u, ok := ev.Object.(*unstructured.Unstructured)
				if !ok {
					continue
				}
				rv = u.GetResourceVersion()
				status, _, _ := unstructured.NestedString(u.Object, "status", "health", "status")
				h.add(status)
			}
		}
	}()
	<-started
	return h
}

// reportedSyncAndHealth is a poll for eventually: "<sync>/<health>" of the Application
// name as the agent of cluster reports it; "not reported" until it does.
func reportedSyncAndHealth(cluster, name string) func(context.Context) (string, error) {
	return func(ctx context.Context) (string, error) {
		app, found, err := reportedApp(ctx, cluster, name)
		if !found || err != nil {
			return "not reported", err
		}
		return app.Sync.Status + "/" + app.Health.Status, nil
	}
}
