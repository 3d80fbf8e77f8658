package fault

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/test/sim"
	"github.com/ocm-gitops/argocd-pull-addon/test/testenv"
)

// parallelWrites is how many requests the setup sends at once; standInWorkers is the
// concurrency of each stand-in controller.
const (
	parallelWrites = 8
	standInWorkers = 4
)

func TestMain(m *testing.M) {
	code := testenv.RunTests(m)
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// The manager binary, built once for the package from the working tree.
var (
	buildOnce     sync.Once
	binDir        string
	managerBinary string
	buildErr      error
)

func buildManager(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		if binDir, buildErr = os.MkdirTemp("", "argocd-pull-fault-"); buildErr == nil {
			managerBinary, _, buildErr = sim.BuildBinaries(binDir)
		}
	})
	if buildErr != nil {
		t.Fatalf("build the manager: %v", buildErr)
	}
	return managerBinary
}

// fleet is a simulated hub with its clusters, ApplicationSets and stand-ins, and no
// manager yet.
type fleet struct {
	t          *testing.T
	ctx        context.Context
	hub        *sim.Hub
	standIns   *sim.StandIns
	binary     string
	kubeconfig string
	clusters   []string
	appSets    []*unstructured.Unstructured
	// logPath is the manager's log; every manager process of the test appends to it.
	logPath string
}

// startFleet starts a hub with clusters simulated clusters and appSets ApplicationSets,
// and the stand-ins. Everything stops when the test ends.
func startFleet(t *testing.T, clusters, appSets int) *fleet {
	t.Helper()
	if testing.Short() {
		t.Skip("the fault suite runs the real manager on a real apiserver: skipped in -short mode")
	}
	binary := buildManager(t)
	dir := t.TempDir()
	if keep := os.Getenv("FAULT_DIR"); keep != "" {
		// Keep the logs and kubeconfigs of the run there.
		dir = filepath.Join(keep, t.Name())
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	hub, err := sim.StartHub(ctx, dir)
	if err != nil {
		cancel()
		t.Fatalf("start the hub: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		if err := hub.Stop(); err != nil {
			t.Logf("stop the hub: %v", err)
		}
	})
	f := &fleet{t: t, ctx: ctx, hub: hub, binary: binary}
	if f.clusters, err = hub.CreateClusters(ctx, clusters, parallelWrites); err != nil {
		t.Fatalf("create the clusters: %v", err)
	}
	if f.appSets, err = hub.CreateApplicationSets(ctx, appSets); err != nil {
		t.Fatalf("create the ApplicationSets: %v", err)
	}
	if f.standIns, err = hub.StartStandIns(ctx, sim.StandInOptions{Workers: standInWorkers}); err != nil {
		t.Fatalf("start the stand-ins: %v", err)
	}
	if f.kubeconfig, err = hub.Kubeconfig("fault-manager", "system:masters"); err != nil {
		t.Fatal(err)
	}
	return f
}

// apps is the number of pulled Applications of the fleet.
func (f *fleet) apps() int { return len(f.clusters) * len(f.appSets) }

// startManager starts a manager process with args added to its flags; it is stopped
// when the test ends, and its log tail is shown if the test failed.
func (f *fleet) startManager(args ...string) *sim.Manager {
	f.t.Helper()
	m, err := sim.StartManager(f.ctx, f.hub.Dir, f.binary, f.kubeconfig, args...)
	if err != nil {
		f.t.Fatalf("start the manager: %v", err)
	}
	if f.logPath == "" {
		f.logPath = m.LogPath
		f.t.Cleanup(func() {
			if f.t.Failed() {
				f.t.Logf("the manager's log ends with:\n%s", tail(f.logPath, 40))
			}
		})
	}
	f.t.Cleanup(func() { m.Stop(10 * time.Second) })
	return m
}

// worksCount counts the pulled Applications' works, as the stand-ins' cache sees them.
func (f *fleet) worksCount() int {
	f.t.Helper()
	n, err := sim.CountPulledWorks(f.ctx, f.standIns.Reader())
	if err != nil {
		f.t.Fatalf("count the works: %v", err)
	}
	return n
}

// expectWorksCorrect waits until every pulled Application has its one correct work,
// and returns the check.
func (f *fleet) expectWorksCorrect(g *gomega.WithT, timeout time.Duration) sim.WorkCheck {
	var check sim.WorkCheck
	g.Eventually(func(g gomega.Gomega) {
		var err error
		check, err = sim.CheckWorks(f.ctx, f.hub.Client)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(check.Apps).To(gomega.Equal(f.apps()), "%v", check)
		g.Expect(check.OK()).To(gomega.BeTrue(), "%v", check)
	}).WithTimeout(timeout).WithPolling(500 * time.Millisecond).Should(gomega.Succeed())
	return check
}

// expectStatusSettled waits until every hub Application and ApplicationSet report shows
// its clusters' status.
func (f *fleet) expectStatusSettled(g *gomega.WithT, timeout time.Duration) {
	g.Eventually(func() (string, error) {
		return sim.StatusSettled(f.ctx, f.hub.Client, f.apps(), len(f.clusters), len(f.appSets), sim.DefaultResourcesPerApp)
	}).WithTimeout(timeout).WithPolling(500 * time.Millisecond).Should(gomega.BeEmpty())
}

// expectNoCleanupFinalizers checks that no hub Application carries the clean-up
// finalizer: every simulated Application is generated by an ApplicationSet, whose
// controller would remove it at once, and a restarted manager must not add it either.
func (f *fleet) expectNoCleanupFinalizers(g *gomega.WithT) {
	apps := argoapp.NewApplicationList()
	g.Expect(f.hub.Client.List(f.ctx, apps)).To(gomega.Succeed())
	g.Expect(apps.Items).To(gomega.HaveLen(f.apps()))
	var with []string
	for i := range apps.Items {
		if slices.Contains(apps.Items[i].GetFinalizers(), argoapp.FinalizerManifestWorkCleanup) {
			with = append(with, apps.Items[i].GetName())
		}
	}
	g.Expect(with).To(gomega.BeEmpty(), "generated Applications with the finalizer %s", argoapp.FinalizerManifestWorkCleanup)
}

// expectNoPanic checks the manager's log for a panic, recovered or not.
func (f *fleet) expectNoPanic(g *gomega.WithT) {
	data, err := os.ReadFile(f.logPath)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	for _, marker := range []string{"panic:", "Observed a panic", "goroutine 1 ["} {
		g.Expect(string(data)).NotTo(gomega.ContainSubstring(marker), "the manager's log shows a panic")
	}
}

// tail returns the last n lines of a file.
func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	var lines []string
	scanner := bufio.NewScanner(f)
	scanner.Buffer(make([]byte, 1<<20), 1<<20)
	for scanner.Scan() {
		lines = append(lines, scanner.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}
