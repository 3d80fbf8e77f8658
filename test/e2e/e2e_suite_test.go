// Package e2e holds the ginkgo suites that run on the local fleet: a real hub and managed
// clusters as processes (test/fleet).
package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	statusv1alpha1 "github.com/ocm-gitops/argocd-pull-addon/pkg/apis/argocdpull/v1alpha1"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/clusterreport"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/addon"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/statusslices"

	"github.com/ocm-gitops/argocd-pull-addon/test/fleet"
)

var (
	binDir   = flag.String("bin-dir", "../../bin", "directory of the binaries that `make tools` builds")
	fleetDir = flag.String("fleet-dir", "../../.cache/e2e-fleet", "run directory of the suite's fleet; kept after the run for its logs")
)

// managedClusters are the clusters of the suite's fleet.
var managedClusters = []string{"cluster1", "cluster2", "cluster3"}

// theFleet is started once for the whole suite.
var theFleet *fleet.Fleet

func TestE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "argocd-pull-addon e2e")
}

var _ = BeforeSuite(func(ctx SpecContext) {
	bin, err := filepath.Abs(*binDir)
	Expect(err).NotTo(HaveOccurred())
	for _, tool := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "registration-operator", "addon", "argocd",
		"clusteradm", "helm", "manager", "agent"} {
		_, err := os.Stat(filepath.Join(bin, tool))
		Expect(err).NotTo(HaveOccurred(), "missing %s in %s: run `make tools build`", tool, bin)
	}
	mods, err := fleet.ResolveModuleDirs("../..")
	Expect(err).NotTo(HaveOccurred())
	theFleet, err = fleet.Start(ctx, fleet.Options{
		Dir: *fleetDir, BinDir: bin, Clusters: managedClusters, ArgoCD: true, Modules: mods,
		Addon: true, Chart: "../../charts/argocd-pull-addon",
		Progress: func(step string) { fmt.Fprintln(GinkgoWriter, step) },
	})
	Expect(err).NotTo(HaveOccurred())
	permitTenantNamespaces(ctx)
}, NodeTimeout(8*time.Minute))

// tenantNamespaces are the hub namespaces, besides Argo CD's, whose Applications the
// suite's specs pull; the hub's default project lists them in spec.sourceNamespaces, as a
// hub admin lists the namespaces whose Applications may use it. Others (the security
// spec's tenant) may not use it.
var tenantNamespaces = []string{"e2e-*", "overtime-*"}

// permitTenantNamespaces lists tenantNamespaces in the hub's default AppProject.
func permitTenantNamespaces(ctx context.Context) {
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"sourceNamespaces": tenantNamespaces}})
	Expect(err).NotTo(HaveOccurred())
	_, err = newHubClients().dyn.Resource(fleet.AppProjectGVR).Namespace(fleet.ArgoCDNamespace).Patch(ctx, "default", types.MergePatchType, patch, metav1.PatchOptions{})
	Expect(err).NotTo(HaveOccurred())
}

var _ = AfterSuite(func() {
	if theFleet == nil {
		return
	}
	pids := theFleet.Pids()
	theFleet.Stop()
	Expect(pids).NotTo(BeEmpty())
	for _, pid := range pids {
		Expect(fleet.ProcessAlive(pid)).To(BeFalse(), "fleet process %d outlived Stop", pid)
	}
})

// eventually polls with the suite's defaults for fleet operations.
func eventually(ctx context.Context, f any) AsyncAssertion {
	return Eventually(ctx, f).WithTimeout(3 * time.Minute).WithPolling(500 * time.Millisecond)
}

// objectGone is a poll for eventually: whether the object name of resources is gone.
func objectGone(resources dynamic.ResourceInterface, name string) func(context.Context) bool {
	return func(ctx context.Context) bool {
		_, err := resources.Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}
}

