package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"open-cluster-management.io/addon-framework/pkg/agent"
	addonv1beta1 "open-cluster-management.io/api/addon/v1beta1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"

	statusv1alpha1 "github.com/ocm-gitops/argocd-pull-addon/pkg/apis/argocdpull/v1alpha1"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/clusterreport"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/addon"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/propagation"
	"github.com/ocm-gitops/argocd-pull-addon/test/fleet"
)

// What a hub user reaches through the hub's argocd-server on a pulled app's tree. Its
// resource endpoints act on a tree node only when it has a UID, and then on the cluster
// of the hub Application's destination, with argocd-server's own credentials there; for
// the documented template that is the hub itself (the fleet's argocd-server resolves
// in-cluster to the hub, as one in a Pod does). The hub holds objects of the same names as
// the spoke's guestbook; no call of the UI's or the argocd CLI reads, patches or deletes
// them. Once the destination names the managed cluster, the live views and actions act
// there (liveViewSpecs).
var _ = Describe("A hub user on a pulled app's tree", Ordered, func() {
	const (
		app       = "security-guestbook"
		namespace = "security-guestbook"
		placement = "security-placement"
	)
	var (
		hubDyn dynamic.Interface
		target *fleet.ManagedCluster
		argocd *fleet.ArgoCDClient
	)
	BeforeAll(func(ctx SpecContext) {
		hubDyn = newHubClients().dyn
		target = theFleet.Clusters[0]
		enableAddonForSpec(ctx, target)
		applyAddonPlacementForSpec(ctx, placement, target)

		By("the hub has a Service and a Deployment named as the guestbook's, in a namespace of that name")
		hub := theFleet.Hub.Kube
		_, err := hub.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) {
			Expect(hub.CoreV1().Namespaces().Delete(ctx, namespace, metav1.DeleteOptions{})).To(Succeed())
		})
		labels := map[string]string{"app": "hub-own"}
		_, err = hub.CoreV1().Services(namespace).Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "guestbook-ui", Labels: labels},
			Spec:       corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Port: 80}}},
		}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = hub.AppsV1().Deployments(namespace).Create(ctx, &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "guestbook-ui", Labels: labels},
			Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](0), Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "hub", Image: "hub-own"}}}}},
		}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())

		By("the guestbook pulled to " + target.Name + " with the documented template's destination, the hub's in-cluster")
		newHubClients().createApp(ctx, pulledApp(fleet.ArgoCDNamespace, app, target.Name, namespace, true))

		password, err := theFleet.ArgoCDAdminPassword(ctx)
		Expect(err).NotTo(HaveOccurred())
		argocd, err = fleet.LoginArgoCD(ctx, theFleet.ArgoCDServer, "admin", password)
		Expect(err).NotTo(HaveOccurred())
		eventually(ctx, func(ctx context.Context) ([]string, error) {
			return treeOf(ctx, argocd, app)
		}).Should(ContainElements(
			"Service "+namespace+"/guestbook-ui Healthy",
			"Deployment "+namespace+"/guestbook-ui Healthy",
			MatchRegexp(`^Pod `+namespace+`/guestbook-ui-\w+-\w+ Healthy under ReplicaSet guestbook-ui-\w+$`),
		), "the hub's argocd-server shows the spoke's tree")
	})

	// hubUntouched checks the hub's Service and Deployment are as the spec made them.
	hubUntouched := func(ctx context.Context) {
		service, err := theFleet.Hub.Kube.CoreV1().Services(namespace).Get(ctx, "guestbook-ui", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred(), "the hub's Service is still there")
		Expect(service.Labels).To(Equal(map[string]string{"app": "hub-own"}), "the hub's Service is not patched")
		deployment, err := theFleet.Hub.Kube.AppsV1().Deployments(namespace).Get(ctx, "guestbook-ui", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred(), "the hub's Deployment is still there")
		Expect(deployment.Spec.Template.Annotations).To(BeEmpty(), "the hub's Deployment is not restarted")
	}
	// liveResource is what the UI asks for a node's live manifest.
	liveResource := func(ctx context.Context, kind, group, version string) (int, string) {
		query := url.Values{"name": {app}, "appNamespace": {fleet.ArgoCDNamespace}, "namespace": {namespace},
			"resourceName": {"guestbook-ui"}, "kind": {kind}, "group": {group}, "version": {version}}
		status, body, err := argocd.Call(ctx, http.MethodGet, "/api/v1/applications/"+app+"/resource?"+query.Encode(), nil)
		Expect(err).NotTo(HaveOccurred())
		return status, string(body)
	}
	// argocdCLI runs the real argocd CLI against the hub's argocd-server, as admin.
	argocdCLI := func(ctx context.Context, args ...string) (string, error) {
		args = append(args, "--server", theFleet.ArgoCDServer, "--plaintext", "--auth-token", argocd.Token())
		out, err := exec.CommandContext(ctx, filepath.Join(*binDir, "argocd"), args...).CombinedOutput()
		fmt.Fprintf(GinkgoWriter, "argocd %s\n%s\n", strings.Join(args[:len(args)-5], " "), out)
		return string(out), err
	}
	notPartOfTheApp := regexp.MustCompile(`not found as part of application`)

	It("reads, patches, deletes and restarts none of the hub's objects of the same names", func(ctx SpecContext) {
		resource := url.Values{"appNamespace": {fleet.ArgoCDNamespace}, "namespace": {namespace}, "resourceName": {"guestbook-ui"}}
		of := func(kind, group string) url.Values {
			q := url.Values{"kind": {kind}, "group": {group}, "version": {"v1"}}
			for k, v := range resource {
				q[k] = v
			}
			return q
		}
		By("the UI's calls: the live manifest, patch, delete and the restart action, each refused by argocd-server")
		for _, call := range []struct {
			what, method, path string
			body               []byte
		}{
			{"the live Service", http.MethodGet, "/resource?" + of("Service", "").Encode(), nil},
			{"the live Deployment", http.MethodGet, "/resource?" + of("Deployment", "apps").Encode(), nil},
			{"a patch of the Service", http.MethodPost, "/resource?" + of("Service", "").Encode() + "&patchType=application%2Fmerge-patch%2Bjson",
				[]byte(`"{\"metadata\":{\"labels\":{\"pwned\":\"true\"}}}"`)},
			{"a delete of the Service", http.MethodDelete, "/resource?" + of("Service", "").Encode(), nil},
			{"the Deployment's restart", http.MethodPost, "/resource/actions/v2",
				fmt.Appendf(nil, `{"name":%q,"appNamespace":%q,"namespace":%q,"resourceName":"guestbook-ui","kind":"Deployment","group":"apps","version":"v1","action":"restart"}`,
					app, fleet.ArgoCDNamespace, namespace)},
		} {
			status, body, err := argocd.Call(ctx, call.method, "/api/v1/applications/"+app+call.path, call.body)
			Expect(err).NotTo(HaveOccurred())
			Expect(status).NotTo(Equal(http.StatusOK), "%s: %s", call.what, body)
			Expect(string(body)).To(MatchRegexp(notPartOfTheApp.String()), call.what)
			Expect(string(body)).NotTo(ContainSubstring("hub-own"), call.what)
		}
		By("the argocd CLI's patch-resource, delete-resource and actions run restart")
		for _, args := range [][]string{
			{"app", "patch-resource", app, "--kind", "Service", "--resource-name", "guestbook-ui", "--namespace", namespace,
				"--patch", `{"metadata":{"labels":{"pwned":"true"}}}`, "--patch-type", "application/merge-patch+json"},
			{"app", "delete-resource", app, "--kind", "Service", "--resource-name", "guestbook-ui", "--namespace", namespace},
			{"app", "actions", "run", app, "restart", "--kind", "Deployment", "--resource-name", "guestbook-ui", "--namespace", namespace},
		} {
			out, err := argocdCLI(ctx, args...)
			Expect(err).To(HaveOccurred(), "argocd %s succeeded: %s", strings.Join(args[:2], " "), out)
		}
		hubUntouched(ctx)

		By("the tree stays complete: the UI's tree and the CLI's list of the managed resources")
		nodes, err := treeOf(ctx, argocd, app)
		Expect(err).NotTo(HaveOccurred())
		Expect(nodes).To(ContainElements(
			"Service "+namespace+"/guestbook-ui Healthy",
			"Deployment "+namespace+"/guestbook-ui Healthy",
			MatchRegexp(`^ReplicaSet `+namespace+`/guestbook-ui-\w+ Healthy under Deployment guestbook-ui$`),
		))
		out, err := argocdCLI(ctx, "app", "resources", app)
		Expect(err).NotTo(HaveOccurred())
		Expect(out).To(And(MatchRegexp(`(?m)^\s+Service\s+`+namespace+`\s+guestbook-ui\s`), MatchRegexp(`(?m)^apps\s+Deployment\s+`+namespace+`\s+guestbook-ui\s`)))
	})

	It("with its destination naming its managed cluster, links the tree and reads the managed cluster's objects, not the hub's", func(ctx SpecContext) {
		patch := fmt.Appendf(nil, `{"spec":{"destination":{"server":null,"name":%q}}}`, target.Name)
		_, err := hubDyn.Resource(fleet.ApplicationGVR).Namespace(fleet.ArgoCDNamespace).Patch(ctx, app, "application/merge-patch+json", patch, metav1.PatchOptions{})
		Expect(err).NotTo(HaveOccurred())
		eventually(ctx, func(ctx context.Context) ([]string, error) {
			tree, err := argocd.ResourceTree(ctx, app)
			var uids []string
			for _, n := range tree.Nodes {
				uids = append(uids, n.UID)
			}
			return uids, err
		}).Should(And(Not(BeEmpty()), HaveEach(Not(BeEmpty()))), "every node carries a UID")

		By("argocd app get -o tree links the Pods under their ReplicaSet")
		out, err := argocdCLI(ctx, "app", "get", app, "-o", "tree")
		Expect(err).NotTo(HaveOccurred())
		Expect(out).To(MatchRegexp(`(?m)ReplicaSet/guestbook-ui-\w+.*\n.*Pod/guestbook-ui-`))

		By("the live manifest comes from " + target.Name + " through the resource proxy, and nothing of the hub's is touched")
		spokeService, err := target.Kube.CoreV1().Services(namespace).Get(ctx, "guestbook-ui", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		status, body := liveResource(ctx, "Service", "", "v1")
		Expect(status).To(Equal(http.StatusOK), "GET the live Service: %s", body)
		Expect(body).To(ContainSubstring(string(spokeService.UID)), "the spoke's Service")
		Expect(body).NotTo(ContainSubstring("hub-own"))
		hubUntouched(ctx)
	})

	liveViewSpecs(app, namespace, func() *fleet.ManagedCluster { return target }, func() *fleet.ArgoCDClient { return argocd })

	It("touched nothing of the hub's while it acted on the managed cluster", func(ctx SpecContext) {
		hubUntouched(ctx)
	})
})

