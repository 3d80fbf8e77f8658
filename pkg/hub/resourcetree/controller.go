package resourcetree

// This file wires the controller: its options, the watches that enqueue hub
// Applications, and the reconcile that keeps one Application's cache entries.

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	statusv1alpha1 "github.com/ocm-gitops/argocd-pull-addon/pkg/apis/argocdpull/v1alpha1"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/argocdcache"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/clusterreport"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/hubevents"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/observed"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/sharedsettings"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/statusslices"
)

// ControllerName names the controller: its logs, metrics and Events.
const ControllerName = "argocd-pull-resourcetree"

// Reasons of the Events on the hub Application.
const (
	// ReasonNotWritten: the hub Argo CD's Redis could not be written; its UI shows no
	// tree, or an old one, for the app.
	ReasonNotWritten = "ResourceTreeNotWritten"
	// ReasonWritten: the tree is written again after a failure.
	ReasonWritten = "ResourceTreeWritten"
)

// Options configure the controller: the hub's settings that it shares with the other
// hub controllers (AddonName, ArgoCDNamespace and Concurrency, required, WatchNamespaces
// and HubClusterName), which pkg/hub passes to each, and its own Settings, whose Redis
// is required.
type Options struct {
	// AddonName names the addon whose agents' slices are read.
	AddonName string
	// ArgoCDNamespace is the hub Argo CD's namespace: the apps there are keyed by name
	// (argocdcache.InstanceName), and the Redis password Secret lives there.
	ArgoCDNamespace string
	// WatchNamespaces limits the controller to the Applications of these namespaces;
	// empty means all namespaces.
	WatchNamespaces []string
	// Concurrency is the number of parallel reconciles.
	Concurrency int
	// HubClusterName names the hub's own ManagedCluster: the nodes of an app whose
	// destination names it carry no UID (NodeIdentityOf).
	HubClusterName string
	// ManagedResources, when set, gives an app whose nodes carry UIDs (its destination
	// names its managed cluster) the managed resources of the Argo CD there, live states
	// included, instead of those the slices carry (the OutOfSync ones' diffs): the argocd
	// CLI's manifests, diff, actions run, patch-resource and delete-resource pick among
	// them. nil, or a cluster that does not answer, leaves the slices' ones.
	ManagedResources ManagedResourcesSource
	Settings
}

// ManagedResourcesSource reads a pulled app's managed resources as the Argo CD of its
// managed cluster caches them, through the resource proxy (pkg/hub/resourceproxy.Server):
// the JSON of a list of argocdcache.ResourceDiff, at most limit bytes.
type ManagedResourcesSource interface {
	ManagedResources(ctx context.Context, cluster, namespace, name string, limit int64) ([]byte, error)
}

// managedResourcesTimeout bounds the wait for a cluster's managed resources.
const managedResourcesTimeout = 10 * time.Second

// lossCheckPeriod is how often the controller checks that the hub Argo CD's Redis still
// holds what it wrote (watchRedis): a Redis that restarted has the trees back a period or
// so later.
const lossCheckPeriod = 2 * time.Second

func (o Options) validate() error {
	return errors.Join(
		sharedsettings.ValidateAddonName(o.AddonName),
		sharedsettings.ValidateArgoCDNamespace(o.ArgoCDNamespace),
		sharedsettings.ValidateConcurrency(o.Concurrency),
		o.Validate(), // Settings.Validate
	)
}

// Setup registers the controller with mgr. c reads through the manager's cache
// (hubcache.NewClient); slices finds apps in the agents' slices, as the status mirror
// does. The Redis password Secret is read by name, past the cache.
func Setup(mgr ctrl.Manager, c client.Client, slices *statusslices.Reader, opts Options) error {
	if err := opts.validate(); err != nil {
		return fmt.Errorf("invalid resource tree options: %w", err)
	}
	kube, err := kubernetes.NewForConfig(mgr.GetConfig())
	if err != nil {
		return fmt.Errorf("create the hub client: %w", err)
	}
	clientOpts := opts.Redis.ClientOptions
	clientOpts.PoolSize = opts.Concurrency + 1
	redisClient, err := argocdcache.NewClient(clientOpts, kube.CoreV1().Secrets(opts.ArgoCDNamespace))
	if err != nil {
		return fmt.Errorf("the hub Argo CD's Redis: %w", err)
	}
	r := &reconciler{
		client: c, slices: slices, full: newFullSlices(mgr.GetAPIReader()),
		cache: &cacheWriter{client: redisClient, target: clientOpts.Target(),
			compression: opts.Redis.Compression, expiration: opts.Redis.Expiration},
		recorder: hubevents.Recorder(mgr, ControllerName), opts: opts, written: map[types.NamespacedName]written{},
		log: mgr.GetLogger().WithValues("controller", ControllerName),
	}
	if err := mgr.Add(closeOnStop{r.cache}); err != nil {
		return err
	}
	err = ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(argoapp.NewApplication(), builder.WithPredicates(predicate.NewPredicateFuncs(r.isCandidate))).
		Watches(&statusv1alpha1.ApplicationStatusSlice{}, statusslices.TreeHandler(observed.ApplicationHandler(c, opts.AddonName).EnqueueApp)).
		WatchesRawSource(source.Func(r.watchRedis)).
		WithOptions(controller.Options{MaxConcurrentReconciles: opts.Concurrency}).
		Complete(r)
	if err != nil {
		return fmt.Errorf("set up the resource tree controller: %w", err)
	}
	return nil
}

