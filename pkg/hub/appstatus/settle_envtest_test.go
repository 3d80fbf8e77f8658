package appstatus

import (
	"fmt"
	"testing"
	"time"

	"github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	statusv1alpha1 "github.com/ocm-gitops/argocd-pull-addon/pkg/apis/argocdpull/v1alpha1"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/test/testenv"
)

// spokeStep is one state of the app on its managed cluster, as the work's feedback
// brings it.
type spokeStep struct {
	sync, health, phase string
}

// step plays the spoke: the work agent's feedback says the step (its revision names it),
// and then the agent's entry.
func (f *coalesceFixture) step(name string, s spokeStep) {
	f.feedStep(name, s)
	f.publishStep(name, s, nil)
}

// publishStep plays the agent: its entry says the step, with conditions.
func (f *coalesceFixture) publishStep(name string, s spokeStep, conditions []statusv1alpha1.Condition) {
	entry := f.entry(name)
	entry.Sync.Status, entry.Health.Status, entry.Health.Message = s.sync, s.health, ""
	entry.Resources[0].Status, entry.Resources[0].Health = s.sync, &statusv1alpha1.Health{Status: s.health}
	if s.phase != "" {
		entry.Operation = &statusv1alpha1.OperationState{Phase: s.phase, StartedAt: operationStart}
	}
	entry.Conditions = conditions
	f.hub.UpdateSlice(client.ObjectKeyFromObject(f.slice), func(cur *statusv1alpha1.ApplicationStatusSlice) {
		cur.Apps = []statusv1alpha1.AppStatus{entry}
	})
}

// operationStart is when the operation of the steps started.
const operationStart = "2026-12-07T10:00:00Z"

// feedStep plays the work agent: the work's feedback says the step.
func (f *coalesceFixture) feedStep(name string, s spokeStep) {
	values := map[string]string{
		argoapp.FeedbackSyncStatus: s.sync, argoapp.FeedbackHealthStatus: s.health, argoapp.FeedbackSyncRevision: name,
	}
	if s.phase != "" {
		values[argoapp.FeedbackOperationStatePhase] = s.phase
		values[argoapp.FeedbackOperationStateStartedAt] = operationStart
	}
	f.hub.UpdateWorkStatus(client.ObjectKeyFromObject(f.work), func(cur *workv1.ManifestWork) {
		cur.Status.ResourceStatus.Manifests = []workv1.ManifestCondition{testenv.ApplicationFeedback("argocd", f.key.Name, values)}
	})
}

// syncAutomatically makes the hub app one that Argo CD syncs on its own.
func (f *coalesceFixture) syncAutomatically() {
	f.hub.UpdateApp(f.key.Name, func(app *unstructured.Unstructured) {
		f.g.Expect(unstructured.SetNestedMap(app.Object, map[string]any{"prune": true}, "spec", "syncPolicy", "automated")).To(gomega.Succeed())
	})
}

// versionsAfter returns the versions of the hub app, as "revision/health", from the one
// that first showed revision from on.
func (f *coalesceFixture) versionsAfter(from string) []string {
	var out []string
	for _, v := range f.seen() {
		if v.revision == from || len(out) > 0 {
			out = append(out, v.revision+"/"+v.health)
		}
	}
	return out
}

// rollout are the states an automatically synced app passes on its managed cluster from
// its work's apply to Healthy.
var rollout = []struct {
	name string
	spokeStep
}{
	{"applied", spokeStep{"OutOfSync", "Missing", ""}},
	{"syncing", spokeStep{"OutOfSync", "Missing", argoapp.OperationRunning}},
	{"synced", spokeStep{"Synced", argoapp.HealthProgressing, argoapp.OperationRunning}},
	{"finished", spokeStep{"Synced", argoapp.HealthProgressing, argoapp.OperationSucceeded}},
	{"healthy", spokeStep{"Synced", argoapp.HealthHealthy, argoapp.OperationSucceeded}},
}