// What a tenant reaches with an Application in its own namespace, bound to a cluster by a
// Placement: no more than the hub Argo CD would let it do.
var _ = Describe("A tenant's pulled Application", Ordered, func() {
	const (
		tenant    = "tenant-security" // not listed by the fleet's default project
		placement = "tenant-security-placement"
	)
	var (
		hubDyn dynamic.Interface
		c      hubClients
		target *fleet.ManagedCluster
	)
	BeforeAll(func(ctx SpecContext) {
		c = newHubClients()
		hubDyn = c.dyn
		target = theFleet.Clusters[0]
		enableAddonForSpec(ctx, target)
		hub := theFleet.Hub.Kube
		_, err := hub.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenant}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) {
			Expect(hub.CoreV1().Namespaces().Delete(ctx, tenant, metav1.DeleteOptions{})).To(Succeed())
		})
		applier, err := fleet.NewApplier(theFleet.Hub.Config)
		Expect(err).NotTo(HaveOccurred())
		Expect(applier.ApplyYAML(ctx, tenant, fleet.PlacementYAML(placement, nil))).To(Succeed())
		eventually(ctx, func(ctx context.Context) ([]string, error) {
			return applier.DecidedClusters(ctx, tenant, placement)
		}).Should(ContainElement(target.Name), "the tenant's namespace is bound to %s", target.Name)
		// The tenant's own project, which lists its namespace.
		Expect(applier.ApplyYAML(ctx, fleet.ArgoCDNamespace, fmt.Appendf(nil, `
apiVersion: argoproj.io/v1alpha1
kind: AppProject
metadata: {name: %[1]s, namespace: %[2]s}
spec:
  sourceNamespaces: [%[1]s]
  sourceRepos: ['*']
  destinations: [{server: '*', namespace: 'tenant-security-*'}]
`, tenant, fleet.ArgoCDNamespace))).To(Succeed())
		DeferCleanup(func(ctx SpecContext) {
			err := hubDyn.Resource(fleet.AppProjectGVR).Namespace(fleet.ArgoCDNamespace).Delete(ctx, tenant, metav1.DeleteOptions{})
			Expect(ignoreNotFound(err)).To(Succeed())
		})
	})

	refused := func(ctx context.Context, name, reason string) { c.expectRefused(ctx, tenant, name, reason) }

	It("on the default project, which does not list the tenant's namespace, gets no work", func(ctx SpecContext) {
		app := pulledApp(tenant, "tenant-default", target.Name, "tenant-security-apps", true)
		_, err := hubDyn.Resource(fleet.ApplicationGVR).Namespace(tenant).Create(ctx, app, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		refused(ctx, "tenant-default", propagation.ReasonAppProjectNotPermitted)
	})

	// tenantApp is a pulled app of the tenant's namespace, on the tenant's own project.
	tenantApp := func(name string) *unstructured.Unstructured {
		app := pulledApp(tenant, name, target.Name, "tenant-security-apps", false)
		app.Object["spec"].(map[string]any)["project"] = tenant
		return app
	}

	It("with inline manifests in its operation gets no work, and nothing lands on the cluster", func(ctx SpecContext) {
		app := tenantApp("tenant-inline")
		app.Object["operation"] = map[string]any{"sync": map[string]any{"manifests": []any{
			"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: injected, namespace: kube-system}\ndata: {from: tenant}",
		}}}
		_, err := hubDyn.Resource(fleet.ApplicationGVR).Namespace(tenant).Create(ctx, app, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		refused(ctx, "tenant-inline", propagation.ReasonOverrideNotPermitted)
		_, err = target.Kube.CoreV1().ConfigMaps("kube-system").Get(ctx, "injected", metav1.GetOptions{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "no inline manifest reached %s: %v", target.Name, err)
	})

	It("named as an Application made on the cluster gets no work, and that one is left as it is", func(ctx SpecContext) {
		const name, handMadeDestination = "hand-made", "hand-made-apps"
		spoke, err := dynamic.NewForConfig(target.Config)
		Expect(err).NotTo(HaveOccurred())
		spokeApps := spoke.Resource(fleet.ApplicationGVR).Namespace(fleet.ArgoCDNamespace)
		handMade := fleet.GuestbookApplication(name, theFleet.Git.URL())
		handMade.SetNamespace(fleet.ArgoCDNamespace)
		Expect(unstructured.SetNestedField(handMade.Object, handMadeDestination, "spec", "destination", "namespace")).To(Succeed())
		unstructured.RemoveNestedField(handMade.Object, "spec", "syncPolicy", "automated")
		_, err = spokeApps.Create(ctx, handMade, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) {
			Expect(ignoreNotFound(spokeApps.Delete(ctx, name, metav1.DeleteOptions{}))).To(Succeed())
		})
		// The cluster's agent reports it by its name alone.
		eventually(ctx, func(ctx context.Context) (bool, error) {
			list, err := hubDyn.Resource(statusv1alpha1.GroupVersion.WithResource(statusv1alpha1.Resource)).Namespace(target.Name).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			for _, u := range list.Items {
				s := &statusv1alpha1.ApplicationStatusSlice{}
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, s); err != nil {
					return false, err
				}
				for _, e := range s.Apps {
					if e.Namespace == fleet.ArgoCDNamespace && e.Name == name {
						return clusterreport.IsSpokeLocalEntry(e) && e.Sync.Status == "" && e.Health == nil && e.Resources == nil, nil
					}
				}
			}
			return false, nil
		}).Should(BeTrue(), "%s's slices report the hand-made Application by its identity alone", target.Name)

		c.createApp(ctx, tenantApp(name))
		refused(ctx, name, propagation.ReasonSpokeApplicationNotPulled)
		Consistently(ctx, func(ctx context.Context) (string, error) {
			app, err := spokeApps.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return "", err
			}
			destination, _, _ := unstructured.NestedString(app.Object, "spec", "destination", "namespace")
			return destination, nil
		}).WithTimeout(10*time.Second).WithPolling(time.Second).Should(Equal(handMadeDestination), "the hand-made Application on %s keeps its spec", target.Name)
	})
})

