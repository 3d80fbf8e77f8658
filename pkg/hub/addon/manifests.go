package addon

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
	"unicode"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argocdcache"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/resourceproxy"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	addonv1beta1 "open-cluster-management.io/api/addon/v1beta1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
)

const (
	// agentContainer names the agent's container; AddOnDeploymentConfig resource
	// requirements match it as "deployments:<agent deployment>:agent".
	agentContainer = "agent"
	// addonNamespaceLabel marks an addon install namespace: the klusterlet copies its image
	// pull secret (open-cluster-management-image-pull-credentials) into such namespaces.
	addonNamespaceLabel = "addon.open-cluster-management.io/namespace"
)

// The agent's memory: its container's limit, which the Go runtime gets as its soft limit
// (GOMEMLIMIT, through the downward API, as the chart does for the manager), and its
// garbage collection target. The agent is idle but for a publish now and then, so a
// collection when the heap has grown by half (GOGC=50) rather than doubled costs it
// little CPU, and keeps its resident memory near its live heap (docs/benchmarks.md, P5:
// the agent's peak RSS on a cluster of 500 apps of 20 resources).
var (
	AgentMemoryRequest = resource.MustParse("32Mi")
	AgentMemoryLimit   = resource.MustParse("128Mi")
)

// AgentGOGC is the agent container's GOGC.
const AgentGOGC = "50"

// agentValues are the per-cluster inputs of the agent's manifests.
type agentValues struct {
	AddonName        string
	ClusterName      string
	InstallNamespace string
	// Image is the agent's image before the registry overrides (see agentImage).
	Image            string
	ImagePullPolicy  corev1.PullPolicy
	ImagePullSecrets []string
	// ClusterAnnotations are the ManagedCluster's: ACM sets image registries for
	// disconnected clusters in open-cluster-management.io/image-registries.
	ClusterAnnotations map[string]string
	WatchNamespaces    []string
	// ArgoCDNamespace is the namespace of Argo CD's application-controller, whose Redis
	// holds the apps' resource trees.
	ArgoCDNamespace string
}

// argoCDRedisAddress is the address of Argo CD's Redis in its install: the Service
// argocd-redis of its namespace.
func argoCDRedisAddress(argoCDNamespace string) string {
	return "argocd-redis." + argoCDNamespace + ".svc:6379"
}

// deploymentName is the name of the agent's Deployment and ServiceAccount on the spoke.
func (v agentValues) deploymentName() string { return v.AddonName + "-agent" }

// HubKubeconfigSecret is the secret in the install namespace where the klusterlet writes
// the agent's hub kubeconfig.
func HubKubeconfigSecret(addonName string) string { return addonName + "-hub-kubeconfig" }

