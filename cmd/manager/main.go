// Command manager is the argocd-pull addon-manager that runs on the OCM hub.
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/client/config"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/uninstall"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "uninstall" {
		os.Exit(runUninstall(os.Args[2:]))
	}
	opts := hub.DefaultOptions()
	parsed := opts.AddFlags(flag.CommandLine)
	klog.InitFlags(nil) // -v and the other klog flags
	flag.Parse()
	parsed()
	ctrl.SetLogger(klog.NewKlogr())
	cfg, err := ctrl.GetConfig()
	if err != nil {
		fmt.Fprintln(os.Stderr, "manager: load kubeconfig:", err)
		os.Exit(1)
	}
	if err := hub.Run(ctrl.SetupSignalHandler(), cfg, opts); err != nil {
		ctrl.Log.Error(err, "manager stopped")
		os.Exit(1)
	}
}

// runUninstall is `manager uninstall`: the chart's pre-delete hook (docs/operations.md).
func runUninstall(args []string) int {
	defaults := hub.DefaultOptions()
	opts := uninstall.Options{Mode: uninstall.LeaveRunning, AddonName: defaults.AddonName,
		ArgoCDNamespace: defaults.ArgoCDNamespace, ClusterSecrets: defaults.ClusterSecret.Enabled, Timeout: 5 * time.Minute}
	fs := flag.NewFlagSet("uninstall", flag.ExitOnError)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: manager uninstall [flags]\n\nStops the manager, then leaves the pulled Applications running on their clusters\n"+
			"(orphans the ManifestWorks) or removes them, releases the hub Applications' finalizers and\n"+
			"deletes the Argo CD cluster Secrets the manager made (with --cluster-secrets).")
		fs.PrintDefaults()
	}
	opts.AddFlags(fs)
	klog.InitFlags(fs)           // -v and the other klog flags
	ctrlconfig.RegisterFlags(fs) // --kubeconfig
	_ = fs.Parse(args)

	log := klog.NewKlogr()
	cfg, err := ctrl.GetConfig()
	if err != nil {
		log.Error(err, "load kubeconfig")
		return 1
	}
	ctx := klog.NewContext(ctrl.SetupSignalHandler(), log)
	res, err := uninstall.Run(ctx, cfg, opts)
	log.Info("uninstall", "mode", opts.Mode, "orphaned", res.Orphaned, "deleted", res.Deleted, "left", res.Left,
		"finalizersReleased", res.FinalizersRemoved, "clusterSecretsDeleted", res.SecretsDeleted)
	if err != nil {
		log.Error(err, "uninstall failed")
		return 1
	}
	return 0
}
