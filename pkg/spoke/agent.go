// Package spoke is the agent that runs on each managed cluster. It watches the local Argo
// CD Applications that came from the hub and publishes their report on the hub, in the
// wire format of package clusterreport: every app, complete (each resource with its sync
// status and health, the app's conditions, revisions, operation state and the children of
// its resource tree from Argo CD's cache), in the ApplicationStatusSlices of its cluster
// namespace; and a summary of each app with the diagnostics of its prerequisites in the
// status of its ManagedClusterAddOn (docs/design.md, sections 3 and 4).
//
// The agent is event-driven: a change is published after Options.PublishDelay, bursts are
// coalesced, and nothing is written while nothing changed. It applies its conditions
// server-side with its own field manager, so that the conditions of the addon framework
// and the klusterlet are never touched, and a condition it no longer applies is removed.
// It retries with backoff while the hub is unreachable, and resyncs fully at start and
// every Options.ResyncPeriod.
//
// Files, by job: agent.go starts the agent and wires its parts; queue.go is the publish
// queue and its retry pacing; applications.go the local Applications (which came from the
// hub, what is kept of each, the informers, started once the API is served); hubaddon.go
// what the agent knows of its ManagedClusterAddOn; publish.go writes the report on it;
// statusslices.go writes the slices; argocdtree.go reads the resource trees from Argo CD's
// cache, and knows which to read again; operations.go runs the hub's operations on the
// spoke Applications; diagnostics.go the prerequisites; clients.go the few client-go
// pieces the agent links (dynamic and REST only).
//
// Its hub identity (pkg/hub/addon) may only read its own ManagedClusterAddOn and patch its
// status, write the ApplicationStatusSlices and Events of its cluster namespace. On the
// managed cluster it needs list, watch and patch (to run the hub's operations) on
// Applications in the watched namespaces, get on Argo CD's Redis password Secret, and
// its Lease in its install namespace.
package spoke

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/clusterreport"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/resourceproxy"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// FieldManager is the server-side apply field manager of the agent's conditions, and the
// user agent of its clients.
const FieldManager = "argocd-pull-agent"

// Run runs the agent until ctx is done, and then returns nil. It fails at once on invalid
// options or kubeconfigs; once running, it rides out the loss of the hub or of the
// managed cluster's apiserver.
func Run(ctx context.Context, opts Options) error {
	opts = opts.withDefaults()
	if err := opts.Validate(); err != nil {
		return fmt.Errorf("agent options: %w", err)
	}
	hubConfig, err := clientcmd.BuildConfigFromFlags("", opts.HubKubeconfig)
	if err != nil {
		return fmt.Errorf("load the hub kubeconfig %s: %w", opts.HubKubeconfig, err)
	}
	var spokeConfig *rest.Config
	if opts.SpokeKubeconfig == "" {
		spokeConfig, err = rest.InClusterConfig()
	} else {
		spokeConfig, err = clientcmd.BuildConfigFromFlags("", opts.SpokeKubeconfig)
	}
	if err != nil {
		return fmt.Errorf("load the managed cluster's kubeconfig: %w", err)
	}
	if opts.PprofAddr != "" {
		go servePprof(ctx, opts.PprofAddr)
	}
	return run(ctx, opts, hubConfig, spokeConfig, defaultTuning())
}

// agent is one running agent.
type agent struct {
	opts   Options
	tuning tuning
	log    logr.Logger

	spokeDynamic   dynamic.Interface
	spokeDiscovery discoveryClient
	hubAddons      addonClient
	recorder       *eventRecorder

	// queue holds reportKey while a publish is due; retry, its rate limiter, paces
	// retries.
	queue workqueue.TypedRateLimitingInterface[string]
	retry *retryBackoff
	// backingOff is set while a failed publish waits for its retry: changes then wait
	// for the retry too, instead of hammering an unreachable hub.
	backingOff atomic.Bool
	// fullResync makes the next publish read the ManagedClusterAddOn back from the hub.
	fullResync atomic.Bool

	// crd is the crdState of the Application API.
	crd atomic.Int32
	// appInformers watch the Applications, one per watched namespace; set once, when the
	// Application API is first found, and read only after appsSynced.
	appInformers []cache.SharedIndexInformer
	appsSynced   atomic.Bool

	// hub is the last known state of the ManagedClusterAddOn, from the agent's writes and
	// its watch.
	hubMu sync.Mutex
	hub   hubState

	// publisher holds the state of the publish loop; only the worker touches it.
	publisher publisher

	// slices are the agent's ApplicationStatusSlices on the hub; trees the apps'
	// resource trees from Argo CD's cache.
	slices *statusSlices
	trees  *trees
	// operations runs the hub's operations on the spoke Applications.
	operations *operations

	// wg tracks the agent's goroutines, so that run returns only once they have stopped.
	wg sync.WaitGroup
}

// goFunc runs f in a goroutine that run waits for.
func (a *agent) goFunc(f func()) {
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		f()
	}()
}

