package addon

// What the addon's envtests create on a real hub apiserver, as an administrator and OCM
// would, and the agent's hub identity.

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"open-cluster-management.io/addon-framework/pkg/agent"
	addonv1beta1 "open-cluster-management.io/api/addon/v1beta1"
	addonclient "open-cluster-management.io/api/client/addon/clientset/versioned"
	clusterv1 "open-cluster-management.io/api/cluster/v1"

	"github.com/ocm-gitops/argocd-pull-addon/test/testenv"
)

// createNamespaces creates the namespaces names.
func createNamespaces(ctx context.Context, t *testing.T, env *testenv.Env, names ...string) {
	t.Helper()
	kube := kubernetes.NewForConfigOrDie(env.Config)
	for _, name := range names {
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// createMCA creates the ManagedClusterAddOn name in the namespace of cluster, as OCM does
// when the addon is enabled there, and returns it.
func createMCA(ctx context.Context, t *testing.T, env *testenv.Env, cluster, name string) *addonv1beta1.ManagedClusterAddOn {
	t.Helper()
	mca, err := addonclient.NewForConfigOrDie(env.Config).AddonV1beta1().ManagedClusterAddOns(cluster).Create(ctx,
		&addonv1beta1.ManagedClusterAddOn{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: cluster}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return mca
}

// createCMA creates the ClusterManagementAddOn name, which an administrator enables on
// each cluster by hand (the Manual install strategy).
func createCMA(ctx context.Context, t *testing.T, env *testenv.Env, name string) {
	t.Helper()
	if _, err := addonclient.NewForConfigOrDie(env.Config).AddonV1beta1().ClusterManagementAddOns().Create(ctx, &addonv1beta1.ClusterManagementAddOn{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       addonv1beta1.ClusterManagementAddOnSpec{InstallStrategy: addonv1beta1.InstallStrategy{Type: addonv1beta1.AddonInstallStrategyManual}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// grantAgent grants the agent that mca registers its hub permissions, as a registers it.
func grantAgent(ctx context.Context, t *testing.T, a *AgentAddon, mca *addonv1beta1.ManagedClusterAddOn) {
	t.Helper()
	if err := a.grantHubPermissions(ctx, &clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: mca.Namespace}}, mca); err != nil {
		t.Fatal(err)
	}
}

// agentConfig returns env's configuration as the hub agent of the addon addonName on
// cluster, exactly as its client certificate presents it: the user and groups of its
// KubeClient registration.
func agentConfig(env *testenv.Env, cluster, addonName string) *rest.Config {
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: agent.DefaultUser(cluster, addonName, AgentName),
		Groups:   append(agent.DefaultGroups(cluster, addonName), "system:authenticated"),
	}
	return cfg
}
