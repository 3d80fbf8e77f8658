package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/test/fleet"
)

// Argo CD's own CLI (bin/argocd) against the hub's argocd-server, on a pulled app, as a
// user drives a pushed one. The hub runs Argo CD's whole install: argocd-server resolves
// a sync's revision through the hub's repo-server, and the hub's application-controller
// skips the pulled app.
var _ = Describe("The argocd CLI on a pulled app", Ordered, func() {
	const (
		app       = "cli-guestbook"
		namespace = "cli-guestbook"
		placement = "cli-placement"
	)
	var (
		c         hubClients
		target    *fleet.ManagedCluster
		spokeApps dynamic.ResourceInterface
		token     string
	)
	BeforeAll(func(ctx SpecContext) {
		c = newHubClients()
		target = theFleet.Clusters[0]
		enableAddonForSpec(ctx, target)
		applyAddonPlacementForSpec(ctx, placement, target)
		spoke, err := dynamic.NewForConfig(target.Config)
		Expect(err).NotTo(HaveOccurred())
		spokeApps = spoke.Resource(fleet.ApplicationGVR).Namespace(fleet.ArgoCDNamespace)

		By("a pulled guestbook that syncs only when asked")
		c.createApp(ctx, pulledApp(fleet.ArgoCDNamespace, app, target.Name, namespace, false))
		eventually(ctx, func(ctx context.Context) (string, error) {
			return spokeStatus(ctx, spokeApps, app, "sync", "status")
		}).Should(Equal("OutOfSync"), "the app is on %s, not synced", target.Name)
		expectReported(ctx, c, app)

		password, err := theFleet.ArgoCDAdminPassword(ctx)
		Expect(err).NotTo(HaveOccurred())
		client, err := fleet.LoginArgoCD(ctx, theFleet.ArgoCDServer, "admin", password)
		Expect(err).NotTo(HaveOccurred())
		token = client.Token()
	})

	// configMap is the manifest of a ConfigMap of that name, for an app's git path.
	configMap := func(name string) string {
		return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s}\ndata: {from: git}\n", name)
	}

	// createPathApp creates a pulled app of the git path, named name and deployed to the
	// namespace name, that syncs only when asked, and waits until the hub shows it
	// reported, OutOfSync.
	createPathApp := func(ctx context.Context, name, path string) {
		a := pulledApp(fleet.ArgoCDNamespace, name, target.Name, name, false)
		Expect(unstructured.SetNestedField(a.Object, path, "spec", "source", "path")).To(Succeed())
		c.createApp(ctx, a)
		eventually(ctx, func(ctx context.Context) (string, error) {
			return spokeStatus(ctx, spokeApps, name, "sync", "status")
		}).Should(Equal("OutOfSync"))
		expectReported(ctx, c, name)
	}

	// cli runs the argocd CLI as admin against the hub's argocd-server.
	cli := func(ctx context.Context, args ...string) (string, int) { return runArgoCD(ctx, token, args...) }

	It("syncs it on its managed cluster with `argocd app sync`, and `argocd app wait --health` returns once it is Healthy", func(ctx SpecContext) {
		before, err := spokeStatus(ctx, spokeApps, app, "operationState", "startedAt")
		Expect(err).NotTo(HaveOccurred())

		out, code := cli(ctx, "app", "sync", fleet.ArgoCDNamespace+"/"+app, "--timeout", "180")
		Expect(code).To(Equal(0), "argocd app sync: %s", out)

		By("the sync ran on " + target.Name)
		startedAt, err := spokeStatus(ctx, spokeApps, app, "operationState", "startedAt")
		Expect(err).NotTo(HaveOccurred())
		Expect(startedAt).NotTo(Equal(before), "a new operation ran on %s", target.Name)
		Expect(spokeStatus(ctx, spokeApps, app, "operationState", "phase")).To(Equal("Succeeded"))
		Expect(spokeStatus(ctx, spokeApps, app, "sync", "status")).To(Equal("Synced"))

		out, code = cli(ctx, "app", "wait", fleet.ArgoCDNamespace+"/"+app, "--health", "--timeout", "180")
		Expect(code).To(Equal(0), "argocd app wait --health: %s", out)
		hub, err := c.apps(fleet.ArgoCDNamespace).Get(ctx, app, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		status, err := argoapp.DecodeStatus(hub)
		Expect(err).NotTo(HaveOccurred())
		Expect(status.Health.Status).To(Equal("Healthy"))
		Expect(hub.Object).NotTo(HaveKey("operation"), "the hub's operation left once the spoke ran it")
	})

	It("shows with `argocd app diff` what differs on the managed cluster: exit 0 when Synced, 1 and the resource's diff when OutOfSync", func(ctx SpecContext) {
		By("Synced: no difference, where the hub once held only null states (\"both live and config are null objects\")")
		var out string
		eventually(ctx, func(ctx context.Context) int {
			var code int
			out, code = cli(ctx, "app", "diff", fleet.ArgoCDNamespace+"/"+app)
			return code
		}).Should(Equal(0), "argocd app diff on the synced app: %s", func() string { return out })

		deployment, err := target.Kube.AppsV1().Deployments(namespace).Get(ctx, "guestbook-ui", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		replicas := *deployment.Spec.Replicas + 2
		By(fmt.Sprintf("scaled to %d on %s: the app goes OutOfSync there, and the hub's diff shows the replicas", replicas, target.Name))
		_, err = target.Kube.AppsV1().Deployments(namespace).Patch(ctx, "guestbook-ui", types.MergePatchType,
			fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, replicas), metav1.PatchOptions{})
		Expect(err).NotTo(HaveOccurred())
		eventually(ctx, func(ctx context.Context) (string, error) {
			return spokeStatus(ctx, spokeApps, app, "sync", "status")
		}).Should(Equal("OutOfSync"))
		eventually(ctx, func(ctx context.Context) int {
			var code int
			out, code = cli(ctx, "app", "diff", fleet.ArgoCDNamespace+"/"+app)
			return code
		}).Should(Equal(1), "argocd app diff on the drifted app: %s", func() string { return out })
		Expect(out).To(ContainSubstring("===== apps/Deployment " + namespace + "/guestbook-ui ======"))
		Expect(out).To(MatchRegexp(`(?m)^[<>].*replicas: %d`, replicas), "the live replicas in the diff")
		Expect(out).NotTo(ContainSubstring("===== /Service "), "a Synced resource in the diff")
	})

	It("exits 1 on a sync that leaves resources to prune, as for a pushed app, and prunes them with --prune", func(ctx SpecContext) {
		const name, path = "cli-prune", "cli-prune"
		_, err := theFleet.Git.Commit("cli-prune: two ConfigMaps", map[string]string{path + "/configmaps.yaml": configMap("keep") + "---\n" + configMap("extra")})
		Expect(err).NotTo(HaveOccurred())
		createPathApp(ctx, name, path)
		out, code := cli(ctx, "app", "sync", fleet.ArgoCDNamespace+"/"+name, "--timeout", "180")
		Expect(code).To(Equal(0), "argocd app sync: %s", out)

		By("git drops one ConfigMap: a sync without --prune leaves it, and says so")
		_, err = theFleet.Git.Commit("cli-prune: one ConfigMap", map[string]string{path + "/configmaps.yaml": configMap("keep")})
		Expect(err).NotTo(HaveOccurred())
		out, code = cli(ctx, "app", "sync", fleet.ArgoCDNamespace+"/"+name, "--timeout", "180")
		Expect(code).To(Equal(1), "argocd app sync: %s", out)
		Expect(out).To(ContainSubstring("1 resources require pruning"))
		_, err = target.Kube.CoreV1().ConfigMaps(name).Get(ctx, "extra", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred(), "the ConfigMap to prune is still on %s", target.Name)

		out, code = cli(ctx, "app", "sync", fleet.ArgoCDNamespace+"/"+name, "--prune", "--timeout", "180")
		Expect(code).To(Equal(0), "argocd app sync --prune: %s", out)
		eventually(ctx, func(ctx context.Context) bool {
			_, err := target.Kube.CoreV1().ConfigMaps(name).Get(ctx, "extra", metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}).Should(BeTrue(), "the pruned ConfigMap is gone from %s", target.Name)
	})

	It("returns the managed cluster's refreshed status from `argocd app get --hard-refresh`", func(ctx SpecContext) {
		const name, path = "cli-refresh", "cli-refresh"
		_, err := theFleet.Git.Commit("cli-refresh: a ConfigMap", map[string]string{path + "/first.yaml": configMap("first")})
		Expect(err).NotTo(HaveOccurred())
		createPathApp(ctx, name, path)
		out, code := cli(ctx, "app", "sync", fleet.ArgoCDNamespace+"/"+name, "--timeout", "180")
		Expect(code).To(Equal(0), "argocd app sync: %s", out)

		By("git moves on: the app's last comparison on the managed cluster is of the previous commit")
		head, err := theFleet.Git.Commit("cli-refresh: a ConfigMap more", map[string]string{path + "/later.yaml": configMap("later")})
		Expect(err).NotTo(HaveOccurred())
		out, code = cli(ctx, "app", "get", fleet.ArgoCDNamespace+"/"+name, "--hard-refresh", "-o", "json")
		Expect(code).To(Equal(0), "argocd app get --hard-refresh: %s", out)
		var got struct {
			Status struct {
				Sync struct{ Status, Revision string } `json:"sync"`
			} `json:"status"`
		}
		Expect(json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &got)).To(Succeed())
		Expect(got.Status.Sync.Revision+" "+got.Status.Sync.Status).To(Equal(head+" OutOfSync"),
			"the status the command returned is from after the managed cluster refreshed")
	})

	It("runs a sync once across a manager failover, even when the hub app changes meanwhile", func(ctx SpecContext) {
		const name, path = "cli-failover", "cli-failover"
		_, err := theFleet.Git.Commit("cli-failover: a ConfigMap", map[string]string{path + "/one.yaml": configMap("one")})
		Expect(err).NotTo(HaveOccurred())
		createPathApp(ctx, name, path)
		spokeApp := func(ctx context.Context) (*unstructured.Unstructured, error) {
			return spokeApps.Get(ctx, name, metav1.GetOptions{})
		}
		u, err := spokeApp(ctx)
		Expect(err).NotTo(HaveOccurred())
		historyBefore, _, _ := unstructured.NestedSlice(u.Object, "status", "history")

		out, code := cli(ctx, "app", "sync", fleet.ArgoCDNamespace+"/"+name, "--async")
		Expect(code).To(Equal(0), "argocd app sync --async: %s", out)
		By("the manager stops (SIGTERM, as a rolling update or an eviction does) and another takes over; the hub app changes meanwhile, so the work is applied again")
		pod, pid := hubManagerPod()
		Expect(syscall.Kill(pid, syscall.SIGTERM)).To(Succeed())
		_, err = c.apps(fleet.ArgoCDNamespace).Patch(ctx, name, types.MergePatchType,
			[]byte(`{"metadata":{"labels":{"example.com/touched":"during-failover"}}}`), metav1.PatchOptions{})
		Expect(err).NotTo(HaveOccurred())
		eventually(ctx, func(context.Context) bool {
			now := theFleet.PodPids()[pod]
			return now != 0 && now != pid
		}).Should(BeTrue(), "the manager runs again")
		eventually(ctx, func(ctx context.Context) (string, error) {
			u, err := spokeApp(ctx)
			if err != nil {
				return "", err
			}
			labels, _, _ := unstructured.NestedStringMap(u.Object, "metadata", "labels")
			return labels["example.com/touched"], nil
		}).Should(Equal("during-failover"), "the new manager applied the changed app to %s", target.Name)

		By("the sync ran on " + target.Name + " once, and left the hub app")
		eventually(ctx, func(ctx context.Context) (bool, error) {
			hub, err := c.apps(fleet.ArgoCDNamespace).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			_, pending := hub.Object["operation"]
			return !pending, nil
		}).Should(BeTrue(), "the operation left the hub app")
		ranOnce := func(ctx context.Context) (string, error) {
			u, err := spokeApp(ctx)
			if err != nil {
				return "", err
			}
			history, _, _ := unstructured.NestedSlice(u.Object, "status", "history")
			operation, _, _ := unstructured.NestedMap(u.Object, "status", "operationState", "operation")
			phase, _, _ := unstructured.NestedString(u.Object, "status", "operationState", "phase")
			_, pending := u.Object["operation"]
			delivered := u.GetAnnotations()[argoapp.AnnotationOperationDelivered]
			return fmt.Sprintf("history +%d, %s, pending %v, state of the delivered operation %v",
				len(history)-len(historyBefore), phase, pending, delivered != "" && argoapp.OperationIDOf(operation) == delivered), nil
		}
		want := "history +1, Succeeded, pending false, state of the delivered operation true"
		eventually(ctx, ranOnce).Should(Equal(want))
		Consistently(ctx, ranOnce).WithTimeout(10*time.Second).WithPolling(time.Second).Should(Equal(want), "the sync ran again on %s", target.Name)
	})

	It("refuses a second sync while one runs, and ends the running one on its managed cluster with `argocd app terminate-op`", func(ctx SpecContext) {
		const name, path = "cli-terminate", "cli-terminate"
		By("a sync that waits on its first wave for good: a LoadBalancer Service that no controller serves stays Progressing")
		_, err := theFleet.Git.Commit("cli-terminate: an unhealthy wave, then a ConfigMap", map[string]string{path + "/resources.yaml": "" +
			"apiVersion: v1\nkind: Service\nmetadata: {name: lb, annotations: {argocd.argoproj.io/sync-wave: \"0\"}}\n" +
			"spec: {type: LoadBalancer, ports: [{port: 80}], selector: {app: none}}\n---\n" +
			"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: after-lb, annotations: {argocd.argoproj.io/sync-wave: \"1\"}}\ndata: {wave: \"1\"}\n"})
		Expect(err).NotTo(HaveOccurred())
		createPathApp(ctx, name, path)

		out, code := cli(ctx, "app", "sync", fleet.ArgoCDNamespace+"/"+name, "--async")
		Expect(code).To(Equal(0), "argocd app sync --async: %s", out)
		By("the spoke runs the hub's operation, under the hub's id, and the hub shows it running")
		eventually(ctx, func(ctx context.Context) (string, error) {
			u, err := spokeApps.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return "", err
			}
			operation, _, _ := unstructured.NestedMap(u.Object, "status", "operationState", "operation")
			phase, _, _ := unstructured.NestedString(u.Object, "status", "operationState", "phase")
			if argoapp.OperationIDOf(operation) == "" {
				return "", nil
			}
			return phase, nil
		}).Should(Equal(argoapp.OperationRunning))
		eventually(ctx, func(ctx context.Context) (string, error) {
			return hubOperationPhase(ctx, c, name)
		}).Should(Equal(argoapp.OperationRunning))

		By("a second sync is refused with Argo CD's own message, as for a pushed app")
		out, code = cli(ctx, "app", "sync", fleet.ArgoCDNamespace+"/"+name, "--async")
		Expect(code).NotTo(Equal(0), "a second argocd app sync while one runs: %s", out)
		Expect(out).To(ContainSubstring("another operation is already in progress"))

		By("terminate-op ends it on " + target.Name + ": the later wave never applies")
		out, code = cli(ctx, "app", "terminate-op", fleet.ArgoCDNamespace+"/"+name)
		Expect(code).To(Equal(0), "argocd app terminate-op: %s", out)
		eventually(ctx, func(ctx context.Context) (string, error) {
			return spokeStatus(ctx, spokeApps, name, "operationState", "message")
		}).Should(ContainSubstring("terminated"))
		Expect(spokeStatus(ctx, spokeApps, name, "operationState", "phase")).To(Equal(argoapp.OperationFailed))
		eventually(ctx, func(ctx context.Context) (bool, error) {
			u, err := c.apps(fleet.ArgoCDNamespace).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			_, pending := u.Object["operation"]
			phase, _, _ := unstructured.NestedString(u.Object, "status", "operationState", "phase")
			return !pending && phase == argoapp.OperationFailed, nil
		}).Should(BeTrue(), "the hub app shows the terminated operation, and lets the next one go")
		_, err = target.Kube.CoreV1().ConfigMaps(name).Get(ctx, "after-lb", metav1.GetOptions{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the wave after the unhealthy one applied on %s: %v", target.Name, err)
	})

	It("lists the syncs done on its managed cluster with `argocd app history`, and `argocd app rollback` deploys an earlier one there", func(ctx SpecContext) {
		const name, path = "cli-history", "cli-history"
		version := func(v string) map[string]string {
			return map[string]string{path + "/configmap.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: version}\ndata: {version: \"" + v + "\"}\n"}
		}
		deployed := func(ctx context.Context) (string, error) {
			cm, err := target.Kube.CoreV1().ConfigMaps(name).Get(ctx, "version", metav1.GetOptions{})
			if err != nil {
				return "", err
			}
			return cm.Data["version"], nil
		}
		_, err := theFleet.Git.Commit("cli-history: version 1", version("1"))
		Expect(err).NotTo(HaveOccurred())
		createPathApp(ctx, name, path)

		By("two syncs, to version 1 and to version 2")
		out, code := cli(ctx, "app", "sync", fleet.ArgoCDNamespace+"/"+name, "--timeout", "180")
		Expect(code).To(Equal(0), "argocd app sync: %s", out)
		_, err = theFleet.Git.Commit("cli-history: version 2", version("2"))
		Expect(err).NotTo(HaveOccurred())
		out, code = cli(ctx, "app", "sync", fleet.ArgoCDNamespace+"/"+name, "--timeout", "180")
		Expect(code).To(Equal(0), "argocd app sync: %s", out)
		Expect(deployed(ctx)).To(Equal("2"))

		By("the hub Application holds the managed cluster's history, and `argocd app history` lists both syncs")
		var history []argoapp.RevisionHistory
		eventually(ctx, func(ctx context.Context) (int, error) {
			u, err := c.apps(fleet.ArgoCDNamespace).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return 0, err
			}
			status, err := argoapp.DecodeStatus(u)
			history = status.History
			return len(history), err
		}).Should(Equal(2), "the hub Application's status.history")
		first, second := history[0], history[1]
		Expect(first.Revision).NotTo(Equal(second.Revision))
		Expect(first.Source).NotTo(BeNil())
		Expect(first.Source.Path).To(Equal(path))
		out, code = cli(ctx, "app", "history", fleet.ArgoCDNamespace+"/"+name)
		Expect(code).To(Equal(0), "argocd app history: %s", out)
		Expect(out).To(ContainSubstring(theFleet.Git.URL()))
		for _, h := range history {
			Expect(out).To(MatchRegexp(`(?m)^%d\s.*\(%s\)`, h.ID, h.Revision[:7]), "the history lists the sync to %s", h.Revision)
		}

		By("`argocd app rollback` to the first sync deploys version 1 on " + target.Name)
		out, code = cli(ctx, "app", "rollback", fleet.ArgoCDNamespace+"/"+name, fmt.Sprint(first.ID), "--timeout", "180")
		Expect(code).To(Equal(0), "argocd app rollback: %s", out)
		eventually(ctx, deployed).Should(Equal("1"), "version 1 runs on %s again", target.Name)
		Expect(spokeStatus(ctx, spokeApps, name, "operationState", "syncResult", "revision")).To(Equal(first.Revision))
		Expect(spokeStatus(ctx, spokeApps, name, "operationState", "phase")).To(Equal(argoapp.OperationSucceeded))
		Expect(hubOperationPhase(ctx, c, name)).To(Equal(argoapp.OperationSucceeded))
		eventually(ctx, func(ctx context.Context) ([]string, error) {
			u, err := c.apps(fleet.ArgoCDNamespace).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			status, err := argoapp.DecodeStatus(u)
			var revisions []string
			for _, h := range status.History {
				revisions = append(revisions, h.Revision)
			}
			return revisions, err
		}).Should(Equal([]string{first.Revision, second.Revision, first.Revision}), "the rollback is the third entry of the history")
	})
})

// hubOperationPhase returns the hub Application's status.operationState.phase.
func hubOperationPhase(ctx context.Context, c hubClients, name string) (string, error) {
	u, err := c.apps(fleet.ArgoCDNamespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	phase, _, _ := unstructured.NestedString(u.Object, "status", "operationState", "phase")
	return phase, nil
}

// expectReported waits until the hub Application shows what only the agent reports, its
// resources, as a user sees it before acting on it.
func expectReported(ctx context.Context, c hubClients, name string) {
	eventually(ctx, func(ctx context.Context) (int, error) {
		u, err := c.apps(fleet.ArgoCDNamespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return 0, err
		}
		status, err := argoapp.DecodeStatus(u)
		return len(status.Resources), err
	}).Should(BeNumerically(">", 0), "the hub Application %s lists its resources", name)
}

// spokeStatus returns a string of a spoke Application's status at path.
func spokeStatus(ctx context.Context, apps dynamic.ResourceInterface, name string, path ...string) (string, error) {
	u, err := apps.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	s, _, err := unstructured.NestedString(u.Object, append([]string{"status"}, path...)...)
	return s, err
}