// run runs the agent with explicit client configurations and periods.
func run(ctx context.Context, opts Options, hubConfig, spokeConfig *rest.Config, tn tuning) error {
	log := klog.FromContext(ctx).WithValues("cluster", opts.ClusterName, "addon", opts.AddonName)
	hubConfig, spokeConfig = rest.CopyConfig(hubConfig), rest.CopyConfig(spokeConfig)
	hubConfig.UserAgent, spokeConfig.UserAgent = FieldManager, FieldManager

	a := &agent{opts: opts, tuning: tn, log: log}
	var err error
	if a.spokeDynamic, err = dynamic.NewForConfig(spokeConfig); err != nil {
		return fmt.Errorf("create the managed cluster dynamic client: %w", err)
	}
	if a.spokeDiscovery, err = newDiscoveryClient(spokeConfig); err != nil {
		return fmt.Errorf("create the managed cluster discovery client: %w", err)
	}
	hubDynamic, err := dynamic.NewForConfig(hubConfig)
	if err != nil {
		return fmt.Errorf("create the hub dynamic client: %w", err)
	}
	a.hubAddons = addonClient{r: hubDynamic.Resource(addonGVR).Namespace(opts.ClusterName)}

	// Events go to the hub, in the cluster namespace only.
	a.recorder = newEventRecorder(hubDynamic.Resource(eventGVR), corev1.EventSource{Component: FieldManager, Host: opts.ClusterName})

	a.retry = &retryBackoff{
		exponential: workqueue.NewTypedItemExponentialFailureRateLimiter[string](tn.retryInitial, tn.retryMax),
		reconnect:   tn.reconnectInterval,
	}
	a.queue = workqueue.NewTypedRateLimitingQueueWithConfig[string](a.retry, workqueue.TypedRateLimitingQueueConfig[string]{})
	a.publisher = newPublisher()
	a.operations = newOperations(a)

	ctx, cancel := context.WithCancel(ctx)
	defer a.wg.Wait()
	defer cancel()
	a.goFunc(func() { a.recorder.run(ctx) })

	// The hub's lease health prober watches this Lease on the managed cluster. Its
	// client has a timeout, so that a request that hangs does not stop the renewals.
	leaseConfig := rest.CopyConfig(spokeConfig)
	leaseConfig.Timeout = tn.requestTimeout
	leaseClient, err := dynamic.NewForConfig(leaseConfig)
	if err != nil {
		return fmt.Errorf("create the managed cluster lease client: %w", err)
	}
	a.goFunc(func() { renewLease(ctx, leaseClient.Resource(leaseGVR), opts.AddonName, opts.AddonNamespace) })

	if a.slices, err = newStatusSlices(hubDynamic, opts.ClusterName, opts.AddonName, a.onHubChange); err != nil {
		return err
	}
	a.goFunc(func() { a.slices.informer.RunWithContext(ctx) })
	a.goFunc(func() {
		// Where the agent reports its apps is known once the slices are listed: publish
		// then, even when the hub holds none yet.
		if cache.WaitForCacheSync(ctx.Done(), a.slices.informer.HasSynced) {
			a.onHubChange()
		}
	})
	var reader *treeReader
	if opts.ArgoCDRedis.Addr != ArgoCDRedisDisabled {
		secrets := dynamicSecrets{r: a.spokeDynamic.Resource(secretGVR).Namespace(opts.ArgoCDNamespace)}
		if reader, err = newTreeReader(opts.ArgoCDRedis, opts.ArgoCDNamespace, secrets, log); err != nil {
			return err
		}
		defer reader.Close()
		a.goFunc(func() {
			reader.Watch(ctx, func(namespace, name string) {
				a.trees.invalidate(clusterreport.AppKey(namespace, name))
				a.enqueue()
			})
		})
	}
	a.trees = newTrees(reader)

	// The hub identity may read only its own ManagedClusterAddOn.
	byName := fields.OneTermEqualSelector("metadata.name", opts.AddonName).String()
	hubInformer := newInformer(a.hubAddons.r, func(o *metav1.ListOptions) { o.FieldSelector = byName })
	if err := hubInformer.SetTransform(typedAddon); err != nil {
		return fmt.Errorf("transform the ManagedClusterAddOn: %w", err)
	}
	if _, err := hubInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { a.observeHubObject(obj) },
		UpdateFunc: func(_, obj any) { a.observeHubObject(obj) },
		DeleteFunc: func(obj any) { a.observeHubDeletion(obj) },
	}); err != nil {
		return fmt.Errorf("watch the ManagedClusterAddOn: %w", err)
	}
	a.goFunc(func() { hubInformer.RunWithContext(ctx) })

	a.goFunc(func() { a.watchApplicationAPI(ctx) })
	a.goFunc(func() { a.operations.run(ctx) })
	if opts.ResourceProxy {
		proxy, err := newResourceProxy(a, hubConfig, spokeConfig,
			"system:serviceaccount:"+opts.ArgoCDNamespace+":"+resourceproxy.SpokeServiceAccount)
		if err != nil {
			return err
		}
		a.goFunc(func() { proxy.run(ctx) })
	}
	a.goFunc(func() {
		a.tick(ctx, opts.ResyncPeriod, func() {
			a.fullResync.Store(true)
			a.trees.invalidateAll()
		})
	})
	a.goFunc(func() { a.tick(ctx, tn.diagnosticsInterval, nil) })
	a.goFunc(func() {
		<-ctx.Done()
		a.queue.ShutDown()
	})

	log.Info("agent started", "watchNamespaces", opts.WatchNamespaces, "publishDelay", opts.PublishDelay)
	for a.processNext(ctx) {
	}
	cancel()
	log.Info("agent stopped")
	return nil
}

// tick enqueues a publish every period until ctx is done, calling before first.
func (a *agent) tick(ctx context.Context, period time.Duration, before func()) {
	_ = wait.PollUntilContextCancel(ctx, period, false, func(context.Context) (bool, error) {
		if before != nil {
			before()
		}
		a.enqueue()
		return false, nil
	})
}