// renderAgentManifests returns the agent's objects for one cluster: its ServiceAccount,
// its spoke RBAC (read-only on Applications in the watched namespaces, its own Lease and
// Events, the Redis password Secret by name), the work agent's Role in each watched
// namespace, its Deployment, and its Namespace when that is not the klusterlet's default.
// adc, when set, customises node placement, tolerations, image registries, proxy and
// resources, and its customized variables (see agentVariables) the work agent's identity
// and the agent's Redis user.
func renderAgentManifests(v agentValues, adc *addonv1beta1.AddOnDeploymentConfig) ([]runtime.Object, error) {
	vars, err := agentVariables(adc)
	if err != nil {
		return nil, err
	}
	name := v.deploymentName()
	sa := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: v.InstallNamespace}
	roleName := hubRoleName(v.AddonName)
	var objs []runtime.Object
	if v.InstallNamespace != DefaultInstallNamespace {
		objs = append(objs, &corev1.Namespace{
			TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
			// Other workloads may share a custom namespace: never delete it with the addon.
			ObjectMeta: metav1.ObjectMeta{Name: v.InstallNamespace,
				Labels:      map[string]string{addonNamespaceLabel: "true"},
				Annotations: map[string]string{addonv1beta1.DeletionOrphanAnnotationKey: ""}},
		})
	}
	objs = append(objs,
		&corev1.ServiceAccount{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: v.InstallNamespace},
		},
		// The prerequisite check reads only the Application CRD.
		&rbacv1.ClusterRole{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
			ObjectMeta: metav1.ObjectMeta{Name: roleName},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"},
				ResourceNames: []string{"applications.argoproj.io"}, Verbs: []string{"get", "list", "watch"}}},
		},
		&rbacv1.ClusterRoleBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"},
			ObjectMeta: metav1.ObjectMeta{Name: roleName},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: roleName},
			Subjects:   []rbacv1.Subject{sa},
		},
	)
	// The addon framework's lease updater gets, creates and updates the Lease named for
	// the addon; create cannot be limited by name.
	objs = append(objs, roleWithBinding(roleName, v.InstallNamespace, sa,
		rbacv1.PolicyRule{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"},
			ResourceNames: []string{v.AddonName}, Verbs: []string{"get", "update"}},
		rbacv1.PolicyRule{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"},
			Verbs: []string{"create"}},
		rbacv1.PolicyRule{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"},
			Verbs: []string{"create", "patch", "update"}},
	)...)
	// The apps' resource trees: the password of Argo CD's Redis, and no other Secret.
	objs = append(objs, roleWithBinding(roleName+":argocd-redis", v.ArgoCDNamespace, sa,
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"},
			ResourceNames: []string{vars.redis.PasswordSecret}, Verbs: []string{"get"}},
	)...)
	// The resource proxy's requests run as Argo CD's application-controller, with its
	// rights and no wider ones (pkg/spoke, resourceproxy.go).
	objs = append(objs, roleWithBinding(roleName+":resource-proxy", v.ArgoCDNamespace, sa,
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"serviceaccounts"},
			ResourceNames: []string{resourceproxy.SpokeServiceAccount}, Verbs: []string{"impersonate"}},
	)...)
	objs = append(objs, argoCDRedisNetworkPolicy(v))
	for _, ns := range v.WatchNamespaces {
		// Read, and patch to run the hub's operations (pkg/spoke, operations.go): set
		// .operation, terminate the running one. Argo CD's Application has no status
		// subresource, so patch covers both.
		objs = append(objs, roleWithBinding(roleName+":applications", ns, sa,
			rbacv1.PolicyRule{APIGroups: []string{"argoproj.io"}, Resources: []string{"applications"},
				Verbs: []string{"get", "list", "watch", "patch"}},
		)...)
		// What the klusterlet's work agent needs to apply the pulled works: it applies
		// with the admin ClusterRole plus every ClusterRole labelled aggregate-to-work, and
		// Argo CD aggregates nothing to admin. So a stock cluster forbids it Applications
		// and AppProjects until this Role, delivered and removed with the agent, grants
		// them, in the namespaces where the pulled apps may land and no other: the
		// namespaces the agent watches. Aggregation collects ClusterRoles only, so the Role
		// is bound to the work agent's service account itself.
		objs = append(objs, roleWithBinding(WorkAgentRoleName(v.AddonName), ns, vars.workAgent, workAgentRule())...)
	}
	deploy, err := agentDeployment(v, vars, adc)
	if err != nil {
		return nil, err
	}
	return append(objs, deploy), nil
}

// argoCDRedisNetworkPolicy admits the agent's Pod to Argo CD's Redis. Argo CD's install
// ships argocd-redis-network-policy, which admits only its own components; policies add
// up, so this one opens port 6379 to the agent and to nothing else.
func argoCDRedisNetworkPolicy(v agentValues) *networkingv1.NetworkPolicy {
	tcp := corev1.ProtocolTCP
	return &networkingv1.NetworkPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: v.deploymentName() + "-argocd-redis", Namespace: v.ArgoCDNamespace},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": "argocd-redis"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From: []networkingv1.NetworkPolicyPeer{{
					NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: v.InstallNamespace}},
					PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": v.deploymentName()}},
				}},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: ptr.To(intstr.FromInt32(6379))}},
			}},
		},
	}
}

func roleWithBinding(name, namespace string, subject rbacv1.Subject, rules ...rbacv1.PolicyRule) []runtime.Object {
	return []runtime.Object{
		&rbacv1.Role{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
			Rules:      rules,
		},
		&rbacv1.RoleBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
			Subjects:   []rbacv1.Subject{subject},
		},
	}
}

