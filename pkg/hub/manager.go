// Package hub is the addon-manager that runs on the OCM hub. Run starts one
// controller-runtime manager (leader election, metrics, health probes) and every hub
// controller in it; they all stop on one context.
package hub

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
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

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argocdcache"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/clusterreport"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/addon"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/appsetreport"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/appstatus"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/clustersecret"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/hubcache"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/observed"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/propagation"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/resourcetree"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/statusslices"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/pprofaddr"
)

// Options configure the hub addon-manager. DefaultOptions gives the defaults that the
// flags of cmd/manager start from.
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
	// AddonName is the name of the ClusterManagementAddOn and of every ManagedClusterAddOn
	// of this addon.
	AddonName string
	// ArgoCDNamespace is the hub Argo CD's namespace.
	ArgoCDNamespace string
	// WatchNamespaces limits the watch of hub Applications; empty means all namespaces.
	WatchNamespaces []string
	// RequirePlacementBinding propagates an Application only when a PlacementDecision in
	// its namespace selects the target cluster.
	RequirePlacementBinding bool
	// HubClusterName names the hub's own ManagedCluster, never a pull target.
	HubClusterName string
	// OptOutGracePeriod is how long the works of an Application are kept once its
	// cluster is no longer a target (see propagation.Options.OptOutGracePeriod).
	OptOutGracePeriod time.Duration
	// TakeOverForeignWorks adopts the pulled works that another controller made (see
	// propagation.Options.TakeOverForeignWorks).
	TakeOverForeignWorks bool
	// ClusterSecrets keeps an Argo CD cluster Secret per opted-in cluster
	// (pkg/hub/clustersecret). Off, the controller does not run, and the Secrets it made
	// before stay until someone deletes them (the chart then grants no right on them).
	ClusterSecrets bool
	// Concurrency is the number of parallel reconciles of each controller. A reconcile
	// mostly waits for the apiserver, so this bounds how many Applications propagate at
	// once, not the CPU the manager uses.
	Concurrency int
	// KubeAPIQPS and KubeAPIBurst limit, on the client side, the requests per second of
	// each of the manager's clients to the hub apiserver, and their burst. A negative
	// KubeAPIQPS sets no limit: the apiserver's priority and fairness alone throttles.
	KubeAPIQPS   float32
	KubeAPIBurst int
	// ReportWriteInterval paces the writes of one MulticlusterApplicationSetReport (see
	// appsetreport.Options.WriteInterval).
	ReportWriteInterval time.Duration
	// ReportBudgetBytes bounds each MulticlusterApplicationSetReport, as JSON with its
	// metadata; a report over it is cut, its counts exact (see
	// appsetreport.Options.BudgetBytes). The default, 1 MiB, stays a third below etcd's
	// default limit of 1.5 MiB per object, for what other writers may add (labels,
	// annotations, their managedFields).
	ReportBudgetBytes int64
	// MaxStatusSlicesPerCluster, when above 0, bounds the ApplicationStatusSlices each
	// cluster's agent may hold on the hub: a ResourceQuota in each cluster namespace
	// (addon.RecommendedMaxStatusSlicesPerCluster by default); 0 keeps none.
	MaxStatusSlicesPerCluster int
	// ProgressingHold is how long the status mirror keeps a Progressing written before
	// Healthy, so that the ApplicationSet controller's RollingSync sees it.
	ProgressingHold time.Duration
	// AgentImage is the image of the agent the addon framework deploys to each cluster.
	AgentImage string
	// AgentImagePullPolicy is the agent container's imagePullPolicy.
	AgentImagePullPolicy string
	// AgentImagePullSecrets name the Secrets, in the agent's namespace on each managed
	// cluster, that its Pod pulls the image with.
	AgentImagePullSecrets []string
	// AgentWatchNamespaces are the namespaces of the managed clusters' Argo CD, where the
	// agent watches Applications.
	AgentWatchNamespaces []string
	// GracefulShutdown bounds how long the controllers get to finish on shutdown.
	GracefulShutdown time.Duration
	// ArgoCDRedis is how the manager writes the pulled apps' resource trees into the hub
	// Argo CD's cache, for its UI and API (pkg/hub/resourcetree). An empty Addr means
	// argocd-redis.<ArgoCDNamespace>.svc:6379, a stock install's, unless Sentinels are set;
	// ResourceTreesDisabled turns the writes off.
	ArgoCDRedis resourcetree.RedisOptions
}

