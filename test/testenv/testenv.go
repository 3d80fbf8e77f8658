// Package testenv starts a real kube-apiserver and etcd (controller-runtime envtest) with
// the CRDs the addon works with: OCM's cluster, work and addon APIs, from the pinned
// open-cluster-management.io/api module, and Argo CD's Application, AppProject and
// ApplicationSet, from the argo-cd module pinned in hack/tools/argocd, and the addon's own
// MulticlusterApplicationSetReport from manifests/crds. Every envtest
// suite of the project starts its apiserver here.
//
// The binaries come from KUBEBUILDER_ASSETS, else from the repository's bin folder, where
// `make tools` builds them. envtest has no controller-manager: no garbage collector, no
// namespace deletion. Suites must not rely on either.
package testenv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	addonv1beta1 "open-cluster-management.io/api/addon/v1beta1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	clusterv1beta2 "open-cluster-management.io/api/cluster/v1beta2"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	appsv1alpha1 "github.com/ocm-gitops/argocd-pull-addon/pkg/apis/apps/v1alpha1"
	argocdpullv1alpha1 "github.com/ocm-gitops/argocd-pull-addon/pkg/apis/argocdpull/v1alpha1"
	"github.com/ocm-gitops/argocd-pull-addon/test/fleet"
)

// ocmAPIModule is the module whose CRD manifests describe OCM's APIs.
const ocmAPIModule = "open-cluster-management.io/api"

// ocmCRDDirs are the folders of the OCM API module that hold CRD manifests, one per API
// group version. addon/v1beta1 holds the addon CRDs serving both v1alpha1 and v1beta1;
// addon/v1alpha1 has copies of the same CRDs and is left out.
var ocmCRDDirs = []string{"cluster/v1", "cluster/v1beta1", "cluster/v1beta2", "work/v1", "addon/v1beta1"}

// argoCDCRDFiles are Argo CD's CRD manifests, relative to the argo-cd module.
var argoCDCRDFiles = []string{
	"manifests/crds/application-crd.yaml",
	"manifests/crds/appproject-crd.yaml",
	"manifests/crds/applicationset-crd.yaml",
}

// ownCRDDir holds the addon's own CRDs (the MulticlusterApplicationSetReport), relative
// to the repository root.
const ownCRDDir = "manifests/crds"

// Env is a running apiserver with the CRDs installed.
type Env struct {
	// Config connects to the apiserver as an administrator.
	Config *rest.Config
	// Scheme knows client-go's types and OCM's cluster, work and addon types.
	Scheme *runtime.Scheme
	// Client is an uncached client of the apiserver with Scheme.
	Client client.Client

	env *envtest.Environment
}

// Start starts an apiserver for the test and stops it when the test ends. It skips the
// test in -short mode and fails it if the apiserver cannot start.
func Start(tb testing.TB) *Env {
	tb.Helper()
	return startForTest(tb, func() (*Env, error) { return New() })
}

// StartBare starts an apiserver without any CRD for the test, as a cluster is before
// anyone installed Argo CD, and stops it when the test ends. It skips the test in -short
// mode and fails it if the apiserver cannot start.
func StartBare(tb testing.TB) *rest.Config {
	tb.Helper()
	return startForTest(tb, newBare).Config
}

// startForTest starts an apiserver with start for the test, and stops it when the test
// ends; it skips the test in -short mode.
func startForTest(tb testing.TB, start func() (*Env, error)) *Env {
	tb.Helper()
	if testing.Short() {
		tb.Skip("envtest: skipped in -short mode")
	}
	env, err := start()
	if err != nil {
		tb.Fatalf("start envtest: %v", err)
	}
	tb.Cleanup(func() {
		if err := env.Stop(); err != nil {
			tb.Errorf("stop envtest: %v", err)
		}
	})
	return env
}

// newBare starts an apiserver without any CRD; its Env has only a Config.
func newBare() (*Env, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	assets := binaryAssets(root)
	env := &envtest.Environment{BinaryAssetsDirectory: assets}
	cfg, err := env.Start()
	if err != nil {
		return nil, errors.Join(fmt.Errorf("start a bare apiserver (binaries from %s): %w", assets, err), env.Stop())
	}
	return &Env{Config: cfg, env: env}, nil
}

