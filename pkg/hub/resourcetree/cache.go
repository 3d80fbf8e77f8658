package resourcetree

import (
	"context"
	"crypto/sha256"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argocdcache"
)

// cacheWriter writes apps' entries into the hub Argo CD's Redis, as the hub
// application-controller's appstate cache does.
type cacheWriter struct {
	client      *redis.Client
	compression argocdcache.Compression
	expiration  time.Duration

	mu sync.Mutex
	// downUntil: after a failure to reach Redis, writes fail at once until then, so that
	// the apps of a burst do not each wait for a timeout.
	downUntil time.Time
	downErr   error
}

// retryAfter is how long the writer gives up on an unreachable Redis.
const retryAfter = 5 * time.Second

// entries are an app's encoded cache entries, uncompressed, and their digest.
type entries struct {
	tree, managed []byte
	digest        [sha256.Size]byte
}

// encodeEntries encodes the tree and the managed resources of an app.
func encodeEntries(tree argocdcache.Tree, managed []argocdcache.ResourceDiff) (entries, error) {
	t, err := argocdcache.Encode(tree, argocdcache.CompressionNone)
	if err != nil {
		return entries{}, err
	}
	m, err := argocdcache.Encode(managed, argocdcache.CompressionNone)
	if err != nil {
		return entries{}, err
	}
	h := sha256.New()
	h.Write(t)
	h.Write(m)
	e := entries{tree: t, managed: m}
	copy(e.digest[:], h.Sum(nil))
	return e, nil
}

// write sets the app instance's tree (one shard) and managed resources, and announces
// the tree as SetAppResourcesTree does, so that argocd-server's tree watch (the UI)
// reads it again.
func (w *cacheWriter) write(ctx context.Context, instance string, e entries) error {
	if err := w.down(); err != nil {
		return err
	}
	tree, err := argocdcache.Compress(e.tree, w.compression)
	if err != nil {
		return err
	}
	managed, err := argocdcache.Compress(e.managed, w.compression)
	if err != nil {
		return err
	}
	_, err = w.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, argocdcache.StoredKey(argocdcache.TreeKey(instance, 0), w.compression), tree, w.expiration)
		p.Set(ctx, argocdcache.StoredKey(argocdcache.ManagedResourcesKey(instance), w.compression), managed, w.expiration)
		p.Publish(ctx, argocdcache.ManagedResourcesKey(instance), "")
		return nil
	})
	return w.result(err)
}

// remove deletes the app instance's entries and announces it.
func (w *cacheWriter) remove(ctx context.Context, instance string) error {
	if err := w.down(); err != nil {
		return err
	}
	_, err := w.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, argocdcache.StoredKey(argocdcache.TreeKey(instance, 0), w.compression),
			argocdcache.StoredKey(argocdcache.ManagedResourcesKey(instance), w.compression))
		p.Publish(ctx, argocdcache.ManagedResourcesKey(instance), "")
		return nil
	})
	return w.result(err)
}

func (w *cacheWriter) down() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if time.Now().Before(w.downUntil) {
		return w.downErr
	}
	return nil
}

func (w *cacheWriter) result(err error) error {
	if err == nil {
		return nil
	}
	err = fmt.Errorf("write the hub Argo CD's cache at %s: %w", w.client.Options().Addr, err)
	w.mu.Lock()
	w.downUntil, w.downErr = time.Now().Add(retryAfter), err
	w.mu.Unlock()
	return err
}

// Close closes the connections.
func (w *cacheWriter) Close() error { return w.client.Close() }