// agentGone is a poll for eventually: whether the addon's agent Deployment is gone from
// cluster.
func agentGone(cluster *fleet.ManagedCluster) func(context.Context) bool {
	return func(ctx context.Context) bool {
		_, err := cluster.Kube.AppsV1().Deployments(addon.DefaultInstallNamespace).Get(ctx, addonName+"-agent", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}
}

// applicationStatus reads the Application name of apps and decodes its status.
func applicationStatus(ctx context.Context, apps dynamic.ResourceInterface, name string) (argoapp.Status, error) {
	u, err := apps.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return argoapp.Status{}, err
	}
	return argoapp.DecodeStatus(u)
}

// addonName is this addon's ClusterManagementAddOn and ManagedClusterAddOn name.
const addonName = clusterreport.DefaultAddonName

// clusteradmEnable enables the addon on a cluster with the real clusteradm, as a user would.
func clusteradmEnable(ctx context.Context, cluster string) {
	cmd := exec.CommandContext(ctx, filepath.Join(*binDir, "clusteradm"), "addon", "enable", "--names", addonName, "--clusters", cluster)
	cmd.Env = append(cmd.Environ(), "KUBECONFIG="+theFleet.Hub.Kubeconfig)
	out, err := cmd.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "clusteradm: %s", out)
}

// enableAddonForSpec enables the addon on cluster with clusteradm and, when the spec
// ends, disables it and waits until the agent is gone from the cluster, so that the next
// spec on the cluster starts without it.
func enableAddonForSpec(ctx context.Context, cluster *fleet.ManagedCluster) {
	pruneIssuedAgentCSRs(ctx, cluster.Name)
	clusteradmEnable(ctx, cluster.Name)
	addons := newHubClients().addons
	DeferCleanup(func(ctx SpecContext) {
		err := addons.AddonV1beta1().ManagedClusterAddOns(cluster.Name).Delete(ctx, addonName, metav1.DeleteOptions{})
		Expect(ignoreNotFound(err)).To(Succeed())
		eventually(ctx, agentGone(cluster)).Should(BeTrue(), "agent removed from %s", cluster.Name)
	})
}

// pruneIssuedAgentCSRs deletes the hub's certificate requests of the addon's agent on
// cluster whose certificate was issued, as kube-controller-manager's csrcleaner does an
// hour after: the klusterlet creates no more than 10 requests of an addon's agent while
// they stand (OCM's addonCSRThreshold), and the suite opts a cluster in and out more
// often than that in an hour. Pending requests stay.
func pruneIssuedAgentCSRs(ctx context.Context, cluster string) {
	csrs := theFleet.Hub.Kube.CertificatesV1().CertificateSigningRequests()
	list, err := csrs.List(ctx, metav1.ListOptions{LabelSelector: "open-cluster-management.io/cluster-name=" + cluster + ",open-cluster-management.io/addon-name=" + addonName})
	Expect(err).NotTo(HaveOccurred())
	for _, csr := range list.Items {
		if len(csr.Status.Certificate) > 0 {
			Expect(ignoreNotFound(csrs.Delete(ctx, csr.Name, metav1.DeleteOptions{}))).To(Succeed())
		}
	}
}

// applyAddonPlacementForSpec applies the Placement name of the clusters where the addon
// is available (fleet.AddonPlacementYAML) and deletes it when the spec ends. It returns
// once the Placement's PlacementDecision lists each of clusters.
func applyAddonPlacementForSpec(ctx context.Context, name string, clusters ...*fleet.ManagedCluster) {
	hub := newHubClients()
	applier := hub.applier
	Expect(applier.ApplyYAML(ctx, fleet.ArgoCDNamespace, fleet.AddonPlacementYAML(name))).To(Succeed())
	DeferCleanup(func(ctx SpecContext) {
		err := hub.dyn.Resource(placementsGVR).Namespace(fleet.ArgoCDNamespace).Delete(ctx, name, metav1.DeleteOptions{})
		Expect(ignoreNotFound(err)).To(Succeed())
	})
	// What reads the decisions next need not race the placement controller
	// (fleet.Applier.DecidedClusters).
	want := []string{}
	for _, mc := range clusters {
		want = append(want, mc.Name)
	}
	eventually(ctx, func(ctx context.Context) ([]string, error) {
		return applier.DecidedClusters(ctx, fleet.ArgoCDNamespace, name)
	}).Should(And(Not(BeNil()), ContainElements(want)), "the placement controller made the PlacementDecision of %s, with %v", name, want)
}

