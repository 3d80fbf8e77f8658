// Package fleet runs a local OCM fleet as plain processes: a hub and N managed clusters,
// each with its own etcd, kube-apiserver and kube-controller-manager; the OCM hub
// controllers and one klusterlet agent per managed cluster; Argo CD's application-controller
// and repo-server on every managed cluster and its ApplicationSet controller on the hub;
// and a local git repository holding a guestbook app.
//
// Everything is built from Go modules (hack/tools) and runs on loopback, so the fleet needs
// no container engine, no kubelet and no network. It is the ground truth that the e2e suite,
// the benchmarks and `make demo` run on.
package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"golang.org/x/sync/errgroup"

	"github.com/ocm-gitops/argocd-pull-addon/test/loopback"
)

// HubName names the hub's control plane, run directory and kubeconfig.
const HubName = "hub"

// Options configure a fleet.
type Options struct {
	// Dir is the run directory: kubeconfigs, logs, certificates and data. It is emptied first.
	Dir string
	// BinDir holds the binaries that `make tools` builds.
	BinDir string
	// Clusters names the managed clusters.
	Clusters []string
	// ArgoCD runs Argo CD on the hub and on every managed cluster.
	ArgoCD bool
	// Addon installs this project on the hub with `helm install` of Chart (HelmValues are
	// passed as --set), and runs, as a kubelet would, the manager Deployment of the chart
	// on the hub and the agent Deployments that the addon framework delivers to the
	// managed clusters.
	Addon      bool
	Chart      string
	HelmValues []string
	// Modules locates the manifests the fleet installs.
	Modules ModuleDirs
	// Progress, when set, is told of each step as it completes.
	Progress func(step string)
}

// ModuleDirs are the module source folders whose manifests the fleet installs.
type ModuleDirs struct {
	OCM    string // open-cluster-management.io/ocm: hub and klusterlet CRDs
	ArgoCD string // github.com/argoproj/argo-cd/v3: Argo CD's core install
	KWOK   string // sigs.k8s.io/kwok: the RBAC of the kwok controller
}

// ResolveModuleDirs asks the go command where the pinned tool modules of hack/tools live,
// downloading them if needed.
func ResolveModuleDirs(repoRoot string) (ModuleDirs, error) {
	ocm, err := ModuleDir(filepath.Join(repoRoot, "hack/tools/ocm"), "open-cluster-management.io/ocm")
	if err != nil {
		return ModuleDirs{}, err
	}
	argo, err := ModuleDir(filepath.Join(repoRoot, "hack/tools/argocd"), "github.com/argoproj/argo-cd/v3")
	if err != nil {
		return ModuleDirs{}, err
	}
	kwok, err := ModuleDir(filepath.Join(repoRoot, "hack/tools/kwok"), "sigs.k8s.io/kwok")
	if err != nil {
		return ModuleDirs{}, err
	}
	return ModuleDirs{OCM: ocm, ArgoCD: argo, KWOK: kwok}, nil
}

// ModuleDir returns the source folder of module, as required by the go.mod in modDir,
// downloading it if needed: go list -m names no folder for a module that is not in the
// module cache yet, as on a fresh machine before its tools are built.
func ModuleDir(modDir, module string) (string, error) {
	path, err := goInModule(modDir, "list", "-m", "-f", "{{.Dir}}", module)
	if err != nil || path != "" {
		return path, err
	}
	if _, err := goInModule(modDir, "mod", "download", module); err != nil {
		return "", err
	}
	path, err = goInModule(modDir, "list", "-m", "-f", "{{.Dir}}", module)
	if err == nil && path == "" {
		err = fmt.Errorf("go list -m %s in %s: the module has no source folder after go mod download", module, modDir)
	}
	return path, err
}

