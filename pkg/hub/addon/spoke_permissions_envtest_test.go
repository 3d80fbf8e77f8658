package addon

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/argocdcache"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/resourceproxy"
	"github.com/ocm-gitops/argocd-pull-addon/test/testenv"
)

// TestAgentSpokeIdentityIsConfined applies the agent's rendered RBAC to a real apiserver
// playing the managed cluster, impersonates the agent's ServiceAccount, and checks what
// the addon framework's lease updater does, and what it must not: its own Lease only.
func TestAgentSpokeIdentityIsConfined(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	v := values(DefaultInstallNamespace)
	admin := applyAgentRBAC(ctx, t, env, v)
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + DefaultInstallNamespace + ":" + v.deploymentName()}
	agent := kubernetes.NewForConfigOrDie(cfg)
	leases := agent.CoordinationV1().Leases(DefaultInstallNamespace)

	// What the lease updater does (RBAC bindings take effect within a moment).
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: v.AddonName}}
	err := untilBound(func() error {
		_, err := leases.Create(ctx, lease, metav1.CreateOptions{})
		return err
	})
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

	// Applications: read, and patch to run the hub's operations, in the watched
	// namespaces only; never create, update or delete them (the work agent does).
	allowed := func(namespace, verb string) bool {
		review, err := agent.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: namespace, Verb: verb, Group: argoapp.Group, Resource: argoapp.ResourceApplications, Name: "guestbook",
			}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return review.Status.Allowed
	}
	for _, ns := range v.WatchNamespaces {
		for _, verb := range []string{"get", "patch"} {
			if !allowed(ns, verb) {
				t.Errorf("the agent may not %s Applications in %s", verb, ns)
			}
		}
		for _, verb := range []string{"create", "update", "delete"} {
			if allowed(ns, verb) {
				t.Errorf("the agent may %s Applications in %s", verb, ns)
			}
		}
	}
	for _, verb := range []string{"get", "patch"} {
		if allowed("other-team", verb) {
			t.Errorf("the agent may %s Applications in a namespace it does not watch", verb)
		}
	}

	// The resource proxy's requests run as Argo CD's application-controller: the agent
	// may impersonate that service account, and no other identity.
	mayImpersonate := func(namespace, resource, name string) bool {
		review, err := agent.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: namespace, Verb: "impersonate", Resource: resource, Name: name,
			}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return review.Status.Allowed
	}
	if !mayImpersonate(v.ArgoCDNamespace, "serviceaccounts", resourceproxy.SpokeServiceAccount) {
		t.Errorf("the agent may not impersonate %s/%s", v.ArgoCDNamespace, resourceproxy.SpokeServiceAccount)
	}
	for _, who := range []struct{ namespace, resource, name string }{
		{v.ArgoCDNamespace, "serviceaccounts", "argocd-server"},
		{"kube-system", "serviceaccounts", resourceproxy.SpokeServiceAccount},
		{"", "users", "system:admin"},
		{"", "groups", "system:masters"},
	} {
		if mayImpersonate(who.namespace, who.resource, who.name) {
			t.Errorf("the agent may impersonate %s %s/%s", who.resource, who.namespace, who.name)
		}
	}
}

