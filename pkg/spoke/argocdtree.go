package spoke

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/redis/go-redis/v9"

	statusv1alpha1 "github.com/ocm-gitops/argocd-pull-addon/pkg/apis/argocdpull/v1alpha1"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/argocdcache"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/clusterreport"
)

// The agent reads Argo CD's application-controller cache as pkg/argocdcache says
// (docs/design.md, section 3.4); TestArgoCDCacheContract, there, pins it to the Argo CD
// source.

// treeReader reads apps' resource trees from the Redis of Argo CD's
// application-controller.
type treeReader struct {
	client          *redis.Client
	argoCDNamespace string
	log             logr.Logger

	mu sync.Mutex
	// downUntil: after a failure to reach Redis, reads fail at once until then, so that
	// a publish does not wait for a timeout per app.
	downUntil time.Time
	downErr   error
}

// treeRetryAfter is how long the reader gives up on an unreachable Redis.
const treeRetryAfter = 10 * time.Second

// newTreeReader returns a reader of the Redis that o says, authenticated as o.Username
// with the password of the Secret o.PasswordSecret of Argo CD's namespace, read through
// secrets at each new connection; none when the Secret does not exist.
func newTreeReader(o argocdcache.ClientOptions, argoCDNamespace string, secrets argocdcache.SecretGetter, log logr.Logger) (*treeReader, error) {
	o.PoolSize = 2
	client, err := argocdcache.NewClient(o, secrets)
	if err != nil {
		return nil, fmt.Errorf("connect to Argo CD's Redis: %w", err)
	}
	return &treeReader{argoCDNamespace: argoCDNamespace, log: log, client: client}, nil
}

// Close closes the connections.
func (r *treeReader) Close() error {
	return r.client.Close()
}

// Read returns the tree of the app namespace/name. When it cannot, the Tree says why in
// Unavailable.
func (r *treeReader) Read(ctx context.Context, namespace, name string) clusterreport.Tree {
	r.mu.Lock()
	if time.Now().Before(r.downUntil) {
		err := r.downErr
		r.mu.Unlock()
		return clusterreport.Tree{Unavailable: err.Error()}
	}
	r.mu.Unlock()

	tree, err := r.read(ctx, argocdcache.InstanceName(r.argoCDNamespace, namespace, name))
	if err != nil {
		// A tree missing or too large is this app's; anything else, Redis'.
		if !errors.Is(err, errNoTree) && !errors.Is(err, argocdcache.ErrValueTooLarge) {
			r.mu.Lock()
			r.downUntil, r.downErr = time.Now().Add(treeRetryAfter), err
			r.mu.Unlock()
		}
		return clusterreport.Tree{Unavailable: err.Error()}
	}
	return tree
}

// ReadStates returns the states of the app namespace/name's managed resources, as Argo
// CD's application-controller caches them for its diff (Secrets redacted), hooks left
// out. When it cannot, States says why in Unavailable. A failure here is the app's
// alone (the ACL user of an older install may not read these keys): the tree is read
// all the same.
func (r *treeReader) ReadStates(ctx context.Context, namespace, name string) clusterreport.States {
	budget := int64(argocdcache.MaxValueBytes)
	var cached []argocdcache.ResourceDiff
	if err := r.get(ctx, argocdcache.ManagedResourcesKey(argocdcache.InstanceName(r.argoCDNamespace, namespace, name)), &budget, &cached); err != nil {
		if errors.Is(err, errNoTree) {
			err = errNoStates
		}
		return clusterreport.States{Unavailable: err.Error()}
	}
	diffs := make([]statusv1alpha1.ResourceDiff, 0, len(cached))
	for _, d := range cached {
		if d.Hook {
			continue
		}
		diffs = append(diffs, statusv1alpha1.ResourceDiff{Group: d.Group, Kind: d.Kind, Namespace: d.Namespace, Name: d.Name,
			LiveState: d.NormalizedLiveState, TargetState: d.TargetState, PredictedLiveState: d.PredictedLiveState})
	}
	return clusterreport.States{Diffs: diffs}
}

