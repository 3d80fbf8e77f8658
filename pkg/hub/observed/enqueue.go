package observed

import (
	"context"

	"k8s.io/client-go/util/workqueue"
	workv1 "open-cluster-management.io/api/work/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// EnqueueClusterWorks adds to q what mapWork maps each ManifestWork of a cluster's
// namespace to: what a controller must recompute when the cluster's agent report or
// availability changes in a way it cannot narrow down.
func EnqueueClusterWorks(ctx context.Context, c client.Reader, cluster string, mapWork handler.MapFunc,
	q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	works := &workv1.ManifestWorkList{}
	if err := c.List(ctx, works, client.InNamespace(cluster)); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "list the ManifestWorks of a cluster", "cluster", cluster)
		return
	}
	for i := range works.Items {
		for _, req := range mapWork(ctx, &works.Items[i]) {
			q.Add(req)
		}
	}
}
