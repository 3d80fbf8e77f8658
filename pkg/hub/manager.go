// Package hub is the addon-manager that runs on the OCM hub. Run starts one
// controller-runtime manager (leader election, metrics, health probes) and every hub
// controller in it; they all stop on one context.
package hub

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"open-cluster-management.io/addon-framework/pkg/addonmanager"
	addonclient "open-cluster-management.io/api/client/addon/clientset/versioned"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/clusterreport"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/addon"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/appsetreport"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/appstatus"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/clustersecret"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/hubcache"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/hubevents"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/observed"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/propagation"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/resourceproxy"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/resourcetree"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/sharedsettings"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/statusslices"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/pprofaddr"
)

// Options configure the hub addon-manager: what the manager process itself needs, the
// settings its controllers share, and each controller's own Settings, held under the
// controller's name. DefaultOptions gives the defaults that the flags of cmd/manager
// start from (AddFlags); the defaults of each controller's Settings are its package's
// DefaultSettings.
type Options struct {
	// MetricsAddr and ProbeAddr are the bind addresses of the metrics and health endpoints;
	// "0" disables one.
	MetricsAddr string
	ProbeAddr   string
	// MetricsSecure serves the metrics over HTTPS, to clients the hub apiserver
	// authenticates (TokenReview) and authorizes (SubjectAccessReview: get on the
	// non-resource URL /metrics), as controller-runtime's filters do. Off, they are plain
	// HTTP to anyone who reaches the port.
	MetricsSecure bool
	// PprofAddr is the bind address of net/http/pprof, for profiling; "0" (the default)
	// disables it. It must be a loopback address (pprofaddr.Validate): pprof has no
	// authentication.
	PprofAddr string
	// LeaderElect makes only one replica act at a time. LeaderElectionNamespace holds its
	// Lease; empty means the namespace the manager runs in.
	LeaderElect             bool
	LeaderElectionNamespace string
	// LeaseDuration, RenewDeadline and RetryPeriod time the leader election: a standby
	// takes over LeaseDuration after the leader's last renewal; the leader gives up (and
	// the process exits) when it could not renew for RenewDeadline; each tries every
	// RetryPeriod. The defaults are those of OCM's own hub controllers, so that the
	// leader rides out an apiserver outage of up to 107 s (docs/operations.md).
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration
	// KubeAPIQPS and KubeAPIBurst limit, on the client side, the requests per second of
	// each of the manager's clients to the hub apiserver, and their burst. A negative
	// KubeAPIQPS sets no limit: the apiserver's priority and fairness alone throttles.
	KubeAPIQPS   float64
	KubeAPIBurst int
	// GracefulShutdown bounds how long the controllers get to finish on shutdown.
	GracefulShutdown time.Duration

	// The settings that several controllers share, given to each in its Options.

	// AddonName is the name of the ClusterManagementAddOn and of every ManagedClusterAddOn
	// of this addon.
	AddonName string
	// ArgoCDNamespace is the hub Argo CD's namespace.
	ArgoCDNamespace string
	// WatchNamespaces limits the watch of hub Applications; empty means all namespaces.
	WatchNamespaces []string
	// HubClusterName names the hub's own ManagedCluster, never a pull target.
	HubClusterName string
	// Concurrency is the number of parallel reconciles of each controller. A reconcile
	// mostly waits for the apiserver, so this bounds how many Applications propagate at
	// once, not the CPU the manager uses.
	Concurrency int

	// Each controller's own settings.

	// Propagation: pkg/hub/propagation (Application -> ManifestWork).
	Propagation propagation.Settings
	// AppStatus: pkg/hub/appstatus (the status mirror).
	AppStatus appstatus.Settings
	// AppSetReport: pkg/hub/appsetreport (MulticlusterApplicationSetReport).
	AppSetReport appsetreport.Settings
	// ResourceTree: pkg/hub/resourcetree, how the manager writes the pulled apps'
	// resource trees into the hub Argo CD's cache, for its UI and API. An empty
	// Redis.Addr means resourcetree.DefaultRedisAddr in ArgoCDNamespace, unless Sentinels
	// are set; resourcetree.Disabled turns the writes off.
	ResourceTree resourcetree.Settings
	// ClusterSecret: pkg/hub/clustersecret, an Argo CD cluster Secret per opted-in
	// cluster. Off, the controller does not run.
	ClusterSecret clustersecret.Settings
	// Addon: pkg/hub/addon, the agent that the addon framework deploys to each cluster.
	Addon addon.Settings
	// ResourceProxy: pkg/hub/resourceproxy, the aggregated API through which the hub's
	// Argo CD reaches the live resources of pulled apps. Off, the cluster Secrets carry no
	// way to reach it.
	ResourceProxy resourceproxy.Settings
}

