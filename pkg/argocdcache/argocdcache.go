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
// that changes any of it fails there, naming what changed (docs/design.md, sections 3.4
// and 2.6).
package argocdcache

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha1" //nolint:gosec // a name-based UUID, not a security use
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
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

// ReaderACLRules are the rules of a Redis ACL user that can read the apps' resource trees,
// their managed resources (the states of Argo CD's diff, Secrets redacted) and their
// notifications and nothing else: GET on the tree and managed-resources keys, PSUBSCRIBE on the
// pattern of the tree notifications (which Redis matches literally against a PSUBSCRIBE
// pattern), PING (go-redis pings an idle subscription every 3 s), and no other command,
// key or channel. AUTH (and HELLO's answer to it) needs no rule. Give them to the agent's
// user:
//
//	ACL SETUSER argocd-pull-agent on >PASSWORD <rules...>
//
// docs/operations.md, "The agent's Redis user", shows the line.
func ReaderACLRules() []string {
	return []string{"resetkeys", "~" + TreeKeyPrefix + "*", "~" + ManagedResourcesKeyPrefix + "*", "resetchannels", "&" + TreeNotificationPattern(), "-@all", "+get", "+psubscribe", "+ping"}
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

// StandInUID is the stable stand-in for the UID of the resource r names, which the
// status slices do not carry, and which the manager writes into the hub's trees: a
// name-based UUID (RFC 9562 version 5) of group/kind/namespace/name. The argocd CLI's
// tree view links children to parents by UID; the UI by group, kind, namespace and name.
// It never equals the UID of a real object: the agent maps it back to the resource of
// that name when argocd-server selects a resource's events by it (pkg/spoke,
// resourceproxy.go).
func (r Ref) StandInUID() string {
	sum := sha1.Sum([]byte("argocd-pull.open-cluster-management.io/" + r.Group + "/" + r.Kind + "/" + r.Namespace + "/" + r.Name)) //nolint:gosec // an identifier, not a security use
	sum[6] = sum[6]&0x0f | 0x50
	sum[8] = sum[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", sum[0:4], sum[4:6], sum[6:8], sum[8:10], sum[10:16])
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

// ClientOptions say how to reach an Argo CD's Redis, with the connection options of
// Argo CD's own components (util/cache's AddCacheFlagsToCmd): each field names the Argo CD
// flag or environment variable it mirrors. The manager's and the agent's flags of the same
// names (with their "argocd-" prefix) set them.
type ClientOptions struct {
	// Addr is host:port of Redis (--redis); unused with SentinelAddrs.
	Addr string
	// DB is the database (--redisdb).
	DB int
	// SentinelAddrs are host:port of Redis Sentinels (--sentinel): when set, the client
	// asks them for the master of the group SentinelMaster (--sentinelmaster) and
	// follows its failovers, instead of connecting to Addr. The Sentinels themselves
	// are reached without a password.
	SentinelAddrs  []string
	SentinelMaster string
	// Username is the Redis ACL user (REDIS_USERNAME); empty means the default user.
	Username string
	// PasswordSecret and PasswordKey name the Secret, in Argo CD's namespace, and its key
	// that hold the user's password (REDIS_PASSWORD; argocd-redis, auth in a stock
	// install). It is read at each new connection, so that a rotated password is picked
	// up; no password when PasswordSecret is empty or the Secret does not exist.
	PasswordSecret string
	PasswordKey    string
	// TLS says how to connect over TLS.
	TLS TLSOptions
	// PoolSize bounds the open connections; it is the caller's, not a flag's.
	PoolSize int
}

// TLSOptions say how to connect to Redis over TLS, as Argo CD's flags do.
type TLSOptions struct {
	// Enabled connects over TLS (--redis-use-tls).
	Enabled bool
	// CAFile is the PEM bundle of the CAs that sign Redis' certificate
	// (--redis-ca-certificate); empty means the system's.
	CAFile string
	// ClientCertFile and ClientKeyFile are the PEM certificate and key that the client
	// presents to a Redis that authenticates clients (--redis-client-certificate,
	// --redis-client-key; tls-auth-clients in redis.conf).
	ClientCertFile string
	ClientKeyFile  string
	// InsecureSkipVerify does not verify Redis' certificate
	// (--redis-insecure-skip-tls-verify).
	InsecureSkipVerify bool
}

// DefaultSentinelMaster is Argo CD's --sentinelmaster default.
const DefaultSentinelMaster = "master"

// Validate reports options that cannot work, or that contradict each other where Argo CD
// would silently pick one.
func (o ClientOptions) Validate() error {
	var errs []error
	switch {
	case o.Addr == "" && len(o.SentinelAddrs) == 0:
		errs = append(errs, errors.New("neither a Redis address nor Sentinels"))
	case o.Addr != "" && len(o.SentinelAddrs) > 0:
		errs = append(errs, fmt.Errorf("both a Redis address (%s) and Sentinels (%s): the Sentinels name the master", o.Addr, strings.Join(o.SentinelAddrs, ",")))
	}
	addrs := o.SentinelAddrs
	if len(addrs) == 0 && o.Addr != "" {
		addrs = []string{o.Addr}
	}
	for _, addr := range addrs {
		if host, port, err := net.SplitHostPort(addr); err != nil || host == "" || port == "" {
			errs = append(errs, fmt.Errorf("the Redis address %q is not host:port", addr))
		}
	}
	if len(o.SentinelAddrs) > 0 && o.SentinelMaster == "" {
		errs = append(errs, errors.New("the Sentinels without the name of their master group"))
	}
	if o.DB < 0 {
		errs = append(errs, fmt.Errorf("the Redis database %d is negative", o.DB))
	}
	if o.PasswordSecret != "" && o.PasswordKey == "" {
		errs = append(errs, fmt.Errorf("the Redis password Secret %s without a key", o.PasswordSecret))
	}
	if o.Username != "" && o.PasswordSecret == "" {
		errs = append(errs, fmt.Errorf("the Redis user %q without a password Secret", o.Username))
	}
	t := o.TLS
	if !t.Enabled && (t.CAFile != "" || t.ClientCertFile != "" || t.ClientKeyFile != "" || t.InsecureSkipVerify) {
		errs = append(errs, errors.New("a TLS option (CA, client certificate or key, skipping verification) without TLS"))
	}
	if (t.ClientCertFile == "") != (t.ClientKeyFile == "") {
		errs = append(errs, fmt.Errorf("a Redis client certificate (%q) needs its key (%q), and a key its certificate", t.ClientCertFile, t.ClientKeyFile))
	}
	if t.InsecureSkipVerify && t.CAFile != "" {
		errs = append(errs, fmt.Errorf("a Redis CA (%s) with skipping the verification of Redis' certificate: choose one", t.CAFile))
	}
	return errors.Join(errs...)
}

// AddFlags registers on fs a flag for each option but Addr and PoolSize, named as Argo
// CD's with the prefix "argocd-" (--argocd-redisdb, --argocd-sentinel, ...), their
// defaults o's. whose says, in their help, whose Redis it is.
func (o *ClientOptions) AddFlags(fs *flag.FlagSet, whose string) {
	fs.IntVar(&o.DB, "argocd-redisdb", o.DB, "database of "+whose+", as its --redisdb")
	fs.Var(sentinelsFlag{&o.SentinelAddrs}, "argocd-sentinel",
		"host:port of a Sentinel of "+whose+", as its --sentinel; repeat the flag, or separate them with commas. With Sentinels the master they name is written, and --argocd-redis must be empty")
	fs.StringVar(&o.SentinelMaster, "argocd-sentinelmaster", o.SentinelMaster, "the Sentinels' master group name, as its --sentinelmaster")
	fs.StringVar(&o.Username, "argocd-redis-username", o.Username, "Redis ACL user to authenticate as (REDIS_USERNAME); empty: the default user")
	fs.StringVar(&o.PasswordSecret, "argocd-redis-password-secret", o.PasswordSecret,
		"Secret in the Argo CD namespace that holds the Redis user's password, read at each new connection (REDIS_PASSWORD); none when empty or when the Secret does not exist")
	fs.StringVar(&o.PasswordKey, "argocd-redis-password-key", o.PasswordKey, "key of the Redis password in its Secret")
	fs.BoolVar(&o.TLS.Enabled, "argocd-redis-use-tls", o.TLS.Enabled, "connect to "+whose+" over TLS, as its --redis-use-tls")
	fs.StringVar(&o.TLS.CAFile, "argocd-redis-ca-certificate", o.TLS.CAFile, "PEM bundle of the CAs that sign Redis' certificate; empty: the system's")
	fs.StringVar(&o.TLS.ClientCertFile, "argocd-redis-client-certificate", o.TLS.ClientCertFile,
		"PEM client certificate to present to Redis (tls-auth-clients), with --argocd-redis-client-key")
	fs.StringVar(&o.TLS.ClientKeyFile, "argocd-redis-client-key", o.TLS.ClientKeyFile, "PEM key of --argocd-redis-client-certificate")
	fs.BoolVar(&o.TLS.InsecureSkipVerify, "argocd-redis-insecure-skip-tls-verify", o.TLS.InsecureSkipVerify, "do not verify Redis' certificate")
}

// Args returns the flags of AddFlags that give o's options, but those at their zero
// value: what a process renders for another's command line (the hub for the agent's).
func (o ClientOptions) Args() []string {
	var args []string
	add := func(name, value string) {
		if value != "" && value != "0" && value != "false" {
			args = append(args, "--"+name+"="+value)
		}
	}
	add("argocd-redisdb", strconv.Itoa(o.DB))
	for _, addr := range o.SentinelAddrs {
		add("argocd-sentinel", addr)
	}
	if len(o.SentinelAddrs) > 0 {
		add("argocd-sentinelmaster", o.SentinelMaster)
	}
	add("argocd-redis-username", o.Username)
	add("argocd-redis-password-secret", o.PasswordSecret)
	add("argocd-redis-password-key", o.PasswordKey)
	add("argocd-redis-use-tls", strconv.FormatBool(o.TLS.Enabled))
	add("argocd-redis-ca-certificate", o.TLS.CAFile)
	add("argocd-redis-client-certificate", o.TLS.ClientCertFile)
	add("argocd-redis-client-key", o.TLS.ClientKeyFile)
	add("argocd-redis-insecure-skip-tls-verify", strconv.FormatBool(o.TLS.InsecureSkipVerify))
	return args
}

// sentinelsFlag is a repeatable flag of comma-separated host:port.
type sentinelsFlag struct{ addrs *[]string }

func (f sentinelsFlag) String() string {
	if f.addrs == nil {
		return ""
	}
	return strings.Join(*f.addrs, ",")
}

func (f sentinelsFlag) Set(v string) error {
	for _, addr := range strings.Split(v, ",") {
		if addr = strings.TrimSpace(addr); addr != "" {
			*f.addrs = append(*f.addrs, addr)
		}
	}
	return nil
}

// Target says which Redis the options reach, for messages.
func (o ClientOptions) Target() string {
	if len(o.SentinelAddrs) > 0 {
		return fmt.Sprintf("master %s of the Sentinels %s", o.SentinelMaster, strings.Join(o.SentinelAddrs, ","))
	}
	return o.Addr
}

// config returns the TLS configuration that Argo CD builds from the same options: the
// client certificate, if any; then no verification, or the CA file's CAs, or the
// system's. Nil without TLS.
func (t TLSOptions) config() (*tls.Config, error) {
	if !t.Enabled {
		return nil, nil
	}
	config := &tls.Config{MinVersion: tls.VersionTLS12}
	if t.ClientCertFile != "" {
		cert, err := tls.LoadX509KeyPair(t.ClientCertFile, t.ClientKeyFile)
		if err != nil {
			return nil, fmt.Errorf("load the Redis client certificate %s and key %s: %w", t.ClientCertFile, t.ClientKeyFile, err)
		}
		config.Certificates = []tls.Certificate{cert}
	}
	switch {
	case t.InsecureSkipVerify:
		config.InsecureSkipVerify = true
	case t.CAFile != "":
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("read the Redis CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("the Redis CA file %s holds no PEM certificate", t.CAFile)
		}
		config.RootCAs = pool
	default:
		pool, err := x509.SystemCertPool()
		if err != nil {
			return nil, fmt.Errorf("read the system's CAs for Redis' certificate: %w", err)
		}
		config.RootCAs = pool
	}
	return config, nil
}

// NewClient returns a client of an Argo CD's Redis, built as Argo CD builds its own
// (util/cache: buildRedisClient, or buildFailoverRedisClient with Sentinels), with the
// password of opts.PasswordSecret read through secrets at each new connection. It fails
// fast (short timeouts, one retry): a caller that cannot reach Redis says so and carries
// on. An error is a bad option or an unreadable TLS file.
func NewClient(opts ClientOptions, secrets SecretGetter) (*redis.Client, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	tlsConfig, err := opts.TLS.config()
	if err != nil {
		return nil, err
	}
	var credentials func(ctx context.Context) (string, string, error)
	if opts.PasswordSecret != "" {
		password := passwordFromSecret(secrets, opts.PasswordSecret, opts.PasswordKey)
		credentials = func(ctx context.Context) (string, string, error) {
			p, err := password(ctx)
			if err == nil && p == "" && opts.Username != "" {
				// Without a password go-redis would not authenticate, and the connection
				// would act as the default user.
				err = fmt.Errorf("no password for the Redis user %q", opts.Username)
			}
			return opts.Username, p, err
		}
	}
	const dial, read, write, retries = 2 * time.Second, 5 * time.Second, 5 * time.Second, 1
	if len(opts.SentinelAddrs) > 0 {
		client := redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName: opts.SentinelMaster, SentinelAddrs: opts.SentinelAddrs,
			DB: opts.DB, TLSConfig: tlsConfig, Protocol: 2, DisableIdentity: true,
			DialTimeout: dial, ReadTimeout: read, WriteTimeout: write, MaxRetries: retries, PoolSize: opts.PoolSize,
		})
		// go-redis 9.8's FailoverOptions take no credentials provider. The master's
		// connections authenticate with the client's Options, which this sets before the
		// first connection; the Sentinels' with FailoverOptions, which leave them
		// unauthenticated. TestSentinelFailoverClient checks it on a real Sentinel.
		client.Options().CredentialsProviderContext = credentials
		return client, nil
	}
	return redis.NewClient(&redis.Options{
		Addr: opts.Addr, DB: opts.DB, TLSConfig: tlsConfig, Protocol: 2, DisableIdentity: true,
		DialTimeout: dial, ReadTimeout: read, WriteTimeout: write, MaxRetries: retries, PoolSize: opts.PoolSize,
		CredentialsProviderContext: credentials,
	}), nil
}

// SecretGetter reads a Secret of Argo CD's namespace: client-go's typed SecretInterface,
// or the agent's reader, which links no typed clientset (docs/design.md, section 3.7).
type SecretGetter interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Secret, error)
}

// passwordFromSecret returns a function that reads the password from key of the Secret
// name (RedisSecret and RedisPasswordKey in a stock install) at each new
// connection, so that a rotated password is picked up; none when the Secret does not
// exist (Redis without a password).
func passwordFromSecret(secrets SecretGetter, name, key string) func(context.Context) (string, error) {
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
