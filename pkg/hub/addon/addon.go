// Package addon wires the argocd-pull agent into the OCM addon framework: the manifests
// the framework deploys to each managed cluster that opts in, the agent's registration
// with the hub (a KubeClient certificate, approved only when the agent's own cluster asks
// for exactly it, and the hub permissions it gets), and its health (a Lease).
package addon

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
	"open-cluster-management.io/addon-framework/pkg/agent"
	"open-cluster-management.io/addon-framework/pkg/utils"
	addonv1beta1 "open-cluster-management.io/api/addon/v1beta1"
	addonclient "open-cluster-management.io/api/client/addon/clientset/versioned"
	clusterv1 "open-cluster-management.io/api/cluster/v1"

	statusv1alpha1 "github.com/ocm-gitops/argocd-pull-addon/pkg/apis/argocdpull/v1alpha1"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/clusterreport"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/resourceproxy"
)

const (
	// AgentName is the agent's name in its registration: its hub user is
	// system:open-cluster-management:cluster:<cluster>:addon:<addon>:agent:<AgentName>.
	AgentName = "agent"
	// DefaultInstallNamespace is where the klusterlet installs addon agents by default.
	DefaultInstallNamespace = clusterreport.DefaultInstallNamespace
	// hubKubeconfigMountPath is where the agent's Deployment mounts the hub kubeconfig
	// secret that the klusterlet writes.
	hubKubeconfigMountPath = "/var/run/hub"
)

// Options configure the addon: the hub's settings that it shares with the hub
// controllers (AddonName, required, and ArgoCDNamespace), which pkg/hub passes to each,
// what it records with, and its own Settings.
type Options struct {
	// AddonName names the ClusterManagementAddOn and every ManagedClusterAddOn.
	AddonName string
	// ArgoCDNamespace is the namespace of the managed clusters' Argo CD
	// application-controller and its Redis; empty means argocd.
	ArgoCDNamespace string
	// Recorder records a Warning Event on a ManagedClusterAddOn whose agent certificate
	// request is not approved automatically (agentCSRApprover); nil records none.
	Recorder events.EventRecorder
	Settings
}

// AgentAddon renders the agent's manifests for each cluster (see Manifests) and grants
// each agent its hub permissions.
type AgentAddon struct {
	opts      Options
	adcGetter utils.AddOnDeploymentConfigGetter
	hubKube   kubernetes.Interface
	// hubRBAC caches the agents' hub Roles and RoleBindings; nil without hubKube.
	hubRBAC *hubRBACCache
	// csrApprover approves the agents' certificate requests.
	csrApprover *agentCSRApprover
	// quotaRepair re-creates slice quotas that refuse every slice; nil without quotas.
	quotaRepair *sliceQuotaRepair
}

var _ agent.AgentAddon = &AgentAddon{}

// NewAgentAddon returns the addon for the framework's manager. hubKube creates the agent's
// hub RBAC; addons reads AddOnDeploymentConfigs. Start runs its cache of that RBAC.
func NewAgentAddon(opts Options, hubKube kubernetes.Interface, addons addonclient.Interface) (*AgentAddon, error) {
	if opts.AddonName == "" || opts.AgentImage == "" || len(opts.WatchNamespaces) == 0 {
		return nil, fmt.Errorf("addon options need a name, an agent image and watch namespaces: %+v", opts)
	}
	if opts.AgentImagePullPolicy == "" {
		opts.AgentImagePullPolicy = corev1.PullIfNotPresent
	}
	if opts.ArgoCDNamespace == "" {
		opts.ArgoCDNamespace = argoapp.DefaultAppNamespace
	}
	if opts.MaxStatusSlicesPerCluster < 0 {
		return nil, fmt.Errorf("the status slices per cluster are %d; they must be 0 (no quota) or more", opts.MaxStatusSlicesPerCluster)
	}
	a := &AgentAddon{opts: opts, adcGetter: utils.NewAddOnDeploymentConfigGetter(addons), hubKube: hubKube,
		csrApprover: newAgentCSRApprover(opts.Recorder)}
	if hubKube != nil {
		rbac, err := newHubRBACCache(hubKube, hubRoleName(opts.AddonName), SliceQuotaName(opts.AddonName))
		if err != nil {
			return nil, err
		}
		a.hubRBAC = rbac
		if opts.MaxStatusSlicesPerCluster > 0 {
			if a.quotaRepair, err = newSliceQuotaRepair(hubKube, rbac.quotaInformer, rbac.quotas, sliceQuotaRepairAfter); err != nil {
				return nil, err
			}
		}
	}
	return a, nil
}

