package main

import (
	"bufio"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/addon"
	"github.com/ocm-gitops/argocd-pull-addon/test/sim"
)

// Results are the figures of one run.
type Results struct {
	Scale    Scale
	Machine  Machine
	Started  time.Time
	Duration time.Duration

	// AddonInstall is how long the addon framework took to deploy the agent everywhere.
	AddonInstall time.Duration

	// P1.
	Apps              int
	AppsCreated       time.Duration
	Propagation       time.Duration
	Works             sim.WorkCheck
	PropagationCPU    sim.CPU
	StatusSettled     time.Duration
	PropagationWrites sim.Requests
	// WritesByWriter are PropagationWrites by who wrote them (writerManager and the
	// rest), from the creation of the first Application until the status settled.
	WritesByWriter map[string]sim.Requests
	// HubSlices are the agents' status slices on the hub once the status settled, and
	// HubSliceApps the apps they hold with every resource and their tree.
	HubSlices, HubSliceApps int
	// HubTrees counts the resource trees the manager wrote into the hub Argo CD's Redis
	// (a miniredis) by the end of P2.
	HubTrees int
	// WorkLatencies are the create -> work latencies of every Application, sorted.
	WorkLatencies []time.Duration
	// PropagationRequests are the manager's requests, reads included, until every work
	// was correct: the apiserver's counts less the bench's own.
	PropagationRequests sim.Requests
	// SettledCPU is the CPU time used until the status settled.
	SettledCPU sim.CPU
	// LoadAverage is the machine's /proc/loadavg when every work was correct: the
	// machine may be shared.
	LoadAverage string

	// The restart: the time until the restarted manager was ready and caught up, and
	// its writes (less the lease's) in the restartWindow after its start.
	RestartReady, RestartCaughtUp time.Duration
	RestartWrites                 sim.Requests

	// APIServerArgs and ManagerArgs are the run's extra flags of the hub apiserver and of
	// the manager (-apiserver-arg, -manager-arg), if any.
	APIServerArgs, ManagerArgs []string

	// P2 and P4.
	AppLatencies, ReportLatencies []time.Duration
	ChangesLost                   []string
	ChangeWrites                  sim.Requests
	// ChangeConsistencyChecks are the apiserver's watch-cache consistency checks during
	// P2, by resource.
	ChangeConsistencyChecks map[string]float64
	// ChangeStages time the steps of the changes during P2 (p2Stages).
	ChangeStages        stageTimes
	ChangeAgentWrites   int64
	SteadyWrites        sim.Requests
	SteadyStandInWrites int64

	// P3.
	ManagerPeakRSS int64
	// ManagerPeakAt is when the manager's resident set was highest, from its start.
	ManagerPeakAt   time.Duration
	ManagerLiveHeap int64
	// ManagerFileRSS is the part of its resident set that maps its binary, at the end.
	ManagerFileRSS int64

	// P5.
	AgentFirstReport time.Duration
	AgentChangesLost []string
	AgentPeakRSS     int64
	AgentStatusBytes int
	AgentSummary     string
	// The status channel: the first time every app was complete in the slices, the
	// latency of a change into its slice, and the slices' number and size.
	AgentFirstSlices    time.Duration
	AgentSliceLatencies []time.Duration
	AgentSlices         int
	AgentSliceBytes     int
}

// Machine describes where the run happened.
type Machine struct {
	Cores     int
	MemoryMiB int64
	CPU       string
	Go        string
	Commit    string
}

func describeMachine() Machine {
	m := Machine{Cores: runtime.NumCPU(), Go: runtime.Version()}
	m.MemoryMiB = procValue("/proc/meminfo", "MemTotal:") / 1024
	m.CPU = procLine("/proc/cpuinfo", "model name")
	if out, err := exec.Command("git", "describe", "--always", "--dirty").Output(); err == nil {
		m.Commit = strings.TrimSpace(string(out))
	}
	return m
}