func agentDeployment(v agentValues, vars agentVariableValues, adc *addonv1beta1.AddOnDeploymentConfig) (*appsv1.Deployment, error) {
	name := v.deploymentName()
	labels := map[string]string{"app.kubernetes.io/name": name, "app.kubernetes.io/part-of": v.AddonName}
	image, err := agentImage(v.Image, adc, v.ClusterAnnotations)
	if err != nil {
		return nil, err
	}
	container := corev1.Container{
		Name:            agentContainer,
		Image:           image,
		ImagePullPolicy: v.ImagePullPolicy,
		Command:         []string{"/agent"},
		Args: []string{
			"--hub-kubeconfig=" + path.Join(hubKubeconfigMountPath, "kubeconfig"),
			"--cluster-name=" + v.ClusterName,
			"--addon-name=" + v.AddonName,
			"--addon-namespace=" + v.InstallNamespace,
			"--watch-namespaces=" + strings.Join(v.WatchNamespaces, ","),
			"--argocd-namespace=" + v.ArgoCDNamespace,
		},
		Env: []corev1.EnvVar{
			{Name: "GOMEMLIMIT", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.memory"}}},
			{Name: "GOGC", Value: AgentGOGC},
		},
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: AgentMemoryRequest},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: AgentMemoryLimit},
		},
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr.To(false),
			ReadOnlyRootFilesystem:   ptr.To(true),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		},
		VolumeMounts: []corev1.VolumeMount{{Name: "hub-kubeconfig", MountPath: hubKubeconfigMountPath, ReadOnly: true}},
	}
	if len(vars.redis.SentinelAddrs) == 0 {
		addr := vars.redis.Addr
		if addr == "" {
			addr = argoCDRedisAddress(v.ArgoCDNamespace)
		}
		container.Args = append(container.Args, "--argocd-redis="+addr)
	}
	container.Args = append(container.Args, vars.redis.Args()...)
	pod := corev1.PodSpec{
		ServiceAccountName: name,
		SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
		Volumes: []corev1.Volume{{Name: "hub-kubeconfig", VolumeSource: corev1.VolumeSource{
			Secret: &corev1.SecretVolumeSource{SecretName: HubKubeconfigSecret(v.AddonName)}}}},
	}
	// The files of Redis' TLS: the CA bundle of a ConfigMap, the client certificate of a
	// kubernetes.io/tls Secret, both in the agent's namespace.
	if vars.redisCAConfigMap != "" {
		container.VolumeMounts = append(container.VolumeMounts, corev1.VolumeMount{Name: "redis-ca", MountPath: redisCAMountPath, ReadOnly: true})
		pod.Volumes = append(pod.Volumes, corev1.Volume{Name: "redis-ca", VolumeSource: corev1.VolumeSource{
			ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: vars.redisCAConfigMap}}}})
	}
	if vars.redisClientCertSecret != "" {
		container.VolumeMounts = append(container.VolumeMounts, corev1.VolumeMount{Name: "redis-client", MountPath: redisClientCertMountPath, ReadOnly: true})
		pod.Volumes = append(pod.Volumes, corev1.Volume{Name: "redis-client", VolumeSource: corev1.VolumeSource{
			Secret: &corev1.SecretVolumeSource{SecretName: vars.redisClientCertSecret}}})
	}
	for _, secret := range v.ImagePullSecrets {
		pod.ImagePullSecrets = append(pod.ImagePullSecrets, corev1.LocalObjectReference{Name: secret})
	}
	if adc != nil {
		if err := customise(&pod, &container, name, adc); err != nil {
			return nil, err
		}
	}
	pod.Containers = []corev1.Container{container}
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: v.InstallNamespace, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": name}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: pod},
		},
	}, nil
}

// agentImage rewrites image as the framework's addonfactory.GetAgentImageValues does: with
// the AddOnDeploymentConfig's registries when one of them matches, else with the
// ManagedCluster's open-cluster-management.io/image-registries annotation (ACM's mirrors
// for a disconnected cluster). A malformed annotation is an error: the framework sets
// ManifestApplied=False with it on the ManagedClusterAddOn and leaves the deployed agent
// as it is, rather than point it at a registry the cluster may not reach.
func agentImage(image string, adc *addonv1beta1.AddOnDeploymentConfig, clusterAnnotations map[string]string) (string, error) {
	if adc != nil {
		if mirrored := mirrorImage(adc.Spec.Registries, image); mirrored != image {
			return mirrored, nil
		}
	}
	annotation, ok := clusterAnnotations[clusterv1.ClusterImageRegistriesAnnotationKey]
	if !ok {
		return image, nil
	}
	var registries struct {
		Registries []addonv1beta1.ImageMirror `json:"registries"`
	}
	if err := json.Unmarshal([]byte(annotation), &registries); err != nil {
		return "", fmt.Errorf("annotation %s of the ManagedCluster: %w", clusterv1.ClusterImageRegistriesAnnotationKey, err)
	}
	return mirrorImage(registries.Registries, image), nil
}