// closeOnStop closes the Redis connections when the manager stops.
type closeOnStop struct{ w *cacheWriter }

func (c closeOnStop) Start(ctx context.Context) error {
	<-ctx.Done()
	return c.w.Close()
}

type reconciler struct {
	client   client.Client
	slices   *statusslices.Reader
	full     *fullSlices
	cache    *cacheWriter
	recorder events.EventRecorder
	opts     Options
	log      logr.Logger

	mu sync.Mutex
	// written is what this process last wrote for each app, and whether its last write
	// failed.
	written map[types.NamespacedName]written
	// losses counts the times Redis was found to have lost what this process wrote.
	losses int
}

type written struct {
	// digest is that of the entries written; entry is the entrySource they were
	// rendered from.
	digest  [sha256.Size]byte
	entry   string
	at      time.Time
	failing bool
}

func (r *reconciler) isCandidate(o client.Object) bool {
	_, labelled := o.GetLabels()[argoapp.LabelPullToOCMManagedCluster]
	return labelled && (len(r.opts.WatchNamespaces) == 0 || slices.Contains(r.opts.WatchNamespaces, o.GetNamespace()))
}

// isServed reports whether the app's entries are this controller's to write: a pulled
// app that the hub application-controller skips. A pulled app without skip-reconcile is
// also the hub controller's, which writes them itself.
func isServed(labels, annotations map[string]string) bool {
	return argoapp.IsPulledAndSkipped(labels, annotations)
}

// Reconcile keeps the cache entries of one hub Application: written while it is pulled
// and its cluster's slices hold it, removed when it goes or leaves its cluster's slices.
func (r *reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	losses := r.lossCount()
	result, err := r.reconcile(ctx, req)
	if r.lossCount() != losses {
		// Redis lost what it held while this ran: what this found or wrote there may be
		// gone, and is known again as at start.
		r.forgetUnlessFailing(req.NamespacedName)
		if err == nil {
			result = ctrl.Result{RequeueAfter: time.Millisecond}
		}
	}
	return result, err
}

