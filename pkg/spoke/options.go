package spoke

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/argocdcache"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/clusterreport"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/pprofaddr"
)

// DefaultAddonNamespace is the agent's default install namespace.
const DefaultAddonNamespace = clusterreport.DefaultInstallNamespace

// Options configure the agent. DefaultOptions gives the defaults that the flags of
// cmd/agent start from; Run also fills in zero values with them.
type Options struct {
	// HubKubeconfig is the kubeconfig the klusterlet wrote for the addon: the hub identity,
	// allowed only in its own cluster namespace. Client certificates that the kubeconfig
	// names as files are reloaded when the klusterlet rotates them.
	HubKubeconfig string
	// SpokeKubeconfig connects to the managed cluster; empty means the in-cluster config.
	SpokeKubeconfig string
	// ClusterName is the managed cluster's name, and so the agent's namespace on the hub.
	ClusterName string
	// AddonName is the name of the ManagedClusterAddOn that carries the report, and of the
	// agent's Lease on the managed cluster.
	AddonName string
	// AddonNamespace is the agent's install namespace on the managed cluster, which holds
	// its Lease.
	AddonNamespace string
	// WatchNamespaces are the namespaces of the Argo CD Applications to report.
	WatchNamespaces []string
	// PublishDelay coalesces changes: the agent publishes this long after the first change
	// it has not published yet. A change on the managed cluster reaches the hub within
	// about PublishDelay plus one request.
	PublishDelay time.Duration
	// ResyncPeriod is the period of a full resync: the agent reads its ManagedClusterAddOn
	// back from the hub, checks its prerequisites, and publishes what differs.
	ResyncPeriod time.Duration
	// PprofAddr is the bind address of net/http/pprof, for profiling; empty disables it.
	// It must be a loopback address (pprofaddr.Validate): pprof has no authentication.
	PprofAddr string
	// ArgoCDNamespace is the namespace of Argo CD's application-controller: it names the
	// apps of that namespace in its cache, and holds the Redis password Secret.
	ArgoCDNamespace string
	// ArgoCDRedis says how to reach the Redis of Argo CD's application-controller, from
	// which the agent reads each app's resource tree: an empty Addr (without Sentinels)
	// means argocd-redis.<ArgoCDNamespace>.svc:6379, Argo CD's install, and
	// ArgoCDRedisDisabled disables the tree. Its Username is the Redis ACL user the agent
	// reads as; empty means Redis' default user, whose password (argocd-redis's) writes
	// the cache too. A user allowed GET on the tree keys and PSUBSCRIBE on their channel
	// only makes the agent's access read-only (docs/operations.md, "The agent's Redis
	// user"). Its PasswordSecret and PasswordKey name the Secret, in ArgoCDNamespace, and
	// its key that hold that user's password (Argo CD's argocd-redis, auth, for the
	// default user).
	ArgoCDRedis argocdcache.ClientOptions
	// ResourceProxy serves the hub's resource proxy (pkg/resourceproxy): the agent holds
	// a tunnel open to the hub, and runs each request for a resource of an app pulled from
	// the hub as Argo CD's application-controller.
	ResourceProxy bool
}

// ArgoCDRedisDisabled as Options.ArgoCDRedis.Addr makes the agent report apps without their
// resource tree, saying so on each.
const ArgoCDRedisDisabled = "none"

// DefaultOptions returns the defaults.
func DefaultOptions() Options {
	return Options{
		AddonName:       clusterreport.DefaultAddonName,
		AddonNamespace:  DefaultAddonNamespace,
		WatchNamespaces: []string{argoapp.DefaultAppNamespace},
		ArgoCDNamespace: argoapp.DefaultAppNamespace,
		PublishDelay:    200 * time.Millisecond,
		ResyncPeriod:    10 * time.Minute,
		ArgoCDRedis: argocdcache.ClientOptions{PasswordSecret: argocdcache.RedisSecret, PasswordKey: argocdcache.RedisPasswordKey,
			SentinelMaster: argocdcache.DefaultSentinelMaster},
		ResourceProxy: true,
	}
}