// What a managed cluster's agent can do with its own hub identity (the certificate its
// klusterlet had signed for it): not fill the hub.
var _ = Describe("A managed cluster's agent, as its hub identity", Ordered, func() {
	const placement = "security-agent-placement"
	var (
		target, other *fleet.ManagedCluster
		asAgent       dynamic.Interface
		managerPod    string
		c             hubClients
	)
	BeforeAll(func(ctx SpecContext) {
		c = newHubClients()
		target, other = theFleet.Clusters[0], theFleet.Clusters[1]
		enableAddonForSpec(ctx, target)
		enableAddonForSpec(ctx, other)
		applyAddonPlacementForSpec(ctx, placement, other)

		By("the agent's hub credentials, from the Secret its klusterlet wrote on " + target.Name)
		var secret *corev1.Secret
		eventually(ctx, func(ctx context.Context) (err error) {
			secret, err = target.Kube.CoreV1().Secrets(addon.DefaultInstallNamespace).Get(ctx, addonName+"-hub-kubeconfig", metav1.GetOptions{})
			if err == nil && len(secret.Data["tls.crt"]) == 0 {
				err = fmt.Errorf("no certificate in %s yet", secret.Name)
			}
			return err
		}).Should(Succeed())
		config := rest.CopyConfig(theFleet.Hub.Config)
		config.BearerToken, config.BearerTokenFile, config.Username, config.Password = "", "", "", ""
		config.Impersonate = rest.ImpersonationConfig{}
		config.CertFile, config.KeyFile = "", ""
		config.CertData, config.KeyData = secret.Data["tls.crt"], secret.Data["tls.key"]
		var err error
		asAgent, err = dynamic.NewForConfig(config)
		Expect(err).NotTo(HaveOccurred())

		managerPod, _ = hubManagerPod()
	})

	It("cannot store slices with oversized messages, and the hub goes on", func(ctx SpecContext) {
		rssBefore := rssOf(theFleet.PodPids()[managerPod])
		slices := asAgent.Resource(statusv1alpha1.GroupVersion.WithResource(statusv1alpha1.Resource)).Namespace(target.Name)
		huge := strings.Repeat("x", 900*1024)
		refused := 0
		for i := range 10 {
			slice := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": statusv1alpha1.GroupVersion.String(), "kind": statusv1alpha1.Kind,
				"metadata":      map[string]any{"name": fmt.Sprintf("hostile-%d", i), "labels": map[string]any{statusv1alpha1.LabelAddon: addonName}},
				"formatVersion": int64(1), "appCount": int64(1),
				"apps": []any{map[string]any{"namespace": "argocd", "name": fmt.Sprintf("hostile-%d", i), "observedAt": "2026-01-01T00:00:00Z",
					"conditions": []any{map[string]any{"type": "SyncError", "message": huge}}}},
			}}
			_, err := slices.Create(ctx, slice, metav1.CreateOptions{})
			if err == nil {
				DeferCleanup(func(ctx SpecContext) {
					Expect(ignoreNotFound(slices.Delete(ctx, slice.GetName(), metav1.DeleteOptions{}))).To(Succeed())
				})
				continue
			}
			Expect(apierrors.IsInvalid(err) || apierrors.IsRequestEntityTooLargeError(err) || apierrors.IsForbidden(err)).To(BeTrue(), "refused as invalid: %v", err)
			refused++
		}
		Expect(refused).To(Equal(10), "every slice with a 0.9 MB message is refused by the hub apiserver")

		By("a new app of " + other.Name + " propagates within a minute, and the manager's memory held")
		app := pulledApp(fleet.ArgoCDNamespace, "security-after-hostile", other.Name, "security-after-hostile", false)
		app.SetFinalizers(nil)
		_, err := c.dyn.Resource(fleet.ApplicationGVR).Namespace(fleet.ArgoCDNamespace).Create(ctx, app, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) {
			Expect(ignoreNotFound(c.dyn.Resource(fleet.ApplicationGVR).Namespace(fleet.ArgoCDNamespace).Delete(ctx, app.GetName(), metav1.DeleteOptions{}))).To(Succeed())
		})
		eventually(ctx, func(ctx context.Context) (int, error) {
			works, err := c.worksOf(ctx, fleet.ArgoCDNamespace, app.GetName())
			return len(works), err
		}).WithTimeout(time.Minute).Should(Equal(1))
		Expect(theFleet.PodPids()).To(HaveKeyWithValue(managerPod, Not(BeZero())), "the manager did not restart")
		rssAfter := rssOf(theFleet.PodPids()[managerPod])
		fmt.Fprintf(GinkgoWriter, "manager RSS %d MiB before, %d MiB after\n", rssBefore>>20, rssAfter>>20)
		Expect(rssAfter-rssBefore).To(BeNumerically("<", 64<<20), "the manager's RSS grew by less than 64 MiB")
	})

	It("cannot hold more slices than its cluster's quota", func(ctx SpecContext) {
		sliceGVR := statusv1alpha1.GroupVersion.WithResource(statusv1alpha1.Resource)
		slices := asAgent.Resource(sliceGVR).Namespace(target.Name)
		DeferCleanup(func(ctx SpecContext) {
			Expect(c.dyn.Resource(sliceGVR).Namespace(target.Name).DeleteCollection(ctx, metav1.DeleteOptions{},
				metav1.ListOptions{LabelSelector: "e2e-bulk=true"})).To(Succeed())
		})
		// Without the addon's label: the cluster's agent deletes the labelled slices it did
		// not write, and the quota counts every slice of the namespace.
		bulk := func(i int) *unstructured.Unstructured {
			return &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": statusv1alpha1.GroupVersion.String(), "kind": statusv1alpha1.Kind,
				"metadata":      map[string]any{"name": fmt.Sprintf("bulk-%d", i), "labels": map[string]any{"e2e-bulk": "true"}},
				"formatVersion": int64(1), "appCount": int64(1),
				"apps": []any{map[string]any{"namespace": "argocd", "name": fmt.Sprintf("bulk-%d", i), "observedAt": "2026-01-01T00:00:00Z"}},
			}}
		}
		// A quota made just after the slices' CRD refuses every slice until
		// kube-controller-manager counts them; the manager re-creates it until it does.
		start := time.Now()
		eventually(ctx, func(ctx context.Context) error {
			_, err := slices.Create(ctx, bulk(0), metav1.CreateOptions{})
			return err
		}).Should(Succeed(), "the quota of %s lets the agent write", target.Name)
		fmt.Fprintf(GinkgoWriter, "the quota of %s let the agent write %v after the spec started\n", target.Name, time.Since(start).Round(time.Second))
		// Created as fast as the agent's identity can: the quota's usage, which the
		// apiserver's admission counts up and kube-controller-manager recounts from its
		// watch, may lag a burst by a few slices.
		// The apiserver may also answer a create with a conflict on the quota's status (its
		// admission and that controller both write it): the agent retries those.
		const slack = 5
		var refusal error
		for i := 1; refusal == nil && i < 2*addon.RecommendedMaxStatusSlicesPerCluster; i++ {
			_, refusal = slices.Create(ctx, bulk(i), metav1.CreateOptions{})
			if apierrors.IsConflict(refusal) {
				refusal = nil
				i--
			}
		}
		Expect(refusal).To(HaveOccurred(), "the hub took %d slices of %s", 2*addon.RecommendedMaxStatusSlicesPerCluster, target.Name)
		Expect(apierrors.IsForbidden(refusal) && strings.Contains(refusal.Error(), "exceeded quota")).To(BeTrue(), "refused by the quota: %v", refusal)
		list, err := slices.List(ctx, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())
		fmt.Fprintf(GinkgoWriter, "%s holds %d slices at the first refusal\n", target.Name, len(list.Items))
		Expect(len(list.Items)).To(BeNumerically("<=", addon.RecommendedMaxStatusSlicesPerCluster+slack), "%s holds about as many slices as its quota allows", target.Name)
		// Once the count has caught up, not one more.
		eventually(ctx, func(ctx context.Context) error {
			_, err := slices.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": statusv1alpha1.GroupVersion.String(), "kind": statusv1alpha1.Kind,
				"metadata":      map[string]any{"generateName": "bulk-late-", "labels": map[string]any{"e2e-bulk": "true"}},
				"formatVersion": int64(1), "appCount": int64(1),
				"apps": []any{map[string]any{"namespace": "argocd", "name": "late", "observedAt": "2026-01-01T00:00:00Z"}},
			}}, metav1.CreateOptions{})
			return err
		}).Should(MatchError(ContainSubstring("exceeded quota")))
		list, err = slices.List(ctx, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(len(list.Items)).To(BeNumerically("<=", addon.RecommendedMaxStatusSlicesPerCluster+slack))
	})
})

