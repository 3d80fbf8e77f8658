package spoke

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/redis/go-redis/v9"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"

	statusv1alpha1 "github.com/ocm-gitops/argocd-pull-addon/pkg/apis/argocdpull/v1alpha1"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/clusterreport"
)

// What the agent reads of Argo CD's application-controller cache (docs/design.md,
// section 8a.2). These are Argo CD's, not ours: TestArgoCDCacheContract checks them
// against the pinned Argo CD source, and fails when an upgrade changes them.
const (
	// ArgoCDCacheVersion is Argo CD's common.CacheVersion, the last part of every key.
	ArgoCDCacheVersion = "1.8.3"
	// argoCDTreeKeyPrefix starts the key of an app's resource tree (appstate
	// appResourcesTreeKey): "app|resources-tree|<app>[|<shard>]|<cache version>".
	argoCDTreeKeyPrefix = "app|resources-tree|"
	// argoCDTreeNotificationPrefix starts the channel on which the application-controller
	// publishes after each write of an app's tree (appstate SetAppResourcesTree).
	argoCDTreeNotificationPrefix = "app|managed-resources|"
	// argoCDGzipSuffix ends a key written with gzip compression, Argo CD's default
	// (--redis-compress).
	argoCDGzipSuffix = ".gz"
	// ArgoCDRedisSecret is the Secret, in Argo CD's namespace, whose key
	// argoCDRedisPasswordKey holds Redis' password (Argo CD 2.11 and later).
	ArgoCDRedisSecret      = "argocd-redis"
	argoCDRedisPasswordKey = "auth"
)

// argoCDTree is the part of Argo CD's ApplicationTree that the agent reads.
type argoCDTree struct {
	Nodes       []argoCDNode `json:"nodes"`
	ShardsCount int64        `json:"shardsCount"`
}

type argoCDNode struct {
	argoCDRef
	ParentRefs []argoCDRef `json:"parentRefs"`
	Images     []string    `json:"images"`
	Health     *struct {
		Status  string `json:"status"`
		Message string `json:"message"`
	} `json:"health"`
}