// TestRolloutWrittenOnceSettled plays an automatically synced app's rollout on its
// managed cluster, each state well past the coalescing window after the one before: the
// mirror writes the hub app once, when it is Healthy. A rollout that stays Progressing
// longer than the settle wait shows Progressing on the hub after the wait, and Healthy
// as soon as it comes; an error the agent reports goes at once, even mid-rollout.
func TestRolloutWrittenOnceSettled(t *testing.T) {
	const window, settle = 300 * time.Millisecond, 5 * time.Second
	// slack is what a loaded machine may add: the reconcile, the patch, the watch event.
	const slack = 700 * time.Millisecond
	f := newCoalesceFixture(t, "apps-settle", "cluster-settle", window, settle)
	f.feedBack("start")
	f.shows("start", "none")
	f.syncAutomatically()
	time.Sleep(2 * window)

	t.Run("a rollout within the wait is one write", func(t *testing.T) {
		f := f.sub(t)
		before := f.mirrorWrites()
		for _, s := range rollout {
			f.step(s.name, s.spokeStep)
			time.Sleep(2 * window)
		}
		f.shows("healthy", "")
		time.Sleep(2 * window)
		f.g.Expect(f.versionsAfter("start")).To(gomega.ContainElement("healthy/Healthy"))
		for _, s := range rollout[:len(rollout)-1] {
			f.g.Expect(f.versionsAfter("start")).NotTo(gomega.ContainElement(gomega.HavePrefix(s.name+"/")), "a version of the hub app shows a passing state")
		}
		f.g.Expect(f.mirrorWrites()-before).To(gomega.Equal(1), "the mirror's writes of the rollout")
	})

	t.Run("a rollout longer than the wait shows its passing state after the wait", func(t *testing.T) {
		f := f.sub(t)
		first := time.Now()
		f.step("applied-2", rollout[0].spokeStep)
		time.Sleep(2 * window)
		f.step("progressing-2", rollout[3].spokeStep)
		f.shows("progressing-2", "")
		shown := f.versionsAfter("progressing-2")
		f.g.Expect(shown).To(gomega.HaveExactElements("progressing-2/Progressing"))
		at := f.seen()[len(f.seen())-1].at
		t.Logf("Progressing shown %v after the first passing state", at.Sub(first).Round(time.Millisecond))
		f.g.Expect(at.Sub(first)).To(gomega.BeNumerically(">=", settle-window), "the hub waited for the app to settle")
		f.g.Expect(at.Sub(first)).To(gomega.BeNumerically("<=", settle+window+slack), "the hub is at most the wait behind")

		healthy := time.Now()
		f.step("healthy-2", rollout[4].spokeStep)
		f.shows("healthy-2", "")
		at = f.seen()[len(f.seen())-1].at
		f.g.Expect(at.Sub(healthy)).To(gomega.BeNumerically("<=", window+slack), "Healthy, once it comes")
	})

	t.Run("a state that one channel brings before the other is one write, once both agree", func(t *testing.T) {
		f := f.sub(t)
		// Count from a quiet moment: the subtest before ends as soon as the hub app
		// shows its last state, which a write of the other channel may follow.
		time.Sleep(2 * window)
		before := f.mirrorWrites()
		f.feedStep("healthy-4", rollout[4].spokeStep) // the work agent first
		time.Sleep(4 * window)
		f.g.Expect(f.versionsAfter("start")).NotTo(gomega.ContainElement(gomega.HavePrefix("healthy-4/")), "the hub waits for the agent")
		f.publishStep("healthy-4", rollout[4].spokeStep, nil)
		f.shows("healthy-4", "")
		time.Sleep(2 * window)
		f.g.Expect(f.mirrorWrites()-before).To(gomega.Equal(1), "the mirror's writes of the state; the hub app's versions: %v", f.versionsAfter("healthy-2"))
	})

	t.Run("an error mid-rollout is written at once", func(t *testing.T) {
		f := f.sub(t)
		f.step("applied-3", rollout[0].spokeStep)
		time.Sleep(2 * window)
		f.step("syncing-3", rollout[1].spokeStep)
		time.Sleep(2 * window)
		reported := time.Now()
		f.publishStep("syncing-3", rollout[1].spokeStep, []statusv1alpha1.Condition{{Type: "SyncError", Message: "one of the resources failed"}})
		f.g.Eventually(func(g gomega.Gomega) {
			_, found, _ := argoapp.FindCondition(getApp(f.ctx, g, f.c, f.key), "SyncError")
			g.Expect(found).To(gomega.BeTrue())
		}, 10*time.Second, 20*time.Millisecond).Should(gomega.Succeed())
		f.g.Expect(f.versionsAfter("syncing-3")).To(gomega.HaveLen(1), "the write of the error shows the state it came in")
		at := f.seen()[len(f.seen())-1].at
		f.g.Expect(at.Sub(reported)).To(gomega.BeNumerically("<=", window+slack), fmt.Sprintf("the error, in %v", at.Sub(reported)))
	})
}