// withDefaults returns the options with zero values replaced by the defaults.
func (o Options) withDefaults() Options {
	d := DefaultOptions()
	if o.AddonName == "" {
		o.AddonName = d.AddonName
	}
	if o.AddonNamespace == "" {
		o.AddonNamespace = d.AddonNamespace
	}
	if len(o.WatchNamespaces) == 0 {
		o.WatchNamespaces = d.WatchNamespaces
	}
	if o.PublishDelay == 0 {
		o.PublishDelay = d.PublishDelay
	}
	if o.ResyncPeriod == 0 {
		o.ResyncPeriod = d.ResyncPeriod
	}
	if o.ArgoCDNamespace == "" {
		o.ArgoCDNamespace = d.ArgoCDNamespace
	}
	if o.ArgoCDRedis.Addr == "" && len(o.ArgoCDRedis.SentinelAddrs) == 0 {
		o.ArgoCDRedis.Addr = "argocd-redis." + o.ArgoCDNamespace + ".svc:6379"
	}
	if o.ArgoCDRedis.PasswordSecret == "" {
		o.ArgoCDRedis.PasswordSecret = d.ArgoCDRedis.PasswordSecret
	}
	if o.ArgoCDRedis.PasswordKey == "" {
		o.ArgoCDRedis.PasswordKey = d.ArgoCDRedis.PasswordKey
	}
	if o.ArgoCDRedis.SentinelMaster == "" {
		o.ArgoCDRedis.SentinelMaster = d.ArgoCDRedis.SentinelMaster
	}
	return o
}

// Validate reports options that cannot work.
func (o Options) Validate() error {
	var errs []error
	if o.HubKubeconfig == "" {
		errs = append(errs, errors.New("the hub kubeconfig is not set"))
	}
	for _, field := range []struct{ what, name string }{
		{"cluster name", o.ClusterName},
		{"addon namespace", o.AddonNamespace},
		{"Argo CD namespace", o.ArgoCDNamespace},
	} {
		if msgs := validation.IsDNS1123Label(field.name); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("the %s %q is not a namespace name: %s", field.what, field.name, strings.Join(msgs, "; ")))
		}
	}
	if msgs := validation.IsDNS1123Subdomain(o.AddonName); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("the addon name %q is not a valid name: %s", o.AddonName, strings.Join(msgs, "; ")))
	}
	if len(o.WatchNamespaces) == 0 {
		errs = append(errs, errors.New("no namespace to watch"))
	}
	for _, ns := range o.WatchNamespaces {
		if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("the watch namespace %q is not a namespace name: %s", ns, strings.Join(msgs, "; ")))
		}
	}
	if o.PublishDelay < 0 || o.PublishDelay > time.Second {
		errs = append(errs, fmt.Errorf("the publish delay %v is not between 0 and 1s", o.PublishDelay))
	}
	if err := pprofaddr.Validate(o.PprofAddr); err != nil {
		errs = append(errs, err)
	}
	if o.ResyncPeriod <= 0 {
		errs = append(errs, fmt.Errorf("the resync period %v is not positive", o.ResyncPeriod))
	}
	if o.ArgoCDRedis.Addr != ArgoCDRedisDisabled {
		if err := o.ArgoCDRedis.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("the Redis of Argo CD: %w", err))
		}
	}
	return errors.Join(errs...)
}

// tuning holds the agent's internal periods; tests shorten them.
type tuning struct {
	// crdCheckInterval is how often the agent asks the managed cluster whether it serves
	// the Application API.
	crdCheckInterval time.Duration
	// diagnosticsInterval is how often the agent re-evaluates the diagnostics that change
	// with time alone (the application-controller's liveness).
	diagnosticsInterval time.Duration
	// controllerStaleAfter is how old the newest reconciledAt of the reported apps may be
	// before the application-controller is reported as not reconciling. Argo CD refreshes
	// every app every 3 minutes (timeout.reconciliation) plus jitter.
	controllerStaleAfter time.Duration
	// retryInitial and retryMax bound the exponential backoff of failed publishes.
	retryInitial time.Duration
	retryMax     time.Duration
	// reconnectInterval caps that backoff while the hub does not answer at all: the
	// agent then retries every reconnectInterval to twice that (see retryBackoff).
	reconnectInterval time.Duration
	// requestTimeout bounds each request to the hub.
	requestTimeout time.Duration
	// summaryInterval is how long after the agent's last write of its ManagedClusterAddOn
	// a change of the summary condition alone waits (summaryWait).
	summaryInterval time.Duration
	// settleWait is how long the status slices may hold back the states an app passes
	// through on its own (publisher.holdBack): as long as the hub's status mirror waits
	// for them (argoapp.DefaultSettleWait).
	settleWait time.Duration
}

// defaultTuning returns the periods of a production agent.
func defaultTuning() tuning {
	return tuning{
		crdCheckInterval:     30 * time.Second,
		diagnosticsInterval:  30 * time.Second,
		controllerStaleAfter: 10 * time.Minute,
		retryInitial:         500 * time.Millisecond,
		retryMax:             30 * time.Second,
		reconnectInterval:    time.Second,
		requestTimeout:       30 * time.Second,
		summaryInterval:      5 * time.Second,
		settleWait:           argoapp.DefaultSettleWait,
	}
}