// Start runs the cache of the agents' hub Roles and RoleBindings until ctx ends. Until it
// has synced, granting an agent its permissions reads them from the apiserver.
func (a *AgentAddon) Start(ctx context.Context) {
	if a.hubRBAC != nil {
		a.hubRBAC.start(ctx)
	}
	if a.quotaRepair != nil {
		go a.quotaRepair.run(ctx)
	}
}

// Manifests returns what the framework deploys to the cluster through a ManifestWork.
func (a *AgentAddon) Manifests(ctx context.Context, cluster *clusterv1.ManagedCluster, addon *addonv1beta1.ManagedClusterAddOn) ([]runtime.Object, error) {
	adc, err := utils.GetDesiredAddOnDeploymentConfig(addon, a.adcGetter)
	if err != nil {
		return nil, fmt.Errorf("AddOnDeploymentConfig of %s/%s: %w", addon.Namespace, addon.Name, err)
	}
	return renderAgentManifests(agentValues{
		AddonName:          a.opts.AddonName,
		ClusterName:        cluster.Name,
		InstallNamespace:   installNamespace(addon, adc),
		Image:              a.opts.AgentImage,
		ImagePullPolicy:    a.opts.AgentImagePullPolicy,
		ImagePullSecrets:   a.opts.AgentImagePullSecrets,
		ClusterAnnotations: cluster.Annotations,
		WatchNamespaces:    a.opts.WatchNamespaces,
		ArgoCDNamespace:    a.opts.ArgoCDNamespace,
	}, adc)
}

// GetAgentAddonOptions tells the framework how to register the agent and judge its health.
func (a *AgentAddon) GetAgentAddonOptions() agent.AgentAddonOptions {
	return agent.AgentAddonOptions{
		AddonName: a.opts.AddonName,
		Registration: &agent.RegistrationOption{
			Configurations:   agent.KubeClientSignerConfigurations(a.opts.AddonName, AgentName),
			CSRApproveCheck:  a.csrApprover.approve,
			PermissionConfig: a.grantHubPermissions,
		},
		// The agent runs addon-framework's lease updater in its install namespace.
		HealthProber:        &agent.HealthProber{Type: agent.HealthProberTypeLease},
		SupportedConfigGVRs: []schema.GroupVersionResource{utils.AddOnDeploymentConfigGVR},
		// Re-render the agent when the cluster's image-registries annotation changes.
		AgentDeployTriggerClusterFilter: utils.ClusterImageRegistriesAnnotationChanged,
		AgentInstallNamespace: func(ctx context.Context, addon *addonv1beta1.ManagedClusterAddOn) (string, error) {
			adc, err := utils.GetDesiredAddOnDeploymentConfig(addon, a.adcGetter)
			if err != nil {
				return "", err
			}
			return installNamespace(addon, adc), nil
		},
	}
}

// installNamespace is the AddOnDeploymentConfig's agentInstallNamespace, else the
// v1alpha1 installNamespace that `clusteradm addon enable --namespace` sets (an annotation
// in v1beta1), else the klusterlet's default.
func installNamespace(addon *addonv1beta1.ManagedClusterAddOn, adc *addonv1beta1.AddOnDeploymentConfig) string {
	if adc != nil && adc.Spec.AgentInstallNamespace != "" {
		return adc.Spec.AgentInstallNamespace
	}
	if ns := addon.Annotations[addonv1beta1.InstallNamespaceAnnotation]; ns != "" {
		return ns
	}
	return DefaultInstallNamespace
}