func procLine(path, prefix string) string {
	f, err := os.Open(path)
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		if line := scanner.Text(); strings.HasPrefix(line, prefix) {
			_, value, _ := strings.Cut(line, ":")
			return strings.TrimSpace(value)
		}
	}
	return "unknown"
}

func procValue(path, prefix string) int64 {
	var n int64
	_, _ = fmt.Sscanf(strings.TrimSuffix(procLine(path, strings.TrimSuffix(prefix, ":")), " kB"), "%d", &n) // 0 when absent
	return n
}

// isLease and isAgentReport pick the writes that are not the manager's reaction to a
// change: the leader's lease renewals and the (stand-in) agents' own reports and status
// slices.
func isLease(key string) bool { return key == "PUT leases" }
func isAgentReport(key string) bool {
	return key == "APPLY managedclusteraddons/status" || key == "APPLY applicationstatusslices" || key == "DELETE applicationstatusslices"
}

// steadyPerMinute returns the writes per minute while nothing changed, without and with
// the leader's lease renewals.
func (r *Results) steadyPerMinute() (others, leases float64) {
	minutes := r.Scale.SteadyWindow.Minutes()
	return r.SteadyWrites.Without(isLease).Total() / minutes, r.SteadyWrites["PUT leases"] / minutes
}

// writesPerChange returns the manager's writes per measured change, and their breakdown.
func (r *Results) writesPerChange() (float64, sim.Requests) {
	manager := r.ChangeWrites.Without(func(key string) bool { return isLease(key) || isAgentReport(key) })
	seen := len(r.ReportLatencies)
	if seen == 0 {
		return 0, manager
	}
	return manager.Total() / float64(seen), manager
}

// Problems are the wrong results: what make test's smoke run fails on.
func (r *Results) Problems() []string {
	var problems []string
	if r.Scale.OnlyAgent {
		return r.AgentChangesLost
	}
	if !r.Works.OK() {
		problems = append(problems, "P1: "+r.Works.String())
	}
	if r.HubTrees != r.Apps {
		problems = append(problems, fmt.Sprintf("P1: the hub Argo CD's cache holds the resource trees of %d of %d apps", r.HubTrees, r.Apps))
	}
	if r.HubSliceApps != r.Apps {
		problems = append(problems, fmt.Sprintf("P1: the status slices hold %d of %d apps with their %d resources and tree", r.HubSliceApps, r.Apps, r.Scale.ResourcesPerApp))
	}
	problems = append(problems, r.ChangesLost...)
	problems = append(problems, r.AgentChangesLost...)
	if r.SteadyStandInWrites != 0 {
		problems = append(problems, fmt.Sprintf("P4: the stand-ins wrote %d times while nothing changed; the steady state is not steady", r.SteadyStandInWrites))
	}
	return problems
}

// row is one figure of the table.
type row struct{ figure, target, result string }

