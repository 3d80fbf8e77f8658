package addon

// This file caches the agents' hub Roles, RoleBindings and slice quotas, so that granting
// an agent permissions it already has costs no request.

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	rbaclisters "k8s.io/client-go/listers/rbac/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/hubcache"
)

// hubRBACCache holds the agents' hub Roles and RoleBindings, those of their one name
// (hubRoleName), and their slice quotas (SliceQuotaName), in every cluster namespace.
// Each watch asks for that name only, which the manager's ClusterRole allows by
// resourceNames.
type hubRBACCache struct {
	factories []kubeinformers.SharedInformerFactory
	roles     rbaclisters.RoleLister
	bindings  rbaclisters.RoleBindingLister
	quotas    corelisters.ResourceQuotaLister
	// quotaInformer is the informer of quotas, for sliceQuotaRepair.
	quotaInformer cache.SharedIndexInformer
	synced        []cache.InformerSynced
}

func newHubRBACCache(kube kubernetes.Interface, name, quotaName string) (*hubRBACCache, error) {
	byName := func(name string) kubeinformers.SharedInformerOption {
		return kubeinformers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
		})
	}
	factory := kubeinformers.NewSharedInformerFactoryWithOptions(kube, 0, byName(name))
	quotaFactory := kubeinformers.NewSharedInformerFactoryWithOptions(kube, 0, byName(quotaName))
	roles, bindings, quotas := factory.Rbac().V1().Roles(), factory.Rbac().V1().RoleBindings(), quotaFactory.Core().V1().ResourceQuotas()
	c := &hubRBACCache{factories: []kubeinformers.SharedInformerFactory{factory, quotaFactory},
		roles: roles.Lister(), bindings: bindings.Lister(), quotas: quotas.Lister(), quotaInformer: quotas.Informer()}
	for _, informer := range []cache.SharedIndexInformer{roles.Informer(), bindings.Informer(), quotas.Informer()} {
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
	for _, f := range c.factories {
		f.Start(ctx.Done())
	}
}

// granted reports whether the cache holds role and binding as utils.ApplyRole and
// utils.ApplyRoleBinding would leave them (the same rules; the same subjects and role
// reference), and quota as applySliceQuota would (sameQuota), so that applying them would
// change nothing. It is false for a nil cache,
// one not synced yet, and anything it does not hold: the caller then applies them, reading
// from the apiserver. A cache that lags a change made by someone else leaves that change
// to the framework's next sync of the cluster, as a change made just after a sync is.
func (c *hubRBACCache) granted(role *rbacv1.Role, binding *rbacv1.RoleBinding, quota *corev1.ResourceQuota) bool {
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
	if err != nil || !equality.Semantic.DeepEqual(cachedBinding.Subjects, binding.Subjects) ||
		!equality.Semantic.DeepEqual(cachedBinding.RoleRef, binding.RoleRef) {
		return false
	}
	if quota == nil {
		return true
	}
	cachedQuota, err := c.quotas.ResourceQuotas(quota.Namespace).Get(quota.Name)
	return err == nil && sameQuota(cachedQuota, quota)
}