// HubRole is what the agent's hub identity may do, in its own cluster namespace only: read
// its own ManagedClusterAddOn, patch its status, write its ApplicationStatusSlices, and
// record Events, and serve the resource proxy's requests for its cluster. RBAC cannot name objects before they exist (create takes no
// resourceNames), so the namespace bounds the slices, as it bounds the Events; their
// number is bounded by the quota that grantHubPermissions keeps beside the Role
// (sliceQuota), their size by the CRD's schema.
func HubRole(addonName string) *rbacv1.Role {
	return &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: hubRoleName(addonName)},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{addonv1beta1.GroupName}, Resources: []string{"managedclusteraddons"},
				ResourceNames: []string{addonName}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{addonv1beta1.GroupName}, Resources: []string{"managedclusteraddons/status"},
				ResourceNames: []string{addonName}, Verbs: []string{"patch"}},
			{APIGroups: []string{statusv1alpha1.GroupVersion.Group}, Resources: []string{statusv1alpha1.Resource},
				Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
			{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
			// The resource proxy's tunnel: take the requests for this cluster, answer them.
			{APIGroups: []string{resourceproxy.Group}, Resources: []string{resourceproxy.ResourceAgents + "/" + resourceproxy.Subresource},
				Verbs: []string{"get", "create"}},
		},
	}
}

func hubRoleName(addonName string) string {
	return "open-cluster-management:" + addonName + ":agent"
}

// grantHubPermissions creates HubRole in the cluster's namespace and binds it to the
// agent's user and to the group of this cluster's agents only, and bounds the slices the
// agent may create there (sliceQuota). When the cache holds all three as they should be,
// it reads and writes nothing: the framework calls it for every cluster at every start
// of the manager, one cluster at a time. The quota is applied first, so that the agent
// never holds the right to create slices without their bound.
//
// The framework's BindKubeClientRole binds every group of the registration, and one of
// them, system:open-cluster-management:addon:<addon>, is shared by the agents of all
// clusters: bound in each cluster namespace, it would let any cluster's agent write any
// other cluster's report. So the binding names only the per-cluster subjects.
func (a *AgentAddon) grantHubPermissions(ctx context.Context, cluster *clusterv1.ManagedCluster, addon *addonv1beta1.ManagedClusterAddOn) error {
	role, binding, quota := a.hubPermissions(cluster.Name, addon)
	if a.hubRBAC.granted(role, binding, quota) {
		return nil
	}
	if quota != nil {
		if err := a.applySliceQuota(ctx, quota); err != nil {
			return err
		}
	}
	if _, _, err := utils.ApplyRole(ctx, a.hubKube.RbacV1(), role); err != nil {
		return fmt.Errorf("apply hub role for %s: %w", cluster.Name, err)
	}
	if _, _, err := utils.ApplyRoleBinding(ctx, a.hubKube.RbacV1(), binding); err != nil {
		return fmt.Errorf("apply hub role binding for %s: %w", cluster.Name, err)
	}
	return nil
}

// hubPermissions returns the agent's hub Role (HubRole) and RoleBinding in the
// namespace of cluster, and the quota of its slices (sliceQuota; nil without
// MaxStatusSlicesPerCluster), all owned by its ManagedClusterAddOn.
func (a *AgentAddon) hubPermissions(cluster string, addon *addonv1beta1.ManagedClusterAddOn) (*rbacv1.Role, *rbacv1.RoleBinding, *corev1.ResourceQuota) {
	role := HubRole(a.opts.AddonName)
	role.Namespace = cluster
	setAddonOwner(&role.ObjectMeta, addon)
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name, Namespace: cluster},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{
			{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: agent.DefaultUser(cluster, a.opts.AddonName, AgentName)},
			{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: clusterAgentsGroup(cluster, a.opts.AddonName)},
		},
	}
	setAddonOwner(&binding.ObjectMeta, addon)
	if a.opts.MaxStatusSlicesPerCluster == 0 {
		return role, binding, nil
	}
	return role, binding, sliceQuota(a.opts.AddonName, cluster, a.opts.MaxStatusSlicesPerCluster, addon)
}

// clusterAgentsGroup is the registration group of this addon's agents on one cluster.
func clusterAgentsGroup(cluster, addonName string) string {
	return fmt.Sprintf("system:open-cluster-management:cluster:%s:addon:%s", cluster, addonName)
}

// setAddonOwner makes the ManagedClusterAddOn own obj, so that disabling the addon on a
// cluster removes the agent's hub permissions with it.
func setAddonOwner(obj *metav1.ObjectMeta, addon *addonv1beta1.ManagedClusterAddOn) {
	obj.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(addon,
		schema.GroupVersionKind{Group: addonv1beta1.GroupName, Version: "v1beta1", Kind: "ManagedClusterAddOn"})}
}
