package hub

import (
	"flag"
	"strings"
)

// AddFlags registers on fs the manager's flags, their defaults o's: those of the manager
// and of the settings its controllers share, then each controller's own (its Settings'
// AddFlags). The flags of lists take them comma-separated: once fs is parsed, the
// function it returns sets them.
func (o *Options) AddFlags(fs *flag.FlagSet) (parsed func()) {
	fs.StringVar(&o.MetricsAddr, "metrics-bind-address", o.MetricsAddr, `address of the metrics endpoint; "0" disables it`)
	fs.BoolVar(&o.MetricsSecure, "metrics-secure", o.MetricsSecure,
		"serve the metrics over HTTPS to clients the hub apiserver authenticates and authorizes (get on /metrics); false serves plain HTTP to anyone")
	fs.StringVar(&o.PprofAddr, "pprof-bind-address", o.PprofAddr, `address of net/http/pprof, for profiling, on loopback only (127.0.0.1:6060; kubectl port-forward reaches it); "0" disables it`)
	fs.StringVar(&o.ProbeAddr, "health-probe-bind-address", o.ProbeAddr, "address of the /healthz and /readyz endpoints")
	fs.BoolVar(&o.LeaderElect, "leader-elect", o.LeaderElect, "let only one replica act at a time")
	fs.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", o.LeaderElectionNamespace, "namespace of the leader election Lease; empty means the manager's own")
	fs.DurationVar(&o.LeaseDuration, "leader-election-lease-duration", o.LeaseDuration, "how long after the leader's last renewal a standby takes over")
	fs.DurationVar(&o.RenewDeadline, "leader-election-renew-deadline", o.RenewDeadline, "how long the leader keeps trying to renew before it gives up and exits")
	fs.DurationVar(&o.RetryPeriod, "leader-election-retry-period", o.RetryPeriod, "how often the leader renews and a standby tries to acquire")
	fs.Float64Var(&o.KubeAPIQPS, "kube-api-qps", o.KubeAPIQPS, "requests per second of each of the manager's clients to the hub apiserver; negative: no client-side limit")
	fs.IntVar(&o.KubeAPIBurst, "kube-api-burst", o.KubeAPIBurst, "burst of requests of each of the manager's clients to the hub apiserver")
	fs.DurationVar(&o.GracefulShutdown, "graceful-shutdown-timeout", o.GracefulShutdown, "how long controllers get to finish on shutdown")

	fs.StringVar(&o.AddonName, "addon-name", o.AddonName, "name of the ClusterManagementAddOn and ManagedClusterAddOns")
	fs.StringVar(&o.ArgoCDNamespace, "argocd-namespace", o.ArgoCDNamespace, "namespace of the hub Argo CD")
	watchNamespaces := strings.Join(o.WatchNamespaces, ",")
	fs.StringVar(&watchNamespaces, "watch-namespaces", watchNamespaces, "comma-separated namespaces of hub Applications to pull; empty means all")
	fs.StringVar(&o.HubClusterName, "hub-cluster-name", o.HubClusterName,
		`name of the hub's own ManagedCluster, never a pull target (a ManagedCluster labelled local-cluster="true" is not either)`)
	fs.IntVar(&o.Concurrency, "concurrency", o.Concurrency, "parallel reconciles of each controller")

	o.Propagation.AddFlags(fs)
	o.AppSetReport.AddFlags(fs)
	o.ResourceTree.AddFlags(fs)
	o.ClusterSecret.AddFlags(fs)
	o.ResourceProxy.AddFlags(fs)
	addonParsed := o.Addon.AddFlags(fs)
	return func() {
		if watchNamespaces != "" {
			o.WatchNamespaces = strings.Split(watchNamespaces, ",")
		}
		addonParsed()
	}
}