// ResourceTreesDisabled as Options.ArgoCDRedis.Addr: the manager does not write the
// pulled apps' resource trees into the hub Argo CD's cache.
const ResourceTreesDisabled = "none"

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

// DefaultAgentImage is the agent's image unless a flag or a registry override says
// otherwise: the release's image, whose tag is the chart's appVersion (test/chart checks).
const DefaultAgentImage = "quay.io/ocm-gitops/argocd-pull-addon:0.1.0"

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

// DefaultOptions returns the defaults: the only defaults of the hub's options; the
// controllers' options are all required.
func DefaultOptions() Options {
	return Options{
		MetricsAddr:             ":8443",
		MetricsSecure:           true,
		ProbeAddr:               ":8081",
		PprofAddr:               "0",
		LeaderElect:             true,
		LeaseDuration:           137 * time.Second,
		RenewDeadline:           107 * time.Second,
		RetryPeriod:             26 * time.Second,
		AddonName:               clusterreport.DefaultAddonName,
		ArgoCDNamespace:         "argocd",
		RequirePlacementBinding: true,
		// The name of the hub's own ManagedCluster on ACM hubs.
		HubClusterName:      "local-cluster",
		OptOutGracePeriod:   time.Hour,
		ClusterSecrets:      true,
		Concurrency:         16,
		KubeAPIQPS:          DefaultKubeAPIQPS,
		KubeAPIBurst:        DefaultKubeAPIBurst,
		ReportWriteInterval: time.Second,
		ReportBudgetBytes:   1 << 20,
		// What one cluster may store on the hub: docs/operations.md.
		MaxStatusSlicesPerCluster: addon.RecommendedMaxStatusSlicesPerCluster,
		ProgressingHold:           time.Second,
		AgentImage:                DefaultAgentImage,
		AgentImagePullPolicy:      string(corev1.PullIfNotPresent),
		AgentWatchNamespaces:      []string{"argocd"},
		GracefulShutdown:          30 * time.Second,
		ArgoCDRedis: resourcetree.RedisOptions{
			ClientOptions: argocdcache.ClientOptions{PasswordSecret: argocdcache.RedisSecret, PasswordKey: argocdcache.RedisPasswordKey,
				SentinelMaster: argocdcache.DefaultSentinelMaster},
			Compression: argocdcache.CompressionGzip, Expiration: argocdcache.DefaultExpiration,
		},
	}
}

// Validate reports options that cannot work.
func (o Options) Validate() error {
	var errs []error
	if o.AddonName == "" {
		errs = append(errs, errors.New("the addon name is empty"))
	}
	if o.ArgoCDNamespace == "" {
		errs = append(errs, errors.New("the Argo CD namespace is empty"))
	}
	if o.AgentImage == "" {
		errs = append(errs, errors.New("the agent image is empty"))
	}
	switch corev1.PullPolicy(o.AgentImagePullPolicy) {
	case corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
	default:
		errs = append(errs, fmt.Errorf("the agent image pull policy %q is not Always, IfNotPresent or Never", o.AgentImagePullPolicy))
	}
	if len(o.AgentWatchNamespaces) == 0 {
		errs = append(errs, errors.New("the agent watches no namespace"))
	}
	if o.Concurrency < 1 {
		errs = append(errs, fmt.Errorf("concurrency is %d; it must be at least 1", o.Concurrency))
	}
	if o.HubClusterName == "" {
		errs = append(errs, errors.New("the hub cluster name is empty"))
	}
	if o.ReportBudgetBytes < appsetreport.MinBudgetBytes {
		errs = append(errs, fmt.Errorf("the report budget is %d bytes; it must be at least %d", o.ReportBudgetBytes, appsetreport.MinBudgetBytes))
	}
	if o.MaxStatusSlicesPerCluster < 0 {
		errs = append(errs, fmt.Errorf("the status slices per cluster are %d; they must be 0 (no quota) or more", o.MaxStatusSlicesPerCluster))
	}
	if o.KubeAPIQPS == 0 || o.KubeAPIQPS > 0 && o.KubeAPIBurst < 1 {
		errs = append(errs, fmt.Errorf("kube API QPS %v and burst %d: the QPS must be positive with a positive burst, or negative for no client-side limit",
			o.KubeAPIQPS, o.KubeAPIBurst))
	}
	if err := pprofaddr.Validate(o.PprofAddr); err != nil {
		errs = append(errs, err)
	}
	if o.ProgressingHold <= 0 {
		errs = append(errs, fmt.Errorf("the progressing hold is %v; it must be positive", o.ProgressingHold))
	}
	if trees, ok := o.ResourceTreeOptions(); ok {
		if err := trees.Redis.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("the hub Argo CD's Redis: %w", err))
		}
		if _, err := argocdcache.ParseCompression(string(o.ArgoCDRedis.Compression)); err != nil {
			errs = append(errs, fmt.Errorf("the hub Argo CD's Redis: %w", err))
		}
		if o.ArgoCDRedis.Expiration < 2*time.Second {
			errs = append(errs, fmt.Errorf("the hub Argo CD's cache expiration is %v; it must be at least 2s", o.ArgoCDRedis.Expiration))
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
		RequirePlacementBinding: o.RequirePlacementBinding, Concurrency: o.Concurrency,
		HubClusterName: o.HubClusterName, OptOutGracePeriod: o.OptOutGracePeriod,
		TakeOverForeignWorks: o.TakeOverForeignWorks,
	}
}