// ReadManagedResources returns the managed resources of the app namespace/name as Argo
// CD's application-controller caches them, hooks included, each state as
// clusterreport.RedactedState passes it: a Secret's state that is not redacted as Argo CD
// redacts it fails the whole read.
func (r *treeReader) ReadManagedResources(ctx context.Context, namespace, name string) ([]argocdcache.ResourceDiff, error) {
	budget := int64(argocdcache.MaxValueBytes)
	var cached []argocdcache.ResourceDiff
	err := r.get(ctx, argocdcache.ManagedResourcesKey(argocdcache.InstanceName(r.argoCDNamespace, namespace, name)), &budget, &cached)
	if err != nil {
		if errors.Is(err, errNoTree) {
			err = errNoStates
		}
		return nil, err
	}
	for i := range cached {
		if cached[i], err = clusterreport.RedactedDiff(cached[i]); err != nil {
			return nil, err
		}
	}
	return cached, nil
}

// errNoStates: Argo CD has not cached the managed resources of the app (yet).
var errNoStates = errors.New("the Argo CD cache holds no managed resources for this application yet")

// errNoTree: Argo CD has not cached a tree for the app (yet).
var errNoTree = errors.New("the Argo CD cache holds no resource tree for this application yet")

// read reads the tree of an app, its shards together at most argocdcache.MaxValueBytes
// decompressed.
func (r *treeReader) read(ctx context.Context, instance string) (clusterreport.Tree, error) {
	budget := int64(argocdcache.MaxValueBytes)
	var first argocdcache.Tree
	if err := r.get(ctx, argocdcache.TreeKey(instance, 0), &budget, &first); err != nil {
		return clusterreport.Tree{}, err
	}
	nodes := first.Nodes
	for shard := int64(1); shard < first.ShardsCount; shard++ {
		var next argocdcache.Tree
		if err := r.get(ctx, argocdcache.TreeKey(instance, shard), &budget, &next); err != nil {
			return clusterreport.Tree{}, fmt.Errorf("shard %d of %d: %w", shard, first.ShardsCount, err)
		}
		nodes = append(nodes, next.Nodes...)
	}
	return clusterreport.Tree{Nodes: convertNodes(nodes)}, nil
}

// get reads key, gzip-compressed (Argo CD's default) or not, into v, at most *budget
// bytes decompressed, and takes what it decompressed from *budget. Its errors name the
// key.
func (r *treeReader) get(ctx context.Context, key string, budget *int64, v any) error {
	stored := argocdcache.StoredKey(key, argocdcache.CompressionGzip)
	raw, err := r.client.Get(ctx, stored).Bytes()
	compressed := true
	if errors.Is(err, redis.Nil) {
		stored = key
		raw, err = r.client.Get(ctx, key).Bytes()
		compressed = false
	}
	if errors.Is(err, redis.Nil) {
		return errNoTree
	}
	if err != nil {
		return fmt.Errorf("read Argo CD's cache: %w", err)
	}
	n, err := argocdcache.DecodeBounded(raw, compressed, *budget, v)
	if err != nil {
		return fmt.Errorf("key %s: %w", stored, err)
	}
	*budget -= n
	return nil
}

func convertNodes(nodes []argocdcache.Node) []statusv1alpha1.ResourceNode {
	out := make([]statusv1alpha1.ResourceNode, 0, len(nodes))
	intern := argoapp.Intern
	for _, n := range nodes {
		node := statusv1alpha1.ResourceNode{
			Group: intern(n.Group), Version: intern(n.Version), Kind: intern(n.Kind), Namespace: intern(n.Namespace), Name: n.Name,
		}
		for _, image := range n.Images {
			node.Images = append(node.Images, intern(image))
		}
		if n.Health != nil {
			node.Health = &statusv1alpha1.Health{Status: intern(n.Health.Status), Message: n.Health.Message}
		}
		for _, p := range n.ParentRefs {
			node.ParentRefs = append(node.ParentRefs, statusv1alpha1.ResourceRef{Group: intern(p.Group), Kind: intern(p.Kind), Namespace: intern(p.Namespace), Name: p.Name})
		}
		out = append(out, node)
	}
	return out
}

