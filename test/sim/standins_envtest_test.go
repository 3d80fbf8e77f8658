package sim

import (
	"context"
	"slices"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"
	workv1 "open-cluster-management.io/api/work/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	statusv1alpha1 "github.com/ocm-gitops/argocd-pull-addon/pkg/apis/argocdpull/v1alpha1"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/observed"
)

// shortRollout is FleetRollout's shape in a tenth of its time.
func shortRollout() []WorkStep {
	out := slices.Clone(FleetRollout)
	for i := range out {
		out[i].After /= 10
	}
	return out
}

// TestStandInsPlayTheRollout, on a real apiserver: the work agent writes a work's
// finalizer and every status step of its rollout, each refused patch included, and no
// more; the cluster's agent publishes the app in its slice as the feedback ends, Synced
// and Healthy with its resources; a deleted work loses the finalizer and goes.
func TestStandInsPlayTheRollout(t *testing.T) {
	ctrl.SetLogger(klog.NewKlogr())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	hub, err := StartHub(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	// The stand-ins stop first: an apiserver stops slowly while watches stay open.
	defer func() { cancel(); _ = hub.Stop() }()
	clusters, err := hub.CreateClusters(ctx, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	rollout := shortRollout()
	standIns, err := hub.StartStandIns(ctx, StandInOptions{Workers: 2, ResourcesPerApp: 3, Rollout: rollout})
	if err != nil {
		t.Fatal(err)
	}
	work := pulledWork(clusters[0], "")
	work.Name, work.Generation = "guestbook", 0
	if err := hub.Client.Create(ctx, work); err != nil {
		t.Fatal(err)
	}

	waitUntil(t, ctx, "the work's feedback Synced and Healthy and its app so in the cluster's slice", func() (bool, error) {
		got := &workv1.ManifestWork{}
		if err := hub.Client.Get(ctx, client.ObjectKeyFromObject(work), got); err != nil {
			return false, err
		}
		f := observed.FeedbackOf(got)
		if f.SyncStatus != argoapp.SyncSynced || f.HealthStatus != argoapp.HealthHealthy || !slices.Contains(got.Finalizers, workv1.ManifestWorkFinalizer) {
			return false, nil
		}
		list := &statusv1alpha1.ApplicationStatusSliceList{}
		if err := hub.Client.List(ctx, list, client.InNamespace(clusters[0])); err != nil {
			return false, err
		}
		for _, s := range list.Items {
			for _, app := range s.Apps {
				if app.Hub.Name == "guestbook" && app.Sync.Status == argoapp.SyncSynced && app.Health.Status == argoapp.HealthHealthy && len(app.Resources) == 3 {
					return true, nil
				}
			}
		}
		return false, nil
	})
	// The last step's write may still be on its way back to the cache: let the stand-ins
	// settle, then count.
	time.Sleep(time.Second)
	want := 0.0
	for _, step := range rollout {
		want += float64(1 + step.Conflicts)
	}
	writes := standIns.WorkAgent.Counts().WritesSince(nil)
	if writes.Total() != want || writes["PATCH manifestworks"] != 1 {
		t.Errorf("the work agent wrote %v; want %v patches in all, one of them of the finalizer", writes, want)
	}

	if err := hub.Client.Delete(ctx, work); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, ctx, "the deleted work gone", func() (bool, error) {
		err := hub.Client.Get(ctx, client.ObjectKeyFromObject(work), &workv1.ManifestWork{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
}

func waitUntil(t *testing.T, ctx context.Context, what string, done func() (bool, error)) {
	t.Helper()
	for {
		ok, err := done()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if ok {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: not after %v", what, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