func (r *Results) rows() []row {
	others, leases := r.steadyPerMinute()
	perChange, _ := r.writesPerChange()
	latencies := func(d []time.Duration) string {
		return fmt.Sprintf("p50 %s, p95 %s, p99 %s (%d changes)", percentile(d, 50), percentile(d, 95), percentile(d, 99), len(d))
	}
	apps := float64(max(r.Apps, 1))
	pathRequests := r.PropagationRequests.Without(func(key string) bool { return !onPropagationPath(key) })
	cpuPerApp := func(cpu sim.CPU, name string) string {
		return fmt.Sprintf("%.1f ms", cpu[name]*1000/apps)
	}
	all := []row{
		{"P1 propagation", "≤ 60 s", fmt.Sprintf("%s for %d apps on %d clusters: %.0f apps/s (creating them took %s)",
			r.Propagation.Round(100*time.Millisecond), r.Apps, r.Scale.Clusters, float64(r.Apps)/r.Propagation.Seconds(), r.AppsCreated.Round(100*time.Millisecond))},
		{"P1 create -> work latency", "p99 ≤ 3 s", fmt.Sprintf("p50 %s, p95 %s, p99 %s (%d apps)",
			percentile(r.WorkLatencies, 50), percentile(r.WorkLatencies, 95), percentile(r.WorkLatencies, 99), len(r.WorkLatencies))},
		{"P1 requests per app, propagation path", "≤ 2", fmt.Sprintf("%.2f: %s", pathRequests.Total()/apps, perApp(pathRequests, apps))},
		{"P1 manager requests per app", "", fmt.Sprintf("%.2f: %s", r.PropagationRequests.Total()/apps, perApp(r.PropagationRequests, apps))},
		{"P1 CPU per app", "manager ≤ 1 ms", fmt.Sprintf("manager %s, kube-apiserver %s, etcd %s until every work; until the status settled: manager %s, kube-apiserver %s",
			cpuPerApp(r.PropagationCPU, "manager"), cpuPerApp(r.PropagationCPU, "kube-apiserver"), cpuPerApp(r.PropagationCPU, "etcd"),
			cpuPerApp(r.SettledCPU, "manager"), cpuPerApp(r.SettledCPU, "kube-apiserver"))},
		{"P1 hub writes per app, create to Healthy", "", writesPerApp(r.WritesByWriter, apps)},
		{"P1 stand-ins beside the fleet", "each within 20 %", besideTheFleet(r.WritesByWriter, apps, r.Scale.ApplicationSets)},
		{"P1 status on the hub", "≤ 60 s", fmt.Sprintf("%s until every hub app and report shows its clusters Synced and Healthy, every app with its %d resources (%d apps complete in %d ApplicationStatusSlices; %d resource trees in the hub Argo CD's cache)",
			r.StatusSettled.Round(100*time.Millisecond), r.Scale.ResourcesPerApp, r.HubSliceApps, r.HubSlices, r.HubTrees)},
		{"P2 freshness, hub Application", "p99 ≤ 1 s", latencies(r.AppLatencies)},
		{"P2 freshness, ApplicationSet report", "p99 ≤ 1 s", latencies(r.ReportLatencies) + "; " + consistencyChecks(r.ChangeConsistencyChecks)},
		{"P2 where the time goes", "", r.ChangeStages.String()},
		{"P3 manager peak RSS", "≤ 256 MiB", fmt.Sprintf("%s, %s after the manager started (its binary's pages at the end: %s; live Go heap at the end: %s; GOGC %d and GOMEMLIMIT %s as the chart sets them)",
			mib(r.ManagerPeakRSS), r.ManagerPeakAt, mib(r.ManagerFileRSS), mib(r.ManagerLiveHeap), sim.ManagerGOGC, mib(sim.ManagerMemoryLimit))},
		{"P4 writes per change", "", fmt.Sprintf("%.2f hub writes by the manager per report change", perChange)},
		{"P4 steady state", "0 writes/min", fmt.Sprintf("%.1f writes/min, plus %.0f/min leader lease renewals", others, leases)},
		{"Restart with every app settled", "≤ 30 s, 0 writes", fmt.Sprintf("ready after %s, caught up after %s, %.0f writes in the %s after the start%s",
			r.RestartReady.Round(100*time.Millisecond), r.RestartCaughtUp.Round(100*time.Millisecond), r.RestartWrites.Total(), restartWindow, listed(r.RestartWrites))},
		{"P5 agent peak RSS", "≤ 40 MiB", fmt.Sprintf("%s with %d local apps of %d resources (GOGC %s and GOMEMLIMIT %s as the agent's Deployment sets them)",
			mib(r.AgentPeakRSS), r.Scale.AgentApps, r.Scale.AgentResources, addon.AgentGOGC, mib(addon.AgentMemoryLimit.Value()))},
		{"P5 agent status size", "", fmt.Sprintf("%d bytes of ManagedClusterAddOn status (its summary counted every app after %s)", r.AgentStatusBytes, r.AgentFirstReport.Round(100*time.Millisecond))},
		{"P5 agent status slices latency", "", latencies(r.AgentSliceLatencies)},
		{"P5 agent status slices", "", fmt.Sprintf("%d ApplicationStatusSlices, %d bytes, every app complete after %s", r.AgentSlices, r.AgentSliceBytes, r.AgentFirstSlices.Round(100*time.Millisecond))},
	}
	if r.Scale.OnlyAgent {
		return slices.DeleteFunc(all, func(x row) bool { return !strings.HasPrefix(x.figure, "P5") })
	}
	return all
}

