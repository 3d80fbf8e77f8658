package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/alicebob/miniredis/v2"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argocdcache"
	"github.com/ocm-gitops/argocd-pull-addon/test/sim"
)

// parallelWrites is how many requests the simulation sends at once while it sets up
// clusters and Applications.
const parallelWrites = 16

// standInWorkers is the concurrency of each stand-in controller: the work agents and
// agents of a thousand clusters write side by side, and the stand-ins must not be what
// a rollout waits for (with 8, the work agent's patches went at about 40 a second, each
// waiting for the busy apiserver, and held the rollout up).
const standInWorkers = 64

// run runs every phase at scale and returns what it measured. The results hold what was
// measured before an error.
func run(ctx context.Context, scale Scale, dir string) (*Results, error) {
	r := &Results{Scale: scale, Machine: describeMachine(), Started: time.Now(),
		APIServerArgs: apiserverArgs, ManagerArgs: managerArgs}
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	step("building the manager and the agent")
	managerBin, agentBin, err := sim.BuildBinaries(dir)
	if err != nil {
		return nil, err
	}
	step("starting the hub apiserver")
	hub, err := sim.StartHub(ctx, dir, apiserverArgs...)
	if err != nil {
		return nil, err
	}
	defer func() { _ = hub.Stop() }()
	if scale.OnlyAgent {
		if err := measureAgent(ctx, r, hub, agentBin, dir, step); err != nil {
			return r, err
		}
		r.Duration = time.Since(r.Started)
		return r, nil
	}

	clusters, appSets, err := createClusters(ctx, hub, scale)
	if err != nil {
		return r, err
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	standIns, err := hub.StartStandIns(ctx, sim.StandInOptions{Workers: standInWorkers, ResourcesPerApp: scale.ResourcesPerApp, Rollout: sim.FleetRollout})
	if err != nil {
		return r, err
	}
	// The hub Argo CD's Redis, where the manager writes the pulled apps' resource trees
	// from the stand-ins' slices (pkg/hub/resourcetree), as on a real hub.
	hubRedis, err := miniredis.Run()
	if err != nil {
		return r, err
	}
	defer hubRedis.Close()
	step("starting the manager")
	manager, kubeconfig, args, err := startManager(ctx, hub, managerBin, hubRedis)
	if err != nil {
		return r, err
	}
	defer func() { manager.Stop(30 * time.Second) }()
	peak := trackPeak(ctx, manager, filepath.Join(dir, "manager-heap-peak.pb.gz"), filepath.Join(dir, "manager-metrics-peak.txt"))
	// The addon framework installs the agent on every cluster first, as it would long
	// before the first Application: its deploy work per cluster.
	start := time.Now()
	if err := waitForAgentDeploys(ctx, standIns.Reader(), len(clusters), true); err != nil {
		return r, err
	}
	r.AddonInstall = time.Since(start)
	step("the addon framework deployed %d agents in %s", len(clusters), since(start))

	if err := measurePropagation(ctx, r, hub, standIns, manager, appSets, clusters, step); err != nil {
		return r, err
	}
	if err := measureSteadyState(ctx, r, hub, standIns, manager, step); err != nil {
		return r, err
	}
	if err := measureFreshness(ctx, r, hub, manager, standIns, clusters, appSets, step); err != nil {
		return r, err
	}
	for _, key := range hubRedis.Keys() {
		if strings.HasPrefix(key, argocdcache.TreeKeyPrefix) {
			r.HubTrees++
		}
	}
	if r.ManagerPeakRSS, err = manager.PeakRSS(); err != nil {
		return r, err
	}
	if r.ManagerFileRSS, err = manager.FileRSS(); err != nil {
		return r, err
	}
	r.ManagerPeakAt = peak.Stop().Round(time.Second)
	if err := saveHeapProfile(ctx, manager.PprofAddr, filepath.Join(dir, "manager-heap.pb.gz")); err != nil {
		return r, err
	}
	if r.ManagerLiveHeap, err = managerLiveHeap(ctx, manager); err != nil {
		return r, err
	}
	restarted, err := measureRestart(ctx, r, hub, manager, managerBin, kubeconfig, args, step)
	if restarted != nil {
		manager = restarted // the one the deferred Stop stops
	}
	if err != nil {
		return r, err
	}
	if err := measureAgent(ctx, r, hub, agentBin, dir, step); err != nil {
		return r, err
	}
	r.Duration = time.Since(r.Started)
	return r, nil
}

// startManager starts the manager binary against hub as the bench runs it: as an
// administrator, with hubRedis as the hub Argo CD's Redis, and the -manager-arg flags;
// and waits until it is ready. It returns the kubeconfig and the flags it runs with.
func startManager(ctx context.Context, hub *sim.Hub, binary string, hubRedis *miniredis.Miniredis) (*sim.Manager, string, []string, error) {
	kubeconfig, err := hub.Kubeconfig("bench-manager", "system:masters")
	if err != nil {
		return nil, "", nil, err
	}
	args := append([]string{"--argocd-redis=" + hubRedis.Addr()}, managerArgs...)
	manager, err := sim.StartManager(ctx, hub.Dir, binary, kubeconfig, args...)
	return manager, kubeconfig, args, err
}

// createClusters creates scale's simulated clusters and ApplicationSets on hub.
func createClusters(ctx context.Context, hub *sim.Hub, scale Scale) ([]string, []*unstructured.Unstructured, error) {
	start := time.Now()
	clusters, err := hub.CreateClusters(ctx, scale.Clusters, parallelWrites)
	if err != nil {
		return nil, nil, err
	}
	appSets, err := hub.CreateApplicationSets(ctx, scale.ApplicationSets)
	if err != nil {
		return nil, nil, err
	}
	step("created %d simulated clusters in %s", len(clusters), since(start))
	return clusters, appSets, nil
}

// waitForAgentDeploys waits until the manager's addon framework has deployed the agent
// to every one of the clusters (its deploy work in each cluster's namespace, and with a
// work agent, Available), as it would long before the first Application, as reader (a
// cache) sees it. Without a work agent (-peer), no work becomes Available.
func waitForAgentDeploys(ctx context.Context, reader client.Reader, clusters int, workAgent bool) error {
	err := waitFor(ctx, 15*time.Minute, func() (bool, error) {
		n, err := sim.CountWorks(ctx, reader, func(w *workv1.ManifestWork) bool {
			return !sim.IsPulledWork(w) && (!workAgent || meta.IsStatusConditionTrue(w.Status.Conditions, workv1.WorkAvailable))
		})
		return n >= clusters, err
	})
	if err != nil {
		return fmt.Errorf("the addon framework did not deploy the agent to every cluster: %w", err)
	}
	return nil
}

// waitFor polls done every half second until it is true, or timeout.
func waitFor(ctx context.Context, timeout time.Duration, done func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var lastErr error
	for {
		ok, err := done()
		if ok && err == nil {
			return nil
		}
		if err != nil {
			lastErr = err
		}
		select {
		case <-ctx.Done():
			return errors.Join(ctx.Err(), lastErr)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func since(t time.Time) time.Duration { return time.Since(t).Round(10 * time.Millisecond) }