// mirrorImage returns image as the last of registries that matches it rewrites it, as
// the addon framework rewrites its addons' images (v1.3: addonfactory.OverrideImage,
// utils.OverrideImageByAnnotation): a mirror whose source prefixes image replaces that
// prefix; one without a source takes the image's last path segment (name and tag or
// digest) under the mirror. A trailing "/" of either is ignored.
func mirrorImage(registries []addonv1beta1.ImageMirror, image string) string {
	mirrored := image
	for _, r := range registries {
		source, mirror := strings.TrimSuffix(r.Source, "/"), strings.TrimSuffix(r.Mirror, "/")
		rewritten := image
		switch {
		case source == "" && mirror == "":
			rewritten = image[strings.LastIndex(image, "/")+1:]
		case source == "":
			rewritten = mirror + "/" + image[strings.LastIndex(image, "/")+1:]
		case strings.HasPrefix(image, source):
			rewritten = mirror + strings.TrimPrefix(image, source)
		}
		if rewritten != image {
			mirrored = rewritten
		}
	}
	return mirrored
}

// customise applies an AddOnDeploymentConfig: node placement, proxy and resource
// requirements (the first entry whose containerID matches
// "deployments:<name>:agent", containerIDMatches).
func customise(pod *corev1.PodSpec, container *corev1.Container, deployment string, adc *addonv1beta1.AddOnDeploymentConfig) error {
	if np := adc.Spec.NodePlacement; np != nil {
		pod.NodeSelector = np.NodeSelector
		pod.Tolerations = np.Tolerations
	}
	proxy := adc.Spec.ProxyConfig
	for _, env := range []struct{ name, value string }{
		{"HTTP_PROXY", proxy.HTTPProxy}, {"HTTPS_PROXY", proxy.HTTPSProxy}, {"NO_PROXY", proxy.NoProxy},
	} {
		if env.value != "" {
			container.Env = append(container.Env, corev1.EnvVar{Name: env.name, Value: env.value})
		}
	}
	id := fmt.Sprintf("deployments:%s:%s", deployment, agentContainer)
	matched := false
	for _, rr := range adc.Spec.ResourceRequirements {
		ok, err := containerIDMatches(rr.ContainerID, id)
		if err != nil {
			return fmt.Errorf("AddOnDeploymentConfig %s/%s: %w", adc.Namespace, adc.Name, err)
		}
		if ok && !matched {
			container.Resources = rr.Resources
			matched = true
		}
	}
	return nil
}

// containerIDMatches reports whether an AddOnDeploymentConfig's containerID,
// "<resource type>:<resource name>:<container name>", names the container id: each part
// is "*", which matches any, or the same as id's. A containerID of another form is an
// error, as it is for the framework (v1.3: addonfactory.GetRegexResourceRequirements),
// whichever entry matches.
func containerIDMatches(containerID, id string) (bool, error) {
	pattern := strings.Split(containerID, ":")
	if len(pattern) != 3 {
		return false, fmt.Errorf("invalid containerID %q: want <resource type>:<resource name>:<container name>", containerID)
	}
	parts := strings.Split(id, ":")
	if len(parts) != len(pattern) {
		return false, nil
	}
	for i, p := range pattern {
		if p != "*" && p != parts[i] {
			return false, nil
		}
	}
	return true, nil
}

// WorkAgentRoleName names the Role, in each namespace the agent watches, that lets the
// klusterlet's work agent apply the pulled Applications and AppProjects there.
func WorkAgentRoleName(addonName string) string {
	return "open-cluster-management:" + addonName + ":work-applications"
}

// workAgentRule lets the work agent apply, watch (status feedback: OCM v1.2's work agent
// watches per namespace) and delete the Argo CD Applications and AppProjects of the
// pulled works.
func workAgentRule() rbacv1.PolicyRule {
	return rbacv1.PolicyRule{
		APIGroups: []string{"argoproj.io"},
		Resources: []string{"applications", "appprojects"},
		Verbs:     []string{"get", "list", "watch", "create", "update", "patch", "delete"},
	}
}

