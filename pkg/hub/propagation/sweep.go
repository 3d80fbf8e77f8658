package propagation

// This file holds the periodic sweep for leftover ManifestWorks. Reconciliation is
// level-triggered and deletes works on the events that make them stale; the sweep is a
// safety net for a lost event, and logs everything it finds.

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	workv1 "open-cluster-management.io/api/work/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/hubcache"
)

// sweeper runs leftoverWorks every interval, and hands the Applications it finds to the
// propagation controller, which decides what to delete.
type sweeper struct {
	reconciler *reconciler
	interval   time.Duration
	found      chan<- event.TypedGenericEvent[types.NamespacedName]
}

// Start sweeps until ctx ends.
func (s *sweeper) Start(ctx context.Context) error {
	ctx = ctrl.LoggerInto(ctx, ctrl.Log.WithName("argocd-pull-propagation-sweep"))
	_ = wait.PollUntilContextCancel(ctx, s.interval, false, func(ctx context.Context) (bool, error) {
		for _, key := range s.reconciler.leftoverWorks(ctx) {
			select {
			case s.found <- event.TypedGenericEvent[types.NamespacedName]{Object: key}:
			case <-ctx.Done():
				return true, nil
			}
		}
		return false, nil
	})
	return nil
}

// NeedLeaderElection makes only the leader sweep.
func (s *sweeper) NeedLeaderElection() bool { return true }

// leftoverWorks returns the hub Applications that have a ManifestWork they should not
// have: the Application is gone or no longer pulled, or the work is not its current one
// (another cluster, or an earlier UID). It logs each one.
func (r *reconciler) leftoverWorks(ctx context.Context) []types.NamespacedName {
	log := ctrl.LoggerFrom(ctx)
	// The sweep reads the cache's own works and Applications, and only their metadata: a
	// deep copy of every work and a thaw of every Application at 10,000 apps made it the
	// manager's highest heap, every ten minutes (docs/design.md, section 2.9).
	works := &workv1.ManifestWorkList{}
	if err := r.client.List(ctx, works, client.HasLabels{argoapp.LabelPullToOCMManagedCluster}, client.UnsafeDisableDeepCopy); err != nil {
		log.Error(err, "list the pulled ManifestWorks")
		return nil
	}
	var found requestSet
	for i := range works.Items {
		work := &works.Items[i]
		key, ok := argoapp.ApplicationOfWork(work)
		if !ok {
			log.Info("a ManifestWork carries the pull label but does not name its hub application; leaving it",
				"work", client.ObjectKeyFromObject(work))
			continue
		}
		if !r.opts.watches(key.Namespace) {
			continue
		}
		if addon, labelled := work.Labels[argoapp.LabelAddon]; labelled && addon != r.opts.AddonName && !r.opts.TakeOverForeignWorks {
			continue // another install's work
		}
		app := argoapp.NewApplication()
		err := r.client.Get(ctx, key, app, client.UnsafeDisableDeepCopy, hubcache.KeepFrozen)
		switch {
		case apierrors.IsNotFound(err):
			log.Info("found a leftover ManifestWork: its hub application is gone", "work", client.ObjectKeyFromObject(work), "application", key)
		case err != nil:
			log.Error(err, "get the hub application of a ManifestWork", "work", client.ObjectKeyFromObject(work))
			continue
		default:
			pull, _ := argoapp.IsPullRequested(app.GetLabels(), app.GetAnnotations())
			current := work.Namespace == app.GetAnnotations()[argoapp.AnnotationOCMManagedCluster] &&
				work.Name == argoapp.ManifestWorkName(app.GetName(), app.GetUID())
			if pull && current && app.GetDeletionTimestamp() == nil {
				continue
			}
			log.Info("found a leftover ManifestWork: it is not the current work of its hub application",
				"work", client.ObjectKeyFromObject(work), "application", key, "pulled", pull)
		}
		found.add(key)
	}
	keys := make([]types.NamespacedName, 0, len(found.requests))
	for _, request := range found.list() {
		keys = append(keys, request.NamespacedName)
	}
	return keys
}

// sweepInterval is how often the sweep looks for leftover ManifestWorks.
const sweepInterval = 10 * time.Minute