// AppSetReportOptions are the options of the ApplicationSet report controller.
func (o Options) AppSetReportOptions() appsetreport.Options {
	return appsetreport.Options{
		AddonName: o.AddonName, WatchNamespaces: o.WatchNamespaces, Concurrency: o.Concurrency,
		WriteInterval: o.ReportWriteInterval, BudgetBytes: o.ReportBudgetBytes,
	}
}

// AppStatusOptions are the options of the status mirror.
func (o Options) AppStatusOptions() appstatus.Options {
	return appstatus.Options{
		AddonName: o.AddonName, WatchNamespaces: o.WatchNamespaces, Concurrency: o.Concurrency,
		ProgressingHold: o.ProgressingHold,
	}
}

// ResourceTreeOptions are the options of the resource tree controller; ok is false when
// it is disabled.
func (o Options) ResourceTreeOptions() (opts resourcetree.Options, ok bool) {
	redis := o.ArgoCDRedis
	if redis.Addr == ResourceTreesDisabled {
		return resourcetree.Options{}, false
	}
	if redis.Addr == "" && len(redis.SentinelAddrs) == 0 {
		redis.Addr = "argocd-redis." + o.ArgoCDNamespace + ".svc:6379"
	}
	return resourcetree.Options{
		AddonName: o.AddonName, ArgoCDNamespace: o.ArgoCDNamespace, WatchNamespaces: o.WatchNamespaces,
		Concurrency: o.Concurrency, Redis: redis, HubClusterName: o.HubClusterName,
	}, true
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
	cfg.QPS, cfg.Burst = opts.KubeAPIQPS, opts.KubeAPIBurst
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
	if err := SetupControllers(mgr, c, opts); err != nil {
		return err
	}
	addonMgr, agentAddon, err := newAddonManager(cfg, opts, mgr.GetEventRecorder(addon.CSRApproverName))
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
// from hubcache, and hands each what they share: c, the client that reads through the
// manager's cache (hubcache.NewClient), and one decoder of the agents' reports, which
// reads their status slices first (statusslices.Reader, through c).
func SetupControllers(mgr ctrl.Manager, c client.Client, opts Options) error {
	slices := statusslices.NewReader(c, opts.AddonName)
	decoder := observed.NewDecoder().WithSlices(slices)
	if err := propagation.Setup(mgr, c, slices, opts.PropagationOptions()); err != nil {
		return fmt.Errorf("set up propagation: %w", err)
	}
	// Off, the manager holds no rights on the cluster Secrets (the chart grants them with
	// the feature), so it neither watches nor touches them.
	if opts.ClusterSecrets {
		if err := clustersecret.Setup(mgr, clustersecret.Options{
			AddonName: opts.AddonName, ArgoCDNamespace: opts.ArgoCDNamespace, Concurrency: opts.Concurrency,
		}); err != nil {
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
	agentAddon, err := addon.NewAgentAddon(addon.Options{
		AddonName: opts.AddonName, AgentImage: opts.AgentImage, WatchNamespaces: opts.AgentWatchNamespaces,
		AgentImagePullPolicy: corev1.PullPolicy(opts.AgentImagePullPolicy), AgentImagePullSecrets: opts.AgentImagePullSecrets,
		// The managed clusters' Argo CD runs in the namespace of the hub's: the pulled apps
		// land there by default, and the agent reads its Redis there.
		ArgoCDNamespace:           opts.ArgoCDNamespace,
		Recorder:                  recorder,
		MaxStatusSlicesPerCluster: opts.MaxStatusSlicesPerCluster,
	}, kube, addons)
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
