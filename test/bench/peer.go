package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/alicebob/miniredis/v2"
	corev1 "k8s.io/api/core/v1"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ocm-gitops/argocd-pull-addon/test/loopback"
	"github.com/ocm-gitops/argocd-pull-addon/test/sim"
	"github.com/ocm-gitops/argocd-pull-addon/test/testenv"
)

// The upstream peer of issue 13: open-cluster-management-io/argocd-pull-integration, whose
// basic mode (--mode=basic) watches the same pulled Applications (the pull label and the
// cluster annotation) and creates a ManifestWork of each. -peer runs it and this
// project's manager on the same harness, one after the other.
const (
	peerModule  = "open-cluster-management.io/argocd-pull-integration"
	peerVersion = "v0.28.1"
	// peerClusterSecretLabel marks the Argo CD cluster Secret that the peer's basic mode
	// writes in the Argo CD namespace for every ManagedCluster.
	peerClusterSecretLabel = "argocd.argoproj.io/secret-type"
)

// peerSide is one side of the comparison: which manager ran, and what it measured.
type peerSide struct {
	Name    string
	Results *Results
}

// startedManager is a manager process the comparison started and waited for, and how to
// stop what came with it.
type startedManager struct {
	*sim.Process
	stop func()
}

// runPeer is -peer: the propagation-only run of the upstream peer's basic mode, then of
// this project's manager, each on a fresh hub of scale's clusters and Applications with
// nothing else running (no work agent, no stand-in agent). peerBin is the peer's binary,
// or "" to build it at peerVersion from its Go module.
func runPeer(ctx context.Context, scale Scale, dir, peerBin string) ([]*peerSide, error) {
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	if peerBin == "" {
		root, err := testenv.RepoRoot()
		if err != nil {
			return nil, err
		}
		step("building %s@%s", peerModule, peerVersion)
		if peerBin, err = buildPeer(filepath.Join(root, ".cache", "peer", peerVersion)); err != nil {
			return nil, err
		}
	}
	peerBin, err := filepath.Abs(peerBin)
	if err != nil {
		return nil, err
	}
	step("building the manager")
	managerBin, _, err := sim.BuildBinaries(dir)
	if err != nil {
		return nil, err
	}
	sides := []*peerSide{
		{Name: fmt.Sprintf("upstream argocd-pull-integration %s, basic mode", peerVersion)},
		{Name: "this project"},
	}
	starts := []func(context.Context, *sim.Hub, client.Reader, []string) (*startedManager, error){
		func(ctx context.Context, hub *sim.Hub, _ client.Reader, clusters []string) (*startedManager, error) {
			return startPeer(ctx, hub, peerBin, len(clusters))
		},
		func(ctx context.Context, hub *sim.Hub, works client.Reader, clusters []string) (*startedManager, error) {
			return startProjectManager(ctx, hub, managerBin, works, len(clusters))
		},
	}
	for i, side := range sides {
		step("%s: a fresh hub", side.Name)
		side.Results, err = measurePropagationOnly(ctx, scale, filepath.Join(dir, fmt.Sprintf("side-%d", i)), starts[i])
		if err != nil {
			return sides, fmt.Errorf("%s: %w", side.Name, err)
		}
	}
	return sides, nil
}

// measurePropagationOnly starts a hub in dir with scale's clusters and ApplicationSets,
// starts a manager with start once a watch-fed cache of the bench runs, and measures the
// time until every Application created has its one ManifestWork (measureWorks).
func measurePropagationOnly(ctx context.Context, scale Scale, dir string,
	start func(context.Context, *sim.Hub, client.Reader, []string) (*startedManager, error)) (*Results, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	hub, err := sim.StartHub(ctx, dir)
	if err != nil {
		return nil, err
	}
	defer func() { _ = hub.Stop() }()
	clusters, appSets, err := createClusters(ctx, hub, scale)
	if err != nil {
		return nil, err
	}
	cache, err := startCache(ctx, hub)
	if err != nil {
		return nil, err
	}
	step("starting the manager")
	manager, err := start(ctx, hub, cache, clusters)
	if err != nil {
		return nil, err
	}
	defer manager.stop()
	r := &Results{Scale: scale, Machine: describeMachine(), Started: time.Now()}
	if _, err := measureWorks(ctx, r, hub, cache, appSets, clusters, sim.WorkCheck.Propagated, step); err != nil {
		return r, err
	}
	if r.ManagerPeakRSS, err = manager.PeakRSS(); err != nil {
		return r, err
	}
	r.Duration = time.Since(r.Started)
	return r, nil
}

