// Command bench measures the addon-manager and the agent at fleet scale, the same way
// every time, and prints the figures of docs/benchmarks.md:
//
//	P1 propagation: pulled Applications created until every ManifestWork is correct;
//	P2 status freshness: a change in an agent's report until the ApplicationSet report
//	   and the hub Application show it, observed with watches, and where its time goes
//	   by the histograms of the manager and the apiserver (stages.go);
//	P3 memory: the manager's peak RSS;
//	P4 write amplification: hub writes per real change, and per minute when nothing
//	   changes, from the apiserver's own apiserver_request_total;
//	P5 agent: a real agent process with many local Applications: RSS, publish latency
//	   and the size of its ManagedClusterAddOn status.
//
// It runs one real kube-apiserver and etcd, the real manager as a process, and simulated
// clusters (test/sim). `make bench` runs it at full scale and writes docs/benchmarks.md;
// `make test` runs it at -scale=small with -check, as a smoke test that fails on wrong
// results (a lost work, a change never seen), never on timing.
//
// With -peer (`make bench-peer`, issue 13) it measures propagation only, side by side: the
// upstream peer open-cluster-management-io/argocd-pull-integration in its basic mode, then
// this project's manager, each alone on a fresh hub of the same clusters, with no work
// agent and no stand-in agent; the time until every Application has its ManifestWork, the
// create -> work latencies, CPU, peak RSS and the manager's requests, as P1 takes them
// (peer.go). At full scale it writes docs/benchmarks-peer.md.
//
// -manager-arg and -apiserver-arg add flags to the manager and to the hub apiserver, to
// tell what a figure owes to a setting; the results then say they are not the defaults.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/ocm-gitops/argocd-pull-addon/test/testenv"
)

// managerArgs are extra flags of the manager.
var managerArgs stringList

// apiserverArgs are extra flags of the hub apiserver; the results say so.
var apiserverArgs stringList

type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, " ") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

// Scale is the size of a run.
type Scale struct {
	Name string
	// Clusters and ApplicationSets: every ApplicationSet has one Application per cluster.
	Clusters, ApplicationSets int
	// ResourcesPerApp is the number of managed resources that each stand-in agent reports
	// of each app, in its report and its status slices, with the app's resource tree.
	ResourcesPerApp int
	// Changes is the number of report changes whose freshness P2 measures.
	Changes int
	// SteadyWindow is how long P4 counts writes while nothing changes.
	SteadyWindow time.Duration
	// AgentApps is the number of local Applications of the agent of P5, AgentResources
	// the managed resources of each (a Deployment with a ReplicaSet and a Pod in its tree,
	// a Service, ConfigMaps), and AgentChanges the number of changes whose publish latency
	// it measures.
	AgentApps, AgentResources, AgentChanges int
	// OnlyAgent runs P5 alone.
	OnlyAgent bool
}

var scales = map[string]Scale{
	// fleet is the shape of the fleet's rollout that fleetCase measured: 10 apps on each of
	// 2 clusters, each of 2 resources.
	"fleet":  {Name: "fleet", ResourcesPerApp: 2, Clusters: 2, ApplicationSets: 10, Changes: 10, SteadyWindow: 15 * time.Second, AgentApps: 20, AgentResources: 2, AgentChanges: 5},
	"small":  {Name: "small", ResourcesPerApp: 20, Clusters: 50, ApplicationSets: 4, Changes: 30, SteadyWindow: 15 * time.Second, AgentApps: 50, AgentResources: 20, AgentChanges: 10},
	"medium": {Name: "medium", ResourcesPerApp: 20, Clusters: 250, ApplicationSets: 8, Changes: 60, SteadyWindow: 30 * time.Second, AgentApps: 200, AgentResources: 20, AgentChanges: 20},
	"full":   {Name: "full", ResourcesPerApp: 20, Clusters: 1000, ApplicationSets: 10, Changes: 200, SteadyWindow: time.Minute, AgentApps: 500, AgentResources: 20, AgentChanges: 30},
}

