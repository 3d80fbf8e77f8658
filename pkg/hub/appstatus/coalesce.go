package appstatus

// This file gathers what arrives together for one app into one reconcile, and so into
// at most one write: the feedback of its ManifestWork, the agent's slices and report,
// and the hub Application itself.

import (
	"context"
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// DefaultCoalesceWindow is Options.CoalesceWindow when it is zero. The agent publishes
// a change PublishDelay (200 ms) plus one request after it sees it, and the work agent
// feeds the same change back at about the time it sees it: 300 ms gathers both channels
// of one change on the spoke, and keeps the hub app within a second of it.
const DefaultCoalesceWindow = 300 * time.Millisecond

type requestQueue = workqueue.TypedRateLimitingInterface[reconcile.Request]

// coalescing returns h with every request it enqueues delayed by window. The workqueue
// holds an item once, and keeps the earliest of the times it was asked to hand it out
// (AddAfter): the events of an app in the window after its first become one reconcile,
// which reads the latest of every channel, and a stream of events cannot postpone it,
// as a delay renewed with each event would. A requeue (RequeueAfter, a retry) is not
// delayed further.
func coalescing(h handler.EventHandler, window time.Duration) handler.EventHandler {
	delayed := func(q requestQueue) requestQueue { return delayedQueue{TypedRateLimitingInterface: q, delay: window} }
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q requestQueue) {
			h.Create(ctx, e, delayed(q))
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q requestQueue) {
			h.Update(ctx, e, delayed(q))
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q requestQueue) {
			h.Delete(ctx, e, delayed(q))
		},
		GenericFunc: func(ctx context.Context, e event.GenericEvent, q requestQueue) {
			h.Generic(ctx, e, delayed(q))
		},
	}
}

// delayedQueue is a controller's queue whose Add hands the item out after delay. It does
// not offer controller-runtime's priority queue's AddWithOpts, so that the handlers it is
// given to call Add. The priority stays: handler.Funcs hands coalescing's functions a
// priority queue that gives the events of the initial list and of a resync the low
// priority, and AddAfter keeps it.
type delayedQueue struct {
	workqueue.TypedRateLimitingInterface[reconcile.Request]
	delay time.Duration
}

// Add hands item out after the delay, or sooner if the queue holds it for sooner.
func (q delayedQueue) Add(item reconcile.Request) {
	q.AddAfter(item, q.delay)
}