// Watch calls changed with the app of each tree the application-controller writes,
// until ctx is done. The subscription reconnects by itself.
func (r *treeReader) Watch(ctx context.Context, changed func(namespace, name string)) {
	sub := r.client.PSubscribe(ctx, argocdcache.TreeNotificationPattern())
	defer sub.Close()
	messages := sub.Channel()
	for {
		select {
		case <-ctx.Done():
			return
		case m, ok := <-messages:
			if !ok {
				return
			}
			changed(argocdcache.AppOfInstanceName(r.argoCDNamespace, argocdcache.InstanceOfTreeNotification(m.Channel)))
		}
	}
}

// trees knows when each app's resource tree was read from Argo CD's cache, and whether
// it must be read again: when the app changed (its resourceVersion), when Argo CD says
// its tree changed, or after treeRetryAfter when it could not be read. It does not keep
// the trees: an app's entry holds what it needs of its tree, and is built again only
// after a new read.
type trees struct {
	reader *treeReader // nil when disabled

	mu    sync.Mutex
	byApp map[string]treeRead
}

// treeRead is one read of an app's tree.
type treeRead struct {
	resourceVersion string
	stale           bool
	// failed: the tree could not be read; it is read again after treeRetryAfter.
	failed bool
	at     time.Time
}

// treeDisabled is the Unavailable of every tree when the agent does not read them.
const treeDisabled = "the agent does not read Argo CD's resource trees (--argocd-redis=" + ArgoCDRedisDisabled + ")"

func newTrees(reader *treeReader) *trees {
	return &trees{reader: reader, byApp: map[string]treeRead{}}
}

// fresh returns when the tree of app was last read, and whether that read is still
// current. Without a reader, every tree is the same unavailable one, read at the zero
// time.
func (t *trees) fresh(app observedApp) (time.Time, bool) {
	if t.reader == nil {
		return time.Time{}, true
	}
	t.mu.Lock()
	last, ok := t.byApp[app.report.Key()]
	t.mu.Unlock()
	return last.at, ok && !last.stale && last.resourceVersion == app.resourceVersion &&
		(!last.failed || time.Since(last.at) < treeRetryAfter)
}

// read reads the tree of app, and returns it with the time of the read: a new time means
// a new tree.
func (t *trees) read(ctx context.Context, app observedApp) (clusterreport.Tree, time.Time) {
	if t.reader == nil {
		tree := clusterreport.Tree{Unavailable: treeDisabled}
		if hasOutOfSync(app) {
			tree.States.Unavailable = treeDisabled
		}
		return tree, time.Time{}
	}
	tree := t.reader.Read(ctx, app.report.Namespace, app.report.Name)
	// Argo CD's diff of the OutOfSync resources, read with the tree: the application
	// controller writes both at each comparison, and then updates the Application,
	// which makes the agent read them again.
	if hasOutOfSync(app) {
		if tree.Unavailable != "" {
			tree.States.Unavailable = tree.Unavailable
		} else {
			tree.States = t.reader.ReadStates(ctx, app.report.Namespace, app.report.Name)
		}
	}
	at := time.Now()
	t.mu.Lock()
	t.byApp[app.report.Key()] = treeRead{resourceVersion: app.resourceVersion, failed: tree.Unavailable != "", at: at}
	t.mu.Unlock()
	return tree, at
}

// invalidate marks the tree of an app out of date.
func (t *trees) invalidate(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if last, ok := t.byApp[key]; ok {
		last.stale = true
		t.byApp[key] = last
	}
}

// invalidateAll marks every tree out of date (a full resync).
func (t *trees) invalidateAll() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for key, last := range t.byApp {
		last.stale = true
		t.byApp[key] = last
	}
}

// retain forgets the trees of apps that are gone.
func (t *trees) retain(apps []observedApp) {
	keep := make(map[string]bool, len(apps))
	for _, app := range apps {
		keep[app.report.Key()] = true
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for key := range t.byApp {
		if !keep[key] {
			delete(t.byApp, key)
		}
	}
}

// hasOutOfSync reports whether an app has a resource that differs from git, whose
// states the agent then reads (clusterreport.Entry carries them as the app's Diffs).
func hasOutOfSync(app observedApp) bool {
	for _, r := range app.report.Resources {
		if r.Status == argoapp.SyncOutOfSync {
			return true
		}
	}
	return false
}
