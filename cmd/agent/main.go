// Command agent is the argocd-pull agent that the addon framework installs on each managed
// cluster. Its flags are the ones the addon's Deployment passes.
package main

import (
	"context"
	"flag"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"k8s.io/klog/v2"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/spoke"
)

func main() {
	opts := spoke.DefaultOptions()
	watchNamespaces := strings.Join(opts.WatchNamespaces, ",")
	flag.StringVar(&opts.HubKubeconfig, "hub-kubeconfig", opts.HubKubeconfig, "kubeconfig of the hub, as the klusterlet wrote it for the addon")
	flag.StringVar(&opts.ClusterName, "cluster-name", opts.ClusterName, "name of the managed cluster")
	flag.StringVar(&opts.AddonName, "addon-name", opts.AddonName, "name of the ManagedClusterAddOn")
	flag.StringVar(&opts.AddonNamespace, "addon-namespace", opts.AddonNamespace, "install namespace of the agent on the managed cluster")
	flag.StringVar(&watchNamespaces, "watch-namespaces", watchNamespaces, "comma-separated namespaces of the Argo CD Applications to report")
	flag.DurationVar(&opts.PublishDelay, "publish-delay", opts.PublishDelay, "coalescing window of changes before a publish")
	flag.DurationVar(&opts.ResyncPeriod, "resync-period", opts.ResyncPeriod, "period of a full resync")
	flag.StringVar(&opts.ArgoCDNamespace, "argocd-namespace", opts.ArgoCDNamespace, "namespace of Argo CD's application-controller and of its Redis password Secret")
	flag.StringVar(&opts.ArgoCDRedis.Addr, "argocd-redis", opts.ArgoCDRedis.Addr, "address of the Redis of Argo CD's application-controller, to read the apps' resource trees; empty: argocd-redis.<argocd-namespace>.svc:6379 (or the master the Sentinels of --argocd-sentinel name); \""+spoke.ArgoCDRedisDisabled+"\": do not read them")
	opts.ArgoCDRedis.AddFlags(flag.CommandLine, "Argo CD's Redis")
	flag.StringVar(&opts.PprofAddr, "pprof-bind-address", opts.PprofAddr, "address of net/http/pprof, for profiling, on loopback only (127.0.0.1:6060; kubectl port-forward reaches it); empty disables it")
	flag.BoolVar(&opts.ResourceProxy, "resource-proxy", opts.ResourceProxy, "serve the hub's resource proxy: live manifests, events, logs and actions, from the hub's Argo CD, on the resources of apps pulled from the hub, run as Argo CD's application-controller")
	flag.StringVar(&opts.SpokeKubeconfig, "kubeconfig", "", "kubeconfig of the managed cluster; empty: $KUBECONFIG, else the in-cluster config")
	klog.InitFlags(nil)
	flag.Parse()
	opts.WatchNamespaces = strings.Split(watchNamespaces, ",")
	if opts.SpokeKubeconfig == "" {
		opts.SpokeKubeconfig = os.Getenv("KUBECONFIG")
	}

	// SIGTERM (the kubelet) or SIGINT stops the agent; a second one exits at once.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	go func() {
		<-ctx.Done()
		stop()
	}()
	if err := spoke.Run(ctx, opts); err != nil {
		klog.ErrorS(err, "agent stopped")
		os.Exit(1)
	}
}
