package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/clustersecret"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/resourceproxy"
	"github.com/ocm-gitops/argocd-pull-addon/test/fleet"
)

// liveViewSpecs registers the specs of the live views and actions of the hub's Argo CD on
// a pulled app, served from its managed cluster through the resource proxy: the hub
// apiserver forwards argocd-server's Kubernetes requests for the Argo CD cluster of the
// managed cluster to the manager, which hands them to that cluster's agent over the tunnel
// the agent holds open; the agent runs them there as Argo CD's application-controller, on
// the app's tree only. It is called in an Ordered container whose app (its guestbook in
// namespace) has, by then, a destination naming its managed cluster (target), is Synced
// and Healthy, and shows nodes with UIDs; admin is argocd-server's client as admin.
func liveViewSpecs(app, namespace string, target func() *fleet.ManagedCluster, admin func() *fleet.ArgoCDClient) {
	const deployment = "guestbook-ui"
	cli := func(ctx context.Context, args ...string) (string, int) {
		return runArgoCD(ctx, admin().Token(), args...)
	}
	// liveResource is the UI's call for a node's live manifest.
	liveResource := func(ctx context.Context, client *fleet.ArgoCDClient, kind, group, name string) (int, string) {
		query := url.Values{"appNamespace": {fleet.ArgoCDNamespace}, "namespace": {namespace}, "resourceName": {name},
			"kind": {kind}, "group": {group}, "version": {"v1"}}
		status, body, err := client.Call(ctx, http.MethodGet, "/api/v1/applications/"+app+"/resource?"+query.Encode(), nil)
		Expect(err).NotTo(HaveOccurred())
		return status, string(body)
	}
	// podsOf returns the names of the guestbook's Pods on the managed cluster.
	podsOf := func(ctx context.Context) []string {
		pods, err := target().Kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=" + deployment})
		Expect(err).NotTo(HaveOccurred())
		var names []string
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil {
				names = append(names, p.Name)
			}
		}
		return names
	}

	It("shows the live manifest of its Deployment, read on the managed cluster", func(ctx SpecContext) {
		live, err := target().Kube.AppsV1().Deployments(namespace).Get(ctx, deployment, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())

		status, body := liveResource(ctx, admin(), "Deployment", "apps", deployment)
		Expect(status).To(Equal(http.StatusOK), "the UI's live manifest: %s", body)
		Expect(body).To(ContainSubstring(string(live.UID)), "the manifest is %s's Deployment", target().Name)

		out, code := cli(ctx, "app", "get-resource", app, "--kind", "Deployment", "--resource-name", deployment, "-o", "yaml")
		Expect(code).To(Equal(0), "argocd app get-resource: %s", out)
		Expect(out).To(ContainSubstring("uid: " + string(live.UID)))
	})

	It("prints its live manifests with `argocd app manifests --source live`, and `argocd app diff` finds no difference", func(ctx SpecContext) {
		live, err := target().Kube.AppsV1().Deployments(namespace).Get(ctx, deployment, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		var out string
		eventually(ctx, func(ctx context.Context) string {
			out, _ = cli(ctx, "app", "manifests", app, "--source", "live")
			return out
		}).Should(ContainSubstring("uid: "+string(live.UID)), "the live Deployment of %s", target().Name)
		Expect(out).To(ContainSubstring("kind: Service"))
		out, code := cli(ctx, "app", "diff", app)
		Expect(code).To(Equal(0), "argocd app diff on the synced app: %s", out)
	})

	It("lists the events of its Deployment, recorded on the managed cluster", func(ctx SpecContext) {
		// The UI asks by the UID of the hub's tree node.
		tree, err := admin().ResourceTree(ctx, app)
		Expect(err).NotTo(HaveOccurred())
		uid := ""
		for _, n := range tree.Nodes {
			if n.Kind == "Deployment" && n.Name == deployment {
				uid = n.UID
			}
		}
		Expect(uid).NotTo(BeEmpty())
		query := url.Values{"appNamespace": {fleet.ArgoCDNamespace}, "resourceNamespace": {namespace}, "resourceName": {deployment},
			"resourceUID": {uid}}
		status, body, err := admin().Call(ctx, http.MethodGet, "/api/v1/applications/"+app+"/events?"+query.Encode(), nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(status).To(Equal(http.StatusOK), "the UI's events: %s", body)
		var events corev1.EventList
		Expect(json.Unmarshal(body, &events)).To(Succeed())
		var reasons []string
		for _, e := range events.Items {
			reasons = append(reasons, e.Reason)
		}
		Expect(reasons).To(ContainElement("ScalingReplicaSet"), "the deployment controller's events on %s", target().Name)
	})

	It("deletes its Pod on the managed cluster, as the UI's delete does, and its ReplicaSet makes another", func(ctx SpecContext) {
		// The argocd CLI's delete-resource picks among the app's managed resources, which a
		// Pod is not, for a pulled app as for a pushed one; the UI deletes any node.
		pods := podsOf(ctx)
		Expect(pods).NotTo(BeEmpty())
		pod := pods[0]
		query := url.Values{"appNamespace": {fleet.ArgoCDNamespace}, "namespace": {namespace}, "resourceName": {pod},
			"kind": {"Pod"}, "group": {""}, "version": {"v1"}, "force": {"false"}, "orphan": {"false"}}
		status, body, err := admin().Call(ctx, http.MethodDelete, "/api/v1/applications/"+app+"/resource?"+query.Encode(), nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(status).To(Equal(http.StatusOK), "the UI's delete of Pod %s: %s", pod, body)
		eventually(ctx, func(ctx context.Context) bool {
			_, err := target().Kube.CoreV1().Pods(namespace).Get(ctx, pod, metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}).Should(BeTrue(), "Pod %s is gone from %s", pod, target().Name)
		eventually(ctx, podsOf).Should(And(HaveLen(len(pods)), Not(ContainElement(pod))), "the ReplicaSet made another Pod")
	})

	It("restarts its Deployment on the managed cluster with `argocd app actions run restart`", func(ctx SpecContext) {
		out, code := cli(ctx, "app", "actions", "run", app, "restart", "--kind", "Deployment", "--resource-name", deployment, "--namespace", namespace)
		Expect(code).To(Equal(0), "argocd app actions run restart: %s", out)
		live, err := target().Kube.AppsV1().Deployments(namespace).Get(ctx, deployment, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(live.Spec.Template.Annotations).To(HaveKey("kubectl.kubernetes.io/restartedAt"), "the Pod template changed on %s", target().Name)
		eventually(ctx, func(ctx context.Context) (bool, error) {
			d, err := target().Kube.AppsV1().Deployments(namespace).Get(ctx, deployment, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			want := *d.Spec.Replicas
			return d.Status.ObservedGeneration == d.Generation && d.Status.UpdatedReplicas == want && d.Status.AvailableReplicas == want &&
				d.Status.Replicas == want && len(podsOf(ctx)) == int(want), nil
		}).Should(BeTrue(), "the restart rolled out on %s", target().Name)
	})

	It("shows a Pod's log with `argocd app logs`, served by the managed cluster's kubelet", func(ctx SpecContext) {
		// KWOK plays the kubelet, and serves each container's log from one file
		// (fleet.PodLogLine): the log comes from the managed cluster's apiserver and its
		// kubelet stand-in, through the resource proxy.
		pods := podsOf(ctx)
		Expect(pods).NotTo(BeEmpty())
		out, code := cli(ctx, "app", "logs", app, "--kind", "Pod", "--name", pods[0], "--namespace", namespace, "--tail", "10")
		Expect(code).To(Equal(0), out)
		Expect(out).To(ContainSubstring(fleet.PodLogLine))
		out, code = cli(ctx, "app", "logs", app, "--kind", "Deployment", "--name", deployment, "--namespace", namespace, "--tail", "10")
		Expect(code).To(Equal(0), out)
		Expect(out).To(ContainSubstring(fleet.PodLogLine), "the logs of the Deployment's Pods")

		By("the time to the log's first line, as the UI asks for it")
		query := url.Values{"appNamespace": {fleet.ArgoCDNamespace}, "namespace": {namespace}, "podName": {pods[0]},
			"container": {deployment}, "tailLines": {"10"}, "follow": {"false"}}
		const n = 20
		var took []time.Duration
		for range n {
			start := time.Now()
			status, body, err := admin().Call(ctx, http.MethodGet, "/api/v1/applications/"+app+"/logs?"+query.Encode(), nil)
			took = append(took, time.Since(start))
			Expect(err).NotTo(HaveOccurred())
			Expect(status).To(Equal(http.StatusOK), string(body))
			Expect(string(body)).To(ContainSubstring(fleet.PodLogLine))
		}
		sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
		fmt.Fprintf(GinkgoWriter, "a Pod's log from the hub, %d requests: median %v, slowest %v\n", n, took[n/2].Round(time.Millisecond), took[n-1].Round(time.Millisecond))
	})

	It("refuses what Argo CD's RBAC refuses, and any object outside the app's tree", func(ctx SpecContext) {
		By("a project role allowed only to get applications")
		_, _ = cli(ctx, "proj", "role", "create", "default", "live-viewer")
		DeferCleanup(func(ctx SpecContext) { _, _ = cli(ctx, "proj", "role", "delete", "default", "live-viewer") })
		out, code := cli(ctx, "proj", "role", "add-policy", "default", "live-viewer", "--action", "get", "--permission", "allow", "--object", "*")
		Expect(code).To(Equal(0), out)
		token, code := cli(ctx, "proj", "role", "create-token", "default", "live-viewer", "--token-only")
		Expect(code).To(Equal(0), token)
		token = strings.TrimSpace(token)
		viewer := func(ctx context.Context, args ...string) (string, int) { return runArgoCD(ctx, token, args...) }

		out, code = viewer(ctx, "app", "get-resource", app, "--kind", "Deployment", "--resource-name", deployment, "-o", "yaml")
		Expect(code).To(Equal(0), "the viewer may read the live manifest: %s", out)
		pods := podsOf(ctx)
		for _, args := range [][]string{
			{"app", "delete-resource", app, "--kind", "Service", "--resource-name", deployment, "--namespace", namespace},
			{"app", "actions", "run", app, "restart", "--kind", "Deployment", "--resource-name", deployment, "--namespace", namespace},
			{"app", "logs", app, "--kind", "Pod", "--name", pods[0], "--namespace", namespace, "--tail", "1"},
		} {
			out, code := viewer(ctx, args...)
			Expect(code).NotTo(Equal(0), "argocd %s as the viewer: %s", strings.Join(args[:3], " "), out)
			Expect(out).To(ContainSubstring("permission denied"))
		}
		viewerAPI := fleet.NewArgoCDClient(admin().URL, token)
		query := url.Values{"appNamespace": {fleet.ArgoCDNamespace}, "namespace": {namespace}, "resourceName": {pods[0]},
			"kind": {"Pod"}, "group": {""}, "version": {"v1"}}
		status, denied, err := viewerAPI.Call(ctx, http.MethodDelete, "/api/v1/applications/"+app+"/resource?"+query.Encode(), nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(status).To(Equal(http.StatusForbidden), "the UI's delete of a Pod as the viewer: %s", denied)
		Expect(podsOf(ctx)).To(ContainElement(pods[0]), "the viewer deleted nothing")
		_, err = target().Kube.CoreV1().Services(namespace).Get(ctx, deployment, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred(), "the viewer deleted nothing")

		By("a ConfigMap on " + target().Name + " that is not in the app's tree")
		_, err = target().Kube.CoreV1().ConfigMaps(namespace).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "not-in-the-tree"}, Data: map[string]string{"secret": "value"}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		status, body := liveResource(ctx, admin(), "ConfigMap", "", "not-in-the-tree")
		Expect(status).NotTo(Equal(http.StatusOK))
		Expect(body).To(ContainSubstring("not found as part of application"), "argocd-server refuses it")

		By("asked of the resource proxy directly, with argocd-server's credentials: the agent refuses it")
		proxy := proxyAt(ctx, target().Name)
		for _, call := range []struct{ method, path string }{
			{http.MethodGet, "/api/v1/namespaces/" + namespace + "/configmaps/not-in-the-tree"},
			{http.MethodDelete, "/api/v1/namespaces/" + namespace + "/configmaps/not-in-the-tree"},
			{http.MethodGet, "/api/v1/namespaces/kube-system/secrets"},
			{http.MethodGet, "/api/v1/namespaces/" + namespace + "/pods"},
		} {
			code, body := proxy(ctx, call.method, call.path)
			Expect(code).To(Equal(http.StatusForbidden), "%s %s: %s", call.method, call.path, body)
			Expect(body).To(ContainSubstring("argocd-pull agent of managed cluster " + target().Name + " refuses"))
			Expect(body).NotTo(ContainSubstring("value"))
		}
		_, err = target().Kube.CoreV1().ConfigMaps(namespace).Get(ctx, "not-in-the-tree", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred(), "the ConfigMap is still there")

		By("a cluster with no agent connected answers at once")
		start := time.Now()
		code, text := proxyAt(ctx, "no-such-cluster")(ctx, http.MethodGet, "/api")
		Expect(code).To(Equal(http.StatusServiceUnavailable), text)
		Expect(text).To(ContainSubstring("is not connected to the hub"))
		Expect(time.Since(start)).To(BeNumerically("<", 5*time.Second))
	})

	It("costs the hub no write per request; the live manifest's latency", func(ctx SpecContext) {
		quiet := waitForQuietHub(ctx, 5*time.Second, 2*time.Minute, pullResources...)
		const n = 50
		var took []time.Duration
		for range n {
			start := time.Now()
			status, body := liveResource(ctx, admin(), "Deployment", "apps", deployment)
			took = append(took, time.Since(start))
			Expect(status).To(Equal(http.StatusOK), body)
		}
		d := readHubWrites(ctx).since(quiet)
		sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
		fmt.Fprintf(GinkgoWriter, "live manifest of a Deployment from the hub, %d requests: median %v, p99 %v; hub writes meanwhile: %s\n",
			n, took[n/2].Round(time.Millisecond), took[n*99/100].Round(time.Millisecond), d)
		for _, r := range slices.Concat(pullResources, []string{"applicationstatusslices", "secrets", "configmaps"}) {
			Expect(d.of(r)).To(BeZero(), "writes to %s during %d live manifests", r, n)
		}
	})
}

// proxyAt calls the resource proxy of a cluster name as argocd-server does, with the
// credentials of the first managed cluster's Argo CD cluster Secret (the same for every
// cluster), and returns the status and body.
func proxyAt(ctx context.Context, cluster string) func(ctx context.Context, method, path string) (int, string) {
	first := theFleet.Clusters[0].Name
	secret, err := theFleet.Hub.Kube.CoreV1().Secrets(fleet.ArgoCDNamespace).Get(ctx, clustersecret.SecretName("argocd-pull", first), metav1.GetOptions{})
	Expect(err).NotTo(HaveOccurred())
	var config struct {
		BearerToken     string `json:"bearerToken"`
		TLSClientConfig struct {
			CAData []byte `json:"caData"`
		} `json:"tlsClientConfig"`
	}
	Expect(json.Unmarshal(secret.Data["config"], &config)).To(Succeed())
	server, ok := strings.CutSuffix(string(secret.Data["server"]), resourceproxy.ClientPath(first))
	Expect(ok).To(BeTrue(), "the cluster Secret's server %s is the resource proxy's", secret.Data["server"])
	return proxyCaller(server+resourceproxy.ClientPath(cluster), config.BearerToken, config.TLSClientConfig.CAData)
}

// proxyCaller returns a function that calls server+path with the token.
func proxyCaller(server, token string, ca []byte) func(ctx context.Context, method, path string) (int, string) {
	client, err := rest.HTTPClientFor(&rest.Config{Host: server, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: ca}})
	Expect(err).NotTo(HaveOccurred())
	return func(ctx context.Context, method, path string) (int, string) {
		req, err := http.NewRequestWithContext(ctx, method, server+path, nil)
		Expect(err).NotTo(HaveOccurred())
		resp, err := client.Do(req)
		Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		Expect(err).NotTo(HaveOccurred())
		return resp.StatusCode, string(body)
	}
}
