package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	addonv1beta1 "open-cluster-management.io/api/addon/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	appsv1alpha1 "github.com/ocm-gitops/argocd-pull-addon/pkg/apis/apps/v1alpha1"
	statusv1alpha1 "github.com/ocm-gitops/argocd-pull-addon/pkg/apis/argocdpull/v1alpha1"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/test/sim"
)

// measurePropagation is P1: it creates every Application and waits until every work is
// correct; then until every hub Application and ApplicationSet report shows the
// clusters' status.
func measurePropagation(ctx context.Context, r *Results, hub *sim.Hub, standIns *sim.StandIns, manager *sim.Manager,
	appSets []*unstructured.Unstructured, clusters []string, step func(string, ...any)) error {
	before, err := hub.RequestCounts(ctx)
	if err != nil {
		return err
	}
	cpuBefore, err := sim.ProcessCPU()
	if err != nil {
		return err
	}
	step("P1: creating %d Applications", len(appSets)*len(clusters))
	start := time.Now()
	keys, err := hub.CreateApplications(ctx, appSets, clusters, parallelWrites)
	if err != nil {
		return err
	}
	r.Apps, r.AppsCreated = len(keys), time.Since(start)
	step("P1: created in %s; waiting for every work", since(start))
	reader := standIns.Reader()
	err = waitFor(ctx, 20*time.Minute, func() (bool, error) {
		n, err := sim.CountPulledWorks(ctx, reader)
		if err != nil || n < len(keys) {
			return false, err
		}
		r.Works, err = sim.CheckWorks(ctx, reader)
		return r.Works.OK(), err
	})
	r.Propagation = time.Since(start)
	if cpu, cpuErr := sim.ProcessCPU(); cpuErr == nil {
		r.PropagationCPU = cpu.Since(cpuBefore)
	}
	if err != nil {
		return fmt.Errorf("P1: works not correct after %s: %v: %w", since(start), r.Works, err)
	}
	step("P1: every work correct after %s (%.0f apps/s); CPU used: %v", since(start), float64(r.Apps)/r.Propagation.Seconds(), r.PropagationCPU)

	err = waitFor(ctx, 20*time.Minute, func() (bool, error) {
		settled, err := sim.StatusSettled(ctx, reader, len(keys), len(clusters), len(appSets), r.Scale.ResourcesPerApp)
		return settled == "", err
	})
	r.StatusSettled = time.Since(start)
	if err != nil {
		return fmt.Errorf("P1: hub status not settled after %s: %w", since(start), err)
	}
	after, err := hub.RequestCounts(ctx)
	if err != nil {
		return err
	}
	r.PropagationWrites = after.WritesSince(before)
	if r.HubSlices, r.HubSliceApps, err = countSlices(ctx, hub, r.Scale.ResourcesPerApp); err != nil {
		return err
	}
	if err := saveManagerMetrics(ctx, manager, filepath.Join(hub.Dir, "manager-metrics-p1.txt")); err != nil {
		return err
	}
	step("P1: every hub Application and report shows its clusters after %s; hub writes: %v", since(start), r.PropagationWrites)
	return nil
}

// countSlices counts the agents' ApplicationStatusSlices on the hub, and the apps they
// hold complete: with every one of their resources and their tree's nodes.
func countSlices(ctx context.Context, hub *sim.Hub, resources int) (slices, complete int, err error) {
	list := &statusv1alpha1.ApplicationStatusSliceList{}
	if err := hub.Client.List(ctx, list); err != nil {
		return 0, 0, fmt.Errorf("list ApplicationStatusSlices: %w", err)
	}
	for _, s := range list.Items {
		for _, app := range s.Apps {
			if len(app.Resources) == resources && len(app.Nodes) > 0 {
				complete++
			}
		}
	}
	return len(list.Items), complete, nil
}

// measureSteadyState is the second half of P4: the hub writes while nothing changes.
func measureSteadyState(ctx context.Context, r *Results, hub *sim.Hub, standIns *sim.StandIns, manager *sim.Manager, step func(string, ...any)) error {
	// Let the last reconciles of P1 finish.
	time.Sleep(5 * time.Second)
	step("P4: counting writes for %s while nothing changes", r.Scale.SteadyWindow)
	before, err := hub.RequestCounts(ctx)
	if err != nil {
		return err
	}
	standInsBefore := standIns.WorkStatusWrites.Load() + standIns.ReportWrites.Load() + standIns.SliceWrites.Load()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(r.Scale.SteadyWindow):
	}
	after, err := hub.RequestCounts(ctx)
	if err != nil {
		return err
	}
	r.SteadyWrites = after.WritesSince(before)
	r.SteadyStandInWrites = standIns.WorkStatusWrites.Load() + standIns.ReportWrites.Load() + standIns.SliceWrites.Load() - standInsBefore
	step("P4: steady state writes: %v", r.SteadyWrites)
	return nil
}