// reportedApp returns what the cluster's agent reports on the hub about the spoke
// Application called name: its entry in the agent's ApplicationStatusSlices, as the hub
// reads it (statusslices.AppOf). The agent of this fleet reports its apps there, so its
// report on the ManagedClusterAddOn must hold no condition per app: that is an error.
func reportedApp(ctx context.Context, cluster, name string) (clusterreport.App, bool, error) {
	mca, err := newHubClients().addons.AddonV1beta1().ManagedClusterAddOns(cluster).Get(ctx, addonName, metav1.GetOptions{})
	if err != nil {
		return clusterreport.App{}, false, err
	}
	report, err := clusterreport.Decode(mca.Status.Conditions)
	if err != nil {
		return clusterreport.App{}, false, err
	}
	if len(report.Apps) > 0 {
		return clusterreport.App{}, false, fmt.Errorf("the agent of %s wrote %d conditions per app on its ManagedClusterAddOn: it reports its apps in slices", cluster, len(report.Apps))
	}
	apps, err := sliceApps(ctx, cluster)
	if err != nil {
		return clusterreport.App{}, false, err
	}
	for _, app := range apps {
		if app.Name == name {
			return app, true, nil
		}
	}
	return clusterreport.App{}, false, nil
}

// sliceApps returns the apps of the cluster's agent in its ApplicationStatusSlices on the
// hub, as the hub reads them (statusslices.AppOf).
func sliceApps(ctx context.Context, cluster string) ([]clusterreport.App, error) {
	list, err := newHubClients().dyn.Resource(statusv1alpha1.GroupVersion.WithResource(statusv1alpha1.Resource)).Namespace(cluster).List(ctx,
		metav1.ListOptions{LabelSelector: statusv1alpha1.LabelAddon + "=" + addonName})
	if err != nil {
		return nil, err
	}
	typed := make([]statusv1alpha1.ApplicationStatusSlice, len(list.Items))
	for i := range list.Items {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(list.Items[i].Object, &typed[i]); err != nil {
			return nil, err
		}
	}
	entries, err := clusterreport.DecodeSlices(typed)
	if err != nil {
		return nil, err
	}
	apps := make([]clusterreport.App, 0, len(entries))
	for _, e := range entries {
		apps = append(apps, statusslices.AppOf(e))
	}
	return apps, nil
}

// hubManagerPod returns the fleet's key of the manager's pod on the hub (one runs) and
// its process id.
func hubManagerPod() (string, int) {
	pod, pid := "", 0
	for key, p := range theFleet.PodPids() {
		if strings.HasPrefix(key, fleet.HubName+"/") {
			Expect(pod).To(BeEmpty(), "one manager runs on the hub")
			pod, pid = key, p
		}
	}
	Expect(pod).NotTo(BeEmpty(), "the manager runs on the hub")
	return pod, pid
}

// runArgoCD runs the argocd CLI (bin/argocd) with the session token against the hub's
// argocd-server, and returns its output and exit code.
func runArgoCD(ctx context.Context, token string, args ...string) (string, int) {
	full := append(slices.Clone(args), "--server", theFleet.ArgoCDServer, "--plaintext", "--auth-token", token)
	out, err := exec.CommandContext(ctx, filepath.Join(*binDir, "argocd"), full...).CombinedOutput()
	fmt.Fprintf(GinkgoWriter, "$ argocd %s\n%s\n", strings.Join(args, " "), out)
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return string(out), exit.ExitCode()
	}
	Expect(err).NotTo(HaveOccurred())
	return string(out), 0
}
