// Package argocdcache is the one place where the addon meets the internals of Argo CD's
// application-controller cache, its Redis: key names, the cache version, compression, the
// encoding of values, the notification after a write, the Redis password Secret, and the
// JSON of the values the addon reads and writes. None of it is an Argo CD API.
//
// The agent reads the resource trees that the spoke's application-controller writes
// (pkg/spoke); the manager writes, for the pulled apps that the hub's
// application-controller skips, the entries that controller would write, so that the
// hub's argocd-server shows their resource trees (pkg/hub/resourcetree). Both go through
// this package, and TestArgoCDCacheContract checks every value here against the source of
// the Argo CD the project supports (hack/tools/argocd pins it): an upgrade of Argo CD
// that changes any of it fails there, naming what changed (docs/design.md, sections 8a.2
// and 8b).
package argocdcache

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// What Argo CD 3.2 names and how it stores (util/cache, util/cache/appstate, common).
const (
	// CacheVersion is Argo CD's common.CacheVersion, the last part of every key.
	CacheVersion = "1.8.3"
	// TreeKeyPrefix starts the key of an app's resource tree (appstate
	// appResourcesTreeKey): "app|resources-tree|<app>[|<shard>]|<cache version>".
	TreeKeyPrefix = "app|resources-tree|"
	// ManagedResourcesKeyPrefix starts the key of an app's managed resources (appstate
	// appManagedResourcesKey), "app|managed-resources|<app>|<cache version>", and the
	// channel on which a write of the app's tree is announced (SetAppResourcesTree), to
	// which argocd-server's resource tree watch (the UI) listens.
	ManagedResourcesKeyPrefix = "app|managed-resources|"
	// GzipSuffix ends a key written with gzip compression (redisCache.getKey).
	GzipSuffix = ".gz"
	// RedisSecret is the Secret, in Argo CD's namespace, whose key RedisPasswordKey holds
	// Redis' password (common.RedisInitialCredentials; Argo CD 2.11 and later).
	RedisSecret      = "argocd-redis"
	RedisPasswordKey = "auth"
	// DefaultExpiration is how long Argo CD keeps an app's tree and managed resources
	// (--app-state-cache-expiration, ARGOCD_APP_STATE_CACHE_EXPIRATION).
	DefaultExpiration = time.Hour
)

// ReaderACLRules are the rules of a Redis ACL user that can read the apps' resource trees
// and their notifications and nothing else: GET on the tree keys, PSUBSCRIBE on the
// pattern of the tree notifications (which Redis matches literally against a PSUBSCRIBE
// pattern), PING (go-redis pings an idle subscription every 3 s), and no other command,
// key or channel. AUTH (and HELLO's answer to it) needs no rule. Give them to the agent's
// user:
//
//	ACL SETUSER argocd-pull-agent on >PASSWORD <rules...>
//
// docs/operations.md, "The agent's Redis user", shows the line.
func ReaderACLRules() []string {
	return []string{"resetkeys", "~" + TreeKeyPrefix + "*", "resetchannels", "&" + TreeNotificationPattern(), "-@all", "+get", "+psubscribe", "+ping"}
}

// Compression is how values are compressed (--redis-compress, REDIS_COMPRESSION). Every
// Argo CD component of an install must use the same.
type Compression string

const (
	// CompressionGzip is Argo CD's default.
	CompressionGzip Compression = "gzip"
	CompressionNone Compression = "none"
)

// ParseCompression parses a --redis-compress value.
func ParseCompression(s string) (Compression, error) {
	switch c := Compression(s); c {
	case CompressionGzip, CompressionNone:
		return c, nil
	}
	return "", fmt.Errorf("unknown Redis compression %q: gzip or none", s)
}

// InstanceName is Argo CD's Application.InstanceName, the <app> of every key: the name
// of an app in Argo CD's own namespace, "<namespace>_<name>" otherwise.
func InstanceName(argoCDNamespace, namespace, name string) string {
	if namespace == "" || namespace == argoCDNamespace {
		return name
	}
	return namespace + "_" + name
}

// AppOfInstanceName is the inverse of InstanceName. A namespace has no "_".
func AppOfInstanceName(argoCDNamespace, instance string) (namespace, name string) {
	if ns, n, ok := strings.Cut(instance, "_"); ok {
		return ns, n
	}
	return argoCDNamespace, instance
}

// versioned appends the cache version, as Cache.generateFullKey does.
func versioned(key string) string { return key + "|" + CacheVersion }

// TreeKey is the key of shard shard of an app's tree, without the compression suffix.
func TreeKey(instance string, shard int64) string {
	key := TreeKeyPrefix + instance
	if shard > 0 {
		key += "|" + strconv.FormatInt(shard, 10)
	}
	return versioned(key)
}