func (r *reconciler) reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	instance := argocdcache.InstanceName(r.opts.ArgoCDNamespace, req.Namespace, req.Name)
	app := argoapp.NewApplication()
	if err := r.client.Get(ctx, req.NamespacedName, app); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		// Gone: remove what this process wrote. What an earlier process wrote for an app
		// deleted since expires (Settings.Redis.Expiration); argocd-server shows no tree
		// of an app that does not exist.
		return ctrl.Result{}, r.remove(ctx, req.NamespacedName, instance, nil)
	}
	if !isServed(app.GetLabels(), app.GetAnnotations()) {
		// The hub application-controller writes its entries now, or nobody: leave them.
		r.forget(req.NamespacedName)
		return ctrl.Result{}, nil
	}
	cluster := app.GetAnnotations()[argoapp.AnnotationOCMManagedCluster]
	found, at := r.slices.FindWithSlice(cluster, argoapp.ManifestWorkName(app.GetName(), app.GetUID()), req.NamespacedName)
	if found == nil {
		// Not (or no longer) reported by the cluster: no tree to show.
		return ctrl.Result{}, r.remove(ctx, req.NamespacedName, instance, app)
	}
	spec, err := argoapp.DecodeSpec(app)
	if err != nil {
		// Propagation reports the malformed spec on the app; without a destination, the
		// nodes carry no UID.
		log.V(1).Info("cannot read the application's destination; its tree's nodes carry no UID", "app", req.NamespacedName, "error", err)
	}
	identity := NodeIdentityOf(spec.Destination, cluster, r.opts.HubClusterName)
	// What the entries are rendered from: the slice's entry, and the nodes' identity, so
	// that a change of the app's destination renders them again even when the entry
	// stays.
	source := entrySource(at.Digest, identity)
	refresh := r.opts.Redis.Expiration / 2
	last, wrote := r.lastWritten(ctx, req.NamespacedName, instance, source)
	fresh := wrote && !last.failing && time.Since(last.at) < refresh
	if wrote && !last.failing && at.Digest != "" && last.entry == source {
		// The entry written last, unchanged: the slice need not be read.
		if fresh {
			return ctrl.Result{RequeueAfter: refresh - time.Since(last.at)}, nil
		}
		// Due for a refresh: the entries live on as they are, unless they are gone.
		if kept, err := r.cache.extend(ctx, instance); err == nil && kept {
			r.mu.Lock()
			r.written[req.NamespacedName] = written{digest: last.digest, entry: last.entry, at: time.Now()}
			r.mu.Unlock()
			return ctrl.Result{RequeueAfter: refresh}, nil
		}
	}
	entry, ok, err := r.full.entry(ctx, types.NamespacedName{Namespace: cluster, Name: at.Slice}, at.ResourceVersion, found.Key())
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("read ApplicationStatusSlice %s/%s: %w", cluster, at.Slice, err)
	}
	if !ok {
		// The slice changed since the cache saw it: its event brings the app back.
		return ctrl.Result{}, nil
	}
	tree, managed := Render(entry, identity)
	if identity == StableUIDs && r.opts.ManagedResources != nil {
		if live, err := r.liveManagedResources(ctx, cluster, entry.Namespace, entry.Name); err != nil {
			log.V(1).Info("the managed resources as the managed cluster caches them are not at hand; writing those of the slices",
				"app", req.NamespacedName, "cluster", cluster, "error", err.Error())
		} else {
			managed = live
		}
	}
	e, err := encodeEntries(tree, managed)
	if err != nil {
		return ctrl.Result{}, err
	}
	_, sum := clusterreport.EntryDigest(entry)
	entryDigest := entrySource(string(sum[:]), identity)
	if fresh && last.digest == e.digest {
		// A change that shows nowhere in the tree (a condition, a revision): the entries
		// stay, and say what they are rendered from now.
		if err := r.cache.setSource(ctx, instance, sourceOf(entryDigest)); err != nil {
			r.failed(ctx, req.NamespacedName, app, err)
			return ctrl.Result{}, err
		}
		r.mu.Lock()
		r.written[req.NamespacedName] = written{digest: e.digest, entry: entryDigest, at: last.at}
		r.mu.Unlock()
		return ctrl.Result{RequeueAfter: refresh - time.Since(last.at)}, nil
	}
	if err := r.cache.write(ctx, instance, e, sourceOf(entryDigest)); err != nil {
		r.failed(ctx, req.NamespacedName, app, err)
		return ctrl.Result{}, err
	}
	r.mu.Lock()
	r.written[req.NamespacedName] = written{digest: e.digest, entry: entryDigest, at: time.Now()}
	r.mu.Unlock()
	if wrote && last.failing {
		log.Info("wrote the resource tree to the hub Argo CD's cache again", "app", req.NamespacedName, "cluster", cluster)
		r.recorder.Eventf(app, nil, corev1.EventTypeNormal, ReasonWritten, "WriteResourceTree",
			"The resource tree of cluster %s is written to the hub Argo CD's cache again", cluster)
	} else {
		log.V(2).Info("wrote the resource tree to the hub Argo CD's cache", "app", req.NamespacedName, "cluster", cluster,
			"nodes", len(entry.Resources)+len(entry.Nodes))
	}
	return ctrl.Result{RequeueAfter: refresh}, nil
}

// liveManagedResources returns the managed resources of the spoke app namespace/name on
// cluster as its Argo CD caches them, each state checked again (clusterreport.RedactedState:
// no Secret's data reaches the hub's cache), in Argo CD's order.
func (r *reconciler) liveManagedResources(ctx context.Context, cluster, namespace, name string) ([]argocdcache.ResourceDiff, error) {
	ctx, cancel := context.WithTimeout(ctx, managedResourcesTimeout)
	defer cancel()
	raw, err := r.opts.ManagedResources.ManagedResources(ctx, cluster, namespace, name, argocdcache.MaxValueBytes)
	if err != nil {
		return nil, err
	}
	var managed []argocdcache.ResourceDiff
	if err := json.Unmarshal(raw, &managed); err != nil {
		return nil, fmt.Errorf("decode the managed resources: %w", err)
	}
	for i := range managed {
		if managed[i], err = clusterreport.RedactedDiff(managed[i]); err != nil {
			return nil, err
		}
	}
	slices.SortStableFunc(managed, func(a, b argocdcache.ResourceDiff) int { return cmp.Compare(a.FullName(), b.FullName()) })
	return managed, nil
}

