package addon

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argocdcache"
	"github.com/ocm-gitops/argocd-pull-addon/test/testenv"
)

// TestAgentSpokeIdentityIsConfined applies the agent's rendered RBAC to a real apiserver
// playing the managed cluster, impersonates the agent's ServiceAccount, and checks what
// the addon framework's lease updater does, and what it must not: its own Lease only.
func TestAgentSpokeIdentityIsConfined(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	v := values(DefaultInstallNamespace)
	objs, err := renderAgentManifests(v, nil)
	if err != nil {
		t.Fatal(err)
	}
	admin := kubernetes.NewForConfigOrDie(env.Config)
	for _, ns := range append([]string{DefaultInstallNamespace}, v.WatchNamespaces...) {
		if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, o := range objs {
		switch obj := o.(type) {
		case *rbacv1.Role, *rbacv1.RoleBinding, *rbacv1.ClusterRole, *rbacv1.ClusterRoleBinding:
			if err := env.Client.Create(ctx, obj.(client.Object)); err != nil {
				t.Fatalf("create %T: %v", obj, err)
			}
		}
	}
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + DefaultInstallNamespace + ":" + v.deploymentName()}
	agent := kubernetes.NewForConfigOrDie(cfg)
	leases := agent.CoordinationV1().Leases(DefaultInstallNamespace)

	// What the lease updater does (RBAC bindings take effect within a moment).
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: v.AddonName}}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err = leases.Create(ctx, lease, metav1.CreateOptions{})
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("the agent cannot create its Lease: %v", err)
	}
	own, err := leases.Get(ctx, v.AddonName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the agent cannot get its Lease: %v", err)
	}
	if _, err := leases.Update(ctx, own, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("the agent cannot update its Lease: %v", err)
	}

	// What it must not: another Lease of its namespace (another addon's, say).
	other := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "other-addon", Namespace: DefaultInstallNamespace}}
	if _, err := admin.CoordinationV1().Leases(DefaultInstallNamespace).Create(ctx, other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := leases.Get(ctx, "other-addon", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("get another Lease: %v, want forbidden", err)
	}
	if _, err := leases.Update(ctx, other, metav1.UpdateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("update another Lease: %v, want forbidden", err)
	}
	if err := leases.Delete(ctx, v.AddonName, metav1.DeleteOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("delete its own Lease: %v, want forbidden", err)
	}
	if _, err := leases.List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("list the Leases: %v, want forbidden", err)
	}

	// The password of Argo CD's Redis, for the resource trees, and no other Secret.
	for _, name := range []string{argocdcache.RedisSecret, "argocd-secret"} {
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: v.ArgoCDNamespace}, Data: map[string][]byte{"auth": []byte("x")}}
		if _, err := admin.CoreV1().Secrets(v.ArgoCDNamespace).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	secrets := agent.CoreV1().Secrets(v.ArgoCDNamespace)
	if _, err := secrets.Get(ctx, argocdcache.RedisSecret, metav1.GetOptions{}); err != nil {
		t.Errorf("the agent cannot read the Redis password: %v", err)
	}
	if _, err := secrets.Get(ctx, "argocd-secret", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("get another Secret: %v, want forbidden", err)
	}
	if _, err := secrets.List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("list the Secrets: %v, want forbidden", err)
	}
	if _, err := agent.CoreV1().Secrets("team-a").Get(ctx, argocdcache.RedisSecret, metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("get a Secret of that name in another namespace: %v, want forbidden", err)
	}
}
