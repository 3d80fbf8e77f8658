package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/redis/go-redis/v9"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argocdcache"
	"github.com/ocm-gitops/argocd-pull-addon/test/fleet"
)

// The hub's argocd-server, the one a user opens, shows a pulled app's resource tree with
// the managed cluster's resources: the manager writes into the hub Argo CD's Redis what
// the hub application-controller would write, from the agent's status slices; and again
// within seconds once that Redis has lost them.
var _ = Describe("The hub's argocd-server shows a pulled app's resource tree", Ordered, func() {
	const (
		app       = "resourcetree-guestbook"
		namespace = "resourcetree"
		placement = "resourcetree-placement"
	)
	var (
		target *fleet.ManagedCluster
		argocd *fleet.ArgoCDClient
	)
	BeforeAll(func(ctx SpecContext) {
		Expect(theFleet.ArgoCDServer).NotTo(BeEmpty(), "the fleet runs argocd-server on the hub")
		target = theFleet.Clusters[0]

		enableAddonForSpec(ctx, target)

		// The tenant gate: a Placement in the app's namespace selects the cluster.
		applyAddonPlacementForSpec(ctx, placement, target)

		By("logging in to the hub's argocd-server as the UI does: POST /api/v1/session as admin, with the password of argocd-initial-admin-secret")
		password, err := theFleet.ArgoCDAdminPassword(ctx)
		Expect(err).NotTo(HaveOccurred())
		argocd, err = fleet.LoginArgoCD(ctx, theFleet.ArgoCDServer, "admin", password)
		Expect(err).NotTo(HaveOccurred())
	})

	It("shows the spoke's Deployment, ReplicaSet and Pods with their health, and a Pod scaled up on the spoke", func(ctx SpecContext) {
		// The guestbook, pulled to the target cluster. Auto-sync without self-heal, so
		// that a scale on the spoke stays (and the Deployment goes OutOfSync).
		a := pulledApp(fleet.ArgoCDNamespace, app, target.Name, namespace, true)
		Expect(unstructured.SetNestedField(a.Object, false, "spec", "syncPolicy", "automated", "selfHeal")).To(Succeed())
		newHubClients().createApp(ctx, a)

		By("GET /api/v1/applications/" + app + "/resource-tree shows the Deployment, its ReplicaSet and its Pod, Healthy")
		eventually(ctx, func(ctx context.Context) ([]string, error) {
			return treeOf(ctx, argocd, app)
		}).Should(ContainElements(
			"Service "+namespace+"/guestbook-ui Healthy",
			"Deployment "+namespace+"/guestbook-ui Healthy",
			MatchRegexp(`^ReplicaSet `+namespace+`/guestbook-ui-\w+ Healthy under Deployment guestbook-ui$`),
			MatchRegexp(`^Pod `+namespace+`/guestbook-ui-\w+-\w+ Healthy under ReplicaSet guestbook-ui-\w+$`),
		))
		nodes, err := treeOf(ctx, argocd, app)
		Expect(err).NotTo(HaveOccurred())
		fmt.Fprintf(GinkgoWriter, "the hub's tree of %s:\n  %s\n", app, strings.Join(nodes, "\n  "))
		// The managed-resources view lists the OutOfSync resources only, with the states
		// of Argo CD's diff: none of this synced app.
		eventually(ctx, func(ctx context.Context) ([]argocdcache.ResourceDiff, error) {
			return argocd.ManagedResources(ctx, app)
		}).Should(BeEmpty())

		// One replica more than git says (git's count is whatever the last commit of the
		// guestbook holds): the new Pod shows, and the Deployment differs from git.
		deployment, err := target.Kube.AppsV1().Deployments(namespace).Get(ctx, "guestbook-ui", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		replicas := *deployment.Spec.Replicas + 1
		By(fmt.Sprintf("scaled to %d on the spoke: the new Pod appears in the hub's tree, and the Deployment shows modified", replicas))
		scaled := time.Now()
		_, err = target.Kube.AppsV1().Deployments(namespace).Patch(ctx, "guestbook-ui", types.MergePatchType,
			fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, replicas), metav1.PatchOptions{})
		Expect(err).NotTo(HaveOccurred())
		eventually(ctx, func(ctx context.Context) (int, error) {
			nodes, err := treeOf(ctx, argocd, app)
			return len(slices.DeleteFunc(nodes, func(n string) bool {
				return !strings.HasPrefix(n, "Pod ") || !strings.Contains(n, " Healthy under ReplicaSet ")
			})), err
		}).Should(BeEquivalentTo(replicas))
		fmt.Fprintf(GinkgoWriter, "the scaled-up Pod was in the hub's tree, Healthy, %v after the scale\n", time.Since(scaled).Round(100*time.Millisecond))
		eventually(ctx, func(ctx context.Context) (bool, error) {
			managed, err := argocd.ManagedResources(ctx, app)
			return slices.ContainsFunc(managed, func(r argocdcache.ResourceDiff) bool {
				return r.Kind == "Deployment" && r.Modified && strings.Contains(r.NormalizedLiveState, fmt.Sprintf(`"replicas":%d`, replicas)) &&
					strings.Contains(r.TargetState, `"kind":"Deployment"`) && r.PredictedLiveState != "null"
			}), err
		}).Should(BeTrue(), "the managed-resources view says the Deployment differs from git, with the live and target states of Argo CD's diff")

		// Argo CD's Redis keeps nothing on disk: a restart (a Pod rolled, an OOM kill)
		// empties it, as FLUSHALL does; nothing changed for the app, and its tree is back
		// within seconds (the manager's check of its marker, docs/design.md 2.6). A read
		// that misses the tree makes argocd-server request a refresh of the app and wait
		// for it (getCachedAppState), which the spoke acknowledges: a poll may take that
		// long, hence 30 s.
		nodes, err = treeOf(ctx, argocd, app)
		Expect(err).NotTo(HaveOccurred())
		managed, err := argocd.ManagedResources(ctx, app)
		Expect(err).NotTo(HaveOccurred())
		By("the hub Argo CD's Redis emptied, as a restart leaves it: the tree and the managed resources are back within seconds")
		secret, err := theFleet.Hub.Kube.CoreV1().Secrets(fleet.ArgoCDNamespace).Get(ctx, argocdcache.RedisSecret, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		hubRedis := redis.NewClient(&redis.Options{Addr: theFleet.HubArgoCDRedis, Password: string(secret.Data[argocdcache.RedisPasswordKey]),
			DisableIdentity: true, Protocol: 2})
		defer hubRedis.Close()
		Expect(hubRedis.FlushAll(ctx).Err()).To(Succeed())
		flushed := time.Now()
		Eventually(ctx, func(ctx context.Context) ([]string, error) {
			return treeOf(ctx, argocd, app)
		}).WithTimeout(30*time.Second).WithPolling(200*time.Millisecond).Should(ConsistOf(nodes), "the tree is not back")
		fmt.Fprintf(GinkgoWriter, "the tree was back in the hub's argocd-server %v after its Redis was emptied\n", time.Since(flushed).Round(100*time.Millisecond))
		Eventually(ctx, func(ctx context.Context) ([]argocdcache.ResourceDiff, error) {
			return argocd.ManagedResources(ctx, app)
		}).WithTimeout(30*time.Second).WithPolling(200*time.Millisecond).Should(HaveLen(len(managed)), "the managed resources are not back")
	})
})

// treeOf returns the nodes of the app's tree in the hub's argocd-server, each as
// "<kind> <namespace>/<name> <health>[ under <parent kind> <parent name>]".
func treeOf(ctx context.Context, argocd *fleet.ArgoCDClient, app string) ([]string, error) {
	tree, err := argocd.ResourceTree(ctx, app)
	if err != nil {
		return nil, err
	}
	var nodes []string
	for _, n := range tree.Nodes {
		node := n.Kind + " " + n.Namespace + "/" + n.Name
		if n.Health != nil {
			node += " " + n.Health.Status
		}
		if len(n.ParentRefs) > 0 {
			node += " under " + n.ParentRefs[0].Kind + " " + n.ParentRefs[0].Name
		}
		nodes = append(nodes, node)
	}
	return nodes, nil
}