// ManagedResourcesKey is the key of an app's managed resources, without the compression
// suffix. It is also the channel of NotifyTreeChanged.
func ManagedResourcesKey(instance string) string {
	return versioned(ManagedResourcesKeyPrefix + instance)
}

// TreeNotificationPattern matches the channel of every app's tree notification.
func TreeNotificationPattern() string {
	return ManagedResourcesKeyPrefix + "*|" + CacheVersion
}

// InstanceOfTreeNotification returns the app of a tree notification's channel.
func InstanceOfTreeNotification(channel string) string {
	return strings.TrimSuffix(strings.TrimPrefix(channel, ManagedResourcesKeyPrefix), "|"+CacheVersion)
}

// StoredKey is key as stored with compression c (redisCache.getKey).
func StoredKey(key string, c Compression) string {
	if c == CompressionGzip {
		return key + GzipSuffix
	}
	return key
}

// Encode encodes v as redisCache.marshal does: the JSON of json.Encoder (with its
// trailing newline), gzip-compressed with CompressionGzip (at another level than Argo
// CD's default: its gzip reader reads any). go-redis/cache stores the bytes as they are.
func Encode(v any, c Compression) ([]byte, error) {
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(v); err != nil {
		return nil, fmt.Errorf("encode an Argo CD cache value: %w", err)
	}
	return Compress(buf.Bytes(), c)
}

// Compress compresses an encoded value as Encode does.
func Compress(encoded []byte, c Compression) ([]byte, error) {
	if c != CompressionGzip {
		return encoded, nil
	}
	var buf bytes.Buffer
	gz := gzipWriters.Get().(*gzip.Writer)
	defer gzipWriters.Put(gz)
	gz.Reset(&buf)
	if _, err := gz.Write(encoded); err != nil {
		return nil, fmt.Errorf("compress an Argo CD cache value: %w", err)
	}
	if err := gz.Close(); err != nil {
		return nil, fmt.Errorf("compress an Argo CD cache value: %w", err)
	}
	return buf.Bytes(), nil
}

// gzipWriters are reused: each holds most of a megabyte of compressor state. They
// compress at gzip.BestSpeed, a few times faster than the default level and about as
// small for JSON of this kind; any level reads back the same.
var gzipWriters = sync.Pool{New: func() any {
	gz, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed) // a valid level: no error
	return gz
}}

// MaxValueBytes bounds what the addon decodes of Argo CD's cache for one app: the JSON of
// its tree, decompressed, all shards together. Whoever can write Redis chooses what the
// agent reads, and a gzip value of a few hundred KiB expands to gigabytes. The bound
// comes from the largest tree the agent can report: an app's entry in its status slice
// holds at most clusterreport.MaxSliceBytes (1 MiB) of JSON, and the agent cuts the
// nodes of a larger tree (clusterreport.FitEntry); Argo CD's JSON of a node (with its
// info, networking info, uid, resource version and creation time) takes up to about four
// times the entry's, so a tree over 4 MiB loses nodes anyway. 16 MiB leaves four times
// that, and keeps a read (the JSON text and the decoded nodes, about as large) within
// the agent's 128 MiB memory limit.
const MaxValueBytes = 16 << 20

// ErrValueTooLarge: a value decompresses to more than the bound its reader set.
var ErrValueTooLarge = errors.New("the Argo CD cache value is larger than the addon reads")

// Decode decodes a value as redisCache.unmarshal does: JSON, gzip-compressed or not. A
// value over MaxValueBytes, decompressed, is ErrValueTooLarge.
func Decode(raw []byte, compressed bool, v any) error {
	_, err := DecodeBounded(raw, compressed, MaxValueBytes, v)
	return err
}

// DecodeBounded is Decode of a value that may decompress to limit bytes at most; it
// returns how many it decompressed. It stops reading past the limit with
// ErrValueTooLarge, so that a gzip bomb costs no more than limit bytes.
func DecodeBounded(raw []byte, compressed bool, limit int64, v any) (int64, error) {
	counted := &countingReader{r: bytes.NewReader(raw), limit: limit}
	if compressed {
		gz, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			return 0, fmt.Errorf("decompress an Argo CD cache value: %w", err)
		}
		defer gz.Close()
		counted.r = gz
	}
	err := json.NewDecoder(counted).Decode(v)
	switch {
	case counted.n > limit:
		return counted.n, fmt.Errorf("%w: over %d bytes decompressed", ErrValueTooLarge, limit)
	case err != nil:
		return counted.n, fmt.Errorf("decode an Argo CD cache value: %w", err)
	}
	return counted.n, nil
}