// Table is the results as a plain text table.
func (r *Results) Table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "\nscale %s: %d clusters, %d apps; %d cores, %d MiB; %s\n", r.Scale.Name, r.Scale.Clusters,
		r.Scale.Clusters*r.Scale.ApplicationSets, r.Machine.Cores, r.Machine.MemoryMiB, r.Started.UTC().Format(time.RFC3339))
	b.WriteString(r.extraFlags())
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "FIGURE\tTARGET\tRESULT")
	for _, row := range r.rows() {
		fmt.Fprintf(w, "%s\t%s\t%s\n", row.figure, row.target, row.result)
	}
	w.Flush()
	if problems := r.Problems(); len(problems) > 0 {
		fmt.Fprintf(&b, "wrong results:\n  %s\n", strings.Join(problems, "\n  "))
	}
	return b.String()
}

// extraFlags is a line naming the run's extra flags of the apiserver and the manager,
// or nothing when it ran with the defaults.
func (r *Results) extraFlags() string {
	var each []string
	if len(r.APIServerArgs) > 0 {
		each = append(each, "the hub apiserver "+strings.Join(r.APIServerArgs, " "))
	}
	if len(r.ManagerArgs) > 0 {
		each = append(each, "the manager "+strings.Join(r.ManagerArgs, " "))
	}
	if len(each) == 0 {
		return ""
	}
	return "\nNot the defaults: extra flags of " + strings.Join(each, "; of ") + ".\n"
}

