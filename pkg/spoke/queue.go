package spoke

import (
	"context"
	"errors"
	"net/url"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/workqueue"
)

// reportKey is the only item of the agent's work queue: there is one report.
const reportKey = "report"

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