// countingReader reads r up to one byte past limit, and counts what it read.
type countingReader struct {
	r        io.Reader
	n, limit int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	if c.n > c.limit {
		return 0, ErrValueTooLarge
	}
	if room := c.limit + 1 - c.n; int64(len(p)) > room {
		p = p[:room]
	}
	k, err := c.r.Read(p)
	c.n += int64(k)
	return k, err
}

// Tree is the part of Argo CD's ApplicationTree that the addon reads and writes.
type Tree struct {
	Nodes       []Node `json:"nodes,omitempty"`
	ShardsCount int64  `json:"shardsCount,omitempty"`
}

// Node is the part of Argo CD's ResourceNode that the addon reads and writes.
type Node struct {
	Ref
	ParentRefs []Ref    `json:"parentRefs,omitempty"`
	Images     []string `json:"images,omitempty"`
	Health     *Health  `json:"health,omitempty"`
}

// Ref is Argo CD's ResourceRef.
type Ref struct {
	Group     string `json:"group,omitempty"`
	Version   string `json:"version,omitempty"`
	Kind      string `json:"kind,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name,omitempty"`
	// UID links a node to its children's ParentRefs in the argocd CLI's tree view.
	UID string `json:"uid,omitempty"`
}

// Health is Argo CD's HealthStatus.
type Health struct {
	Status  string `json:"status,omitempty"`
	Message string `json:"message,omitempty"`
}

// ResourceDiff is the part of Argo CD's ResourceDiff, an entry of an app's managed
// resources, that the addon writes.
type ResourceDiff struct {
	Group     string `json:"group,omitempty"`
	Kind      string `json:"kind,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name,omitempty"`
	// The manifests, JSON; "null" for none, as the application-controller writes an
	// absent one.
	TargetState         string `json:"targetState,omitempty"`
	LiveState           string `json:"liveState,omitempty"`
	NormalizedLiveState string `json:"normalizedLiveState,omitempty"`
	PredictedLiveState  string `json:"predictedLiveState,omitempty"`
	Hook                bool   `json:"hook,omitempty"`
	Modified            bool   `json:"modified,omitempty"`
}

// FullName is ResourceDiff.FullName, the order Argo CD keeps managed resources in.
func (r ResourceDiff) FullName() string {
	return r.Group + "/" + r.Kind + "/" + r.Namespace + "/" + r.Name
}

// ClientOptions say how to reach an Argo CD's Redis.
type ClientOptions struct {
	// Addr is host:port.
	Addr string
	// Username is the Redis ACL user (AUTH <username> <password>); empty means the
	// default user.
	Username string
	// Password returns Redis' password at each new connection; "" for none. Nil means
	// none.
	Password func(ctx context.Context) (string, error)
	// TLS, when set, connects over TLS (--redis-use-tls).
	TLS *tls.Config
	// PoolSize bounds the open connections.
	PoolSize int
}

// NewClient returns a client of an Argo CD's Redis. It fails fast (short timeouts, one
// retry): a caller that cannot reach Redis says so and carries on.
func NewClient(opts ClientOptions) *redis.Client {
	o := &redis.Options{
		Addr:            opts.Addr,
		TLSConfig:       opts.TLS,
		Protocol:        2,
		DisableIdentity: true,
		DialTimeout:     2 * time.Second,
		ReadTimeout:     5 * time.Second,
		WriteTimeout:    5 * time.Second,
		MaxRetries:      1,
		PoolSize:        opts.PoolSize,
	}
	switch {
	case opts.Password != nil:
		o.CredentialsProviderContext = func(ctx context.Context) (string, string, error) {
			password, err := opts.Password(ctx)
			if err == nil && password == "" && opts.Username != "" {
				// Without a password go-redis would not authenticate, and the connection
				// would act as the default user.
				err = fmt.Errorf("no password for the Redis user %q", opts.Username)
			}
			return opts.Username, password, err
		}
	case opts.Username != "":
		o.Username = opts.Username
	}
	return redis.NewClient(o)
}

// SecretGetter reads a Secret of Argo CD's namespace: client-go's typed SecretInterface,
// or the agent's reader, which links no typed clientset (docs/design.md, section 8).
type SecretGetter interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Secret, error)
}

// PasswordFromSecret returns a ClientOptions.Password that reads the password from key of
// the Secret name (RedisSecret and RedisPasswordKey in a stock install) at each new
// connection, so that a rotated password is picked up; none when the Secret does not
// exist (Redis without a password).
func PasswordFromSecret(secrets SecretGetter, name, key string) func(context.Context) (string, error) {
	return func(ctx context.Context) (string, error) {
		secret, err := secrets.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return "", nil
		}
		if err != nil {
			return "", fmt.Errorf("read the Redis password from Secret %s: %w", name, err)
		}
		return string(secret.Data[key]), nil
	}
}