// The customized variables of an AddOnDeploymentConfig that the agent's manifests read;
// other variables are ignored.
const (
	// VariableWorkAgentServiceAccount is "<namespace>/<name>" of the klusterlet's work
	// agent's service account on the managed cluster, which applies the pulled works.
	VariableWorkAgentServiceAccount = "workAgentServiceAccount"
	// VariableArgoCDRedisUsername is the Redis ACL user the agent reads Argo CD's cache
	// as; empty means Redis' default user (docs/operations.md, "The agent's Redis user").
	VariableArgoCDRedisUsername = "argocdRedisUsername"
	// VariableArgoCDRedisPasswordSecret and VariableArgoCDRedisPasswordKey name the Secret,
	// in Argo CD's namespace, and its key that hold that user's password.
	VariableArgoCDRedisPasswordSecret = "argocdRedisPasswordSecret"
	VariableArgoCDRedisPasswordKey    = "argocdRedisPasswordKey"
	// VariableArgoCDRedisAddress is host:port of Argo CD's Redis; empty means
	// argocd-redis.<namespace>.svc:6379 (OpenShift GitOps names it
	// <instance>-redis.<namespace>.svc:6379).
	VariableArgoCDRedisAddress = "argocdRedisAddress"
	// VariableArgoCDRedisDB is the Redis database (Argo CD's --redisdb).
	VariableArgoCDRedisDB = "argocdRedisDB"
	// VariableArgoCDRedisSentinels are comma-separated host:port of Redis Sentinels (Argo
	// CD's --sentinel): the agent reads the master of the group
	// VariableArgoCDRedisSentinelMaster (default "master") instead of
	// argocd-redis.<namespace>.svc:6379.
	VariableArgoCDRedisSentinels      = "argocdRedisSentinels"
	VariableArgoCDRedisSentinelMaster = "argocdRedisSentinelMaster"
	// VariableArgoCDRedisUseTLS, "true", connects to Redis over TLS (--redis-use-tls).
	VariableArgoCDRedisUseTLS = "argocdRedisUseTLS"
	// VariableArgoCDRedisCAConfigMap names a ConfigMap in the agent's install namespace
	// whose key VariableArgoCDRedisCAConfigMapKey (default "ca.crt") holds the CAs that
	// sign Redis' certificate, mounted into the agent's Pod; none means the system's. On
	// OpenShift, openshift-service-ca.crt (key service-ca.crt) is in every namespace.
	VariableArgoCDRedisCAConfigMap    = "argocdRedisCAConfigMap"
	VariableArgoCDRedisCAConfigMapKey = "argocdRedisCAConfigMapKey"
	// VariableArgoCDRedisClientCertSecret names a Secret of type kubernetes.io/tls in the
	// agent's install namespace, mounted into its Pod, whose certificate the agent
	// presents to a Redis that authenticates clients.
	VariableArgoCDRedisClientCertSecret = "argocdRedisClientCertSecret"
	// VariableArgoCDRedisInsecureSkipTLSVerify, "true", does not verify Redis'
	// certificate.
	VariableArgoCDRedisInsecureSkipTLSVerify = "argocdRedisInsecureSkipTLSVerify"
)

// Where the agent's Pod mounts the files of Redis' TLS.
const (
	redisCAMountPath         = "/etc/argocd-pull/redis-ca"
	redisClientCertMountPath = "/etc/argocd-pull/redis-client"
)

// DefaultWorkAgentServiceAccount is the work agent's service account of a klusterlet
// named "klusterlet" in the Default or Singleton mode (OCM v1.2's klusterlet operator:
// "<klusterlet name>-work-sa" in its namespace, open-cluster-management-agent).
var DefaultWorkAgentServiceAccount = rbacv1.Subject{Kind: rbacv1.ServiceAccountKind,
	Namespace: "open-cluster-management-agent", Name: "klusterlet-work-sa"}

// agentVariableValues are the agent's settings that its AddOnDeploymentConfig may set.
type agentVariableValues struct {
	workAgent rbacv1.Subject
	// redis is how the agent reaches Argo CD's Redis (an empty Addr: Argo CD's
	// argocd-redis); its TLS files are
	// where the agent's Pod mounts redisCAConfigMap and redisClientCertSecret.
	redis                                   argocdcache.ClientOptions
	redisCAConfigMap, redisClientCertSecret string
}