// Markdown is the results as docs/benchmarks.md.
func (r *Results) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, `# Benchmarks

Written by `+"`make bench`"+` (test/bench) on %s. Rerun it to refresh this page; the
method is in the package documentation of test/bench and below. Propagation alone, side by
side with the upstream argocd-pull-integration: [benchmarks-peer.md](benchmarks-peer.md)
(`+"`make bench-peer`"+`).

**Machine:** %d cores (%s), %d MiB of memory, %s, commit %s. The machine is shared and
noisy: compare ratios and medians, not single figures. Load average (1, 5, 15 min) when
every work of P1 was correct: %s.

**Scale %s:** one real kube-apiserver and etcd; %d simulated managed clusters (namespace,
ManagedCluster, ManagedClusterAddOn, PlacementDecisions), %d ApplicationSets with one
pulled Application per cluster (%d Applications); the real addon-manager as a process
(leader election on, as the chart runs it); in-process stand-ins for the work agent
(writes each work's finalizer and its status, the Application's status feedback among it,
step by step as the local fleet's OCM work agent wrote them while Argo CD rolled a
guestbook app out: test/sim FleetRollout) and for every cluster's agent (publishes each
app in the state its work's feedback shows, in its report and its ApplicationStatusSlices
with pkg/clusterreport, server-side, holding a rollout's passing states back as pkg/spoke
does: every app with %d resources and its resource tree). P5 runs the real agent binary
against a second apiserver. The whole run took %s.
%s
| Figure | Target | Result |
|---|---|---|
`, r.Started.UTC().Format("2006-01-02 15:04 MST"), r.Machine.Cores, r.Machine.CPU, r.Machine.MemoryMiB, r.Machine.Go, r.Machine.Commit, r.LoadAverage,
		r.Scale.Name, r.Scale.Clusters, r.Scale.ApplicationSets, r.Apps, r.Scale.ResourcesPerApp, r.Duration.Round(time.Second), r.extraFlags())
	for _, row := range r.rows() {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", row.figure, row.target, row.result)
	}
	_, perChange := r.writesPerChange()
	fmt.Fprintf(&b, `
## How each figure is taken

- **P1** starts before the first Application is created and ends when every work is
  correct: exactly one ManifestWork per Application, in its cluster's namespace, named and
  rendered as the manager renders it now, and no orphaned work (test/sim CheckWorks, on a
  watch-fed cache). The addon framework has already deployed the agent to every cluster
  (%s). CPU time used during P1 by each process: %v, on %d cores in %s of wall time.
  Hub writes during P1, by the apiserver's apiserver_request_total: %s. CPU profiles of
  the manager and of the kube-apiserver over P1's first 25 s are kept in the run folder
  (manager-p1-cpu.pb.gz, apiserver-p1-cpu.pb.gz).
- **P1 hub writes per app** are the apiserver's write requests (refused ones included)
  from the first create until the status settled, less the leader's lease renewals, by
  writer: the work agent's and the agents' as their stand-ins' transports count them, the
  bench's creates of the Applications, and the manager's, the rest. Beside the fleet sets
  each writer's figure beside what the same writer wrote per app on the local fleet, with
  every writer real, in a rollout of 20 apps on 2 clusters (test/bench fleetCase):
  `+"`make bench SCALE=fleet`"+` runs the bench at that size. The ApplicationSet
  controller's writes past the creates (its status, Events) have no stand-in here.
- **P1 create -> work latency** is, for each Application, the time from the return of its
  create to the first sight of its ManifestWork by an informer of the bench (the watch's
  delay included), while the bench creates them %d at a time, as fast as the apiserver
  takes them.
- **P1 requests** are the apiserver's apiserver_request_total until every work is correct,
  reads included, less the requests of the bench's own clients (counted on their
  transport): the manager's. The propagation path is its requests on ManifestWorks and
  Events; the writes to Applications are the status mirror's (propagation writes none to
  an Application that an ApplicationSet generated, as every Application here is). CPU
  per app is each process's CPU time over the same span, divided by the Applications.
- **Restart** stops the manager with SIGTERM once everything has settled (it releases its
  lease, as in a rolling update), and starts it again: ready is when its /readyz answers
  (once its informers have synced), caught up when every queue is empty and propagation
  and the status mirror have each reconciled every Application, and the writes are the
  apiserver's write requests in the %s after the start, less the bench's own and the
  leader election's (its Lease, and the Event that says who leads). The run's log says when each work queue was last seen holding an item, and a
  CPU profile of the %s after the start is kept in the run folder
  (manager-restart-cpu.pb.gz).
- **P2** changes the report of one random cluster's agent at a time: an Argo CD SyncError
  whose message carries the change's number and timestamp. Two watches, on the hub
  Applications and on the MulticlusterApplicationSetReports, record when each first shows
  it. Latency = seen - timestamp, in one process clock. Each change's cluster,
  ApplicationSet and latencies are kept in the run folder (p2-changes.tsv), and CPU
  profiles of the manager and of the kube-apiserver over its first 25 s
  (manager-p2-cpu.pb.gz, apiserver-p2-cpu.pb.gz). The apiserver's watch-cache
  consistency checks during P2 are counted (apiserver_storage_consistency_checks_total):
  on by default since Kubernetes 1.34, each lists one resource from etcd and decodes
  all of it, every 5 to 7.5 minutes per resource, seconds of CPU at this size, and every
  write waits while it runs.
- **P2 where the time goes** reads, before and after P2, the histograms of the processes
  a change goes through: in the manager, the time each request waited in the queue of
  the status mirror and of the report controller
  (workqueue_queue_duration_seconds) and the time of their reconciles
  (controller_runtime_reconcile_time_seconds, its write included); in the apiserver, the
  time it took to handle each PATCH of an Application and each APPLY of a report
  (apiserver_request_duration_seconds). Each quantile is the upper bound of the
  histogram's bucket that holds it; the counts include the reconciles that found nothing
  to write.
- **P3** is the manager's VmHWM (peak resident set) at the end of P1, P2 and P4, and its
  Go heap right after a forced garbage collection (close to the live heap). The manager runs
  with GOGC (values goGC) and GOMEMLIMIT at the chart's memory limit, as the chart's
  Deployment sets them; a heap profile is kept in the run folder (manager-heap.pb.gz). Of
  the resident set, the pages of the binary that the manager has run (RssFile at the end)
  map the file: the kernel may drop them and read them again. The bench reads the manager's
  resident set every second, and keeps a heap profile (the live heap at the last garbage
  collection) at each high 16 MiB past the last one: the last, manager-heap-peak.pb.gz,
  shows what the manager held near its peak.
- **P4** counts the apiserver's write requests (POST, PUT, PATCH, APPLY, DELETE) during
  P2, without the agents' own report and slice writes and the leader's lease renewals, per change
  seen: %s. The steady state counts them for %s, from the settle wait (the longest a
  write may be held back for a passing state) and 5 s after everything settled, with
  nothing changing: %s.
- **P5** runs the agent binary against its own apiserver with %d local Applications of
  %d resources each, their resource trees in a Redis as Argo CD 3 writes them, and a hub
  with admin credentials; its peak RSS (VmHWM), the time of each change (a SyncError set
  on a local Application) until its status slice on the hub shows it, and the JSON size
  of the ManagedClusterAddOn's status (the diagnostics and a summary: the apps are in
  the slices) and of the slices; a heap profile is kept in the
  run folder (agent-heap.pb.gz). The agent runs with the environment its Deployment
  gives it (pkg/hub/addon: GOMEMLIMIT from its memory limit, GOGC). The agent's summary: %q.
`, r.AddonInstall.Round(100*time.Millisecond), r.PropagationCPU, r.Machine.Cores, r.Propagation.Round(time.Second), r.PropagationWrites,
		parallelWrites, restartWindow, restartWindow, perChange, r.Scale.SteadyWindow, r.SteadyWrites,
		r.Scale.AgentApps, r.Scale.AgentResources, r.AgentSummary)
	if problems := r.Problems(); len(problems) > 0 {
		fmt.Fprintf(&b, "\n## Wrong results\n\n- %s\n", strings.Join(problems, "\n- "))
	}
	return b.String()
}