// measureFreshness is P2 and the first half of P4: one change at a time in the report of
// a random cluster's agent, each carrying its timestamp, until a watch of the hub
// Applications and a watch of the ApplicationSet reports see it.
func measureFreshness(ctx context.Context, r *Results, hub *sim.Hub, standIns *sim.StandIns, clusters []string,
	appSets []*unstructured.Unstructured, step func(string, ...any)) error {
	appWatch, err := watchChanges(ctx, hub.Config, argoapp.ApplicationGVK.GroupVersion().WithResource("applications"), sim.AppNamespace)
	if err != nil {
		return err
	}
	reportWatch, err := watchChanges(ctx, hub.Config, appsv1alpha1.GroupVersion.WithResource("multiclusterapplicationsetreports"), sim.AppNamespace)
	if err != nil {
		return err
	}
	before, err := hub.RequestCounts(ctx)
	if err != nil {
		return err
	}
	reportsBefore := standIns.ReportWrites.Load() + standIns.SliceWrites.Load()
	step("P2: %d report changes, one at a time", r.Scale.Changes)
	rng := rand.New(rand.NewPCG(1, 2))
	var lastCluster string
	for i := range r.Scale.Changes {
		cluster := clusters[rng.IntN(len(clusters))]
		lastCluster = cluster
		app := sim.ApplicationName(appSets[rng.IntN(len(appSets))].GetName(), cluster)
		standIns.Inject(cluster, app, argoapp.Condition{Type: "SyncError", Message: changeMessage(i, time.Now())})
		err := waitFor(ctx, 30*time.Second, func() (bool, error) {
			return appWatch.Seen(i) && reportWatch.Seen(i), nil
		})
		if err != nil {
			r.ChangesLost = append(r.ChangesLost, fmt.Sprintf("change %d on %s/%s: seen on the app %t, in the report %t",
				i, cluster, app, appWatch.Seen(i), reportWatch.Seen(i)))
		}
	}
	after, err := hub.RequestCounts(ctx)
	if err != nil {
		return err
	}
	r.ChangeWrites = after.WritesSince(before)
	r.ChangeAgentWrites = standIns.ReportWrites.Load() + standIns.SliceWrites.Load() - reportsBefore
	r.AppLatencies, r.ReportLatencies = appWatch.Latencies(), reportWatch.Latencies()
	step("P4: writes during P2: %v", r.ChangeWrites)
	// The last changed cluster's addon, with its field managers: who wrote what.
	addon := &addonv1beta1.ManagedClusterAddOn{}
	if err := hub.Client.Get(ctx, client.ObjectKey{Namespace: lastCluster, Name: sim.AddonName}, addon); err == nil {
		if data, err := yaml.Marshal(addon); err == nil {
			_ = os.WriteFile(filepath.Join(hub.Dir, "addon-after-p2.yaml"), data, 0o644)
		}
	}
	step("P2: app p50 %s p99 %s; report p50 %s p99 %s", percentile(r.AppLatencies, 50), percentile(r.AppLatencies, 99),
		percentile(r.ReportLatencies, 50), percentile(r.ReportLatencies, 99))
	return nil
}

// changeMarker prefixes the message of a measured change; changeMessage gives each its
// number and its time.
const changeMarker = "bench-change-"

func changeMessage(i int, at time.Time) string {
	return changeMarker + strconv.Itoa(i) + "@" + strconv.FormatInt(at.UnixNano(), 10) + " the sync failed"
}

// parseChanges returns the numbers and times of the changes in data.
func parseChanges(data string) map[int]time.Time {
	out := map[int]time.Time{}
	for {
		i := strings.Index(data, changeMarker)
		if i < 0 {
			return out
		}
		data = data[i+len(changeMarker):]
		id, rest, ok := strings.Cut(data, "@")
		if !ok {
			return out
		}
		end := strings.IndexFunc(rest, func(c rune) bool { return c < '0' || c > '9' })
		if end < 0 {
			end = len(rest)
		}
		n, err1 := strconv.Atoi(id)
		nanos, err2 := strconv.ParseInt(rest[:end], 10, 64)
		if err1 == nil && err2 == nil {
			out[n] = time.Unix(0, nanos)
		}
	}
}

// httpGet returns the body of a GET of url, an endpoint of a process the bench started.
func httpGet(ctx context.Context, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("get %s: %s", url, resp.Status)
	}
	return io.ReadAll(resp.Body)
}

// saveManagerMetrics keeps the manager's own metrics (reconciles, errors, queue times)
// next to its log, to explain a figure.
func saveManagerMetrics(ctx context.Context, manager *sim.Manager, path string) error {
	data, err := httpGet(ctx, "http://"+manager.MetricsAddr+"/metrics")
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

// managerLiveHeap reads the manager's Go heap (go_memstats_heap_alloc_bytes) from its
// metrics. Call it right after saveHeapProfile, which runs a garbage collection first, so
// that it is close to the live heap.
func managerLiveHeap(ctx context.Context, manager *sim.Manager) (int64, error) {
	data, err := httpGet(ctx, "http://"+manager.MetricsAddr+"/metrics")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if value, ok := strings.CutPrefix(line, "go_memstats_heap_alloc_bytes "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
			return int64(f), err
		}
	}
	return 0, fmt.Errorf("no go_memstats_heap_alloc_bytes in the manager's metrics")
}

// saveHeapProfile keeps a heap profile of a process that serves pprof at addr, next to
// its log, to explain a memory figure (go tool pprof <file>). It runs a garbage
// collection first.
func saveHeapProfile(ctx context.Context, addr, path string) error {
	data, err := httpGet(ctx, "http://"+addr+"/debug/pprof/heap?gc=1")
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}