// agentVariables reads the customized variables of adc (nil: the defaults). A malformed
// value is an error: the framework then sets ManifestApplied=False with it on the
// ManagedClusterAddOn and leaves the deployed agent as it is.
func agentVariables(adc *addonv1beta1.AddOnDeploymentConfig) (agentVariableValues, error) {
	vars := agentVariableValues{workAgent: DefaultWorkAgentServiceAccount,
		redis: argocdcache.ClientOptions{PasswordSecret: argocdcache.RedisSecret, PasswordKey: argocdcache.RedisPasswordKey,
			SentinelMaster: argocdcache.DefaultSentinelMaster}}
	if adc == nil {
		return vars, nil
	}
	var errs []error
	caKey := "ca.crt"
	for _, kv := range adc.Spec.CustomizedVariables {
		invalid := func(msgs []string) {
			if len(msgs) > 0 {
				errs = append(errs, fmt.Errorf("customized variable %s=%q: %s", kv.Name, kv.Value, strings.Join(msgs, "; ")))
			}
		}
		boolean := func() bool {
			b, err := strconv.ParseBool(kv.Value)
			if err != nil {
				invalid([]string{"want true or false"})
			}
			return b
		}
		switch kv.Name {
		case VariableWorkAgentServiceAccount:
			ns, name, ok := strings.Cut(kv.Value, "/")
			if !ok {
				invalid([]string{"want <namespace>/<name>"})
				continue
			}
			invalid(append(validation.IsDNS1123Label(ns), validation.IsDNS1123Subdomain(name)...))
			vars.workAgent = rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}
		case VariableArgoCDRedisUsername:
			if kv.Value == "" || strings.ContainsFunc(kv.Value, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) }) {
				invalid([]string{"a Redis user name is not empty and has no space"})
			}
			vars.redis.Username = kv.Value
		case VariableArgoCDRedisPasswordSecret:
			invalid(validation.IsDNS1123Subdomain(kv.Value))
			vars.redis.PasswordSecret = kv.Value
		case VariableArgoCDRedisPasswordKey:
			invalid(validation.IsConfigMapKey(kv.Value))
			vars.redis.PasswordKey = kv.Value
		case VariableArgoCDRedisAddress:
			vars.redis.Addr = kv.Value
		case VariableArgoCDRedisDB:
			db, err := strconv.Atoi(kv.Value)
			if err != nil || db < 0 {
				invalid([]string{"want a database number, 0 or more"})
			}
			vars.redis.DB = db
		case VariableArgoCDRedisSentinels:
			vars.redis.SentinelAddrs = nil
			for _, addr := range strings.Split(kv.Value, ",") {
				if addr = strings.TrimSpace(addr); addr != "" {
					vars.redis.SentinelAddrs = append(vars.redis.SentinelAddrs, addr)
				}
			}
		case VariableArgoCDRedisSentinelMaster:
			vars.redis.SentinelMaster = kv.Value
		case VariableArgoCDRedisUseTLS:
			vars.redis.TLS.Enabled = boolean()
		case VariableArgoCDRedisInsecureSkipTLSVerify:
			vars.redis.TLS.InsecureSkipVerify = boolean()
		case VariableArgoCDRedisCAConfigMap:
			invalid(validation.IsDNS1123Subdomain(kv.Value))
			vars.redisCAConfigMap = kv.Value
		case VariableArgoCDRedisCAConfigMapKey:
			invalid(validation.IsConfigMapKey(kv.Value))
			caKey = kv.Value
		case VariableArgoCDRedisClientCertSecret:
			invalid(validation.IsDNS1123Subdomain(kv.Value))
			vars.redisClientCertSecret = kv.Value
		}
	}
	if vars.redisCAConfigMap != "" {
		vars.redis.TLS.CAFile = path.Join(redisCAMountPath, caKey)
	}
	if vars.redisClientCertSecret != "" {
		vars.redis.TLS.ClientCertFile = path.Join(redisClientCertMountPath, corev1.TLSCertKey)
		vars.redis.TLS.ClientKeyFile = path.Join(redisClientCertMountPath, corev1.TLSPrivateKeyKey)
	}
	// The agent would refuse to start with options that do not go together: say so here.
	check := vars.redis
	if check.Addr == "" && len(check.SentinelAddrs) == 0 {
		check.Addr = "argocd-redis:6379"
	}
	if err := check.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("the Redis of Argo CD: %w", err))
	}
	if err := errors.Join(errs...); err != nil {
		return agentVariableValues{}, fmt.Errorf("AddOnDeploymentConfig %s/%s: %w", adc.Namespace, adc.Name, err)
	}
	return vars, nil
}