// startCache starts a watch-fed cache of the hub for the bench's own reads: the works, the
// Applications. It stops with ctx.
func startCache(ctx context.Context, hub *sim.Hub) (crcache.Cache, error) {
	cache, err := crcache.New(hub.Config, crcache.Options{Scheme: hub.Env.Scheme})
	if err != nil {
		return nil, err
	}
	go func() { _ = cache.Start(ctx) }()
	if !cache.WaitForCacheSync(ctx) {
		return nil, errors.New("the bench's cache of the hub did not start")
	}
	return cache, nil
}

// startProjectManager starts this project's manager as the bench runs it (run): as an
// administrator, leader election on, GOGC and GOMEMLIMIT as the chart sets them, the
// hub Argo CD's Redis a miniredis; and waits until it is ready and its addon framework
// has deployed the agent to every cluster, as it would have long before the first
// Application.
func startProjectManager(ctx context.Context, hub *sim.Hub, binary string, works client.Reader, clusters int) (*startedManager, error) {
	hubRedis, err := miniredis.Run()
	if err != nil {
		return nil, err
	}
	manager, _, _, err := startManager(ctx, hub, binary, hubRedis)
	if err != nil {
		hubRedis.Close()
		return nil, err
	}
	started := &startedManager{Process: manager.Process, stop: func() { manager.Stop(30 * time.Second); hubRedis.Close() }}
	if err := waitForAgentDeploys(ctx, works, clusters, false); err != nil {
		started.stop()
		return nil, err
	}
	return started, nil
}

// startPeer starts the peer's basic mode as its chart's Deployment runs it, with these
// differences: it connects as an administrator (as this project's manager does here), it
// serves metrics and probes on loopback, and it runs without leader election, which needs
// an in-cluster namespace out of a cluster. It waits until the peer has written the Argo
// CD cluster Secret of every cluster: its caches have synced and it reconciles.
func startPeer(ctx context.Context, hub *sim.Hub, binary string, clusters int) (*startedManager, error) {
	kubeconfig, err := hub.Kubeconfig("bench-peer", "system:masters")
	if err != nil {
		return nil, err
	}
	// Named manager, so that sim.ProcessCPU counts its CPU time as the manager's.
	link := filepath.Join(hub.Dir, "manager")
	if err := os.Symlink(binary, link); err != nil {
		return nil, err
	}
	ports, err := loopback.FreePorts(2)
	if err != nil {
		return nil, err
	}
	peer, err := sim.StartProcess(hub.Dir, "peer", link, []string{
		"--mode=basic", "--kubeconfig=" + kubeconfig, "--argocd-namespace=" + sim.AppNamespace,
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", ports[0]), fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", ports[1]),
	}, nil)
	if err != nil {
		return nil, err
	}
	started := &startedManager{Process: peer, stop: func() { peer.Stop(30 * time.Second) }}
	waitCtx, cancelWait := context.WithCancel(ctx)
	defer cancelWait()
	var exitErr error
	err = waitFor(waitCtx, 5*time.Minute, func() (bool, error) {
		if exited, err := peer.Exited(); exited {
			exitErr = fmt.Errorf("the peer exited (see %s): %w", peer.LogPath, errors.Join(err, errors.New("it should run until stopped")))
			cancelWait()
			return false, exitErr
		}
		secrets := &corev1.SecretList{}
		err := hub.Client.List(waitCtx, secrets, client.InNamespace(sim.AppNamespace), client.HasLabels{peerClusterSecretLabel})
		return len(secrets.Items) >= clusters, err
	})
	if err != nil {
		started.stop()
		if exitErr != nil {
			return nil, exitErr
		}
		return nil, fmt.Errorf("the peer did not write a cluster Secret for every cluster: %w", err)
	}
	return started, nil
}

