package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	addonv1beta1 "open-cluster-management.io/api/addon/v1beta1"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
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
	reader := standIns.Reader()
	// Where the time of propagation goes while the apps arrive: the first profileSeconds.
	profiles := profileCPU(ctx, hub, manager, "p1")
	workAgentBefore, agentsBefore := standIns.WorkAgent.Counts(), standIns.Agents.Counts()
	began, err := measureWorks(ctx, r, hub, reader, appSets, clusters, sim.WorkCheck.OK, step)
	if err != nil {
		return err
	}
	start := began.at
	err = waitFor(ctx, 45*time.Minute, func() (bool, error) {
		settled, err := sim.StatusSettled(ctx, reader, r.Apps, len(clusters), len(appSets), r.Scale.ResourcesPerApp)
		return settled == "", err
	})
	r.StatusSettled = time.Since(start)
	if cpu, cpuErr := sim.ProcessCPU(); cpuErr == nil {
		r.SettledCPU = cpu.Since(began.cpu)
	}
	if err != nil {
		return fmt.Errorf("P1: hub status not settled after %s: %w", since(start), err)
	}
	after, err := hub.RequestCounts(ctx)
	if err != nil {
		return err
	}
	r.PropagationWrites = after.WritesSince(began.requests)
	// Who wrote them: the stand-ins each through its own counter, the bench's own creates
	// of the Applications (what the ApplicationSet controller writes first), and the
	// manager, the rest.
	own := hub.Own.Counts().WritesSince(began.own)
	workAgent := standIns.WorkAgent.Counts().WritesSince(workAgentBefore)
	agents := standIns.Agents.Counts().WritesSince(agentsBefore)
	r.WritesByWriter = map[string]sim.Requests{
		writerManager:   r.PropagationWrites.Minus(own),
		writerWorkAgent: workAgent,
		writerAgents:    agents,
		writerBench:     own.Minus(workAgent).Minus(agents),
	}
	if r.HubSlices, r.HubSliceApps, err = countSlices(ctx, hub, r.Scale.ResourcesPerApp); err != nil {
		return err
	}
	if err := saveManagerMetrics(ctx, manager, filepath.Join(hub.Dir, "manager-metrics-p1.txt")); err != nil {
		return err
	}
	step("P1: every hub Application and report shows its clusters after %s; hub writes: %v", since(start), r.PropagationWrites)
	for err := range profiles {
		step("P1: a CPU profile was not taken: %v", err)
	}
	return nil
}

// baseline is what measureWorks read when it started: the time, the apiserver's request
// counts and each process's CPU time. P1 measures the status against it too.
type baseline struct {
	at       time.Time
	requests sim.Requests
	// own are the bench's own requests (hub.Own).
	own sim.Requests
	cpu sim.CPU
}

