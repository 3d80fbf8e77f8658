package clustersecret

import (
	"os"
	"testing"

	"github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	addonv1beta1 "open-cluster-management.io/api/addon/v1beta1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/hubcache"
	"github.com/ocm-gitops/argocd-pull-addon/test/testenv"
)

// shared is the package's apiserver, started by the first envtest test.
var shared testenv.Shared

func TestMain(m *testing.M) { os.Exit(testenv.RunTests(m, &shared)) }

// fixture is one test's manager; its addon name and Argo CD namespace are its own.
type fixture struct {
	*testenv.Hub
	opts Options
	id   string
	// writes counts the controller's writes.
	writes *testenv.WriteLog
}

func newFixture(t *testing.T, adjust ...func(*Options)) *fixture {
	t.Helper()
	env := shared.Get(t)
	id := testenv.RandomID()
	f := &fixture{Hub: testenv.NewHub(t, env, ""), id: id,
		opts: Options{AddonName: "addon-" + id, ArgoCDNamespace: "argocd-" + id, Concurrency: 2}, writes: &testenv.WriteLog{}}
	for _, a := range adjust {
		a(&f.opts)
	}
	f.CreateNamespace(f.opts.ArgoCDNamespace)
	scope := hubcache.Scope{AddonName: f.opts.AddonName, ArgoCDNamespace: f.opts.ArgoCDNamespace}
	testenv.StartManager(t, env, scope, f.writes, func(mgr ctrl.Manager, c client.Client) error {
		return setup(mgr, f.opts, c)
	})
	return f
}

// createCluster creates a ManagedCluster with labels, its namespace and, when enabled,
// the addon's ManagedClusterAddOn.
func (f *fixture) createCluster(short string, labels map[string]string, enabled bool) string {
	f.T.Helper()
	name := short + "-" + f.id
	f.CreateCluster(name, labels)
	if enabled {
		f.setAddon(name, true)
	}
	return name
}

func (f *fixture) setAddon(cluster string, enabled bool) {
	f.T.Helper()
	if enabled {
		f.EnableAddon(cluster, f.opts.AddonName)
	} else {
		f.DisableAddon(cluster, f.opts.AddonName)
	}
}

// secret returns the cluster's Secret, or nil.
func (f *fixture) secret(cluster string) *corev1.Secret {
	f.T.Helper()
	secret := &corev1.Secret{}
	err := f.C.Get(f.Ctx, types.NamespacedName{Namespace: f.opts.ArgoCDNamespace, Name: SecretName(f.opts.AddonName, cluster)}, secret)
	if apierrors.IsNotFound(err) {
		return nil
	}
	f.G.Expect(err).NotTo(gomega.HaveOccurred())
	return secret
}

func stringData(secret *corev1.Secret) map[string]string {
	if secret == nil {
		return nil
	}
	out := map[string]string{}
	for k, v := range secret.Data {
		out[k] = string(v)
	}
	return out
}