// buildPeer builds the peer's command (the folder cmd of its module) at peerVersion with
// go install into dir, once, and returns the binary's path.
func buildPeer(dir string) (string, error) {
	binary := filepath.Join(dir, "cmd") // go install names it after the package's folder
	if _, err := os.Stat(binary); err == nil {
		return binary, nil
	}
	cmd := exec.Command("go", "install", peerModule+"/cmd@"+peerVersion)
	cmd.Env = append(os.Environ(), "GOBIN="+dir)
	if output, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go install %s/cmd@%s: %w\n%s\n(where the module proxy does not serve it, build the command from the "+
			"peer's source at that tag with go build, and pass it with -peer-bin)", peerModule, peerVersion, err, output)
	}
	return binary, nil
}

// step prints a line of progress of the comparison.
func step(format string, args ...any) {
	fmt.Printf("%s  %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// peerRows are the figures of the comparison, one row each, a column per side.
func peerRows(sides []*peerSide) [][]string {
	cell := func(f func(r *Results) string) []string {
		var out []string
		for _, side := range sides {
			if side.Results == nil {
				out = append(out, "not measured")
				continue
			}
			out = append(out, f(side.Results))
		}
		return out
	}
	cpu := func(name string) func(r *Results) string {
		return func(r *Results) string { return fmt.Sprintf("%.1f s", r.PropagationCPU[name]) }
	}
	rows := [][]string{
		append([]string{"all works exist after"}, cell(func(r *Results) string {
			return fmt.Sprintf("%s (%.0f apps/s; creating the %d apps took %s)", r.Propagation.Round(100*time.Millisecond),
				float64(r.Apps)/r.Propagation.Seconds(), r.Apps, r.AppsCreated.Round(100*time.Millisecond))
		})...),
		append([]string{"create -> work latency p50 / p95 / p99"}, cell(func(r *Results) string {
			return fmt.Sprintf("%s / %s / %s", percentile(r.WorkLatencies, 50), percentile(r.WorkLatencies, 95), percentile(r.WorkLatencies, 99))
		})...),
		append([]string{"kube-apiserver CPU during the run"}, cell(cpu("kube-apiserver"))...),
		append([]string{"etcd CPU during the run"}, cell(cpu("etcd"))...),
		append([]string{"manager CPU during the run"}, cell(cpu("manager"))...),
		append([]string{"bench CPU during the run (creates, watches)"}, cell(cpu("bench (stand-ins)"))...),
		append([]string{"manager peak RSS"}, cell(func(r *Results) string { return mib(r.ManagerPeakRSS) })...),
		append([]string{"manager requests"}, cell(func(r *Results) string {
			return fmt.Sprintf("%.0f (%.2f per app): %s", r.PropagationRequests.Total(), r.PropagationRequests.Total()/float64(max(r.Apps, 1)), r.PropagationRequests)
		})...),
		append([]string{"works as this project renders them"}, cell(func(r *Results) string {
			return fmt.Sprintf("%d of %d", r.Works.Correct, r.Works.Apps)
		})...),
		append([]string{"load average (1, 5, 15 min) at the end"}, cell(func(r *Results) string { return r.LoadAverage })...),
	}
	return rows
}

// peerTable is the comparison as plain text.
func peerTable(scale Scale, sides []*peerSide) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\npropagation only, scale %s: %d clusters, %d apps\n", scale.Name, scale.Clusters, scale.Clusters*scale.ApplicationSets)
	for _, row := range peerRows(sides) {
		fmt.Fprintf(&b, "%s\n", row[0])
		for i, side := range sides {
			fmt.Fprintf(&b, "  %-55s %s\n", side.Name+":", row[i+1])
		}
	}
	return b.String()
}

// peerMarkdown is the comparison as docs/benchmarks-peer.md; peerBin is -peer-bin.
func peerMarkdown(scale Scale, sides []*peerSide, started time.Time, peerBin string) string {
	build := "built from its Go module with go install"
	if peerBin != "" {
		build = "the binary given with -peer-bin (where the Go module proxy does not serve the module: built with go build from its source at that tag)"
	}
	machine := describeMachine()
	var b strings.Builder
	fmt.Fprintf(&b, `# Side by side with the upstream peer

Written by `+"`make bench-peer`"+` (test/bench -peer) on %s. Rerun it to refresh this page.

**Machine:** %d cores (%s), %d MiB of memory, %s, commit %s. The machine is shared and
noisy: compare ratios, not single figures; the load average is in the table.

**Scale %s, propagation only:** for each side a fresh hub (one real kube-apiserver and etcd
as test/sim builds it) with %d simulated managed clusters (namespace, ManagedCluster, the
addon's ManagedClusterAddOn, PlacementDecisions) and %d ApplicationSets; one manager
running, and nothing else: no work agent, no stand-in agent. The bench then creates one
pulled Application per ApplicationSet and cluster (%d), %d at a time, as fast as the
apiserver takes them, and waits until every Application has exactly one ManifestWork in
its cluster's namespace (test/sim CheckWorks on a watch-fed cache, whatever the work is
named and holds) and no work is orphaned.

| | %s |
|---|%s
`, started.UTC().Format("2006-01-02 15:04 MST"), machine.Cores, machine.CPU, machine.MemoryMiB, machine.Go, machine.Commit,
		scale.Name, scale.Clusters, scale.ApplicationSets, scale.Clusters*scale.ApplicationSets, parallelWrites,
		strings.Join(sideNames(sides), " | "), strings.Repeat("---|", len(sides)))
	for _, row := range peerRows(sides) {
		fmt.Fprintf(&b, "| %s |\n", strings.Join(row, " | "))
	}
	fmt.Fprintf(&b, `
## How each side runs

- **%s**: the command of the module %s at %s, %s, run with
  `+"`--mode=basic`"+` as its chart's Deployment runs it, but for three things: it connects
  as an administrator (as this project's manager does here), it serves metrics and probes on
  loopback, and it runs without leader election (out of a cluster, controller-runtime finds no
  namespace for its lease). Its chart sets no GOMEMLIMIT; its memory limit there is 128 MiB,
  not enforced here. Before the Applications are created, it has written the Argo CD cluster
  Secret of every cluster (its ManagedCluster controller), which is not counted.
- **this project**: cmd/manager built from the working tree, run as test/bench runs it: as an
  administrator, leader election on, GOGC and GOMEMLIMIT (at its memory limit) as the
  chart's Deployment sets them, the hub Argo CD's Redis a miniredis. Before the
  Applications are created, its addon framework has deployed the agent to every cluster
  (a ManifestWork each), which is not counted.

## How each figure is taken

The figures are those of P1 in docs/benchmarks.md, taken by the same code (test/bench
measureWorks), from before the first Application is created until every work exists.
- **create -> work latency**: for each Application, from the return of its create to the first
  sight of its ManifestWork by an informer of the bench (the watch's delay included).
- **CPU**: the CPU time (user and system) each process used over that span, from
  /proc/<pid>/stat; the bench's own process creates the Applications and runs the watches.
- **peak RSS**: the manager's VmHWM at the end of the run.
- **requests**: the apiserver's apiserver_request_total over that span, reads included, less the
  requests of the bench's own clients (counted on their transport): the manager's, and a few
  of the apiserver's own (its endpoint reconciler's reads and its lease renewals).
- **works as this project renders them**: the works whose name and payload are what this
  project's manager renders (pkg/hub/propagation); the peer names and renders its works its own
  way, so it has none, as expected; not a fault of either.
`, sides[0].Name, peerModule, peerVersion, build)
	return b.String()
}

func sideNames(sides []*peerSide) []string {
	var names []string
	for _, side := range sides {
		names = append(names, side.Name)
	}
	return names
}
