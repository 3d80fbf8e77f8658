// Package spoke is the agent that runs on each managed cluster. It watches the local Argo
// CD Applications that came from the hub and publishes their report (sync, health,
// revisions, operation, resources and errors) on the status of its ManagedClusterAddOn on
// the hub, in the wire format of package clusterreport, together with diagnostics of its
// prerequisites.
//
// The agent is event-driven: a change is published after Options.PublishDelay, bursts are
// coalesced, and nothing is written while nothing changed. It applies its conditions
// server-side with its own field manager, so that the conditions of the addon framework
// and the klusterlet are never touched, and a condition it no longer applies is removed.
// It retries with backoff while the hub is unreachable, and resyncs fully at start and
// every Options.ResyncPeriod.
//
// On the hub it needs only: get, list and watch on its own ManagedClusterAddOn, patch on
// its status, and create and patch on Events, all in its cluster namespace. On the
// managed cluster it needs list and watch on Applications in the watched namespaces,
// and its Lease in its install namespace.
package spoke

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	addonv1beta1 "open-cluster-management.io/api/addon/v1beta1"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
)

// FieldManager is the server-side apply field manager of the agent's conditions, and the
// user agent of its clients.
const FieldManager = "argocd-pull-agent"

// reportKey is the only item of the agent's work queue: there is one report.
const reportKey = "report"

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
	var reader *treeReader
	if opts.ArgoCDRedis != ArgoCDRedisDisabled {
		secrets := dynamicSecrets{r: a.spokeDynamic.Resource(secretGVR).Namespace(opts.ArgoCDNamespace)}
		reader = newTreeReader(opts.ArgoCDRedis, opts.ArgoCDNamespace, secrets, log)
		defer reader.Close()
		a.goFunc(func() {
			reader.Watch(ctx, func(namespace, name string) {
				a.trees.invalidate(namespace + "/" + name)
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
	ticker := time.NewTicker(period)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			if before != nil {
				before()
			}
			a.enqueue()
		}
	}
}

// enqueue asks for a publish after the coalescing delay, unless a failed publish is
// waiting for its retry.
func (a *agent) enqueue() {
	if !a.backingOff.Load() {
		a.queue.AddAfter(reportKey, a.opts.PublishDelay)
	}
}

// processNext publishes once for a queued item. It returns false when the queue is shut
// down.
func (a *agent) processNext(ctx context.Context) bool {
	key, shutdown := a.queue.Get()
	if shutdown {
		return false
	}
	defer a.queue.Done(key)
	err := a.publish(ctx)
	if err == nil {
		a.queue.Forget(key)
		a.backingOff.Store(false)
		return true
	}
	if ctx.Err() != nil {
		return false
	}
	a.backingOff.Store(true)
	a.retry.unanswered.Store(hubDidNotAnswer(err))
	if errors.Is(err, errAddonMissing) {
		a.log.Info("waiting for the ManagedClusterAddOn to exist", "retries", a.queue.NumRequeues(key))
	} else {
		a.log.Error(err, "publish the report; retrying", "retries", a.queue.NumRequeues(key))
	}
	a.queue.AddRateLimited(key)
	return true
}

// retryBackoff paces the retries of a failed publish. While the hub answers with an
// error (it is overloaded, refuses, or the object is missing), the wait grows
// exponentially from retryInitial to retryMax, to spare the hub. While the hub does not
// answer at all (connection refused or reset, no response in time), nothing reaches it,
// so a retry costs it nothing: the wait is then at most reconnect, jittered up to twice
// that, so that the report converges within seconds of the hub coming back, however long
// it was away. The hub's own watch cannot be relied on for that: client-go's reflector
// backs off up to 30 s too.
type retryBackoff struct {
	exponential workqueue.TypedRateLimiter[string]
	reconnect   time.Duration
	// unanswered is whether the last failure got no answer from the hub.
	unanswered atomic.Bool
}

func (b *retryBackoff) When(item string) time.Duration {
	d := b.exponential.When(item)
	if b.unanswered.Load() {
		d = min(d, wait.Jitter(b.reconnect, 1))
	}
	return d
}

func (b *retryBackoff) Forget(item string) { b.exponential.Forget(item) }

func (b *retryBackoff) NumRequeues(item string) int { return b.exponential.NumRequeues(item) }

// hubDidNotAnswer reports whether a publish failed without any HTTP response from the
// hub: client-go returns transport failures (dial, TLS, reset, timeout) as *url.Error,
// and every answer of the hub as an API status.
func hubDidNotAnswer(err error) bool {
	var urlErr *url.Error
	return errors.As(err, &urlErr)
}

// watchApplicationAPI checks, at start and every crdCheckInterval, whether the managed
// cluster serves the Application API. It starts the Application informers when it first
// does, and asks for a publish whenever the answer changes.
func (a *agent) watchApplicationAPI(ctx context.Context) {
	ticker := time.NewTicker(a.tuning.crdCheckInterval)
	defer ticker.Stop()
	started := false
	for {
		state, err := a.checkApplicationAPI(ctx)
		if err != nil {
			a.log.Error(err, "ask the managed cluster for the Application API")
		} else if previous := crdState(a.crd.Swap(int32(state))); previous != state {
			a.log.Info("Application API", "served", state == crdPresent)
			if state == crdPresent && !started {
				started = true
				a.startApplicationInformers(ctx)
			}
			a.enqueue()
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// checkApplicationAPI asks discovery whether the managed cluster serves Applications.
func (a *agent) checkApplicationAPI(ctx context.Context) (crdState, error) {
	resources, err := a.spokeDiscovery.ServerResourcesForGroupVersion(ctx, argoapp.GroupVersion)
	if apierrors.IsNotFound(err) {
		return crdMissing, nil
	}
	if err != nil {
		return crdUnknown, fmt.Errorf("discover %s: %w", argoapp.GroupVersion, err)
	}
	for _, r := range resources.APIResources {
		if r.Name == argoapp.ResourceApplications {
			return crdPresent, nil
		}
	}
	return crdMissing, nil
}

// startApplicationInformers starts one Application informer per watched namespace, and
// asks for a publish once all have synced.
func (a *agent) startApplicationInformers(ctx context.Context) {
	var synced []cache.InformerSynced
	for _, ns := range a.opts.WatchNamespaces {
		informer := newInformer(a.spokeDynamic.Resource(argoapp.ApplicationGVR).Namespace(ns), noTweak)
		// The agent keeps of each Application its identity and its decoded report.
		if err := informer.SetTransform(compactApplication); err != nil {
			a.log.Error(err, "set the Application informer transform", "namespace", ns)
		}
		if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { a.onApplication(obj) },
			UpdateFunc: func(old, obj any) { a.onApplication(old, obj) },
			DeleteFunc: func(obj any) { a.onApplication(obj) },
		}); err != nil {
			a.log.Error(err, "watch Applications", "namespace", ns)
		}
		a.appInformers = append(a.appInformers, informer)
		synced = append(synced, informer.HasSynced)
		a.goFunc(func() { informer.RunWithContext(ctx) })
	}
	a.goFunc(func() {
		if cache.WaitForCacheSync(ctx.Done(), synced...) {
			a.appsSynced.Store(true)
			a.enqueue()
		}
	})
}

// onApplication asks for a publish when one of the objects came from the hub.
func (a *agent) onApplication(objs ...any) {
	for _, obj := range objs {
		if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tombstone.Obj
		}
		if l, ok := obj.(*localApplication); ok && l.fromHub {
			a.trees.invalidate(l.Namespace + "/" + l.Name)
			a.enqueue()
			return
		}
	}
}

// hubState is what the agent knows of its ManagedClusterAddOn on the hub.
type hubState struct {
	// known: the agent has read or written the object since it started or last resynced.
	known bool
	// exists: the object exists; the agent cannot create it.
	exists bool
	// object identifies the object for Events.
	object corev1.ObjectReference
	// resourceVersion orders what the watch and the writes report.
	resourceVersion string
	// conditions are the agent's own conditions on the object.
	conditions []metav1.Condition
}

// observeHubObject records a ManagedClusterAddOn from the watch, and asks for a publish:
// the agent's conditions may have been changed by someone else, and an event means the
// hub is reachable, so a waiting retry may go now.
func (a *agent) observeHubObject(obj any) {
	addon, ok := obj.(*addonv1beta1.ManagedClusterAddOn)
	if !ok || addon.Name != a.opts.AddonName {
		return
	}
	a.recordHub(addon)
	a.onHubChange()
}

// onHubChange asks for a publish after a change on the hub: the agent's report may have
// been changed by someone else, and an event means the hub is reachable, so a waiting
// retry may go now.
func (a *agent) onHubChange() {
	a.backingOff.Store(false)
	a.queue.AddAfter(reportKey, a.opts.PublishDelay)
}

// observeHubDeletion records that the ManagedClusterAddOn is gone.
func (a *agent) observeHubDeletion(any) {
	a.hubMu.Lock()
	a.hub = hubState{known: true}
	a.hubMu.Unlock()
	a.log.Info("the ManagedClusterAddOn was deleted; waiting for it to come back")
}

// recordHub records the state of the ManagedClusterAddOn, unless the agent already knows
// a newer one.
func (a *agent) recordHub(addon *addonv1beta1.ManagedClusterAddOn) {
	state := hubState{
		known:  true,
		exists: true,
		object: corev1.ObjectReference{
			APIVersion: addonv1beta1.GroupVersion.String(), Kind: "ManagedClusterAddOn",
			Namespace: addon.Namespace, Name: addon.Name, UID: addon.UID, ResourceVersion: addon.ResourceVersion,
		},
		resourceVersion: addon.ResourceVersion,
		conditions:      ownConditions(addon.Status.Conditions),
	}
	a.hubMu.Lock()
	defer a.hubMu.Unlock()
	if a.hub.known && a.hub.exists && a.hub.object.UID == addon.UID && olderResourceVersion(addon.ResourceVersion, a.hub.resourceVersion) {
		return
	}
	a.hub = state
}

// hubSnapshot returns the known state of the ManagedClusterAddOn.
func (a *agent) hubSnapshot() hubState {
	a.hubMu.Lock()
	defer a.hubMu.Unlock()
	return a.hub
}

// forgetHub makes the next publish read the ManagedClusterAddOn from the hub.
func (a *agent) forgetHub() {
	a.hubMu.Lock()
	defer a.hubMu.Unlock()
	a.hub = hubState{}
}