func TestEnvtestClusterSecretLifecycle(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	g := f.G
	cluster := f.createCluster("east", map[string]string{"region": "eu", "tier": "gold"}, true)

	// Created: Argo CD's cluster marker, the cluster's labels, a name and a placeholder
	// server, and nothing else.
	g.Eventually(func() map[string]string { return stringData(f.secret(cluster)) }).Should(gomega.Equal(map[string]string{
		"name": cluster, "server": "https://" + cluster + ".ocm.invalid",
	}))
	secret := f.secret(cluster)
	g.Expect(secret.Labels).To(gomega.Equal(map[string]string{
		argoapp.LabelSecretType:       argoapp.SecretTypeCluster,
		LabelManagedBy:                f.opts.AddonName,
		clusterv1.ClusterNameLabelKey: cluster,
		"region":                      "eu",
		"tier":                        "gold",
	}))
	g.Expect(secret.Type).To(gomega.Equal(corev1.SecretTypeOpaque))

	// No write without a change: a change to the Secret that the controller does not
	// own reconciles, and is left alone.
	applies := int64(f.writes.Matching("apply "))
	secret.Annotations = map[string]string{"note": "by hand"}
	g.Expect(f.C.Update(f.Ctx, secret)).To(gomega.Succeed())
	g.Consistently(func() int64 { return int64(f.writes.Matching("apply ")) }).Should(gomega.Equal(applies))
	g.Expect(f.secret(cluster).Annotations).To(gomega.HaveKeyWithValue("note", "by hand"))

	// The cluster's labels and API URL follow.
	f.UpdateCluster(cluster, func(mc *clusterv1.ManagedCluster) {
		mc.Labels = map[string]string{"region": "us", "env": "prod"}
		mc.Spec.ManagedClusterClientConfigs = []clusterv1.ClientConfig{{URL: "https://east.example.com:6443"}}
	})
	g.Eventually(func() map[string]string { return f.secret(cluster).Labels }).Should(gomega.Equal(map[string]string{
		argoapp.LabelSecretType:       argoapp.SecretTypeCluster,
		LabelManagedBy:                f.opts.AddonName,
		clusterv1.ClusterNameLabelKey: cluster,
		"region":                      "us",
		"env":                         "prod",
	}))
	g.Eventually(func() string { return stringData(f.secret(cluster))["server"] }).Should(gomega.Equal("https://east.example.com:6443"))

	// Deleted by hand: it comes back.
	g.Expect(f.C.Delete(f.Ctx, f.secret(cluster))).To(gomega.Succeed())
	g.Eventually(func() *corev1.Secret { return f.secret(cluster) }).ShouldNot(gomega.BeNil())

	// The addon is disabled: the Secret goes. Enabled again: it comes back.
	f.setAddon(cluster, false)
	g.Eventually(func() *corev1.Secret { return f.secret(cluster) }).Should(gomega.BeNil())
	f.setAddon(cluster, true)
	g.Eventually(func() *corev1.Secret { return f.secret(cluster) }).ShouldNot(gomega.BeNil())

	// The cluster is deleted: the Secret goes.
	g.Expect(f.C.Delete(f.Ctx, &clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: cluster}})).To(gomega.Succeed())
	g.Eventually(func() *corev1.Secret { return f.secret(cluster) }).Should(gomega.BeNil())
}

func TestEnvtestClusterSecretNeedsOptIn(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	g := f.G
	cluster := f.createCluster("west", nil, false)
	// Another addon's ManagedClusterAddOn does not opt the cluster in.
	g.Expect(f.C.Create(f.Ctx, &addonv1beta1.ManagedClusterAddOn{
		ObjectMeta: metav1.ObjectMeta{Name: "other-addon", Namespace: cluster},
	})).To(gomega.Succeed())
	g.Consistently(func() *corev1.Secret { return f.secret(cluster) }).Should(gomega.BeNil())

	f.setAddon(cluster, true)
	g.Eventually(func() *corev1.Secret { return f.secret(cluster) }).ShouldNot(gomega.BeNil())
}

// otherToolSecret creates an Argo CD cluster Secret of cluster that another tool keeps,
// as Red Hat ACM's GitOpsCluster does: another name, the same cluster name.
func (f *fixture) otherToolSecret(cluster string) {
	f.T.Helper()
	f.G.Expect(f.C.Create(f.Ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: cluster + "-application-manager-cluster-secret", Namespace: f.opts.ArgoCDNamespace,
			Labels: map[string]string{argoapp.LabelSecretType: argoapp.SecretTypeCluster},
		},
		Data: map[string][]byte{"name": []byte(cluster), "server": []byte("https://" + cluster + ".example.com:6443"), "config": []byte("{}")},
	})).To(gomega.Succeed())
}

// A cluster that already has another tool's cluster Secret never gets a second one:
// Argo CD would take either for the cluster.
func TestEnvtestClusterSecretNotASecondOne(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	g := f.G
	taken := "taken-" + f.id
	f.otherToolSecret(taken)
	f.createCluster("taken", nil, true)
	g.Consistently(func() *corev1.Secret { return f.secret(taken) }).Should(gomega.BeNil())

	// The other tool comes after this controller: its Secret wins, as soon as it is
	// there (the controller watches other tools' cluster Secrets).
	late := f.createCluster("late", nil, true)
	g.Eventually(func() *corev1.Secret { return f.secret(late) }).ShouldNot(gomega.BeNil())
	f.otherToolSecret(late)
	g.Eventually(func() *corev1.Secret { return f.secret(late) }).Should(gomega.BeNil())

	// The other tool's Secret goes: the cluster gets this controller's again.
	g.Expect(f.C.Delete(f.Ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{
		Name: taken + "-application-manager-cluster-secret", Namespace: f.opts.ArgoCDNamespace,
	}})).To(gomega.Succeed())
	g.Eventually(func() *corev1.Secret { return f.secret(taken) }).ShouldNot(gomega.BeNil())
	g.Expect(f.secret(late)).To(gomega.BeNil(), "the other tool still keeps the Secret of %s", late)
}