// metricsOptions serves the metrics; with MetricsSecure, over HTTPS with a self-signed
// certificate, behind authentication and authorization by the hub apiserver.
func metricsOptions(opts Options) metricsserver.Options {
	o := metricsserver.Options{BindAddress: opts.MetricsAddr}
	if opts.MetricsSecure {
		o.SecureServing = true
		o.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	return o
}

// DefaultKubeAPIQPS and DefaultKubeAPIBurst are the client-side limit of each of the
// manager's clients: by default none (a negative QPS), as controller-runtime's own
// default, and the hub apiserver's priority and fairness throttles. client-go's default
// (5 per second, burst 10) would hold propagation to a few Applications a second, and
// even 1000 per second (burst 2000) throttled the manager's first pass over 1,000
// clusters in the benchmark; an operator who wants a ceiling sets one
// (docs/operations.md), and the burst then applies.
const (
	DefaultKubeAPIQPS   = -1
	DefaultKubeAPIBurst = 2000
)

// DefaultOptions returns the defaults: those of the manager and of the settings its
// controllers share here, and each controller's DefaultSettings. A controller's Options
// have no defaults of their own: they are all required.
func DefaultOptions() Options {
	return Options{
		MetricsAddr:      ":8443",
		MetricsSecure:    true,
		ProbeAddr:        ":8081",
		PprofAddr:        "0",
		LeaderElect:      true,
		LeaseDuration:    137 * time.Second,
		RenewDeadline:    107 * time.Second,
		RetryPeriod:      26 * time.Second,
		KubeAPIQPS:       DefaultKubeAPIQPS,
		KubeAPIBurst:     DefaultKubeAPIBurst,
		GracefulShutdown: 30 * time.Second,
		AddonName:        clusterreport.DefaultAddonName,
		ArgoCDNamespace:  "argocd",
		// The name of the hub's own ManagedCluster on ACM hubs.
		HubClusterName: "local-cluster",
		Concurrency:    16,
		Propagation:    propagation.DefaultSettings(),
		AppStatus:      appstatus.DefaultSettings(),
		AppSetReport:   appsetreport.DefaultSettings(),
		ResourceTree:   resourcetree.DefaultSettings(),
		ClusterSecret:  clustersecret.DefaultSettings(),
		Addon:          addon.DefaultSettings(),
		ResourceProxy:  resourceproxy.DefaultSettings(),
	}
}

// Validate reports options that cannot work.
func (o Options) Validate() error {
	errs := []error{
		sharedsettings.ValidateAddonName(o.AddonName),
		sharedsettings.ValidateArgoCDNamespace(o.ArgoCDNamespace),
		sharedsettings.ValidateConcurrency(o.Concurrency),
		sharedsettings.ValidateHubClusterName(o.HubClusterName),
	}
	if o.KubeAPIQPS == 0 || o.KubeAPIQPS > 0 && o.KubeAPIBurst < 1 {
		errs = append(errs, fmt.Errorf("kube API QPS %v and burst %d: the QPS must be positive with a positive burst, or negative for no client-side limit",
			o.KubeAPIQPS, o.KubeAPIBurst))
	}
	if err := pprofaddr.Validate(o.PprofAddr); err != nil {
		errs = append(errs, err)
	}
	for _, settings := range []interface{ Validate() error }{o.Addon, o.AppSetReport, o.AppStatus, o.ResourceProxy} {
		if err := settings.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	if trees, ok := o.ResourceTreeOptions(); ok {
		if err := trees.Validate(); err != nil { // resourcetree.Settings.Validate
			errs = append(errs, err)
		}
	}
	if o.LeaderElect {
		// client-go's leader election needs LeaseDuration > RenewDeadline > 1.2 RetryPeriod.
		if o.RetryPeriod <= 0 || o.RenewDeadline <= o.RetryPeriod*6/5 || o.LeaseDuration <= o.RenewDeadline {
			errs = append(errs, fmt.Errorf("leader election: lease duration %v, renew deadline %v and retry period %v must satisfy lease duration > renew deadline > 1.2 x retry period > 0",
				o.LeaseDuration, o.RenewDeadline, o.RetryPeriod))
		}
	}
	return errors.Join(errs...)
}

// CacheScope is what the manager's cache keeps (hubcache.Options).
func (o Options) CacheScope() hubcache.Scope {
	return hubcache.Scope{AddonName: o.AddonName, ArgoCDNamespace: o.ArgoCDNamespace, WatchNamespaces: o.WatchNamespaces,
		ReportFieldManager: appsetreport.FieldManager}
}

// PropagationOptions are the options of the propagation controllers.
func (o Options) PropagationOptions() propagation.Options {
	return propagation.Options{
		AddonName: o.AddonName, ArgoCDNamespace: o.ArgoCDNamespace, WatchNamespaces: o.WatchNamespaces,
		Concurrency: o.Concurrency, HubClusterName: o.HubClusterName, Settings: o.Propagation,
	}
}

// AppSetReportOptions are the options of the ApplicationSet report controller.
func (o Options) AppSetReportOptions() appsetreport.Options {
	return appsetreport.Options{
		AddonName: o.AddonName, WatchNamespaces: o.WatchNamespaces, Concurrency: o.Concurrency, Settings: o.AppSetReport,
	}
}

// AppStatusOptions are the options of the status mirror.
func (o Options) AppStatusOptions() appstatus.Options {
	return appstatus.Options{
		AddonName: o.AddonName, WatchNamespaces: o.WatchNamespaces, Concurrency: o.Concurrency, Settings: o.AppStatus,
	}
}

// ResourceTreeOptions are the options of the resource tree controller; ok is false when
// it is disabled.
func (o Options) ResourceTreeOptions() (opts resourcetree.Options, ok bool) {
	settings := o.ResourceTree
	if !settings.Enabled() {
		return resourcetree.Options{}, false
	}
	if settings.Redis.Addr == "" && len(settings.Redis.SentinelAddrs) == 0 {
		settings.Redis.Addr = resourcetree.DefaultRedisAddr(o.ArgoCDNamespace)
	}
	return resourcetree.Options{
		AddonName: o.AddonName, ArgoCDNamespace: o.ArgoCDNamespace, WatchNamespaces: o.WatchNamespaces,
		Concurrency: o.Concurrency, HubClusterName: o.HubClusterName, Settings: settings,
	}, true
}

// ClusterSecretOptions are the options of the cluster Secret controller; ok is false
// when it is disabled. With the resource proxy on, the Secrets reach it through the hub
// apiserver at cfg's URL (unless the settings name another) with cfg's CA.
func (o Options) ClusterSecretOptions(cfg *rest.Config) (opts clustersecret.Options, ok bool, err error) {
	if !o.ClusterSecret.Enabled {
		return clustersecret.Options{}, false, nil
	}
	opts = clustersecret.Options{AddonName: o.AddonName, ArgoCDNamespace: o.ArgoCDNamespace, Concurrency: o.Concurrency}
	if o.ResourceProxy.Enabled() {
		access := clustersecret.ProxyAccess{HubServer: o.ResourceProxy.HubServer, TokenSecret: o.ResourceProxy.ClientTokenSecret}
		if access.HubServer == "" {
			access.HubServer = cfg.Host
		}
		if access.CAData, err = hubCA(cfg); err != nil {
			return clustersecret.Options{}, false, err
		}
		opts.ResourceProxy = &access
	}
	return opts, true, nil
}

// hubCA returns the PEM of the CA with which cfg trusts the hub apiserver.
func hubCA(cfg *rest.Config) ([]byte, error) {
	if len(cfg.CAData) > 0 || cfg.CAFile == "" {
		return cfg.CAData, nil
	}
	data, err := os.ReadFile(cfg.CAFile)
	if err != nil {
		return nil, fmt.Errorf("read the hub apiserver's CA: %w", err)
	}
	return data, nil
}

// AddonOptions are the options of the addon; recorder records the Events of the agents'
// certificate requests.
func (o Options) AddonOptions(recorder events.EventRecorder) addon.Options {
	return addon.Options{
		AddonName: o.AddonName,
		// The managed clusters' Argo CD runs in the namespace of the hub's: the pulled apps
		// land there by default, and the agent reads its Redis there.
		ArgoCDNamespace: o.ArgoCDNamespace,
		Recorder:        recorder,
		Settings:        o.Addon,
	}
}

// Run runs the hub addon-manager until ctx ends.
func Run(ctx context.Context, cfg *rest.Config, opts Options) error {
	if err := opts.Validate(); err != nil {
		return fmt.Errorf("invalid options: %w", err)
	}
	scheme, err := hubcache.NewScheme()
	if err != nil {
		return err
	}
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = float32(opts.KubeAPIQPS), opts.KubeAPIBurst
	gracefulShutdown := opts.GracefulShutdown
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                        scheme,
		Cache:                         hubcache.Options(opts.CacheScope()),
		Metrics:                       metricsOptions(opts),
		HealthProbeBindAddress:        opts.ProbeAddr,
		PprofBindAddress:              opts.PprofAddr,
		LeaderElection:                opts.LeaderElect,
		LeaderElectionID:              opts.AddonName + "-addon-manager",
		LeaderElectionNamespace:       opts.LeaderElectionNamespace,
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 &opts.LeaseDuration,
		RenewDeadline:                 &opts.RenewDeadline,
		RetryPeriod:                   &opts.RetryPeriod,
		GracefulShutdownTimeout:       &gracefulShutdown,
	})
	if err != nil {
		return fmt.Errorf("create controller manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("informers", cacheSynced(mgr.GetCache())); err != nil {
		return err
	}
	c, err := hubcache.NewClient(mgr)
	if err != nil {
		return err
	}
	if err := SetupControllers(mgr, c, cfg, opts); err != nil {
		return err
	}
	addonMgr, agentAddon, err := newAddonManager(cfg, opts, hubevents.Recorder(mgr, addon.CSRApproverName))
	if err != nil {
		return err
	}
	errs := make(chan error, 1)
	// The addon framework acts only on the elected replica, and stops with the rest.
	go func() {
		select {
		case <-mgr.Elected():
			agentAddon.Start(ctx)
			if err := addon.StartFramework(ctx, cfg, addonMgr, []string{opts.AddonName}, mgr.GetCache()); err != nil {
				errs <- fmt.Errorf("start the addon framework: %w", err)
			}
		case <-ctx.Done():
		}
	}()
	log := ctrl.LoggerFrom(ctx)
	log.Info("starting the hub addon-manager", "addon", opts.AddonName,
		"leaderElection", opts.LeaderElect, "concurrency", opts.Concurrency)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case err := <-errs:
			log.Error(err, "stopping the manager")
			cancel()
		case <-ctx.Done():
		}
	}()
	return mgr.Start(ctx)
}