// measureWorks creates every Application of appSets for clusters, as fast as the hub
// takes them, and waits until done holds of the works that reader (a watch-fed cache)
// sees: the first half of P1, and the whole of the propagation-only run (-peer). It
// records the figures up to then in r: the time, the create -> work latencies, the CPU
// time of each process and the manager's requests (the apiserver's less the bench's own).
func measureWorks(ctx context.Context, r *Results, hub *sim.Hub, reader client.Reader, appSets []*unstructured.Unstructured,
	clusters []string, done func(sim.WorkCheck) bool, step func(string, ...any)) (began baseline, err error) {
	informers, ok := reader.(crcache.Informers)
	if !ok {
		return began, fmt.Errorf("the reader %T is no cache", reader)
	}
	latencies, err := watchWorkLatencies(ctx, informers)
	if err != nil {
		return began, err
	}
	before, err := hub.RequestCounts(ctx)
	if err != nil {
		return began, err
	}
	ownBefore := hub.Own.Counts()
	cpuBefore, err := sim.ProcessCPU()
	if err != nil {
		return began, err
	}
	step("P1: creating %d Applications", len(appSets)*len(clusters))
	start := time.Now()
	began = baseline{at: start, requests: before, own: ownBefore, cpu: cpuBefore}
	keys, err := hub.CreateApplicationsTimed(ctx, appSets, clusters, parallelWrites, latencies.Created)
	if err != nil {
		return began, err
	}
	r.Apps, r.AppsCreated = len(keys), time.Since(start)
	step("P1: created in %s; waiting for every work", since(start))
	err = waitFor(ctx, 20*time.Minute, func() (bool, error) {
		n, err := sim.CountPulledWorks(ctx, reader)
		if err != nil || n < len(keys) {
			return false, err
		}
		r.Works, err = sim.CheckWorks(ctx, reader)
		return done(r.Works), err
	})
	r.Propagation = time.Since(start)
	if cpu, cpuErr := sim.ProcessCPU(); cpuErr == nil {
		r.PropagationCPU = cpu.Since(cpuBefore)
	}
	if err != nil {
		return began, fmt.Errorf("P1: works not done after %s: %v: %w", since(start), r.Works, err)
	}
	r.WorkLatencies = latencies.Latencies()
	if load, err := os.ReadFile("/proc/loadavg"); err == nil {
		r.LoadAverage = strings.Join(strings.Fields(string(load))[:3], ", ")
	}
	if after, err := hub.RequestCounts(ctx); err == nil {
		// The manager's requests: the apiserver's counts less the bench's own.
		r.PropagationRequests = after.Since(before).Minus(hub.Own.Counts().Since(ownBefore))
	}
	step("P1: every work done after %s (%.0f apps/s); create -> work p50 %s p99 %s; CPU used: %v; the manager's requests: %v",
		since(start), float64(r.Apps)/r.Propagation.Seconds(), percentile(r.WorkLatencies, 50), percentile(r.WorkLatencies, 99),
		r.PropagationCPU, r.PropagationRequests)
	return began, nil
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
	// Let the last reconciles of P1 finish, and the writes they held back for a passing
	// state (at most argoapp.DefaultSettleWait) with them.
	time.Sleep(argoapp.DefaultSettleWait + 5*time.Second)
	step("P4: counting writes for %s while nothing changes", r.Scale.SteadyWindow)
	before, err := hub.RequestCounts(ctx)
	if err != nil {
		return err
	}
	standInsBefore := writesOf(standIns.WorkAgent) + writesOf(standIns.Agents)
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
	r.SteadyStandInWrites = writesOf(standIns.WorkAgent) + writesOf(standIns.Agents) - standInsBefore
	step("P4: steady state writes: %v", r.SteadyWrites)
	return nil
}

// writesOf is how many write requests counter has counted.
func writesOf(counter *sim.RequestCounter) int64 {
	return int64(counter.Counts().WritesSince(nil).Total())
}

// measureFreshness is P2 and the first half of P4: one change at a time in the report of
// a random cluster's agent, each carrying its timestamp, until a watch of the hub
// Applications and a watch of the ApplicationSet reports see it.
func measureFreshness(ctx context.Context, r *Results, hub *sim.Hub, manager *sim.Manager, standIns *sim.StandIns, clusters []string,
	appSets []*unstructured.Unstructured, step func(string, ...any)) error {
	appWatch, err := watchChanges(ctx, hub.Config, argoapp.ApplicationGVK.GroupVersion().WithResource("applications"), sim.AppNamespace)
	if err != nil {
		return err
	}
	reportWatch, err := watchChanges(ctx, hub.Config, appsv1alpha1.GroupVersion.WithResource("multiclusterapplicationsetreports"), sim.AppNamespace)
	if err != nil {
		return err
	}
	// One read of the apiserver's and the manager's metrics before P2 and one after: the
	// requests, the apiserver's watch-cache consistency checks (each a burst of its CPU
	// that stalls every write while it runs: counted, to tell a slow change from a slow
	// path), and the histograms of the steps a change goes through (p2Stages).
	metricsBefore, err := takeMetrics(ctx, hub, manager)
	if err != nil {
		return err
	}
	reportsBefore := writesOf(standIns.Agents)
	step("P2: %d report changes, one at a time", r.Scale.Changes)
	// Where the time of a change goes, in the manager and in the apiserver (go tool pprof
	// <file>).
	profiles := profileCPU(ctx, hub, manager, "p2")
	rng := rand.New(rand.NewPCG(1, 2))
	var lastCluster string
	// Each change's latencies, kept in the run folder (p2-changes.tsv): a slow report
	// change next to the earlier changes of the same ApplicationSet shows the pace.
	changes := []string{"change\tcluster\tapplicationset\tapp_ms\treport_ms"}
	for i := range r.Scale.Changes {
		cluster := clusters[rng.IntN(len(clusters))]
		lastCluster = cluster
		appSet := appSets[rng.IntN(len(appSets))].GetName()
		app := sim.ApplicationName(appSet, cluster)
		standIns.Inject(cluster, app, argoapp.Condition{Type: "SyncError", Message: changeMessage(i, time.Now())})
		err := waitFor(ctx, 30*time.Second, func() (bool, error) {
			return appWatch.Seen(i) && reportWatch.Seen(i), nil
		})
		if err != nil {
			r.ChangesLost = append(r.ChangesLost, fmt.Sprintf("change %d on %s/%s: seen on the app %t, in the report %t",
				i, cluster, app, appWatch.Seen(i), reportWatch.Seen(i)))
		}
		appLatency, _ := appWatch.Latency(i)
		reportLatency, _ := reportWatch.Latency(i)
		changes = append(changes, fmt.Sprintf("%d\t%s\t%s\t%d\t%d", i, cluster, appSet, appLatency.Milliseconds(), reportLatency.Milliseconds()))
	}
	_ = os.WriteFile(filepath.Join(hub.Dir, "p2-changes.tsv"), []byte(strings.Join(changes, "\n")+"\n"), 0o644)
	metricsAfter, err := takeMetrics(ctx, hub, manager)
	if err != nil {
		return err
	}
	if err := measureBetween(r, metricsBefore, metricsAfter); err != nil {
		return err
	}
	r.ChangeAgentWrites = writesOf(standIns.Agents) - reportsBefore
	for err := range profiles {
		step("P2: a CPU profile was not taken: %v", err)
	}
	r.AppLatencies, r.ReportLatencies = appWatch.Latencies(), reportWatch.Latencies()
	step("P4: writes during P2: %v", r.ChangeWrites)
	// The last changed cluster's addon, with its field managers: who wrote what.
	addon := &addonv1beta1.ManagedClusterAddOn{}
	if err := hub.Client.Get(ctx, client.ObjectKey{Namespace: lastCluster, Name: sim.AddonName}, addon); err == nil {
		if data, err := yaml.Marshal(addon); err == nil {
			_ = os.WriteFile(filepath.Join(hub.Dir, "addon-after-p2.yaml"), data, 0o644)
		}
	}
	step("P2: app p50 %s p99 %s; report p50 %s p99 %s; %s", percentile(r.AppLatencies, 50), percentile(r.AppLatencies, 99),
		percentile(r.ReportLatencies, 50), percentile(r.ReportLatencies, 99), consistencyChecks(r.ChangeConsistencyChecks))
	step("P2: where the time goes: %s", r.ChangeStages)
	return nil
}