// rssOf returns the resident memory of a process, in bytes.
func rssOf(pid int) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	Expect(err).NotTo(HaveOccurred())
	m := regexp.MustCompile(`(?m)^VmRSS:\s+(\d+) kB$`).FindSubmatch(data)
	Expect(m).NotTo(BeNil(), "VmRSS of %d", pid)
	kb, err := strconv.ParseInt(string(m[1]), 10, 64)
	Expect(err).NotTo(HaveOccurred())
	return kb << 10
}

// What a managed cluster's registration agent can have signed on the hub: its own
// agent's certificate, nothing wider and nothing of another cluster's. The manager's
// approver (the addon framework's CSR controller, with the addon's check) leaves every
// other request Pending for a person, with a Warning Event.
var _ = Describe("A managed cluster's registration agent", Ordered, func() {
	It("cannot have another cluster's agent certificate signed", func(ctx SpecContext) {
		victim, forger := theFleet.Clusters[0], theFleet.Clusters[1]
		enableAddonForSpec(ctx, victim)
		// The forger's klusterlet identity on the hub, as its registration agent holds it.
		config, err := clientcmd.BuildConfigFromFlags("", filepath.Join(forger.Dir, "hub-kubeconfig", "kubeconfig"))
		Expect(err).NotTo(HaveOccurred())
		asForger, err := kubernetes.NewForConfig(config)
		Expect(err).NotTo(HaveOccurred())

		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		Expect(err).NotTo(HaveOccurred())
		der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{
			CommonName:   agent.DefaultUser(victim.Name, addonName, addon.AgentName),
			Organization: agent.DefaultGroups(victim.Name, addonName),
		}, DNSNames: []string{addonName + ".addon.open-cluster-management.io"}}, key)
		Expect(err).NotTo(HaveOccurred())
		csr := &certificatesv1.CertificateSigningRequest{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "addon-" + victim.Name + "-" + addonName + "-",
				Labels: map[string]string{clusterv1.ClusterNameLabelKey: victim.Name, addonv1beta1.AddonLabelKey: addonName}},
			Spec: certificatesv1.CertificateSigningRequestSpec{
				Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
				SignerName: certificatesv1.KubeAPIServerClientSignerName,
				Usages:     []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageClientAuth},
			},
		}
		csr, err = asForger.CertificatesV1().CertificateSigningRequests().Create(ctx, csr, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred(), "a registration agent may create certificate requests")
		hub := theFleet.Hub.Kube
		DeferCleanup(func(ctx SpecContext) {
			Expect(ignoreNotFound(hub.CertificatesV1().CertificateSigningRequests().Delete(ctx, csr.Name, metav1.DeleteOptions{}))).To(Succeed())
		})
		eventually(ctx, func(ctx context.Context) ([]string, error) {
			list, err := hub.CoreV1().Events(victim.Name).List(ctx, metav1.ListOptions{
				FieldSelector: "involvedObject.name=" + addonName + ",type=" + corev1.EventTypeWarning})
			var reasons []string
			if err == nil {
				for _, e := range list.Items {
					if e.InvolvedObject.Kind == "ManagedClusterAddOn" && strings.Contains(e.Message, csr.Name) {
						reasons = append(reasons, e.Reason)
					}
				}
			}
			return reasons, err
		}).Should(ContainElement(addon.ReasonAgentCSRNotApproved), "a Warning Event on %s's ManagedClusterAddOn naming the request", victim.Name)
		Consistently(ctx, func(ctx context.Context) ([]certificatesv1.CertificateSigningRequestCondition, error) {
			current, err := hub.CertificatesV1().CertificateSigningRequests().Get(ctx, csr.Name, metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			Expect(current.Status.Certificate).To(BeEmpty(), "no certificate signed for %s", current.Spec.Username)
			return current.Status.Conditions, nil
		}).WithTimeout(15*time.Second).Should(BeEmpty(), "the request of %s for %s's agent stays Pending", forger.Name, victim.Name)
	})
})
