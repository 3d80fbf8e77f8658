package fault

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub"
	"github.com/ocm-gitops/argocd-pull-addon/test/sim"
)

// shortLease is the leader election of the managers of the kill test: a SIGKILLed
// leader does not release its Lease, and a new process takes over LeaseDuration after
// it first sees the Lease, about 5 s here instead of 137 s. A leader that cannot renew
// within the renew deadline exits; each renewal request may take half of it, at least
// 1 s (controller-runtime). With a deadline of 1.5 s (requests of 1 s), a hub apiserver
// saturated by make test's two lanes made the leaders exit every few seconds, and the
// status never settled.
var shortLease = []string{
	"--leader-election-lease-duration=5s",
	"--leader-election-renew-deadline=4s",
	"--leader-election-retry-period=500ms",
}

// steadyLease is the leader election of the manager started after the last kill, and
// of those started when it exits: no kill follows, and how soon a standby would take
// over no longer matters, so the leader gets a renew deadline that a loaded machine
// meets. A takeover after the last kill waits on the killed leader's short Lease only.
// With shortLease, a new leader's first reconciles of the thousand apps slowed the
// apiserver past its 4 s deadline, it exited, and the next one started over: minutes
// of restarts before the status settled.
var steadyLease = []string{
	"--leader-election-lease-duration=30s",
	"--leader-election-renew-deadline=20s",
	"--leader-election-retry-period=2s",
}

// leaseName is the manager's leader election Lease.
var leaseName = hub.DefaultOptions().AddonName + "-addon-manager"

// kill is one SIGKILL of the leader.
type kill struct {
	// works existed when it was killed.
	works int
	// takeover is how long the process had taken from its start to hold the Lease and
	// create a work.
	takeover time.Duration
}

func TestManagerKilledDuringPropagation(t *testing.T) {
	const clusters, appSets, kills = 50, 20, 10
	f := startFleet(t, clusters, appSets)
	g := gomega.NewWithT(t)
	apps := f.apps()

	manager := f.startManager(shortLease...)
	started := time.Now()
	created := make(chan error, 1)
	go func() {
		_, err := f.hub.CreateApplications(f.ctx, f.appSets, f.clusters, parallelWrites)
		created <- err
	}()

	var record []kill
	lastWorks, lastHolder, exitedOnTheirOwn := 0, "", 0
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range kills {
		// Wait for a new leader that made progress: a new holder of the Lease, and more
		// works than at the last kill (or all of them). How many more varies, so that
		// some kills land in the new leader's first reconciles and the kills spread over
		// the propagation.
		progress := 1 + rng.IntN(apps/(kills-2))
		g.Eventually(func(g gomega.Gomega) {
			if exited, err := manager.Exited(); exited {
				// Not a kill of the test: a leader that could not renew its Lease in
				// time on a loaded machine exits. Start another one; count it.
				exitedOnTheirOwn++
				t.Logf("the manager exited on its own (%v); starting another", err)
				manager, started = f.startManager(shortLease...), time.Now()
			}
			holder := f.leaseHolder(g)
			g.Expect(holder).NotTo(gomega.BeEmpty())
			g.Expect(holder).NotTo(gomega.Equal(lastHolder))
			n := f.worksCount()
			g.Expect(n >= lastWorks+progress || n == apps).To(gomega.BeTrue(), "%d works, %d at the last kill", n, lastWorks)
		}).WithTimeout(time.Minute).WithPolling(50 * time.Millisecond).Should(gomega.Succeed())
		takeover := time.Since(started)
		// Land the kills at different points of the reconciles.
		time.Sleep(time.Duration(rng.IntN(200)) * time.Millisecond)
		lastHolder = f.leaseHolder(g)
		manager.Kill()
		lastWorks = f.worksCount()
		record = append(record, kill{works: lastWorks, takeover: takeover})
		t.Logf("kill %d: SIGKILL with %d of %d works; that leader took %s to take over and work",
			len(record), lastWorks, apps, takeover.Round(10*time.Millisecond))
		lease := shortLease
		if i == kills-1 {
			lease = steadyLease
		}
		manager, started = f.startManager(lease...), time.Now()
	}
	lastRestart := started
	before, err := f.hub.RequestCounts(f.ctx)
	g.Expect(err).NotTo(gomega.HaveOccurred())

	// From here on no kill: like the Deployment's kubelet, restart a manager that exits
	// on its own (a lease it could not renew in time on a loaded machine), and count it.
	supervised := make(chan struct{})
	supervisorDone := make(chan int)
	go func() {
		restarts := 0
		defer func() { supervisorDone <- restarts }()
		for {
			select {
			case <-supervised:
				return
			case <-time.After(200 * time.Millisecond):
			}
			if exited, err := manager.Exited(); exited {
				restarts++
				t.Logf("the manager exited on its own (%v) after the kills; starting another", err)
				manager = f.startManager(steadyLease...)
			}
		}
	}()
	stopSupervisor := func() {
		if supervised != nil {
			close(supervised)
			exitedOnTheirOwn += <-supervisorDone
			supervised = nil
		}
	}
	defer stopSupervisor()

	g.Eventually(created).WithTimeout(2*time.Minute).Should(gomega.Receive(gomega.BeNil()), "create the Applications")
	check := f.expectWorksCorrect(g, 4*time.Minute)
	worksAfter := time.Since(lastRestart)
	f.expectStatusSettled(g, 3*time.Minute)
	statusAfter := time.Since(lastRestart)
	after, err := f.hub.RequestCounts(f.ctx)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	stopSupervisor()

	var atKill []string
	midPropagation := 0
	for _, k := range record {
		atKill = append(atKill, fmt.Sprint(k.works))
		if k.works > 0 && k.works < apps {
			midPropagation++
		}
	}
	t.Logf("%d kills (%d mid-propagation), works at each: %s; %d exits on their own",
		len(record), midPropagation, strings.Join(atKill, ", "), exitedOnTheirOwn)
	t.Logf("after the last restart: every work correct in %s, every status settled in %s; %v",
		worksAfter.Round(10*time.Millisecond), statusAfter.Round(10*time.Millisecond), check)
	t.Logf("writes meanwhile: %v", after.WritesSince(before))

	g.Expect(record).To(gomega.HaveLen(kills))
	g.Expect(midPropagation).To(gomega.BeNumerically(">=", 5), "kills with 0 < works < %d: %s", apps, atKill)
	g.Expect(check.Apps).To(gomega.Equal(apps))
	g.Expect(check.Missing).To(gomega.BeZero(), "lost works")
	g.Expect(check.Duplicated).To(gomega.BeZero(), "duplicated works")
	g.Expect(check.Orphaned).To(gomega.BeZero(), "orphaned works")
	g.Expect(check.Stale).To(gomega.BeZero(), "stale works")
	f.expectNoCleanupFinalizers(g)
	f.expectNoPanic(g)
}

// leaseHolder returns the holder of the manager's leader election Lease, or "".
func (f *fleet) leaseHolder(g gomega.Gomega) string {
	lease, err := f.hub.Kube.CoordinationV1().Leases(sim.ManagerNamespace).Get(f.ctx, leaseName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return ""
	}
	g.Expect(err).NotTo(gomega.HaveOccurred())
	if lease.Spec.HolderIdentity == nil {
		return ""
	}
	return *lease.Spec.HolderIdentity
}