func main() {
	scaleName := flag.String("scale", "full", "size of the run: fleet (the local fleet's rollout of 20 apps on 2 clusters, to set the stand-ins beside the real writers), small (about a minute, the smoke test of make test), medium (250 clusters, 2,000 apps) or full (1,000 clusters, 10,000 apps)")
	out := flag.String("out", "", "write the results as Markdown to this file (make bench: docs/benchmarks.md)")
	check := flag.Bool("check", false, "exit non-zero when a result is wrong (a work lost or wrong, a change never seen); timing never fails")
	dir := flag.String("dir", "", "working folder for kubeconfigs, binaries and process logs (default .cache/bench/<scale>)")
	onlyAgent := flag.Bool("only-agent", false, "run P5 alone: the real agent against a hub apiserver, without the manager")
	agentApps := flag.Int("agent-apps", 0, "the local Applications of P5 (default: the scale's)")
	agentResources := flag.Int("agent-resources", 0, "the managed resources of each local Application of P5 (default: the scale's)")
	peer := flag.Bool("peer", false, "instead of the benchmarks, propagation only (no work agent, no stand-in agent), side by side: the upstream argocd-pull-integration "+peerVersion+" in basic mode, then this project's manager, each on a fresh hub; -out writes the comparison (make bench-peer: docs/benchmarks-peer.md)")
	peerBin := flag.String("peer-bin", "", "with -peer: the upstream argocd-pull-integration binary to run (default: built from its Go module at "+peerVersion+" into .cache/peer)")
	flag.Var(&apiserverArgs, "apiserver-arg", "an extra flag of the hub apiserver, e.g. -apiserver-arg=--feature-gates=DetectCacheInconsistency=false (repeatable), to tell what a figure owes to a default of Kubernetes; the results say so")
	flag.Var(&managerArgs, "manager-arg", "an extra flag of the manager, e.g. -manager-arg=--concurrency=8 (repeatable); the default is the manager's own defaults")
	flag.Parse()
	ctrl.SetLogger(klog.NewKlogr())

	scale, ok := scales[*scaleName]
	if !ok {
		fmt.Fprintf(os.Stderr, "bench: unknown -scale %q: fleet, small, medium or full\n", *scaleName)
		os.Exit(2)
	}
	if *agentApps > 0 {
		scale.AgentApps = *agentApps
	}
	if *agentResources > 0 {
		scale.AgentResources = *agentResources
	}
	scale.OnlyAgent = *onlyAgent
	if *peer && len(apiserverArgs) > 0 {
		// Its comparison would not say so.
		fmt.Fprintln(os.Stderr, "bench: -apiserver-arg is for the benchmarks, not for -peer")
		os.Exit(2)
	}
	if *dir == "" {
		root, err := testenv.RepoRoot()
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		*dir = filepath.Join(root, ".cache", "bench", scale.Name)
		if *peer {
			*dir = filepath.Join(root, ".cache", "bench-peer", scale.Name)
		}
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()

	if *peer {
		started := time.Now()
		sides, err := runPeer(ctx, scale, *dir, *peerBin)
		if len(sides) > 0 {
			fmt.Println(peerTable(scale, sides))
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		if *out != "" {
			if err := os.WriteFile(*out, []byte(peerMarkdown(scale, sides, started, *peerBin)), 0o644); err != nil {
				fmt.Fprintln(os.Stderr, "bench:", err)
				os.Exit(1)
			}
			fmt.Println("wrote", *out)
		}
		return
	}

	results, err := run(ctx, scale, *dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	fmt.Println(results.Table())
	if *out != "" {
		if err := os.WriteFile(*out, []byte(results.Markdown()+handKept(*out)), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		fmt.Println("wrote", *out)
	}
	if problems := results.Problems(); *check && len(problems) > 0 {
		for _, p := range problems {
			fmt.Fprintln(os.Stderr, "bench: wrong result:", p)
		}
		os.Exit(1)
	}
}

// handKeptMarker starts the part of docs/benchmarks.md that is written by hand, which
// make bench keeps as it is.
const handKeptMarker = "<!-- kept by hand: make bench keeps what follows -->"

// handKept returns the part of the file at path from handKeptMarker on, or "".
func handKept(path string) string {
	old, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	if i := strings.Index(string(old), handKeptMarker); i >= 0 {
		return "\n" + string(old[i:])
	}
	return ""
}
