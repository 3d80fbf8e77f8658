package sim

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/observed"
)

// pulledWork is a work of cluster that carries an Application, as the manager renders one.
func pulledWork(cluster string, uid types.UID) *workv1.ManifestWork {
	app := []byte(`{"apiVersion":"argoproj.io/v1alpha1","kind":"Application","metadata":{"name":"guestbook","namespace":"argocd"}}`)
	return &workv1.ManifestWork{
		ObjectMeta: metav1.ObjectMeta{Namespace: cluster, Name: "guestbook-" + string(uid), UID: uid, Generation: 1,
			Annotations: map[string]string{argoapp.AnnotationHubApplicationName: "guestbook"}},
		Spec: workv1.ManifestWorkSpec{Workload: workv1.ManifestsTemplate{Manifests: []workv1.Manifest{{RawExtension: runtime.RawExtension{Raw: app}}}}},
	}
}

// TestFleetRolloutSpread: each step waits half to one and a half times its After, the
// same for the same work; a step taken Together waits the same for every work of a
// cluster, and the others do not.
func TestFleetRolloutSpread(t *testing.T) {
	s := &StandIns{rollout: FleetRollout}
	together, alone := -1, -1
	for i, step := range FleetRollout {
		if step.Together && together < 0 {
			together = i
		}
		if !step.Together && step.After >= time.Second && alone < 0 {
			alone = i
		}
	}
	if together < 0 || alone < 0 {
		t.Fatalf("FleetRollout has no step taken Together (%d) or alone of a second or more (%d)", together, alone)
	}
	differs := false
	for n := range 50 {
		a, b := pulledWork("cluster-1", types.UID(fmt.Sprintf("a%d", n))), pulledWork("cluster-1", types.UID(fmt.Sprintf("b%d", n)))
		for i, step := range FleetRollout {
			got := s.after(a, i)
			if got < step.After/2 || got >= step.After*3/2 {
				t.Fatalf("step %d of work %s waits %v; want [%v, %v)", i, a.UID, got, step.After/2, step.After*3/2)
			}
			if again := s.after(a, i); again != got {
				t.Errorf("step %d of work %s waits %v, then %v", i, a.UID, got, again)
			}
		}
		if s.after(a, together) != s.after(b, together) {
			t.Errorf("the step taken Together waits %v for one work of the cluster and %v for another", s.after(a, together), s.after(b, together))
		}
		differs = differs || s.after(a, alone) != s.after(b, alone)
	}
	if !differs {
		t.Errorf("step %d waits the same for every work of a cluster", alone)
	}
}

// TestFleetRolloutEndsHealthy: the rollout's last status shows the Application Synced and
// Healthy, its operation Succeeded, and the work Applied and Available, as the agents and
// the manager read them; its first step is the finalizer.
func TestFleetRolloutEndsHealthy(t *testing.T) {
	for name, rollout := range map[string][]WorkStep{"FleetRollout": FleetRollout, "AtOnce": AtOnce} {
		work := pulledWork("cluster-1", "w")
		patch, err := stepPatch(work, rollout[len(rollout)-1])
		if err != nil {
			t.Fatal(err)
		}
		if patch.Status == nil || patch.Metadata != nil {
			t.Fatalf("%s's last step patches %+v, not the status alone", name, patch)
		}
		work.Status = *patch.Status
		f := observed.FeedbackOf(work)
		if f.SyncStatus != argoapp.SyncSynced || f.HealthStatus != argoapp.HealthHealthy || f.OperationStatePhase != argoapp.OperationSucceeded || f.SyncRevision != SyncRevision {
			t.Errorf("%s ends with the feedback %+v", name, f)
		}
		for _, c := range []string{workv1.WorkApplied, workv1.WorkAvailable} {
			if cond := meta.FindStatusCondition(work.Status.Conditions, c); cond == nil || cond.Status != metav1.ConditionTrue || cond.ObservedGeneration != 1 {
				t.Errorf("%s ends with the work's %s condition %+v", name, c, cond)
			}
		}
	}
	if !FleetRollout[0].Finalizer {
		t.Errorf("FleetRollout's first step is not the finalizer")
	}
}
