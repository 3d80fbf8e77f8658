package resourcetree

import (
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argocdcache"
)

// Settings are the controller's own settings, which the manager's flags set (AddFlags);
// DefaultSettings gives their defaults.
type Settings struct {
	// Redis is how to reach the hub Argo CD's Redis. Among the manager's settings, an
	// empty Addr without Sentinels means DefaultRedisAddr, and Disabled turns the
	// controller off.
	Redis RedisOptions
}

// RedisOptions say how to reach and write the hub Argo CD's Redis; DefaultSettings gives
// those of a stock Argo CD install.
type RedisOptions struct {
	// ClientOptions say how to reach it (argocd-redis.<namespace>.svc:6379, the password
	// of the Secret argocd-redis in ArgoCDNamespace); Setup sets its PoolSize.
	argocdcache.ClientOptions
	// Compression must be that of the hub Argo CD (--redis-compress, gzip by default).
	Compression argocdcache.Compression
	// Expiration is how long an entry lives without being written again
	// (argocdcache.DefaultExpiration, as the application-controller's); the controller
	// writes every app's entries again after half of it.
	Expiration time.Duration
}

// Disabled as Settings.Redis.Addr turns the controller off: the manager does not write
// the pulled apps' resource trees into the hub Argo CD's cache.
const Disabled = "none"

// DefaultSettings returns the defaults of the settings: a stock Argo CD install's Redis,
// its address left empty for DefaultRedisAddr.
func DefaultSettings() Settings {
	return Settings{Redis: RedisOptions{
		ClientOptions: argocdcache.ClientOptions{PasswordSecret: argocdcache.RedisSecret, PasswordKey: argocdcache.RedisPasswordKey,
			SentinelMaster: argocdcache.DefaultSentinelMaster},
		Compression: argocdcache.CompressionGzip, Expiration: argocdcache.DefaultExpiration,
	}}
}

// DefaultRedisAddr is the address of the Redis of a stock Argo CD install in
// argoCDNamespace.
func DefaultRedisAddr(argoCDNamespace string) string {
	return "argocd-redis." + argoCDNamespace + ".svc:6379"
}

// Enabled reports whether the settings run the controller (Disabled).
func (s Settings) Enabled() bool {
	return s.Redis.Addr != Disabled
}

// Validate reports settings that cannot work.
func (s Settings) Validate() error {
	var errs []error
	if err := s.Redis.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("the hub Argo CD's Redis: %w", err))
	}
	if _, err := argocdcache.ParseCompression(string(s.Redis.Compression)); err != nil {
		errs = append(errs, fmt.Errorf("the hub Argo CD's Redis: %w", err))
	}
	if s.Redis.Expiration < 2*time.Second {
		errs = append(errs, fmt.Errorf("the hub Argo CD's cache expiration is %v; it must be at least 2s", s.Redis.Expiration))
	}
	return errors.Join(errs...)
}

// AddFlags registers on fs a flag for each setting, its default s's: those of
// argocdcache.ClientOptions.AddFlags, and --argocd-redis, --argocd-redis-compress and
// --argocd-app-state-cache-expiration.
func (s *Settings) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&s.Redis.Addr, "argocd-redis", s.Redis.Addr,
		`host:port of the hub Argo CD's Redis, where the manager writes the pulled apps' resource trees for Argo CD's UI and API; empty means argocd-redis.<argocd-namespace>.svc:6379 (or the master the Sentinels of --argocd-sentinel name), "`+Disabled+`" writes none`)
	s.Redis.AddFlags(fs, "the hub Argo CD's Redis")
	fs.StringVar((*string)(&s.Redis.Compression), "argocd-redis-compress", string(s.Redis.Compression),
		"compression of the hub Argo CD's cache: gzip or none, as its --redis-compress")
	fs.DurationVar(&s.Redis.Expiration, "argocd-app-state-cache-expiration", s.Redis.Expiration,
		"how long a resource tree lives in the hub Argo CD's cache unless written again (written again after half of it)")
}