// entrySource is what an app's entries are rendered from: the Digest of its slice's entry
// (statusv1alpha1.AppStatus.Digest; empty when unknown) and the nodes' identity.
func entrySource(entryDigest string, identity NodeIdentity) string {
	if entryDigest == "" {
		return ""
	}
	if identity == StableUIDs {
		return entryDigest + "+uid"
	}
	return entryDigest
}

// lastWritten returns what was last written for the app key, and whether anything was:
// by this process, or, for an app it has not written, by an earlier one from the
// entrySource entryDigest (sourceKey), which it then takes for its own.
func (r *reconciler) lastWritten(ctx context.Context, key types.NamespacedName, instance, entryDigest string) (written, bool) {
	r.mu.Lock()
	last, wrote := r.written[key]
	r.mu.Unlock()
	if wrote || entryDigest == "" {
		return last, wrote
	}
	source, ttl, err := r.cache.source(ctx, instance)
	if err != nil || source != sourceOf(entryDigest) {
		return written{}, false
	}
	last = written{entry: entryDigest, at: time.Now().Add(min(0, ttl-r.opts.Redis.Expiration))}
	r.mu.Lock()
	r.written[key] = last
	r.mu.Unlock()
	return last, true
}

// remove deletes the entries this process wrote for an app (app is nil when it is gone).
func (r *reconciler) remove(ctx context.Context, key types.NamespacedName, instance string, app client.Object) error {
	r.mu.Lock()
	_, wrote := r.written[key]
	r.mu.Unlock()
	if !wrote {
		return nil
	}
	if err := r.cache.remove(ctx, instance); err != nil {
		if app != nil {
			r.failed(ctx, key, app, err)
		}
		return err
	}
	r.forget(key)
	return nil
}

// failed records a failed write once per failure: a Warning Event on the hub
// Application, which Argo CD's UI lists under the app's events, and a log line.
func (r *reconciler) failed(ctx context.Context, key types.NamespacedName, app client.Object, err error) {
	r.mu.Lock()
	last := r.written[key]
	first := !last.failing
	last.failing = true
	r.written[key] = last
	r.mu.Unlock()
	if !first {
		return
	}
	ctrl.LoggerFrom(ctx).Error(err, "cannot write the resource tree to the hub Argo CD's cache; its UI shows no tree, or an old one, for the app", "app", key)
	r.recorder.Eventf(app, nil, corev1.EventTypeWarning, ReasonNotWritten, "WriteResourceTree",
		"The hub Argo CD's UI cannot show this application's resource tree: %v. Propagation and status are not affected; the write is retried.", err)
}

// watchRedis checks every lossCheckPeriod that the hub Argo CD's Redis still holds what
// this process wrote (cacheWriter.checkMarker: one PTTL). When it has lost it (a restart,
// a flush), the process forgets what it wrote and enqueues those apps: each finds its
// entries gone, as at start, and writes them again, at the pace of the work queue's
// Concurrency workers. A Redis that cannot be reached is checked again; one that comes
// back with its data costs no write.
func (r *reconciler) watchRedis(ctx context.Context, queue workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	go func() {
		ticker := time.NewTicker(lossCheckPeriod)
		defer ticker.Stop()
		unreachable := false
		for {
			checkCtx, cancel := context.WithTimeout(ctx, lossCheckPeriod)
			lost, err := r.cache.checkMarker(checkCtx)
			cancel()
			switch {
			case err != nil && ctx.Err() == nil:
				if !unreachable {
					r.log.V(1).Info("cannot check that the hub Argo CD's cache holds the resource trees; checking again", "error", err)
				}
				unreachable = true
			case lost:
				unreachable = false
				apps := r.redisLost()
				for _, app := range apps {
					queue.Add(reconcile.Request{NamespacedName: app})
				}
				if len(apps) > 0 {
					r.log.Info("the hub Argo CD's cache lost the resource trees (Redis restarted or was flushed); writing them again", "apps", len(apps))
				}
			default:
				unreachable = false
			}
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
			}
		}
	}()
	return nil
}

// redisLost forgets what this process wrote, which Redis no longer holds, and returns
// those apps. An app whose last write failed keeps its record: it is retried, and says
// when it is written again.
func (r *reconciler) redisLost() []types.NamespacedName {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.losses++
	apps := make([]types.NamespacedName, 0, len(r.written))
	for key, w := range r.written {
		apps = append(apps, key)
		if !w.failing {
			delete(r.written, key)
		}
	}
	return apps
}

func (r *reconciler) lossCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.losses
}

func (r *reconciler) forgetUnlessFailing(key types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.written[key].failing {
		delete(r.written, key)
	}
}

func (r *reconciler) forget(key types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.written, key)
}
