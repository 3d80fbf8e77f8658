package resourcetree

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argocdcache"
)

// cacheWriter writes apps' entries into the hub Argo CD's Redis, as the hub
// application-controller's appstate cache does.
type cacheWriter struct {
	client *redis.Client
	// target names the Redis in errors (argocdcache.ClientOptions.Target).
	target      string
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

// sourceKey is the manager's own key beside an app's entries, with their expiration:
// what they were rendered from (sourceOf). A manager that starts (a restart, a failover)
// reads it to leave the entries of an unchanged app as they are, rather than read the
// app's slice and write them again. Argo CD reads no key of this prefix.
func sourceKey(instance string) string { return sourceKeyPrefix + instance }

const sourceKeyPrefix = "argocd-pull|resource-tree-source|"

// markerKey is the manager's key that tells whether Redis still holds what the manager
// wrote: set when missing, with the entries' expiration (markerExpiration), and extended
// when half of it is left. Argo CD's Redis keeps nothing on disk: one that restarted (a
// Pod rolled, an OOM kill) or was flushed has lost it with the trees, and checkMarker
// finds it gone. One that was unreachable for a while, or a replica that a Sentinel
// promoted, still has it. No app has this instance name (a Kubernetes name has no "|"),
// and Argo CD reads no key of this prefix.
const markerKey = sourceKeyPrefix + "|marker"

// WriterACLRules are the rules of a Redis ACL user that can do what the writer does and
// nothing else: GET, SET, PTTL, EXISTS, EXPIRE and DEL on the keys of the apps' trees and
// managed resources and on the writer's own source keys and marker, and PUBLISH of the tree
// notifications. AUTH (and HELLO's answer to it) needs no rule; a database other than 0
// needs +select as well. Give them to the manager's user:
//
//	ACL SETUSER argocd-pull-manager on >PASSWORD <rules...>
//
// docs/operations.md, "The manager's Redis user", shows the line.
func WriterACLRules() []string {
	return []string{"resetkeys", "~" + argocdcache.TreeKeyPrefix + "*", "~" + argocdcache.ManagedResourcesKeyPrefix + "*", "~" + sourceKeyPrefix + "*",
		"resetchannels", "&" + argocdcache.TreeNotificationPattern(),
		"-@all", "+get", "+set", "+pttl", "+exists", "+expire", "+del", "+publish"}
}

// renderVersion names Render's output: change it whenever Render renders an entry
// differently (TestRenderIsPinned fails then), so that a new manager writes every tree
// again instead of trusting sourceKey.
const renderVersion = "3"

// sourceOf is the value of sourceKey for entries rendered from a slice entry whose
// Digest is entryDigest.
func sourceOf(entryDigest string) string {
	return renderVersion + ":" + hex.EncodeToString([]byte(entryDigest))
}

// source returns the value of the app instance's sourceKey and its remaining time to
// live; "" when it, or either entry, is not there.
func (w *cacheWriter) source(ctx context.Context, instance string) (string, time.Duration, error) {
	if err := w.down(); err != nil {
		return "", 0, err
	}
	var value *redis.StringCmd
	var ttl *redis.DurationCmd
	var entries *redis.IntCmd
	_, err := w.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		value = p.Get(ctx, sourceKey(instance))
		ttl = p.PTTL(ctx, sourceKey(instance))
		entries = p.Exists(ctx, argocdcache.StoredKey(argocdcache.TreeKey(instance, 0), w.compression),
			argocdcache.StoredKey(argocdcache.ManagedResourcesKey(instance), w.compression))
		return nil
	})
	if errors.Is(err, redis.Nil) || err == nil && entries.Val() != 2 {
		return "", 0, nil
	}
	if err != nil {
		return "", 0, w.result(err)
	}
	return value.Val(), ttl.Val(), nil
}