// goInModule runs a go command in the module of modDir and returns its output, trimmed.
func goInModule(modDir string, args ...string) (string, error) {
	cmd := exec.Command("go", args...)
	cmd.Dir = modDir
	out, err := cmd.Output()
	if err != nil {
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) {
			return "", fmt.Errorf("go %s in %s: %s", strings.Join(args, " "), modDir, exitErr.Stderr)
		}
		return "", fmt.Errorf("go %s in %s: %w", strings.Join(args, " "), modDir, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// Fleet is a running hub and its managed clusters.
type Fleet struct {
	Hub      *ControlPlane
	Clusters []*ManagedCluster
	Git      *GitRepo
	Dir      string
	// ArgoCDServer is the host:port of the hub's argocd-server (plaintext), also in
	// ArgoCDServerFile; empty without Argo CD.
	ArgoCDServer string
	// HubArgoCDRedis is the address of the hub Argo CD's Redis, which the manager's Pod
	// reaches where a real one reaches the Service argocd-redis (ArgoCDRedisService).
	HubArgoCDRedis string

	sup     *supervisor
	redis   []*miniredis.Miniredis
	stopMu  sync.Once
	cancel  context.CancelFunc // stops the pod runners
	runners sync.WaitGroup
	pods    []*podRunner
	addon   Options // how the addon was installed (Addon, Chart, HelmValues, BinDir)
}

// ManagedCluster is a managed cluster's control plane, joined to the hub.
type ManagedCluster struct {
	*ControlPlane
	// ArgoCDRedis is the address of the embedded Redis of the cluster's Argo CD
	// application-controller; empty without Argo CD. The agent's Pod reaches it where a
	// real one reaches the Service argocd-redis (ArgoCDRedisService).
	ArgoCDRedis string
}

// ArgoCDRedisService is the address of Argo CD's Redis Service in a real install, which
// the agent's Deployment names.
const ArgoCDRedisService = "argocd-redis." + ArgoCDNamespace + ".svc:6379"

// Start brings the fleet up and returns when every cluster is joined and Available and,
// with ArgoCD, every Argo CD process runs. On error everything started is stopped.
func Start(ctx context.Context, opts Options) (f *Fleet, err error) {
	if len(opts.Clusters) == 0 {
		return nil, errors.New("fleet: no managed clusters named")
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, err
	}
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	progress := opts.Progress
	if progress == nil {
		progress = func(string) {}
	}
	f = &Fleet{Dir: dir, sup: &supervisor{dir: dir}}
	// An error return (`return nil, err`) has set f to nil by the time this runs.
	toStop := f
	defer func() {
		if err != nil {
			toStop.Stop()
			f = nil
		}
	}()
	started := time.Now()
	step := func(format string, args ...any) {
		progress(fmt.Sprintf("[%5.1fs] ", time.Since(started).Seconds()) + fmt.Sprintf(format, args...))
	}

	// Control planes start in parallel: most of their start-up is waiting.
	names := append([]string{HubName}, opts.Clusters...)
	planes := make([]*ControlPlane, len(names))
	g, gctx := errgroup.WithContext(ctx)
	for i, name := range names {
		g.Go(func() error {
			// Managed clusters run Pods; the hub runs only the control plane, and the
			// addon's manager as a process (Options.Addon).
			workloads := name != HubName
			cp, err := startControlPlane(gctx, f.sup, opts.BinDir, dir, name, workloads)
			if err != nil {
				return fmt.Errorf("control plane %s: %w", name, err)
			}
			if !workloads {
				step("control plane %s ready at %s (etcd, kube-apiserver, kube-controller-manager)", name, cp.URL)
				planes[i] = cp
				return nil
			}
			if err := startWorkloads(gctx, f.sup, opts.BinDir, cp, opts.Modules.KWOK); err != nil {
				return fmt.Errorf("workloads on %s: %w", name, err)
			}
			planes[i] = cp
			step("control plane %s ready at %s (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, KWOK with %d Nodes)",
				name, cp.URL, KWOKNodes)
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	f.Hub = planes[0]
	for _, cp := range planes[1:] {
		f.Clusters = append(f.Clusters, &ManagedCluster{ControlPlane: cp})
	}

	if err := startOCMHub(ctx, f.sup, opts.BinDir, f.Hub, opts.Modules.OCM); err != nil {
		return nil, fmt.Errorf("OCM hub: %w", err)
	}
	step("OCM hub running: registration, work, placement, addon manager, addon conversion webhook")

	g, gctx = errgroup.WithContext(ctx)
	for _, mc := range f.Clusters {
		g.Go(func() error {
			if err := joinCluster(gctx, f.sup, opts.BinDir, f.Hub, mc.ControlPlane, opts.Modules.OCM); err != nil {
				return fmt.Errorf("join %s: %w", mc.Name, err)
			}
			step("cluster %s joined the hub and is Available", mc.Name)
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}

	if f.Git, err = newGitRepo(filepath.Join(dir, "git", "apps")); err != nil {
		return nil, fmt.Errorf("git repository: %w", err)
	}
	if opts.ArgoCD {
		if err := f.startArgoCD(ctx, opts, step); err != nil {
			return nil, err
		}
	}
	if opts.Addon {
		if err := f.startAddon(ctx, opts); err != nil {
			return nil, fmt.Errorf("argocd-pull addon: %w", err)
		}
		step("argocd-pull-addon installed with helm; its manager and agent Deployments run as processes")
	}
	if err := f.writeState(); err != nil {
		return nil, err
	}
	step("fleet ready: hub + %d managed clusters, run directory %s", len(f.Clusters), dir)
	return f, nil
}

func (f *Fleet) startArgoCD(ctx context.Context, opts Options, step func(string, ...any)) error {
	if err := installArgoCD(ctx, f.Hub, opts.Modules.ArgoCD, true, opts.Addon); err != nil {
		return fmt.Errorf("install the hub's Argo CD: %w", err)
	}
	if err := startArgoCDHub(ctx, f.sup, opts.BinDir, f.Hub); err != nil {
		return fmt.Errorf("start the hub's Argo CD: %w", err)
	}
	redis, server, err := startArgoCDServer(ctx, f.sup, opts.BinDir, f.Hub, opts.Modules.ArgoCD)
	if redis != nil {
		f.redis = append(f.redis, redis)
		f.HubArgoCDRedis = redis.Addr()
	}
	if err != nil {
		return fmt.Errorf("start the hub's argocd-server: %w", err)
	}
	f.ArgoCDServer = server
	if err := os.WriteFile(filepath.Join(f.Dir, ArgoCDServerFile), []byte(server+"\n"), 0o644); err != nil {
		return err
	}
	step("Argo CD ApplicationSet controller, Redis, repo-server, application-controller and argocd-server (http://%s, user admin, password in Secret argocd-initial-admin-secret) running on the hub", server)
	for _, mc := range f.Clusters {
		if err := installArgoCD(ctx, mc.ControlPlane, opts.Modules.ArgoCD, false, opts.Addon); err != nil {
			return fmt.Errorf("install the Argo CD of %s: %w", mc.Name, err)
		}
		redis, err := startArgoCDSpoke(ctx, f.sup, opts.BinDir, mc.ControlPlane)
		if redis != nil {
			f.redis = append(f.redis, redis)
			mc.ArgoCDRedis = redis.Addr()
		}
		if err != nil {
			return fmt.Errorf("start the Argo CD of %s: %w", mc.Name, err)
		}
		step("Argo CD application-controller and repo-server running on %s", mc.Name)
	}
	return nil
}

// AddonNamespace is where the fleet installs the addon's chart on the hub.
const AddonReleaseNamespace = "argocd-pull-addon"

// Label selectors of the Deployments the fleet runs as processes: the manager of the chart
// on the hub, the agent on the managed clusters.
const (
	ManagerLabelSelector = "app.kubernetes.io/part-of=argocd-pull,app.kubernetes.io/component=manager"
	AgentLabelSelector   = "app.kubernetes.io/part-of=argocd-pull,app.kubernetes.io/name=argocd-pull-agent"
)

// UninstallJobLabelSelector selects the chart's uninstall hook Job, which the fleet runs
// on the hub as the job controller and a kubelet would.
const UninstallJobLabelSelector = "app.kubernetes.io/part-of=argocd-pull,app.kubernetes.io/component=uninstall"

func (f *Fleet) startAddon(ctx context.Context, opts Options) error {
	f.addon = opts
	if err := f.InstallAddon(ctx); err != nil {
		return err
	}
	runCtx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	hub := &podRunner{cp: f.Hub, sup: f.sup, bin: opts.BinDir, selector: ManagerLabelSelector,
		jobSelector: UninstallJobLabelSelector, pods: map[string]*runningPod{}}
	if f.HubArgoCDRedis != "" {
		hub.services = map[string]string{ArgoCDRedisService: f.HubArgoCDRedis}
	}
	runners := []*podRunner{hub}
	for _, mc := range f.Clusters {
		r := &podRunner{cp: mc.ControlPlane, sup: f.sup, bin: opts.BinDir, selector: AgentLabelSelector,
			kubelet: true, pods: map[string]*runningPod{}}
		if mc.ArgoCDRedis != "" {
			r.services = map[string]string{ArgoCDRedisService: mc.ArgoCDRedis}
		}
		runners = append(runners, r)
	}
	f.pods = runners
	for _, r := range runners {
		f.runners.Add(1)
		go func() {
			defer f.runners.Done()
			r.run(runCtx)
		}()
	}
	return nil
}

// InstallAddon installs the addon's chart on the hub with `helm install`, with the values
// the fleet started with and then values (each a --set). The fleet runs the manager once
// the chart is in.
func (f *Fleet) InstallAddon(ctx context.Context, values ...string) error {
	args := []string{"install", "argocd-pull-addon", f.addon.Chart, "--namespace", AddonReleaseNamespace, "--create-namespace", "--wait=false"}
	// A Pod has its own network; these processes share the host's, so the manager's
	// endpoints get free ports. The hub apiserver has no Service network: it reaches the
	// resource proxy through an ExternalName Service, at the port the APIService names.
	ports, err := loopback.FreePorts(3)
	if err != nil {
		return err
	}
	args = append(args, "--set", "metrics.port="+strconv.Itoa(ports[0]), "--set", "healthProbePort="+strconv.Itoa(ports[1]),
		"--set", "resourceProxy.port="+strconv.Itoa(ports[2]), "--set", "resourceProxy.servicePort="+strconv.Itoa(ports[2]),
		"--set", "resourceProxy.externalName=localhost")
	for _, v := range append(append([]string(nil), f.addon.HelmValues...), values...) {
		args = append(args, "--set", v)
	}
	_, err = f.Helm(ctx, args...)
	return err
}

// UninstallAddon runs `helm uninstall` of the addon as a user would, the chart's
// pre-delete hook included, and returns helm's output.
func (f *Fleet) UninstallAddon(ctx context.Context) (string, error) {
	return f.Helm(ctx, "uninstall", "argocd-pull-addon", "--namespace", AddonReleaseNamespace, "--timeout", "5m")
}

// Helm runs the fleet's helm against the hub.
func (f *Fleet) Helm(ctx context.Context, args ...string) (string, error) {
	args = append(args, "--kubeconfig", f.Hub.Kubeconfig)
	cmd := exec.CommandContext(ctx, filepath.Join(f.addon.BinDir, "helm"), args...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+filepath.Join(f.Dir, "helm", "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(f.Dir, "helm", "config"), "HELM_DATA_HOME="+filepath.Join(f.Dir, "helm", "data"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("helm %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// Cluster returns the managed cluster called name, or nil.
func (f *Fleet) Cluster(name string) *ManagedCluster {
	for _, mc := range f.Clusters {
		if mc.Name == name {
			return mc
		}
	}
	return nil
}

// Pids returns the process ids of the fleet's running processes.
func (f *Fleet) Pids() []int { return f.sup.pids() }

// PodPids returns the process id of each Deployment the fleet runs as a process (see
// Options.Addon), by "<cluster>/<namespace>/<name>": the manager on the hub, the agents on
// the managed clusters. A pod the fleet restarted (its process exited, or its spec or
// secrets changed) has a new id.
func (f *Fleet) PodPids() map[string]int {
	out := map[string]int{}
	for _, r := range f.pods {
		r.mu.Lock()
		for key, pod := range r.pods {
			if exited, _ := pod.proc.Exited(); !exited {
				out[r.cp.Name+"/"+key] = pod.proc.Pid()
			}
		}
		r.mu.Unlock()
	}
	return out
}

// Healthy returns an error naming each fleet process that has exited.
func (f *Fleet) Healthy() error { return f.sup.failed() }

// Stop stops every process, clients before servers, and the embedded redis servers. It is
// safe to call more than once.
func (f *Fleet) Stop() {
	f.stopMu.Do(func() {
		if f.cancel != nil {
			f.cancel()
			f.runners.Wait()
		}
		f.sup.stopAll(10 * time.Second)
		for _, r := range f.redis {
			r.Close()
		}
		_ = os.Remove(filepath.Join(f.Dir, StateFile))
		_ = os.Remove(filepath.Join(f.Dir, ArgoCDServerFile))
	})
}

// StateFile, in the run directory, describes a running fleet for other programs.
const StateFile = "fleet.json"

// State is what StateFile holds.
type State struct {
	Pid            int               `json:"pid"`
	HubKubeconfig  string            `json:"hubKubeconfig"`
	Kubeconfigs    map[string]string `json:"kubeconfigs"` // managed cluster name -> admin kubeconfig
	GitURL         string            `json:"gitURL"`
	ArgoCDServer   string            `json:"argocdServer,omitempty"` // host:port of the hub's argocd-server
	ProcessLogsDir string            `json:"processLogsDir"`
}

func (f *Fleet) writeState() error {
	st := State{Pid: os.Getpid(), HubKubeconfig: f.Hub.Kubeconfig, Kubeconfigs: map[string]string{},
		GitURL: f.Git.URL(), ProcessLogsDir: filepath.Join(f.Dir, "logs"), ArgoCDServer: f.ArgoCDServer}
	for _, mc := range f.Clusters {
		st.Kubeconfigs[mc.Name] = mc.Kubeconfig
	}
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(f.Dir, StateFile), data, 0o644)
}

// ReadState reads the state of the fleet running in dir.
func ReadState(dir string) (*State, error) {
	data, err := os.ReadFile(filepath.Join(dir, StateFile))
	if err != nil {
		return nil, err
	}
	st := &State{}
	return st, json.Unmarshal(data, st)
}
