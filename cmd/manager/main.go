// Command manager is the argocd-pull addon-manager that runs on the OCM hub.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/client/config"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argocdcache"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/uninstall"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "uninstall" {
		os.Exit(runUninstall(os.Args[2:]))
	}
	opts := hub.DefaultOptions()
	var watchNamespaces, agentWatchNamespaces, agentPullSecrets string
	flag.StringVar(&opts.MetricsAddr, "metrics-bind-address", opts.MetricsAddr, `address of the metrics endpoint; "0" disables it`)
	flag.BoolVar(&opts.MetricsSecure, "metrics-secure", opts.MetricsSecure,
		"serve the metrics over HTTPS to clients the hub apiserver authenticates and authorizes (get on /metrics); false serves plain HTTP to anyone")
	flag.StringVar(&opts.PprofAddr, "pprof-bind-address", opts.PprofAddr, `address of net/http/pprof, for profiling, on loopback only (127.0.0.1:6060; kubectl port-forward reaches it); "0" disables it`)
	flag.StringVar(&opts.ProbeAddr, "health-probe-bind-address", opts.ProbeAddr, "address of the /healthz and /readyz endpoints")
	flag.BoolVar(&opts.LeaderElect, "leader-elect", opts.LeaderElect, "let only one replica act at a time")
	flag.StringVar(&opts.LeaderElectionNamespace, "leader-election-namespace", opts.LeaderElectionNamespace, "namespace of the leader election Lease; empty means the manager's own")
	flag.DurationVar(&opts.LeaseDuration, "leader-election-lease-duration", opts.LeaseDuration, "how long after the leader's last renewal a standby takes over")
	flag.DurationVar(&opts.RenewDeadline, "leader-election-renew-deadline", opts.RenewDeadline, "how long the leader keeps trying to renew before it gives up and exits")
	flag.DurationVar(&opts.RetryPeriod, "leader-election-retry-period", opts.RetryPeriod, "how often the leader renews and a standby tries to acquire")
	flag.StringVar(&opts.AddonName, "addon-name", opts.AddonName, "name of the ClusterManagementAddOn and ManagedClusterAddOns")
	flag.StringVar(&opts.ArgoCDNamespace, "argocd-namespace", opts.ArgoCDNamespace, "namespace of the hub Argo CD")
	flag.StringVar(&watchNamespaces, "watch-namespaces", "", "comma-separated namespaces of hub Applications to pull; empty means all")
	flag.BoolVar(&opts.RequirePlacementBinding, "require-placement-binding", opts.RequirePlacementBinding,
		"pull an Application only when a PlacementDecision in its namespace selects the target cluster")
	flag.StringVar(&opts.HubClusterName, "hub-cluster-name", opts.HubClusterName,
		`name of the hub's own ManagedCluster, never a pull target (a ManagedCluster labelled local-cluster="true" is not either)`)
	flag.DurationVar(&opts.OptOutGracePeriod, "opt-out-grace-period", opts.OptOutGracePeriod,
		"how long the ManifestWorks of an application are kept once its cluster left its placement, opted out or is gone; 0 deletes them at once, a negative value never")
	flag.BoolVar(&opts.TakeOverForeignWorks, "take-over-foreign-works", opts.TakeOverForeignWorks,
		"adopt the pulled ManifestWorks that another controller (Red Hat ACM's pull controller) made; only once that controller no longer serves the applications")
	flag.BoolVar(&opts.ClusterSecrets, "cluster-secrets", opts.ClusterSecrets,
		"keep an Argo CD cluster Secret per opted-in cluster in the Argo CD namespace (a cluster that already has a cluster Secret of another tool never gets a second one); false keeps none and touches none, leaving the ones made before")
	flag.StringVar(&opts.AgentImage, "agent-image", opts.AgentImage, "image of the agent deployed to each managed cluster")
	flag.StringVar(&opts.AgentImagePullPolicy, "agent-image-pull-policy", opts.AgentImagePullPolicy, "imagePullPolicy of the agent: Always, IfNotPresent or Never")
	flag.StringVar(&agentPullSecrets, "agent-image-pull-secrets", "",
		"comma-separated Secrets in the agent's namespace on each managed cluster to pull its image with")
	flag.StringVar(&agentWatchNamespaces, "agent-watch-namespaces", strings.Join(opts.AgentWatchNamespaces, ","),
		"comma-separated namespaces of the managed clusters' Argo CD Applications")
	flag.IntVar(&opts.Concurrency, "concurrency", opts.Concurrency, "parallel reconciles of each controller")
	var qps float64
	flag.Float64Var(&qps, "kube-api-qps", float64(opts.KubeAPIQPS), "requests per second of each of the manager's clients to the hub apiserver; negative: no client-side limit")
	flag.IntVar(&opts.KubeAPIBurst, "kube-api-burst", opts.KubeAPIBurst, "burst of requests of each of the manager's clients to the hub apiserver")
	flag.DurationVar(&opts.ReportWriteInterval, "report-write-interval", opts.ReportWriteInterval, "the pace of the writes of one MulticlusterApplicationSetReport: after five writes in a row, one per interval; changes in between go into the next write")
	flag.Int64Var(&opts.ReportBudgetBytes, "report-budget-bytes", opts.ReportBudgetBytes,
		"the most bytes one MulticlusterApplicationSetReport may take as JSON, metadata included; a report over it loses detail (its counts stay exact) and says so in statuses.summary.truncated")
	flag.IntVar(&opts.MaxStatusSlicesPerCluster, "max-status-slices-per-cluster", opts.MaxStatusSlicesPerCluster,
		"the most ApplicationStatusSlices one cluster's agent may hold on the hub (a ResourceQuota in its cluster namespace; docs/operations.md); 0 keeps no quota, and no bound")
	var compression string
	flag.StringVar(&opts.ArgoCDRedis.Addr, "argocd-redis", opts.ArgoCDRedis.Addr,
		`host:port of the hub Argo CD's Redis, where the manager writes the pulled apps' resource trees for Argo CD's UI and API; empty means argocd-redis.<argocd-namespace>.svc:6379 (or the master the Sentinels of --argocd-sentinel name), "`+hub.ResourceTreesDisabled+`" writes none`)
	opts.ArgoCDRedis.AddFlags(flag.CommandLine, "the hub Argo CD's Redis")
	flag.StringVar(&compression, "argocd-redis-compress", string(opts.ArgoCDRedis.Compression),
		"compression of the hub Argo CD's cache: gzip or none, as its --redis-compress")
	flag.DurationVar(&opts.ArgoCDRedis.Expiration, "argocd-app-state-cache-expiration", opts.ArgoCDRedis.Expiration,
		"how long a resource tree lives in the hub Argo CD's cache unless written again (written again after half of it)")
	flag.DurationVar(&opts.GracefulShutdown, "graceful-shutdown-timeout", opts.GracefulShutdown, "how long controllers get to finish on shutdown")
	klog.InitFlags(nil) // -v and the other klog flags
	flag.Parse()

	opts.KubeAPIQPS = float32(qps)
	opts.ArgoCDRedis.Compression = argocdcache.Compression(compression)
	if watchNamespaces != "" {
		opts.WatchNamespaces = strings.Split(watchNamespaces, ",")
	}
	opts.AgentWatchNamespaces = strings.Split(agentWatchNamespaces, ",")
	if agentPullSecrets != "" {
		opts.AgentImagePullSecrets = strings.Split(agentPullSecrets, ",")
	}
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
	opts := uninstall.Options{Mode: uninstall.LeaveRunning, AddonName: hub.DefaultOptions().AddonName,
		ArgoCDNamespace: hub.DefaultOptions().ArgoCDNamespace, ClusterSecrets: hub.DefaultOptions().ClusterSecrets, Timeout: 5 * time.Minute}
	fs := flag.NewFlagSet("uninstall", flag.ExitOnError)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: manager uninstall [flags]\n\nStops the manager, then leaves the pulled Applications running on their clusters\n"+
			"(orphans the ManifestWorks) or removes them, releases the hub Applications' finalizers and\n"+
			"deletes the Argo CD cluster Secrets the manager made (with --cluster-secrets).")
		fs.PrintDefaults()
	}
	mode := string(opts.Mode)
	fs.StringVar(&mode, "mode", mode, fmt.Sprintf("%s: the clusters keep their Applications and workloads; %s: the Applications are removed from the clusters", uninstall.LeaveRunning, uninstall.RemoveApps))
	fs.StringVar(&opts.AddonName, "addon-name", opts.AddonName, "name of the ClusterManagementAddOn")
	fs.StringVar(&opts.ArgoCDNamespace, "argocd-namespace", opts.ArgoCDNamespace, "namespace of the hub Argo CD (the cluster Secrets)")
	fs.BoolVar(&opts.ClusterSecrets, "cluster-secrets", opts.ClusterSecrets,
		"the manager's --cluster-secrets: delete the Argo CD cluster Secrets it made; false leaves them (the manager may not touch them then)")
	fs.StringVar(&opts.Namespace, "namespace", "", "namespace of the manager's Deployment and leader election Lease")
	fs.StringVar(&opts.Deployment, "deployment", "", "the manager's Deployment, scaled to zero first")
	fs.StringVar(&opts.Lease, "lease", "", "the manager's leader election Lease")
	fs.DurationVar(&opts.Timeout, "timeout", opts.Timeout, "how long to wait for the manager to stop and for the clusters to act on their works")
	klog.InitFlags(fs)           // -v and the other klog flags
	ctrlconfig.RegisterFlags(fs) // --kubeconfig
	_ = fs.Parse(args)
	opts.Mode = uninstall.Mode(mode)

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