// binaryAssets returns the folder of the apiserver and etcd binaries: KUBEBUILDER_ASSETS,
// else the repository's bin folder.
func binaryAssets(root string) string {
	if assets := os.Getenv("KUBEBUILDER_ASSETS"); assets != "" {
		return assets
	}
	return filepath.Join(root, "bin")
}

// New starts an apiserver; the caller stops it with Stop. It suits a TestMain or a
// ginkgo BeforeSuite, where no testing.TB is at hand. apiserverFlags are extra flags of
// the apiserver, each "--name=value", on top of envtest's.
func New(apiserverFlags ...string) (*Env, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	paths, err := crdPaths(root)
	if err != nil {
		return nil, err
	}
	scheme, err := NewScheme()
	if err != nil {
		return nil, err
	}
	assets := binaryAssets(root)
	env := &envtest.Environment{
		Scheme:                scheme,
		BinaryAssetsDirectory: assets,
		// The default 10 s to see the CRDs served is short on a shared 2-core machine.
		CRDInstallOptions: envtest.CRDInstallOptions{Paths: paths, ErrorIfPathMissing: true, MaxTime: time.Minute},
	}
	for _, f := range apiserverFlags {
		name, value, ok := strings.Cut(strings.TrimPrefix(f, "--"), "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("apiserver flag %q: want --name=value", f)
		}
		env.ControlPlane.GetAPIServer().Configure().Append(name, value)
	}
	cfg, err := env.Start()
	if err != nil {
		// A start that fails after the control plane came up (the CRDs not served in
		// time) must not leave etcd and the apiserver running.
		return nil, errors.Join(fmt.Errorf("start the apiserver (binaries from %s): %w", assets, err), env.Stop())
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("create client: %w", err), env.Stop())
	}
	return &Env{Config: cfg, Scheme: scheme, Client: c, env: env}, nil
}

// Stop stops the apiserver and etcd.
func (e *Env) Stop() error {
	return e.env.Stop()
}

// Kubeconfig returns a kubeconfig that authenticates as user in groups, with a client
// certificate: what a process outside the test needs to reach the apiserver.
func (e *Env) Kubeconfig(user string, groups ...string) ([]byte, error) {
	u, err := e.env.AddUser(envtest.User{Name: user, Groups: groups}, nil)
	if err != nil {
		return nil, fmt.Errorf("add user %s: %w", user, err)
	}
	return u.KubeConfig()
}

// NewScheme returns a scheme with client-go's types and OCM's cluster (v1, v1beta1,
// v1beta2), work (v1) and addon (v1beta1) types, and the addon's report type.
func NewScheme() (*runtime.Scheme, error) {
	scheme := runtime.NewScheme()
	for _, install := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme, clusterv1.Install, clusterv1beta1.Install, clusterv1beta2.Install,
		workv1.Install, addonv1beta1.Install, appsv1alpha1.AddToScheme, argocdpullv1alpha1.AddToScheme,
	} {
		if err := install(scheme); err != nil {
			return nil, err
		}
	}
	return scheme, nil
}

// RepoRoot returns the root of the repository: the closest folder, from the working
// directory up, that holds a go.mod and the hack/tools folder.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if isFile(filepath.Join(dir, "go.mod")) && isDir(filepath.Join(dir, "hack", "tools")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no repository root (go.mod next to hack/tools) above the working directory")
		}
		dir = parent
	}
}

// crdPaths returns the CRD manifests to install: OCM's from the API module the
// repository builds with, Argo CD's from the pinned argo-cd tool module.
func crdPaths(root string) ([]string, error) {
	modules, err := fleet.ResolveModuleDirs(root)
	if err != nil {
		return nil, fmt.Errorf("locate the tool modules: %w", err)
	}
	ocmAPI, err := fleet.ModuleDir(root, ocmAPIModule)
	if err != nil {
		return nil, err
	}
	var paths []string
	for _, dir := range ocmCRDDirs {
		paths = append(paths, filepath.Join(ocmAPI, dir))
	}
	for _, file := range argoCDCRDFiles {
		paths = append(paths, filepath.Join(modules.ArgoCD, file))
	}
	// The addon's own CRDs, generated by hack/generate.sh.
	paths = append(paths, filepath.Join(root, ownCRDDir))
	return paths, nil
}

func isFile(path string) bool {
	info, err := os.Stat(path)
	return err == nil && info.Mode().IsRegular()
}

func isDir(path string) bool {
	info, err := os.Stat(path)
	return err == nil && info.IsDir()
}
