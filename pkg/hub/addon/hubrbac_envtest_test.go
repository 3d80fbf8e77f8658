package addon

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	addonv1beta1 "open-cluster-management.io/api/addon/v1beta1"
	addonclient "open-cluster-management.io/api/client/addon/clientset/versioned"

	"github.com/ocm-gitops/argocd-pull-addon/test/testenv"
)

// TestGrantingPermissionsInPlaceCostsNoRequest runs the addon as a manager whose identity
// holds, on Roles and RoleBindings, only what the chart grants (create; get, list, watch
// and update of the agent's name), against a real apiserver. Its cache of the agents' hub
// RBAC syncs under that identity; granting an agent the permissions it has reads and
// writes nothing, and permissions someone else changed are put back.
func TestGrantingPermissionsInPlaceCostsNoRequest(t *testing.T) {
	env := testenv.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	admin := kubernetes.NewForConfigOrDie(env.Config)
	adminAddons := addonclient.NewForConfigOrDie(env.Config)
	const addonName, manager = "argocd-pull", "test-manager"
	name := hubRoleName(addonName)

	// The manager: the chart's rules on roles, rolebindings and resourcequotas, and what it must hold to
	// grant the agent's Role (RBAC's escalation check).
	role := HubRole(addonName)
	managerRole := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: manager}, Rules: append([]rbacv1.PolicyRule{
		{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"roles", "rolebindings"}, Verbs: []string{"create"}},
		{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"roles", "rolebindings"}, ResourceNames: []string{name}, Verbs: []string{"get", "list", "watch", "update"}},
		{APIGroups: []string{""}, Resources: []string{"resourcequotas"}, Verbs: []string{"create"}},
		{APIGroups: []string{""}, Resources: []string{"resourcequotas"}, ResourceNames: []string{SliceQuotaName(addonName)}, Verbs: []string{"get", "list", "watch", "update", "delete"}},
	}, role.Rules...)}
	if _, err := admin.RbacV1().ClusterRoles().Create(ctx, managerRole, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: manager},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: manager},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: manager}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Its requests on roles, rolebindings and resourcequotas, but the watches, and those refused.
	var requests, refused atomic.Int64
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: manager, Groups: []string{"system:authenticated"}}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			rbac := strings.Contains(req.URL.Path, "/roles") || strings.Contains(req.URL.Path, "/rolebindings") ||
				strings.Contains(req.URL.Path, "/resourcequotas")
			resp, err := rt.RoundTrip(req)
			if rbac && req.URL.Query().Get("watch") != "true" {
				requests.Add(1)
				if err == nil && resp.StatusCode == http.StatusForbidden {
					refused.Add(1)
				}
			}
			return resp, err
		})
	})
	a, err := NewAgentAddon(Options{AddonName: addonName, Settings: Settings{AgentImage: "agent:test", WatchNamespaces: []string{"argocd"},
		MaxStatusSlicesPerCluster: RecommendedMaxStatusSlicesPerCluster}},
		kubernetes.NewForConfigOrDie(cfg), adminAddons)
	if err != nil {
		t.Fatal(err)
	}
	a.Start(ctx)

	clusters := map[string]*addonv1beta1.ManagedClusterAddOn{}
	for _, c := range []string{"c1", "c2"} {
		createNamespaces(ctx, t, env, c)
		clusters[c] = createMCA(ctx, t, env, c, addonName)
	}
	grant := func(c string) {
		t.Helper()
		grantAgent(ctx, t, a, clusters[c])
	}
	syncCtx, cancelSync := context.WithTimeout(ctx, 30*time.Second)
	defer cancelSync()
	if !cache.WaitForCacheSync(syncCtx.Done(), a.hubRBAC.synced...) {
		t.Fatal("the cache of the agents' hub RBAC never synced")
	}
	for c := range clusters {
		grant(c)
	}
	// The grants are in the cache once its watch delivered them (an exact copy of what
	// grantHubPermissions writes): from then on, granting them again is free.
	eventually(t, func() bool { return a.hubRBAC.granted(a.hubPermissions("c1", clusters["c1"])) })
	eventually(t, func() bool { return a.hubRBAC.granted(a.hubPermissions("c2", clusters["c2"])) })
	before := requests.Load()
	for range 5 {
		for c := range clusters {
			grant(c)
		}
	}
	if n := requests.Load() - before; n != 0 {
		t.Errorf("granting permissions in place made %d requests on roles, rolebindings and resourcequotas, want 0", n)
	}

	// Someone narrows the agent's Role and rewrites its RoleBinding: the next grant
	// puts both back.
	r, err := admin.RbacV1().Roles("c1").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r.Rules = r.Rules[:1]
	if _, err := admin.RbacV1().Roles("c1").Update(ctx, r, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	b, err := admin.RbacV1().RoleBindings("c1").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b.Subjects = b.Subjects[:1]
	if _, err := admin.RbacV1().RoleBindings("c1").Update(ctx, b, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() bool { return !a.hubRBAC.granted(a.hubPermissions("c1", clusters["c1"])) })
	grant("c1")
	r, err = admin.RbacV1().Roles("c1").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, err = admin.RbacV1().RoleBindings("c1").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantRole, wantBinding, _ := a.hubPermissions("c1", clusters["c1"])
	if !equality.Semantic.DeepEqual(r.Rules, wantRole.Rules) || !equality.Semantic.DeepEqual(b.Subjects, wantBinding.Subjects) {
		t.Errorf("the changed permissions were not put back: rules %v, subjects %v", r.Rules, b.Subjects)
	}
	if n := refused.Load(); n != 0 {
		t.Errorf("the manager's identity was refused %d requests on roles, rolebindings and resourcequotas", n)
	}
}

func eventually(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 30s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (fn roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return fn(req) }