// TestWorkAgentMayApplyApplicationsInTheWatchedNamespacesOnly applies the agent's
// rendered RBAC, and the klusterlet's own (OCM v1.2.1: the admin ClusterRole and the
// aggregate-to-work ClusterRole bound to klusterlet-work-sa), to a real apiserver playing
// the managed cluster, and impersonates the work agent: it may create, update, watch and
// delete Applications and AppProjects in the namespaces the agent watches (where the
// pulled apps land), and not in another namespace.
func TestWorkAgentMayApplyApplicationsInTheWatchedNamespacesOnly(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	v := values(DefaultInstallNamespace)
	admin := applyAgentRBAC(ctx, t, env, v, "other-team")
	// The klusterlet's: admin (which covers no Argo CD kind) and its aggregate ClusterRole,
	// both bound cluster-wide to the work agent's service account. envtest runs no
	// clusterrole-aggregation controller, so the aggregate gets the rules of the
	// ClusterRoles labelled aggregate-to-work as that controller would give them.
	work := DefaultWorkAgentServiceAccount
	aggregate := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "open-cluster-management:klusterlet-work:aggregate"},
		AggregationRule: &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{
			{MatchLabels: map[string]string{"open-cluster-management.io/aggregate-to-work": "true"}}}}}
	aggregated, err := admin.RbacV1().ClusterRoles().List(ctx, metav1.ListOptions{LabelSelector: "open-cluster-management.io/aggregate-to-work=true"})
	if err != nil {
		t.Fatal(err)
	}
	for _, cr := range aggregated.Items {
		aggregate.Rules = append(aggregate.Rules, cr.Rules...)
	}
	if err := env.Client.Create(ctx, aggregate); err != nil {
		t.Fatal(err)
	}
	for _, role := range []string{"admin", aggregate.Name} {
		if err := env.Client.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "klusterlet-work-" + strings.ReplaceAll(role, ":", "-")},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects: []rbacv1.Subject{work}}); err != nil {
			t.Fatal(err)
		}
	}
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + work.Namespace + ":" + work.Name,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + work.Namespace, "system:authenticated"}}
	workAgent := dynamic.NewForConfigOrDie(cfg)

	application := func(namespace, name string) *unstructured.Unstructured {
		app := argoapp.NewApplication()
		app.SetNamespace(namespace)
		app.SetName(name)
		app.Object["spec"] = map[string]any{"project": "default",
			"source":      map[string]any{"repoURL": "https://git.example.com/apps.git", "path": "guestbook"},
			"destination": map[string]any{"server": argoapp.InClusterServer, "namespace": "guestbook"}}
		return app
	}
	// In a watched namespace, what the work agent does with a pulled app (RBAC bindings
	// take effect within a moment).
	apps := workAgent.Resource(argoapp.ApplicationGVR).Namespace("argocd")
	err = untilBound(func() error {
		_, err := apps.Create(ctx, application("argocd", "guestbook"), metav1.CreateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("the work agent cannot create an Application in the Argo CD namespace: %v", err)
	}
	if _, err := apps.Patch(ctx, "guestbook", types.MergePatchType, []byte(`{"metadata":{"labels":{"x":"y"}}}`), metav1.PatchOptions{}); err != nil {
		t.Errorf("the work agent cannot patch it: %v", err)
	}
	watch, err := apps.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Errorf("the work agent cannot watch the Applications of the namespace (status feedback): %v", err)
	} else {
		watch.Stop()
	}
	if err := apps.Delete(ctx, "guestbook", metav1.DeleteOptions{}); err != nil {
		t.Errorf("the work agent cannot delete it: %v", err)
	}
	project := argoapp.NewAppProject()
	project.SetNamespace("team-a")
	project.SetName("team-a")
	project.Object["spec"] = map[string]any{"sourceRepos": []any{"*"}}
	if _, err := workAgent.Resource(argoapp.AppProjectGVR).Namespace("team-a").Create(ctx, project, metav1.CreateOptions{}); err != nil {
		t.Errorf("the work agent cannot create an AppProject in the watched namespace team-a: %v", err)
	}

	// Anywhere else, nothing.
	other := workAgent.Resource(argoapp.ApplicationGVR).Namespace("other-team")
	if _, err := other.Create(ctx, application("other-team", "guestbook"), metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("create an Application in namespace other-team: %v, want forbidden", err)
	}
	if _, err := other.List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("list the Applications of namespace other-team: %v, want forbidden", err)
	}
	if _, err := workAgent.Resource(argoapp.ApplicationGVR).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("list the Applications of every namespace: %v, want forbidden", err)
	}
	project.SetNamespace("other-team")
	if _, err := workAgent.Resource(argoapp.AppProjectGVR).Namespace("other-team").Create(ctx, project, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("create an AppProject in namespace other-team: %v, want forbidden", err)
	}
}

// applyAgentRBAC renders the agent's manifests with v and applies their RBAC to env, a
// real apiserver playing the managed cluster, once it has created the agent's install
// namespace, the namespaces it watches, and namespaces. It returns the administrator's
// clientset.
func applyAgentRBAC(ctx context.Context, t *testing.T, env *testenv.Env, v agentValues, namespaces ...string) *kubernetes.Clientset {
	t.Helper()
	objs, err := renderAgentManifests(v, nil)
	if err != nil {
		t.Fatal(err)
	}
	createNamespaces(ctx, t, env, slices.Concat([]string{DefaultInstallNamespace}, namespaces, v.WatchNamespaces)...)
	for _, o := range objs {
		switch obj := o.(type) {
		case *rbacv1.Role, *rbacv1.RoleBinding, *rbacv1.ClusterRole, *rbacv1.ClusterRoleBinding:
			if err := env.Client.Create(ctx, obj.(client.Object)); err != nil {
				t.Fatalf("create %T: %v", obj, err)
			}
		}
	}
	return kubernetes.NewForConfigOrDie(env.Config)
}

// untilBound runs do until it succeeds, for 10 s at the most, as RBAC bindings take
// effect within a moment; it returns do's last error.
func untilBound(do func() error) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := do()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}
