package sim

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	addonv1beta1 "open-cluster-management.io/api/addon/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/clusterreport"
	"github.com/ocm-gitops/argocd-pull-addon/test/testenv"
)

// Namespaces of the simulated hub.
const (
	// AppNamespace holds the hub Applications and ApplicationSets, as on a hub Argo CD.
	AppNamespace = argoapp.DefaultAppNamespace
	// ManagerNamespace is the addon-manager's namespace: its leader election Lease.
	ManagerNamespace = "argocd-pull-addon"
	// AddonName is the addon's name, the chart's default.
	AddonName = clusterreport.DefaultAddonName
)

// Hub is the simulated hub's apiserver.
type Hub struct {
	Env *testenv.Env
	// Config connects as an administrator, without a client-side rate limit.
	Config *rest.Config
	// Own counts the requests of this process to the hub (every client built from
	// Config: the stand-ins, the watches, Client), to tell them from the manager's in the
	// apiserver's own counts.
	Own *RequestCounter
	// Client is an uncached client of the hub with testenv's scheme.
	Client client.Client
	Kube   kubernetes.Interface
	// Dir holds kubeconfigs, binaries and process logs.
	Dir string

	// cma is the ClusterManagementAddOn: the owner of every ManagedClusterAddOn.
	cma *addonv1beta1.ClusterManagementAddOn
	// conversion converts the addon APIs between their versions, as on a real hub.
	conversion *conversionWebhook
}

// StartHub starts the apiserver with the CRDs of OCM, Argo CD and the addon, serves the
// conversion of the addon APIs as OCM's cluster-manager-addon-webhook does on a real hub
// (see convertedCRDs), and creates the hub's namespaces and the ClusterManagementAddOn
// the chart installs. apiserverFlags are extra flags of the apiserver (testenv.New).
func StartHub(ctx context.Context, dir string, apiserverFlags ...string) (*Hub, error) {
	env, err := testenv.New(apiserverFlags...)
	if err != nil {
		return nil, err
	}
	h := &Hub{Env: env, Dir: dir, Config: rest.CopyConfig(env.Config), Own: &RequestCounter{}}
	h.Config.QPS, h.Config.Burst = -1, 0
	h.Config.Wrap(h.Own.Wrap)
	if h.conversion, err = startConversionWebhook(); err != nil {
		return nil, errors.Join(err, env.Stop())
	}
	if err := h.init(ctx); err != nil {
		return nil, errors.Join(err, h.Stop())
	}
	return h, nil
}

func (h *Hub) init(ctx context.Context) error {
	var err error
	if err := os.MkdirAll(h.Dir, 0o755); err != nil {
		return err
	}
	if h.Client, err = client.New(h.Config, client.Options{Scheme: h.Env.Scheme}); err != nil {
		return err
	}
	if h.Kube, err = kubernetes.NewForConfig(h.Config); err != nil {
		return err
	}
	for _, ns := range []string{AppNamespace, ManagerNamespace} {
		if err := createIgnoringExisting(ctx, h.Client, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return err
		}
	}
	if err := h.conversion.install(ctx, h.Client); err != nil {
		return err
	}
	// The chart's ClusterManagementAddOn: install strategy Manual, each cluster opts in.
	h.cma = &addonv1beta1.ClusterManagementAddOn{
		ObjectMeta: metav1.ObjectMeta{Name: AddonName, Annotations: map[string]string{
			addonv1alpha1.AddonLifecycleAnnotationKey: addonv1alpha1.AddonLifecycleAddonManagerAnnotationValue,
		}},
		Spec: addonv1beta1.ClusterManagementAddOnSpec{
			AddOnMeta:       addonv1beta1.AddOnMeta{DisplayName: "Argo CD pull model"},
			InstallStrategy: addonv1beta1.InstallStrategy{Type: addonv1beta1.AddonInstallStrategyManual},
		},
	}
	return h.Client.Create(ctx, h.cma)
}

// Stop stops the apiserver and etcd, and the conversion webhook.
func (h *Hub) Stop() error {
	err := h.Env.Stop()
	h.conversion.stop()
	return err
}

// countedClient is an uncached client of the hub, as Client, whose requests counter
// counts too.
func (h *Hub) countedClient(counter *RequestCounter) (client.Client, error) {
	cfg := rest.CopyConfig(h.Config)
	cfg.Wrap(counter.Wrap)
	return client.New(cfg, client.Options{Scheme: h.Env.Scheme})
}

// Kubeconfig writes a kubeconfig for user in groups and returns its path.
func (h *Hub) Kubeconfig(user string, groups ...string) (string, error) {
	data, err := h.Env.Kubeconfig(user, groups...)
	if err != nil {
		return "", err
	}
	path := filepath.Join(h.Dir, user+".kubeconfig")
	return path, os.WriteFile(path, data, 0o600)
}

func createIgnoringExisting(ctx context.Context, c client.Client, obj client.Object) error {
	if err := c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create %T %s: %w", obj, obj.GetName(), err)
	}
	return nil
}

// BuildBinaries builds the manager and the agent from the repository into dir, so that
// a run always measures the code of the working tree. The Go build cache makes a second
// build cheap.
func BuildBinaries(dir string) (manager, agent string, err error) {
	root, err := testenv.RepoRoot()
	if err != nil {
		return "", "", err
	}
	manager, agent = filepath.Join(dir, "manager"), filepath.Join(dir, "agent")
	for out, pkg := range map[string]string{manager: "./cmd/manager", agent: "./cmd/agent"} {
		cmd := exec.Command("go", "build", "-o", out, pkg)
		cmd.Dir = root
		if output, err := cmd.CombinedOutput(); err != nil {
			return "", "", fmt.Errorf("go build %s: %w\n%s", pkg, err, output)
		}
	}
	return manager, agent, nil
}