// profileSeconds is how long the CPU profiles of P1 and P2 run: under the 32 s timeout
// of a discovery client, through which the apiserver's is read.
const profileSeconds = 25

// profileCPU takes CPU profiles of the manager and of the kube-apiserver over the next
// profileSeconds, kept in the run folder as manager-<phase>-cpu.pb.gz and
// apiserver-<phase>-cpu.pb.gz. The channel yields the error of each profile not taken,
// and is closed when both are done.
func profileCPU(ctx context.Context, hub *sim.Hub, manager *sim.Manager, phase string) <-chan error {
	errs := make(chan error, 2)
	var wg sync.WaitGroup
	wg.Go(func() {
		path := filepath.Join(hub.Dir, "manager-"+phase+"-cpu.pb.gz")
		if err := saveProfile(ctx, manager.PprofAddr, "profile?seconds="+strconv.Itoa(profileSeconds), path); err != nil {
			errs <- fmt.Errorf("the manager's: %w", err)
		}
	})
	wg.Go(func() {
		data, err := hub.Kube.Discovery().RESTClient().Get().AbsPath("/debug/pprof/profile").
			Param("seconds", strconv.Itoa(profileSeconds)).DoRaw(ctx)
		if err == nil {
			err = os.WriteFile(filepath.Join(hub.Dir, "apiserver-"+phase+"-cpu.pb.gz"), data, 0o644)
		}
		if err != nil {
			errs <- fmt.Errorf("the kube-apiserver's: %w", err)
		}
	})
	go func() {
		wg.Wait()
		close(errs)
	}()
	return errs
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

// managerMetrics reads the manager's /metrics, as a Prometheus text exposition.
func managerMetrics(ctx context.Context, manager *sim.Manager) ([]byte, error) {
	return httpGet(ctx, "http://"+manager.MetricsAddr+"/metrics")
}

// saveManagerMetrics keeps the manager's own metrics (reconciles, errors, queue times)
// next to its log, to explain a figure.
func saveManagerMetrics(ctx context.Context, manager *sim.Manager, path string) error {
	data, err := managerMetrics(ctx, manager)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

// managerLiveHeap reads the manager's Go heap (go_memstats_heap_alloc_bytes) from its
// metrics. Call it right after saveHeapProfile, which runs a garbage collection first, so
// that it is close to the live heap.
func managerLiveHeap(ctx context.Context, manager *sim.Manager) (int64, error) {
	data, err := managerMetrics(ctx, manager)
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
	return saveProfile(ctx, addr, "heap?gc=1", path)
}

// saveProfile keeps the pprof profile of a process that serves pprof at addr (profile
// is the path and query under /debug/pprof/) at path.
func saveProfile(ctx context.Context, addr, profile, path string) error {
	data, err := httpGet(ctx, "http://"+addr+"/debug/pprof/"+profile)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

// samples returns the samples of metric in a Prometheus text exposition, summed by the
// value of one of their labels.
func samples(metrics, metric, label string) map[string]float64 {
	out := map[string]float64{}
	for _, line := range strings.Split(metrics, "\n") {
		rest, ok := strings.CutPrefix(line, metric+"{")
		if !ok {
			continue
		}
		labels, value, ok := strings.Cut(rest, "} ")
		if !ok {
			continue
		}
		n, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			continue
		}
		key := labels
		if _, after, ok := strings.Cut(labels, label+`="`); ok {
			key, _, _ = strings.Cut(after, `"`)
		}
		out[key] += n
	}
	return out
}

// queueDepths returns the depth of each work queue in the manager's metrics, by name.
func queueDepths(metrics string) map[string]float64 {
	return samples(metrics, "workqueue_depth", "name")
}

// formatDrained lists the queues by when they were last seen not empty, the last first.
func formatDrained(drained map[string]time.Duration) string {
	names := slices.Collect(maps.Keys(drained))
	slices.SortFunc(names, func(a, b string) int { return cmp.Compare(drained[b], drained[a]) })
	parts := make([]string, len(names))
	for i, name := range names {
		parts[i] = fmt.Sprintf("%s %s", name, drained[name].Round(100*time.Millisecond))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// restartWindow is how long after a restart the manager's writes are counted, and the
// time it has to be ready and caught up.
const restartWindow = 30 * time.Second

// measureRestart stops the manager with every Application settled, as a rolling update
// or a node drain does (SIGTERM: it releases its lease), starts it again, and measures
// the time until it is ready (its /readyz, which waits for its informers), until it has
// caught up (every queue empty, and each Application reconciled by propagation and the
// status mirror), and the writes in the restartWindow after its start. It returns the
// new manager, started with args.
func measureRestart(ctx context.Context, r *Results, hub *sim.Hub, manager *sim.Manager, binary, kubeconfig string, args []string,
	step func(string, ...any)) (*sim.Manager, error) {
	step("restart: stopping the manager with %d settled Applications", r.Apps)
	manager.Stop(30 * time.Second)
	before, err := hub.RequestCounts(ctx)
	if err != nil {
		return nil, err
	}
	ownBefore := hub.Own.Counts()
	start := time.Now()
	restarted, err := sim.StartManager(ctx, hub.Dir, binary, kubeconfig, args...)
	if err != nil {
		return nil, err
	}
	r.RestartReady = time.Since(start)
	// What the catch-up spends its CPU on, to explain the figure (go tool pprof <file>),
	// over the window the writes are counted in anyway.
	profileDone := make(chan error, 1)
	go func() {
		profileDone <- saveProfile(ctx, restarted.PprofAddr, fmt.Sprintf("profile?seconds=%.0f", restartWindow.Seconds()),
			filepath.Join(hub.Dir, "manager-restart-cpu.pb.gz"))
	}()
	drained := map[string]time.Duration{} // when each queue was last seen not empty
	err = waitFor(ctx, 5*time.Minute, func() (bool, error) {
		data, err := managerMetrics(ctx, restarted)
		if err != nil {
			return false, err
		}
		for name, depth := range queueDepths(string(data)) {
			if depth > 0 {
				drained[name] = time.Since(start)
			}
		}
		return caughtUp(string(data), r.Apps), nil
	})
	r.RestartCaughtUp = time.Since(start)
	if err != nil {
		return restarted, fmt.Errorf("restart: not caught up after %s: %w", since(start), err)
	}
	step("restart: each queue last seen not empty after: %s", formatDrained(drained))
	if err := <-profileDone; err != nil {
		step("restart: no CPU profile of the catch-up: %v", err)
	}
	select {
	case <-ctx.Done():
		return restarted, ctx.Err()
	case <-time.After(time.Until(start.Add(restartWindow))):
	}
	after, err := hub.RequestCounts(ctx)
	if err != nil {
		return restarted, err
	}
	events, leaderElections, err := eventsSince(ctx, hub, start)
	if err != nil {
		return restarted, err
	}
	// The leader election's own writes: the Lease, and the Event that says who leads.
	r.RestartWrites = after.WritesSince(before).Minus(hub.Own.Counts().Since(ownBefore)).Without(isLease).
		Minus(sim.Requests{"POST events": float64(leaderElections)})
	step("restart: ready after %s, caught up after %s; %.0f writes in the %s after the start, less the leader election's%s; the Events written: %s",
		r.RestartReady.Round(10*time.Millisecond), r.RestartCaughtUp.Round(10*time.Millisecond), r.RestartWrites.Total(), restartWindow,
		listed(r.RestartWrites), events)
	return restarted, nil
}

// eventsSince lists the reasons and objects of the hub's Events created since start, to
// tell what wrote them, and counts those of a leader election (the Event that
// client-go's leader election records on its Lease).
func eventsSince(ctx context.Context, hub *sim.Hub, start time.Time) (string, int, error) {
	events := &eventsv1.EventList{}
	if err := hub.Client.List(ctx, events); err != nil {
		return "", 0, fmt.Errorf("list the hub's Events: %w", err)
	}
	var out []string
	leaderElections := 0
	for _, e := range events.Items {
		if e.CreationTimestamp.Time.Before(start.Truncate(time.Second)) {
			continue
		}
		out = append(out, fmt.Sprintf("%s %s %s/%s", e.Reason, e.Regarding.Kind, e.Regarding.Namespace, e.Regarding.Name))
		if e.Reason == "LeaderElection" && e.Regarding.Kind == "Lease" {
			leaderElections++
		}
	}
	if len(out) == 0 {
		return "none", 0, nil
	}
	slices.Sort(out)
	return strings.Join(out, "; "), leaderElections, nil
}

// caughtUp reports, from the manager's metrics, whether every queue of its controllers
// is empty and the propagation and status controllers have each reconciled apps
// Applications at least.
func caughtUp(metrics string, apps int) bool {
	for _, depth := range queueDepths(metrics) {
		if depth > 0 {
			return false
		}
	}
	reconciled := samples(metrics, "controller_runtime_reconcile_total", "controller")
	return reconciled[propagationController] >= float64(apps) && reconciled[statusController] >= float64(apps)
}

// The controllers whose reconciles caughtUp counts: pkg/hub/propagation.ControllerName
// and pkg/hub/appstatus.ControllerName.
const (
	propagationController = "argocd-pull-propagation"
	statusController      = "argocd-pull-appstatus"
)

// peakTracker follows the manager's resident set while it runs, and keeps a heap profile
// (of the live heap at the last garbage collection, none forced) and its metrics from each new high, so
// that the last one shows what the manager held around its peak, which P3 reports. The
// heap at the end (manager-heap.pb.gz) does not show it: at 250 clusters the peak was
// four times the final heap.
type peakTracker struct {
	rss  int64         // the highest resident set seen
	at   time.Duration // when, since the tracker started
	stop func()
	done chan struct{}
}

// peakProfileStep is how much the resident set must grow past the last profile's for
// another profile: each one costs the manager a stop of a few milliseconds.
const peakProfileStep = 16 << 20

// trackPeak starts a peakTracker of manager, which keeps its heap profile and metrics at
// each high at the paths given.
func trackPeak(ctx context.Context, manager *sim.Manager, profile, metrics string) *peakTracker {
	ctx, cancel := context.WithCancel(ctx)
	t := &peakTracker{stop: cancel, done: make(chan struct{})}
	start := time.Now()
	go func() {
		defer close(t.done)
		var profiled int64
		_ = wait.PollUntilContextCancel(ctx, time.Second, false, func(ctx context.Context) (bool, error) {
			rss, err := manager.RSS()
			if err != nil || rss <= t.rss {
				return false, nil
			}
			t.rss, t.at = rss, time.Since(start)
			if rss-profiled >= peakProfileStep && saveProfile(ctx, manager.PprofAddr, "heap", profile) == nil {
				profiled = rss
				// The runtime's own account of the memory (go_memstats_*): heap in use,
				// idle and released, stacks, the GC's goal.
				_ = saveManagerMetrics(ctx, manager, metrics)
			}
			return false, nil
		})
	}()
	return t
}

// Stop stops the tracker, and returns when it saw the highest resident set, from its
// start.
func (t *peakTracker) Stop() time.Duration {
	t.stop()
	<-t.done
	return t.at
}
