package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	addonclient "open-cluster-management.io/api/client/addon/clientset/versioned"
	workclient "open-cluster-management.io/api/client/work/clientset/versioned"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/argocdcache"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/clusterreport"
	"github.com/ocm-gitops/argocd-pull-addon/test/fleet"
)

// The documented ApplicationSet and its Applications, <cluster>-guestbook-app.
const (
	demoAppSet = "guestbook-allclusters-app-set"
	demoApp    = "guestbook-app"
)

// demo tells the pull-model story on the fleet: the addon installed with helm, enabled
// per cluster with clusteradm, the documented ApplicationSet generating hub Applications,
// the manager wrapping each in a ManifestWork, each cluster's Argo CD syncing it, the agents
// reporting back, and the report and the hub Applications showing the result.
func demo(args []string) error {
	fs := flag.NewFlagSet("demo", flag.ExitOnError)
	var c common
	c.register(fs, ".fleet")
	_ = fs.Parse(args)
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	c.addon = true

	started := time.Now()
	phase := func(format string, args ...any) {
		fmt.Printf("\n== [%5.1fs] %s\n", time.Since(started).Seconds(), fmt.Sprintf(format, args...))
	}
	phase("Starting the local fleet: a hub and %s, argocd-pull-addon installed with helm", c.clusters)
	f, err := c.start(ctx)
	if err != nil {
		return err
	}
	defer f.Stop()
	bin, err := filepath.Abs(c.bin)
	if err != nil {
		return err
	}
	hubDyn, err := dynamic.NewForConfig(f.Hub.Config)
	if err != nil {
		return err
	}
	works, err := workclient.NewForConfig(f.Hub.Config)
	if err != nil {
		return err
	}
	addons, err := addonclient.NewForConfig(f.Hub.Config)
	if err != nil {
		return err
	}
	var names []string
	for _, mc := range f.Clusters {
		names = append(names, mc.Name)
	}

	phase("clusteradm addon enable --names argocd-pull --clusters %s", strings.Join(names, ","))
	if out, err := run(bin, f.Hub.Kubeconfig, "clusteradm", "addon", "enable", "--names", clusterreport.DefaultAddonName,
		"--clusters", strings.Join(names, ",")); err != nil {
		return fmt.Errorf("clusteradm: %w: %s", err, out)
	}
	for _, mc := range f.Clusters {
		if err := poll(ctx, 3*time.Minute, func(ctx context.Context) (bool, error) {
			mca, err := addons.AddonV1beta1().ManagedClusterAddOns(mc.Name).Get(ctx, clusterreport.DefaultAddonName, metav1.GetOptions{})
			return err == nil && meta.IsStatusConditionTrue(mca.Status.Conditions, "Available"), nil
		}); err != nil {
			return fmt.Errorf("the addon on %s is not Available: %w", mc.Name, err)
		}
		fmt.Printf("   %s: the framework delivered the agent by ManifestWork; the agent runs and the addon is Available\n", mc.Name)
	}

	phase("Applying the documented ApplicationSet (placement generator, multi-source) to the hub")
	applier, err := fleet.NewApplier(f.Hub.Config)
	if err != nil {
		return err
	}
	if err := applier.ApplyYAML(ctx, fleet.ArgoCDNamespace, fleet.AddonPlacementYAML("guestbook-placement")); err != nil {
		return err
	}
	// The ApplicationSet comes once the placement controller has decided: made before,
	// it would wait 3 minutes to retry (fleet.Applier.DecidedClusters).
	if err := poll(ctx, 3*time.Minute, func(ctx context.Context) (bool, error) {
		decided, err := applier.DecidedClusters(ctx, fleet.ArgoCDNamespace, "guestbook-placement")
		return len(decided) == len(f.Clusters), err
	}); err != nil {
		return fmt.Errorf("the PlacementDecisions of guestbook-placement: %w", err)
	}
	if err := applier.ApplyYAML(ctx, fleet.ArgoCDNamespace, fleet.GuestbookApplicationSetYAML(
		demoAppSet, demoApp, "guestbook-placement", f.Git.URL(), fleet.GuestbookNamespace)); err != nil {
		return err
	}
	for _, mc := range f.Clusters {
		app := mc.Name + "-" + demoApp
		if err := poll(ctx, 3*time.Minute, func(ctx context.Context) (bool, error) {
			list, err := works.WorkV1().ManifestWorks(mc.Name).List(ctx, metav1.ListOptions{LabelSelector: argoapp.LabelPullToOCMManagedCluster})
			if err != nil {
				return false, err
			}
			for _, w := range list.Items {
				if w.Annotations[argoapp.AnnotationHubApplicationName] == app {
					fmt.Printf("   hub Application %s -> ManifestWork %s/%s\n", app, mc.Name, w.Name)
					return true, nil
				}
			}
			return false, nil
		}); err != nil {
			return fmt.Errorf("no ManifestWork for %s: %w", app, err)
		}
	}

	phase("Each cluster's Argo CD syncs its Application, its Pods run and become Ready; the agents report back; the hub shows it")
	for _, mc := range f.Clusters {
		app := mc.Name + "-" + demoApp
		var last string
		if err := poll(ctx, 3*time.Minute, func(ctx context.Context) (bool, error) {
			u, err := hubDyn.Resource(fleet.ApplicationGVR).Namespace(fleet.ArgoCDNamespace).Get(ctx, app, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			st, err := argoapp.DecodeStatus(u)
			if err != nil {
				return false, err
			}
			last = fmt.Sprintf("sync %s, health %s, %d resources", st.Sync.Status, st.Health.Status, len(st.Resources))
			return st.Sync.Status == "Synced" && st.Health.Status == "Healthy" && len(st.Resources) > 0, nil
		}); err != nil {
			return fmt.Errorf("hub Application %s (last: %s): %w", app, last, err)
		}
		fmt.Printf("   hub Application %s: %s\n", app, last)
	}
	if err := poll(ctx, 2*time.Minute, func(ctx context.Context) (bool, error) {
		out, err := run(bin, f.Hub.Kubeconfig, "kubectl", "-n", fleet.ArgoCDNamespace, "get", "appsetreport",
			demoAppSet, "-o", "jsonpath={.statuses.summary.synced}/{.statuses.summary.healthy}")
		n := fmt.Sprint(len(f.Clusters))
		return err == nil && string(out) == n+"/"+n, nil
	}); err != nil {
		return fmt.Errorf("the report does not count every cluster synced and healthy: %w", err)
	}

	phase("kubectl get appsetreport -n argocd -o yaml")
	out, _ := run(bin, f.Hub.Kubeconfig, "kubectl", "-n", fleet.ArgoCDNamespace, "get", "appsetreport", "-o", "yaml")
	fmt.Print(string(out))
	phase("kubectl get appsetreport,applications -n argocd")
	out, _ = run(bin, f.Hub.Kubeconfig, "kubectl", "-n", fleet.ArgoCDNamespace, "get", "appsetreport,applications")
	fmt.Print(string(out))

	app := f.Clusters[0].Name + "-" + demoApp
	phase("The hub's argocd-server shows %s's resource tree from %s: POST /api/v1/session, GET /api/v1/applications/%s/resource-tree", app, f.Clusters[0].Name, app)
	if err := showTree(ctx, f, app); err != nil {
		return err
	}

	phase("The pull model works. The fleet stays up until Ctrl-C.")
	printAccess(f, bin)
	fmt.Println("Try: kubectl --kubeconfig", f.Hub.Kubeconfig, "-n argocd get application <cluster>-"+demoApp, "-o yaml")
	return waitForSignal(ctx, f)
}

// showTree logs in to the hub's argocd-server as admin, as its UI does, and prints the
// app's resource tree once it holds the cluster's Pods.
func showTree(ctx context.Context, f *fleet.Fleet, app string) error {
	password, err := f.ArgoCDAdminPassword(ctx)
	if err != nil {
		return fmt.Errorf("the admin password: %w", err)
	}
	argocd, err := fleet.LoginArgoCD(ctx, f.ArgoCDServer, "admin", password)
	if err != nil {
		return err
	}
	var tree argocdcache.Tree
	var last error
	if err := poll(ctx, 2*time.Minute, func(ctx context.Context) (bool, error) {
		tree, last = argocd.ResourceTree(ctx, app)
		return last == nil && slices.ContainsFunc(tree.Nodes, func(n argocdcache.Node) bool { return n.Kind == "Pod" }), nil
	}); err != nil {
		return fmt.Errorf("the hub's argocd-server shows no Pod of %s: %w", app, errors.Join(err, last))
	}
	fmt.Printf("   %-12s %-40s %-12s %s\n", "KIND", "NAMESPACE/NAME", "HEALTH", "PARENT")
	for _, n := range tree.Nodes {
		health, parent := "", ""
		if n.Health != nil {
			health = n.Health.Status
		}
		if len(n.ParentRefs) > 0 {
			parent = n.ParentRefs[0].Kind + "/" + n.ParentRefs[0].Name
		}
		fmt.Printf("   %-12s %-40s %-12s %s\n", n.Kind, n.Namespace+"/"+n.Name, health, parent)
	}
	return nil
}

// run runs a tool of bin against the kubeconfig and returns its combined output.
func run(bin, kubeconfig, tool string, args ...string) ([]byte, error) {
	cmd := exec.Command(filepath.Join(bin, tool), args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	return cmd.CombinedOutput()
}

func poll(ctx context.Context, timeout time.Duration, cond wait.ConditionWithContextFunc) error {
	return wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, cond)
}