// setSource sets the app instance's sourceKey to source, keeping its expiration, when it
// is there: entries rendered from another entry of the app were found to be what this one
// renders.
func (w *cacheWriter) setSource(ctx context.Context, instance, source string) error {
	if err := w.down(); err != nil {
		return err
	}
	err := w.client.SetArgs(ctx, sourceKey(instance), source, redis.SetArgs{Mode: "XX", KeepTTL: true}).Err()
	if errors.Is(err, redis.Nil) {
		return nil // gone: the entries are written again when next due
	}
	return w.result(err)
}

// extend sets the expiration of the app instance's entries and sourceKey again, and
// reports whether all three were there.
func (w *cacheWriter) extend(ctx context.Context, instance string) (bool, error) {
	if err := w.down(); err != nil {
		return false, err
	}
	var kept [3]*redis.BoolCmd
	_, err := w.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, key := range []string{argocdcache.StoredKey(argocdcache.TreeKey(instance, 0), w.compression),
			argocdcache.StoredKey(argocdcache.ManagedResourcesKey(instance), w.compression), sourceKey(instance)} {
			kept[i] = p.Expire(ctx, key, w.expiration)
		}
		return nil
	})
	if err != nil {
		return false, w.result(err)
	}
	return kept[0].Val() && kept[1].Val() && kept[2].Val(), nil
}

// write sets the app instance's tree (one shard) and managed resources, and announces
// the tree as SetAppResourcesTree does, so that argocd-server's tree watch (the UI)
// reads it again; and its sourceKey, to source.
func (w *cacheWriter) write(ctx context.Context, instance string, e entries, source string) error {
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
		p.Set(ctx, sourceKey(instance), source, w.expiration)
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
			argocdcache.StoredKey(argocdcache.ManagedResourcesKey(instance), w.compression), sourceKey(instance))
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
	err = fmt.Errorf("write the hub Argo CD's cache at %s: %w", w.target, err)
	w.mu.Lock()
	w.downUntil, w.downErr = time.Now().Add(retryAfter), err
	w.mu.Unlock()
	return err
}

// checkMarker reports whether Redis lost markerKey, and then sets it again; it extends it
// when less than half of its expiration is left. On a Redis that holds it, that is one
// PTTL, and an EXPIRE once per half expiration. It fails, and reports nothing lost, while
// Redis cannot be reached; unlike the writes, it does not make them fail fast
// (retryAfter). A Redis that answers it ends the writes' failing fast: the writes that
// follow a restart must not fail for what a write failed while Redis was down.
func (w *cacheWriter) checkMarker(ctx context.Context) (lost bool, err error) {
	ttl, err := w.client.PTTL(ctx, markerKey).Result()
	if err != nil {
		return false, fmt.Errorf("read %s in the hub Argo CD's cache at %s: %w", markerKey, w.target, err)
	}
	w.mu.Lock()
	w.downUntil, w.downErr = time.Time{}, nil
	w.mu.Unlock()
	switch {
	case ttl == -2: // gone
		// NX: a Redis that lost it, whoever sets it again.
		if err := w.client.SetArgs(ctx, markerKey, time.Now().UTC().Format(time.RFC3339),
			redis.SetArgs{Mode: "NX", TTL: w.markerExpiration()}).Err(); err != nil && !errors.Is(err, redis.Nil) {
			return false, fmt.Errorf("set %s in the hub Argo CD's cache at %s: %w", markerKey, w.target, err)
		}
		return true, nil
	case ttl == -1 || ttl < w.markerExpiration()/2:
		if err := w.client.Expire(ctx, markerKey, w.markerExpiration()).Err(); err != nil {
			return false, fmt.Errorf("extend %s in the hub Argo CD's cache at %s: %w", markerKey, w.target, err)
		}
	}
	return false, nil
}

// markerExpiration is markerKey's: the entries' expiration, and at least ten checks.
func (w *cacheWriter) markerExpiration() time.Duration { return max(w.expiration, 10*lossCheckPeriod) }

// Close closes the connections.
func (w *cacheWriter) Close() error { return w.client.Close() }