type argoCDRef struct {
	Group     string `json:"group"`
	Version   string `json:"version"`
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// instanceName is Argo CD's Application.InstanceName: the name of an app in Argo CD's own
// namespace, "<namespace>_<name>" otherwise.
func instanceName(argoCDNamespace, namespace, name string) string {
	if namespace == "" || namespace == argoCDNamespace {
		return name
	}
	return namespace + "_" + name
}

// appOfInstanceName is the inverse of instanceName. A namespace has no "_".
func appOfInstanceName(argoCDNamespace, instance string) (namespace, name string) {
	if ns, n, ok := strings.Cut(instance, "_"); ok {
		return ns, n
	}
	return argoCDNamespace, instance
}

// treeKey is the key of shard shard of an app's tree, without the compression suffix.
func treeKey(instance string, shard int64) string {
	key := argoCDTreeKeyPrefix + instance
	if shard > 0 {
		key += "|" + strconv.FormatInt(shard, 10)
	}
	return key + "|" + ArgoCDCacheVersion
}

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

// newTreeReader returns a reader of the Redis at addr, authenticated with the password
// of Argo CD's Secret ArgoCDRedisSecret, read at each new connection; none when the
// Secret does not exist.
func newTreeReader(addr, argoCDNamespace string, secrets typedcorev1.SecretInterface, log logr.Logger) *treeReader {
	return &treeReader{
		argoCDNamespace: argoCDNamespace,
		log:             log,
		client: redis.NewClient(&redis.Options{
			Addr: addr,
			CredentialsProviderContext: func(ctx context.Context) (string, string, error) {
				secret, err := secrets.Get(ctx, ArgoCDRedisSecret, metav1.GetOptions{})
				if apierrors.IsNotFound(err) {
					return "", "", nil
				}
				if err != nil {
					return "", "", fmt.Errorf("read the Redis password from Secret %s/%s: %w", argoCDNamespace, ArgoCDRedisSecret, err)
				}
				return "", string(secret.Data[argoCDRedisPasswordKey]), nil
			},
			Protocol:        2,
			DisableIdentity: true,
			DialTimeout:     2 * time.Second,
			ReadTimeout:     5 * time.Second,
			WriteTimeout:    5 * time.Second,
			MaxRetries:      1,
			PoolSize:        2,
		}),
	}
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

	tree, err := r.read(ctx, instanceName(r.argoCDNamespace, namespace, name))
	if err != nil {
		if !errors.Is(err, errNoTree) {
			r.mu.Lock()
			r.downUntil, r.downErr = time.Now().Add(treeRetryAfter), err
			r.mu.Unlock()
		}
		return clusterreport.Tree{Unavailable: err.Error()}
	}
	return tree
}

// errNoTree: Argo CD has not cached a tree for the app (yet).
var errNoTree = errors.New("the Argo CD cache holds no resource tree for this application yet")

func (r *treeReader) read(ctx context.Context, instance string) (clusterreport.Tree, error) {
	var first argoCDTree
	if err := r.get(ctx, treeKey(instance, 0), &first); err != nil {
		return clusterreport.Tree{}, err
	}
	nodes := first.Nodes
	for shard := int64(1); shard < first.ShardsCount; shard++ {
		var next argoCDTree
		if err := r.get(ctx, treeKey(instance, shard), &next); err != nil {
			return clusterreport.Tree{}, fmt.Errorf("shard %d of %d: %w", shard, first.ShardsCount, err)
		}
		nodes = append(nodes, next.Nodes...)
	}
	return clusterreport.Tree{Nodes: convertNodes(nodes)}, nil
}

// get reads key, gzip-compressed (Argo CD's default) or not, into v.
func (r *treeReader) get(ctx context.Context, key string, v any) error {
	raw, err := r.client.Get(ctx, key+argoCDGzipSuffix).Bytes()
	compressed := true
	if errors.Is(err, redis.Nil) {
		raw, err = r.client.Get(ctx, key).Bytes()
		compressed = false
	}
	if errors.Is(err, redis.Nil) {
		return errNoTree
	}
	if err != nil {
		return fmt.Errorf("read Argo CD's cache: %w", err)
	}
	return decodeCacheValue(raw, compressed, v)
}

// decodeCacheValue decodes a value as Argo CD's redisCache writes it: JSON, gzip
// compressed or not.
func decodeCacheValue(raw []byte, compressed bool, v any) error {
	var reader io.Reader = bytes.NewReader(raw)
	if compressed {
		gz, err := gzip.NewReader(reader)
		if err != nil {
			return fmt.Errorf("decompress Argo CD's cache value: %w", err)
		}
		defer gz.Close()
		reader = gz
	}
	if err := json.NewDecoder(reader).Decode(v); err != nil {
		return fmt.Errorf("decode Argo CD's cache value: %w", err)
	}
	return nil
}

func convertNodes(nodes []argoCDNode) []statusv1alpha1.ResourceNode {
	out := make([]statusv1alpha1.ResourceNode, 0, len(nodes))
	for _, n := range nodes {
		node := statusv1alpha1.ResourceNode{
			Group: n.Group, Version: n.Version, Kind: n.Kind, Namespace: n.Namespace, Name: n.Name, Images: n.Images,
		}
		if n.Health != nil {
			node.Health = &statusv1alpha1.Health{Status: n.Health.Status, Message: n.Health.Message}
		}
		for _, p := range n.ParentRefs {
			node.ParentRefs = append(node.ParentRefs, statusv1alpha1.ResourceRef{Group: p.Group, Kind: p.Kind, Namespace: p.Namespace, Name: p.Name})
		}
		out = append(out, node)
	}
	return out
}

// Watch calls changed with the app of each tree the application-controller writes,
// until ctx is done. The subscription reconnects by itself.
func (r *treeReader) Watch(ctx context.Context, changed func(namespace, name string)) {
	pattern := argoCDTreeNotificationPrefix + "*|" + ArgoCDCacheVersion
	sub := r.client.PSubscribe(ctx, pattern)
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
			instance := strings.TrimSuffix(strings.TrimPrefix(m.Channel, argoCDTreeNotificationPrefix), "|"+ArgoCDCacheVersion)
			changed(appOfInstanceName(r.argoCDNamespace, instance))
		}
	}
}