// cacheSynced is ready once every informer of the manager's cache has synced: a manager
// that has just started (or been elected) reads a complete cache before it is ready.
func cacheSynced(informers cache.Informers) healthz.Checker {
	return func(req *http.Request) error {
		ctx, cancel := context.WithTimeout(req.Context(), time.Second)
		defer cancel()
		if !informers.WaitForCacheSync(ctx) {
			return errors.New("the informers have not synced yet")
		}
		return nil
	}
}

// SetupControllers registers every hub controller with mgr, whose scheme and cache come
// from hubcache, and the resource proxy (its server, and the hub apiserver's cfg for the
// cluster Secrets), and hands each what they share: c, the client that reads through the
// manager's cache (hubcache.NewClient), and one decoder of the agents' reports, which
// reads their status slices first (statusslices.Reader, through c).
func SetupControllers(mgr ctrl.Manager, c client.Client, cfg *rest.Config, opts Options) error {
	slices := statusslices.NewReader(c, opts.AddonName)
	decoder := observed.NewDecoder().WithSlices(slices)
	var managedResources resourcetree.ManagedResourcesSource
	if opts.ResourceProxy.Enabled() {
		proxy := resourceproxy.NewRunnable(cfg, opts.ResourceProxy)
		if err := mgr.Add(proxy); err != nil {
			return fmt.Errorf("set up the resource proxy: %w", err)
		}
		managedResources = proxy.Server()
	}
	if err := propagation.Setup(mgr, c, slices, opts.PropagationOptions()); err != nil {
		return fmt.Errorf("set up propagation: %w", err)
	}
	// Off, the manager holds no rights on the cluster Secrets (the chart grants them with
	// the feature), so it neither watches nor touches them.
	secretOpts, ok, err := opts.ClusterSecretOptions(cfg)
	if err != nil {
		return err
	}
	if ok {
		if err := clustersecret.Setup(mgr, secretOpts); err != nil {
			return fmt.Errorf("set up cluster secrets: %w", err)
		}
	}
	if err := appsetreport.Setup(mgr, c, decoder, opts.AppSetReportOptions()); err != nil {
		return fmt.Errorf("set up the ApplicationSet reports: %w", err)
	}
	if err := appstatus.Setup(mgr, c, decoder, opts.AppStatusOptions()); err != nil {
		return fmt.Errorf("set up the Application status mirror: %w", err)
	}
	if treeOpts, ok := opts.ResourceTreeOptions(); ok {
		treeOpts.ManagedResources = managedResources
		if err := resourcetree.Setup(mgr, c, slices, treeOpts); err != nil {
			return fmt.Errorf("set up the resource trees: %w", err)
		}
	}
	return nil
}

// newAddonManager registers the agent with addon-framework's manager, and returns both.
// recorder records the Events of the agents' certificate requests.
func newAddonManager(cfg *rest.Config, opts Options, recorder events.EventRecorder) (addonmanager.AddonManager, *addon.AgentAddon, error) {
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	addons, err := addonclient.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	agentAddon, err := addon.NewAgentAddon(opts.AddonOptions(recorder), kube, addons)
	if err != nil {
		return nil, nil, err
	}
	addonMgr, err := addonmanager.New(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("create the addon framework manager: %w", err)
	}
	if err := addonMgr.AddAgent(agentAddon); err != nil {
		return nil, nil, err
	}
	return addonMgr, agentAddon, nil
}