// onPropagationPath reports whether a request key is on the propagation path: the
// manager's requests on the pulled ManifestWorks and the Events it records (the
// ManifestWorks of the addon framework are applied before P1). Its writes to
// Applications are not counted: the status mirror's status writes share the key, and
// propagation writes none to an Application that an ApplicationSet generated, as every
// Application of the bench is.
func onPropagationPath(key string) bool {
	_, resource, _ := strings.Cut(key, " ")
	return resource == "manifestworks" || resource == "events"
}

// perApp lists requests divided by apps, largest first.
func perApp(requests sim.Requests, apps float64) string {
	var parts []string
	for _, part := range strings.Split(requests.String(), ", ") {
		key, value, ok := strings.Cut(part, "=")
		if !ok {
			continue
		}
		var n float64
		_, _ = fmt.Sscan(value, &n)
		parts = append(parts, fmt.Sprintf("%s %.2f", key, n/apps))
	}
	return strings.Join(parts, ", ")
}

// consistencyChecks says how many watch-cache consistency checks the apiserver ran, of
// which resources.
func consistencyChecks(checks map[string]float64) string {
	var total float64
	var each []string
	for _, resource := range slices.Sorted(maps.Keys(checks)) {
		total += checks[resource]
		each = append(each, fmt.Sprintf("%s %.0f", resource, checks[resource]))
	}
	if total == 0 {
		return "no watch-cache consistency check of the apiserver meanwhile"
	}
	return fmt.Sprintf("%.0f watch-cache consistency checks of the apiserver meanwhile (%s)", total, strings.Join(each, ", "))
}

// listed is ": " and the requests, or nothing when there are none.
func listed(requests sim.Requests) string {
	if len(requests) == 0 {
		return ""
	}
	return ": " + requests.String()
}

func mib(bytes int64) string { return fmt.Sprintf("%.0f MiB", float64(bytes)/(1<<20)) }
