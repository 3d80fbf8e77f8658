package addon

// This file caches the agents' hub Roles and RoleBindings, so that granting an agent
// permissions it already has costs no request.

import (
	"context"
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	rbaclisters "k8s.io/client-go/listers/rbac/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/hubcache"
)

// hubRBACCache holds the agents' hub Roles and RoleBindings: those of their one name
// (hubRoleName), in every cluster namespace. Its watch asks for that name only, which the
// manager's ClusterRole allows by resourceNames.
type hubRBACCache struct {
	factory  kubeinformers.SharedInformerFactory
	roles    rbaclisters.RoleLister
	bindings rbaclisters.RoleBindingLister
	synced   []cache.InformerSynced
}

func newHubRBACCache(kube kubernetes.Interface, name string) (*hubRBACCache, error) {
	byName := func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
	}
	factory := kubeinformers.NewSharedInformerFactoryWithOptions(kube, 0, kubeinformers.WithTweakListOptions(byName))
	roles, bindings := factory.Rbac().V1().Roles(), factory.Rbac().V1().RoleBindings()
	c := &hubRBACCache{factory: factory, roles: roles.Lister(), bindings: bindings.Lister()}
	for _, informer := range []cache.SharedIndexInformer{roles.Informer(), bindings.Informer()} {
		if err := informer.SetTransform(stripHubRBAC); err != nil {
			return nil, fmt.Errorf("transform the agents' hub RBAC: %w", err)
		}
		c.synced = append(c.synced, informer.HasSynced)
	}
	return c, nil
}

// stripHubRBAC drops an object's managed fields and holds a Role's rules, the same for
// every cluster's agent, once (hubcache.SharedPolicyRules). It is idempotent, as client-go
// asks of a transform.
func stripHubRBAC(obj any) (any, error) {
	obj, err := stripManagedFields(obj)
	if role, ok := obj.(*rbacv1.Role); ok && err == nil {
		role.Rules = hubcache.SharedPolicyRules(role.Rules)
	}
	return obj, err
}

func (c *hubRBACCache) start(ctx context.Context) {
	c.factory.Start(ctx.Done())
}

// granted reports whether the cache holds role and binding as utils.ApplyRole and
// utils.ApplyRoleBinding would leave them (the same rules; the same subjects and role
// reference), so that applying them would change nothing. It is false for a nil cache,
// one not synced yet, and anything it does not hold: the caller then applies them, reading
// from the apiserver. A cache that lags a change made by someone else leaves that change
// to the framework's next sync of the cluster, as a change made just after a sync is.
func (c *hubRBACCache) granted(role *rbacv1.Role, binding *rbacv1.RoleBinding) bool {
	if c == nil {
		return false
	}
	for _, synced := range c.synced {
		if !synced() {
			return false
		}
	}
	cachedRole, err := c.roles.Roles(role.Namespace).Get(role.Name)
	if err != nil || !equality.Semantic.DeepEqual(cachedRole.Rules, role.Rules) {
		return false
	}
	cachedBinding, err := c.bindings.RoleBindings(binding.Namespace).Get(binding.Name)
	return err == nil && equality.Semantic.DeepEqual(cachedBinding.Subjects, binding.Subjects) &&
		equality.Semantic.DeepEqual(cachedBinding.RoleRef, binding.RoleRef)
}
