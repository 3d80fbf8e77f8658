package addon

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	addonv1beta1 "open-cluster-management.io/api/addon/v1beta1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argocdcache"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/spoke"
	"github.com/ocm-gitops/argocd-pull-addon/test/testenv"
)

func values(ns string) agentValues {
	return agentValues{AddonName: "argocd-pull", ClusterName: "c1", InstallNamespace: ns,
		Image: "quay.io/ocm-gitops/argocd-pull-addon:v1", ImagePullPolicy: corev1.PullIfNotPresent,
		WatchNamespaces: []string{"argocd", "team-a"}, ArgoCDNamespace: "argocd"}
}

func find[T runtime.Object](objs []runtime.Object) []T {
	var out []T
	for _, o := range objs {
		if t, ok := o.(T); ok {
			out = append(out, t)
		}
	}
	return out
}

func TestAgentManifestsDefaultNamespace(t *testing.T) {
	objs, err := renderAgentManifests(values(DefaultInstallNamespace), nil)
	if err != nil {
		t.Fatal(err)
	}
	if ns := find[*corev1.Namespace](objs); len(ns) != 0 {
		t.Errorf("the klusterlet's default namespace must not be shipped (the addon would delete it): %v", ns)
	}
	for _, o := range objs {
		if o.GetObjectKind().GroupVersionKind().Kind == "" {
			t.Errorf("%T has no kind; the framework refuses manifests without TypeMeta", o)
		}
	}
	deploys := find[*appsv1.Deployment](objs)
	if len(deploys) != 1 {
		t.Fatalf("want one Deployment, got %d", len(deploys))
	}
	d := deploys[0]
	c := d.Spec.Template.Spec.Containers[0]
	wantArgs := []string{"--hub-kubeconfig=/var/run/hub/kubeconfig", "--cluster-name=c1", "--addon-name=argocd-pull",
		"--addon-namespace=" + DefaultInstallNamespace, "--watch-namespaces=argocd,team-a",
		"--argocd-namespace=argocd", "--argocd-redis=argocd-redis.argocd.svc:6379",
		"--argocd-redis-password-secret=argocd-redis", "--argocd-redis-password-key=auth"}
	if !slices.Equal(c.Args, wantArgs) {
		t.Errorf("args = %v, want %v", c.Args, wantArgs)
	}
	// The Go runtime's soft memory limit is the container's, and the heap grows by half
	// between two collections.
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	if ref := env["GOMEMLIMIT"].ValueFrom; ref == nil || ref.ResourceFieldRef == nil || ref.ResourceFieldRef.Resource != "limits.memory" {
		t.Errorf("GOMEMLIMIT = %+v, want the container's memory limit", env["GOMEMLIMIT"])
	}
	if env["GOGC"].Value != AgentGOGC || c.Resources.Limits.Memory().Cmp(AgentMemoryLimit) != 0 {
		t.Errorf("GOGC = %q, memory limit %v", env["GOGC"].Value, c.Resources.Limits.Memory())
	}
	if got := d.Spec.Template.Spec.Volumes[0].Secret.SecretName; got != "argocd-pull-hub-kubeconfig" {
		t.Errorf("hub kubeconfig secret = %q", got)
	}
	if d.Spec.Template.Spec.ServiceAccountName != "argocd-pull-agent" || d.Labels["app.kubernetes.io/part-of"] != "argocd-pull" {
		t.Errorf("service account %q, labels %v", d.Spec.Template.Spec.ServiceAccountName, d.Labels)
	}

	// Applications are readable, and patchable (to run the hub's operations), only in the
	// watched namespaces; nothing else is writable.
	var appNamespaces []string
	for _, role := range find[*rbacv1.Role](objs) {
		if role.Name == WorkAgentRoleName("argocd-pull") {
			continue // the work agent's: see TestWorkAgentRole
		}
		for _, rule := range role.Rules {
			if slices.Contains(rule.Resources, "applications") {
				appNamespaces = append(appNamespaces, role.Namespace)
				if !slices.Equal(rule.Verbs, []string{"get", "list", "watch", "patch"}) {
					t.Errorf("applications verbs in %s = %v, want read and patch", role.Namespace, rule.Verbs)
				}
			}
		}
	}
	if !slices.Equal(appNamespaces, []string{"argocd", "team-a"}) {
		t.Errorf("Application roles in %v, want argocd and team-a", appNamespaces)
	}
	for _, cr := range find[*rbacv1.ClusterRole](objs) {
		for _, rule := range cr.Rules {
			if !slices.Equal(rule.ResourceNames, []string{"applications.argoproj.io"}) {
				t.Errorf("cluster-wide rule %v is not limited to the Application CRD", rule)
			}
		}
	}
}

// The agent may reach Argo CD's Redis through Argo CD's own NetworkPolicy, and only the
// agent's Pod, only on Redis' port.
func TestArgoCDRedisNetworkPolicy(t *testing.T) {
	objs, err := renderAgentManifests(values(DefaultInstallNamespace), nil)
	if err != nil {
		t.Fatal(err)
	}
	policies := find[*networkingv1.NetworkPolicy](objs)
	if len(policies) != 1 {
		t.Fatalf("%d NetworkPolicies, want 1", len(policies))
	}
	np := policies[0]
	if np.Namespace != "argocd" || np.Spec.PodSelector.MatchLabels["app.kubernetes.io/name"] != "argocd-redis" ||
		!slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) || len(np.Spec.Ingress) != 1 {
		t.Fatalf("policy %+v", np)
	}
	rule := np.Spec.Ingress[0]
	if len(rule.From) != 1 || rule.From[0].NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] != DefaultInstallNamespace ||
		rule.From[0].PodSelector.MatchLabels["app.kubernetes.io/name"] != "argocd-pull-agent" {
		t.Errorf("from %+v", rule.From)
	}
	if len(rule.Ports) != 1 || rule.Ports[0].Port.IntValue() != 6379 {
		t.Errorf("ports %+v", rule.Ports)
	}
	d := find[*appsv1.Deployment](objs)[0]
	if d.Spec.Template.Labels["app.kubernetes.io/name"] != "argocd-pull-agent" {
		t.Errorf("the policy selects the label app.kubernetes.io/name=argocd-pull-agent, which the Pod does not carry: %v", d.Spec.Template.Labels)
	}
}

// The agent ships, for the klusterlet's work agent, a Role in each namespace the agent
// watches that covers Applications and AppProjects, and nothing else, bound to the work
// agent's service account; no ClusterRole of the work agent's. An AddOnDeploymentConfig
// names another work agent.
func TestWorkAgentRole(t *testing.T) {
	wantRules := []rbacv1.PolicyRule{{APIGroups: []string{"argoproj.io"}, Resources: []string{"applications", "appprojects"},
		Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}}}
	hosted := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: "open-cluster-management-c1", Name: "klusterlet-c1-work-sa"}
	for _, tc := range []struct {
		name string
		adc  *addonv1beta1.AddOnDeploymentConfig
		want rbacv1.Subject
	}{
		{"default", nil, DefaultWorkAgentServiceAccount},
		{"another klusterlet", adcWith(addonv1beta1.CustomizedVariable{Name: VariableWorkAgentServiceAccount,
			Value: "open-cluster-management-c1/klusterlet-c1-work-sa"}), hosted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := renderAgentManifests(values(DefaultInstallNamespace), tc.adc)
			if err != nil {
				t.Fatal(err)
			}
			var namespaces []string
			for _, role := range find[*rbacv1.Role](objs) {
				if role.Name != WorkAgentRoleName("argocd-pull") {
					continue
				}
				namespaces = append(namespaces, role.Namespace)
				if !reflect.DeepEqual(role.Rules, wantRules) {
					t.Errorf("rules in %s = %v, want %v", role.Namespace, role.Rules, wantRules)
				}
			}
			if !slices.Equal(namespaces, []string{"argocd", "team-a"}) {
				t.Errorf("the work agent's Roles in %v, want the watched namespaces argocd and team-a", namespaces)
			}
			var bound []string
			for _, b := range find[*rbacv1.RoleBinding](objs) {
				if b.RoleRef.Name != WorkAgentRoleName("argocd-pull") {
					continue
				}
				bound = append(bound, b.Namespace)
				if b.RoleRef.Kind != "Role" || !slices.Equal(b.Subjects, []rbacv1.Subject{tc.want}) {
					t.Errorf("RoleBinding %s/%s binds %s %v, want the Role to %v", b.Namespace, b.Name, b.RoleRef.Kind, b.Subjects, tc.want)
				}
			}
			if !slices.Equal(bound, namespaces) {
				t.Errorf("work agent RoleBindings in %v, want %v", bound, namespaces)
			}
			for _, cr := range find[*rbacv1.ClusterRole](objs) {
				if _, ok := cr.Labels["open-cluster-management.io/aggregate-to-work"]; ok {
					t.Errorf("ClusterRole %s is aggregated to the work agent in every namespace", cr.Name)
				}
			}
		})
	}
}

func adcWith(vars ...addonv1beta1.CustomizedVariable) *addonv1beta1.AddOnDeploymentConfig {
	return &addonv1beta1.AddOnDeploymentConfig{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cfg"},
		Spec: addonv1beta1.AddOnDeploymentConfigSpec{CustomizedVariables: vars}}
}

// The AddOnDeploymentConfig's variables give the agent a Redis ACL user and its password
// Secret: the agent's flags say so, and its Role reads that Secret instead of
// argocd-redis. Malformed values are refused, naming the variable.
func TestAgentRedisUser(t *testing.T) {
	adc := adcWith(
		addonv1beta1.CustomizedVariable{Name: VariableArgoCDRedisUsername, Value: "argocd-pull-agent"},
		addonv1beta1.CustomizedVariable{Name: VariableArgoCDRedisPasswordSecret, Value: "argocd-pull-redis"},
		addonv1beta1.CustomizedVariable{Name: VariableArgoCDRedisPasswordKey, Value: "password"},
		addonv1beta1.CustomizedVariable{Name: "someOtherAddonsVariable", Value: "ignored"},
	)
	objs, err := renderAgentManifests(values(DefaultInstallNamespace), adc)
	if err != nil {
		t.Fatal(err)
	}
	args := find[*appsv1.Deployment](objs)[0].Spec.Template.Spec.Containers[0].Args
	for _, want := range []string{"--argocd-redis-username=argocd-pull-agent", "--argocd-redis-password-secret=argocd-pull-redis",
		"--argocd-redis-password-key=password"} {
		if !slices.Contains(args, want) {
			t.Errorf("args %v lack %s", args, want)
		}
	}
	var secretNames []string
	for _, role := range find[*rbacv1.Role](objs) {
		for _, rule := range role.Rules {
			if slices.Contains(rule.Resources, "secrets") {
				secretNames = append(secretNames, role.Namespace+"/"+strings.Join(rule.ResourceNames, ","))
			}
		}
	}
	if !slices.Equal(secretNames, []string{"argocd/argocd-pull-redis"}) {
		t.Errorf("the agent reads the Secrets %v, want argocd/argocd-pull-redis only", secretNames)
	}

	for _, bad := range []addonv1beta1.CustomizedVariable{
		{Name: VariableArgoCDRedisUsername, Value: "two words"},
		{Name: VariableArgoCDRedisPasswordSecret, Value: "Not_A_Name"},
		{Name: VariableArgoCDRedisPasswordKey, Value: "a/b"},
		{Name: VariableWorkAgentServiceAccount, Value: "klusterlet-work-sa"},
		{Name: VariableWorkAgentServiceAccount, Value: "Bad_NS/klusterlet-work-sa"},
	} {
		_, err := renderAgentManifests(values(DefaultInstallNamespace), adcWith(bad))
		if err == nil || !strings.Contains(err.Error(), bad.Name) {
			t.Errorf("%s=%q: %v, want an error naming the variable", bad.Name, bad.Value, err)
		}
	}
}

// TestAgentRedisConnection: the AddOnDeploymentConfig's variables of Argo CD's Redis
// (database, Sentinels, TLS with a CA ConfigMap and a client certificate Secret) render
// the agent's flags, which the agent's own flags (spoke.DefaultOptions,
// argocdcache.ClientOptions.AddFlags) parse into those options, valid; the CA and the
// client certificate files are in volumes of the ConfigMap and the Secret the variables
// name. Values that cannot work are refused, naming the AddOnDeploymentConfig.
func TestAgentRedisConnection(t *testing.T) {
	defaults := spoke.DefaultOptions().ArgoCDRedis
	for _, tc := range []struct {
		name string
		vars []addonv1beta1.CustomizedVariable
		want func(o *argocdcache.ClientOptions)
		// volumes are the sources, "configMap <name>" or "secret <name>", of the files the
		// options name.
		volumes []string
	}{
		{"none", nil, func(o *argocdcache.ClientOptions) { o.Addr = "argocd-redis.argocd.svc:6379" }, nil},
		{"OpenShift GitOps' Redis with its TLS, in database 2", []addonv1beta1.CustomizedVariable{
			{Name: VariableArgoCDRedisAddress, Value: "openshift-gitops-redis.openshift-gitops.svc:6379"},
			{Name: VariableArgoCDRedisUseTLS, Value: "true"}, {Name: VariableArgoCDRedisCAConfigMap, Value: "openshift-service-ca.crt"},
			{Name: VariableArgoCDRedisCAConfigMapKey, Value: "service-ca.crt"}, {Name: VariableArgoCDRedisDB, Value: "2"},
		}, func(o *argocdcache.ClientOptions) {
			o.Addr, o.DB = "openshift-gitops-redis.openshift-gitops.svc:6379", 2
			o.TLS = argocdcache.TLSOptions{Enabled: true, CAFile: "/etc/argocd-pull/redis-ca/service-ca.crt"}
		}, []string{"configMap openshift-service-ca.crt"}},
		{"Sentinels, a client certificate, the CA's default key", []addonv1beta1.CustomizedVariable{
			{Name: VariableArgoCDRedisSentinels, Value: "argocd-redis-ha-announce-0.argocd.svc:26379, argocd-redis-ha-announce-1.argocd.svc:26379"},
			{Name: VariableArgoCDRedisSentinelMaster, Value: "argocd"},
			{Name: VariableArgoCDRedisUseTLS, Value: "true"}, {Name: VariableArgoCDRedisCAConfigMap, Value: "argocd-redis-ca"},
			{Name: VariableArgoCDRedisClientCertSecret, Value: "argocd-pull-redis-client"},
		}, func(o *argocdcache.ClientOptions) {
			o.SentinelAddrs = []string{"argocd-redis-ha-announce-0.argocd.svc:26379", "argocd-redis-ha-announce-1.argocd.svc:26379"}
			o.SentinelMaster = "argocd"
			o.TLS = argocdcache.TLSOptions{Enabled: true, CAFile: "/etc/argocd-pull/redis-ca/ca.crt",
				ClientCertFile: "/etc/argocd-pull/redis-client/tls.crt", ClientKeyFile: "/etc/argocd-pull/redis-client/tls.key"}
		}, []string{"configMap argocd-redis-ca", "secret argocd-pull-redis-client", "secret argocd-pull-redis-client"}},
		{"TLS unverified", []addonv1beta1.CustomizedVariable{
			{Name: VariableArgoCDRedisUseTLS, Value: "true"}, {Name: VariableArgoCDRedisInsecureSkipTLSVerify, Value: "true"},
		}, func(o *argocdcache.ClientOptions) {
			o.Addr, o.TLS = "argocd-redis.argocd.svc:6379", argocdcache.TLSOptions{Enabled: true, InsecureSkipVerify: true}
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := renderAgentManifests(values(DefaultInstallNamespace), adcWith(tc.vars...))
			if err != nil {
				t.Fatal(err)
			}
			want := defaults
			tc.want(&want)
			testenv.ExpectRedisOptions(t, "agent", find[*appsv1.Deployment](objs)[0].Spec.Template.Spec, defaults, want, tc.volumes)
		})
	}

	for _, bad := range [][]addonv1beta1.CustomizedVariable{
		{{Name: VariableArgoCDRedisCAConfigMap, Value: "openshift-service-ca.crt"}},                                       // without TLS
		{{Name: VariableArgoCDRedisClientCertSecret, Value: "argocd-pull-redis-client"}},                                  // without TLS
		{{Name: VariableArgoCDRedisUseTLS, Value: "yes please"}},                                                          // not a boolean
		{{Name: VariableArgoCDRedisDB, Value: "-1"}},                                                                      // not a database
		{{Name: VariableArgoCDRedisSentinels, Value: "argocd-redis-ha-announce-0"}},                                       // no port
		{{Name: VariableArgoCDRedisAddress, Value: "redis"}},                                                              // no port
		{{Name: VariableArgoCDRedisAddress, Value: "redis:6379"}, {Name: VariableArgoCDRedisSentinels, Value: "s:26379"}}, // both
		{{Name: VariableArgoCDRedisCAConfigMap, Value: "Not_A_Name"}},                                                     // not a name
		{{Name: VariableArgoCDRedisSentinels, Value: "s:26379"}, {Name: VariableArgoCDRedisSentinelMaster, Value: ""}},    // no group
		{{Name: VariableArgoCDRedisUseTLS, Value: "true"}, {Name: VariableArgoCDRedisInsecureSkipTLSVerify, Value: "true"},
			{Name: VariableArgoCDRedisCAConfigMap, Value: "openshift-service-ca.crt"}}, // a CA and no verification
	} {
		if _, err := renderAgentManifests(values(DefaultInstallNamespace), adcWith(bad...)); err == nil || !strings.Contains(err.Error(), "AddOnDeploymentConfig ns/cfg") {
			t.Errorf("%v: %v, want an error naming the AddOnDeploymentConfig", bad, err)
		}
	}
}

func TestAgentManifestsCustomNamespaceIsOrphaned(t *testing.T) {
	objs, err := renderAgentManifests(values("argocd-pull-agent"), nil)
	if err != nil {
		t.Fatal(err)
	}
	ns := find[*corev1.Namespace](objs)
	if len(ns) != 1 || ns[0].Name != "argocd-pull-agent" {
		t.Fatalf("want the custom namespace shipped, got %v", ns)
	}
	if _, ok := ns[0].Annotations[addonv1beta1.DeletionOrphanAnnotationKey]; !ok {
		t.Error("the custom namespace is not orphaned on addon removal")
	}
	if ns[0].Labels["addon.open-cluster-management.io/namespace"] != "true" {
		t.Errorf("the custom namespace lacks the label that makes the klusterlet copy its image pull secret: %v", ns[0].Labels)
	}
}

func TestAgentImagePullSettings(t *testing.T) {
	v := values(DefaultInstallNamespace)
	objs, err := renderAgentManifests(v, nil)
	if err != nil {
		t.Fatal(err)
	}
	pod := find[*appsv1.Deployment](objs)[0].Spec.Template.Spec
	if pod.Containers[0].ImagePullPolicy != corev1.PullIfNotPresent || len(pod.ImagePullSecrets) != 0 {
		t.Errorf("defaults: pull policy %q, secrets %v", pod.Containers[0].ImagePullPolicy, pod.ImagePullSecrets)
	}

	v.ImagePullPolicy = corev1.PullAlways
	v.ImagePullSecrets = []string{"open-cluster-management-image-pull-credentials", "mirror-creds"}
	objs, err = renderAgentManifests(v, nil)
	if err != nil {
		t.Fatal(err)
	}
	pod = find[*appsv1.Deployment](objs)[0].Spec.Template.Spec
	if pod.Containers[0].ImagePullPolicy != corev1.PullAlways {
		t.Errorf("pull policy %q, want Always", pod.Containers[0].ImagePullPolicy)
	}
	want := []corev1.LocalObjectReference{{Name: "open-cluster-management-image-pull-credentials"}, {Name: "mirror-creds"}}
	if !slices.Equal(pod.ImagePullSecrets, want) {
		t.Errorf("imagePullSecrets %v, want %v", pod.ImagePullSecrets, want)
	}
}

// TestAgentImageRegistries: the AddOnDeploymentConfig's registries, else ACM's
// image-registries annotation on the ManagedCluster, rewrite the agent's image, as the
// framework's addonfactory.GetAgentImageValues does.
func TestAgentImageRegistries(t *testing.T) {
	const image = "quay.io/ocm-gitops/argocd-pull-addon:v1"
	annotation := func(registries string) map[string]string {
		return map[string]string{clusterv1.ClusterImageRegistriesAnnotationKey: `{"registries":[` + registries + `]}`}
	}
	adc := func(source, mirror string) *addonv1beta1.AddOnDeploymentConfig {
		return &addonv1beta1.AddOnDeploymentConfig{Spec: addonv1beta1.AddOnDeploymentConfigSpec{
			Registries: []addonv1beta1.ImageMirror{{Source: source, Mirror: mirror}}}}
	}
	for _, tc := range []struct {
		name        string
		adc         *addonv1beta1.AddOnDeploymentConfig
		annotations map[string]string
		want        string
		wantErr     bool
	}{
		{name: "no override", want: image},
		{name: "annotation", annotations: annotation(`{"source":"quay.io/ocm-gitops","mirror":"disconnected.local:5000/gitops"}`),
			want: "disconnected.local:5000/gitops/argocd-pull-addon:v1"},
		{name: "annotation, last matching entry wins", annotations: annotation(
			`{"source":"quay.io","mirror":"first.local"},{"source":"quay.io/ocm-gitops","mirror":"second.local/gitops"}`),
			want: "second.local/gitops/argocd-pull-addon:v1"},
		{name: "annotation for other images", annotations: annotation(`{"source":"registry.redhat.io","mirror":"m.local"}`), want: image},
		{name: "AddOnDeploymentConfig wins over the annotation", adc: adc("quay.io/ocm-gitops", "adc.local/gitops"),
			annotations: annotation(`{"source":"quay.io/ocm-gitops","mirror":"annotation.local/gitops"}`),
			want:        "adc.local/gitops/argocd-pull-addon:v1"},
		{name: "AddOnDeploymentConfig for other images leaves the annotation", adc: adc("registry.redhat.io", "adc.local"),
			annotations: annotation(`{"source":"quay.io/ocm-gitops","mirror":"annotation.local/gitops"}`),
			want:        "annotation.local/gitops/argocd-pull-addon:v1"},
		{name: "digest kept", adc: adc("quay.io/ocm-gitops", "adc.local/gitops"),
			want: "adc.local/gitops/argocd-pull-addon@sha256:" + strings.Repeat("a", 64)},
		{name: "malformed annotation", annotations: map[string]string{clusterv1.ClusterImageRegistriesAnnotationKey: "{registries"}, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := values(DefaultInstallNamespace)
			if strings.Contains(tc.want, "@") {
				v.Image = "quay.io/ocm-gitops/argocd-pull-addon@sha256:" + strings.Repeat("a", 64)
			}
			v.ClusterAnnotations = tc.annotations
			objs, err := renderAgentManifests(v, tc.adc)
			if tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), clusterv1.ClusterImageRegistriesAnnotationKey) {
					t.Fatalf("err = %v, want an error naming the annotation", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := find[*appsv1.Deployment](objs)[0].Spec.Template.Spec.Containers[0].Image; got != tc.want {
				t.Errorf("image %s, want %s", got, tc.want)
			}
		})
	}
}

func TestAgentRedeployedWhenTheRegistriesAnnotationChanges(t *testing.T) {
	a, err := NewAgentAddon(Options{AddonName: "argocd-pull", Settings: Settings{AgentImage: "i:v1", WatchNamespaces: []string{"argocd"}}}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	filter := a.GetAgentAddonOptions().AgentDeployTriggerClusterFilter
	if filter == nil {
		t.Fatal("no AgentDeployTriggerClusterFilter: a new image-registries annotation would not reach the agent")
	}
	old := &clusterv1.ManagedCluster{}
	changed := &clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
		clusterv1.ClusterImageRegistriesAnnotationKey: `{"registries":[]}`}}}
	labelled := &clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"env": "prod"}}}
	if !filter(old, changed) || filter(old, labelled) {
		t.Errorf("filter(annotation added) = %v, filter(label added) = %v; want true, false", filter(old, changed), filter(old, labelled))
	}
}

func TestAgentManifestsAddOnDeploymentConfig(t *testing.T) {
	adc := &addonv1beta1.AddOnDeploymentConfig{
		ObjectMeta: metav1.ObjectMeta{Name: "cfg", Namespace: "c1"},
		Spec: addonv1beta1.AddOnDeploymentConfigSpec{
			NodePlacement: &addonv1beta1.NodePlacement{
				NodeSelector: map[string]string{"node-role.kubernetes.io/infra": ""},
				Tolerations:  []corev1.Toleration{{Key: "infra", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
			},
			Registries:  []addonv1beta1.ImageMirror{{Source: "quay.io/ocm-gitops", Mirror: "mirror.example.com/gitops"}},
			ProxyConfig: addonv1beta1.ProxyConfig{HTTPSProxy: "https://proxy:3128", NoProxy: "10.0.0.0/8"},
			ResourceRequirements: []addonv1beta1.ContainerResourceRequirements{
				{ContainerID: "deployments:other:*", Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}}},
				{ContainerID: "*:argocd-pull-agent:agent", Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}}},
			},
		},
	}
	objs, err := renderAgentManifests(values(DefaultInstallNamespace), adc)
	if err != nil {
		t.Fatal(err)
	}
	pod := find[*appsv1.Deployment](objs)[0].Spec.Template.Spec
	c := pod.Containers[0]
	if c.Image != "mirror.example.com/gitops/argocd-pull-addon:v1" {
		t.Errorf("image = %s, want the mirror", c.Image)
	}
	if pod.NodeSelector["node-role.kubernetes.io/infra"] != "" || len(pod.Tolerations) != 1 {
		t.Errorf("node placement not applied: %v %v", pod.NodeSelector, pod.Tolerations)
	}
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	if env["HTTPS_PROXY"] != "https://proxy:3128" || env["NO_PROXY"] != "10.0.0.0/8" || env["HTTP_PROXY"] != "" {
		t.Errorf("proxy env = %v", env)
	}
	if got := c.Resources.Limits.Memory().String(); got != "64Mi" {
		t.Errorf("memory limit = %s, want the matching entry's 64Mi", got)
	}

	adc.Spec.ResourceRequirements = []addonv1beta1.ContainerResourceRequirements{{ContainerID: "not-three-parts"}}
	if _, err := renderAgentManifests(values(DefaultInstallNamespace), adc); err == nil {
		t.Error("a malformed containerID rendered without error")
	}
}

func TestInstallNamespace(t *testing.T) {
	withAnnotation := &addonv1beta1.ManagedClusterAddOn{ObjectMeta: metav1.ObjectMeta{
		Annotations: map[string]string{addonv1beta1.InstallNamespaceAnnotation: "from-clusteradm"}}}
	adc := &addonv1beta1.AddOnDeploymentConfig{Spec: addonv1beta1.AddOnDeploymentConfigSpec{AgentInstallNamespace: "from-adc"}}
	for _, tc := range []struct {
		name  string
		addon *addonv1beta1.ManagedClusterAddOn
		adc   *addonv1beta1.AddOnDeploymentConfig
		want  string
	}{
		{"default", &addonv1beta1.ManagedClusterAddOn{}, nil, DefaultInstallNamespace},
		{"v1alpha1 installNamespace", withAnnotation, nil, "from-clusteradm"},
		{"AddOnDeploymentConfig wins", withAnnotation, adc, "from-adc"},
	} {
		if got := installNamespace(tc.addon, tc.adc); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestHubRoleIsLimitedToTheAddon(t *testing.T) {
	role := HubRole("argocd-pull")
	for _, rule := range role.Rules {
		if slices.Contains(rule.Resources, "events") {
			if slices.ContainsFunc(rule.Verbs, func(v string) bool { return v != "create" && v != "patch" }) {
				t.Errorf("events verbs %v", rule.Verbs)
			}
			continue
		}
		if slices.Contains(rule.Resources, "applicationstatusslices") {
			// Bounded by the namespace of the binding (create takes no resourceNames);
			// TestAgentHubIdentityIsConfinedToItsOwnAddon proves it by impersonation.
			if !slices.Equal(rule.Resources, []string{"applicationstatusslices"}) ||
				!slices.Equal(rule.APIGroups, []string{"argocd-pull.open-cluster-management.io"}) {
				t.Errorf("the slices rule grants more: %v", rule)
			}
			continue
		}
		if slices.Contains(rule.Resources, "agents/proxy") {
			// The resource proxy's tunnel: bounded by the namespace of the binding (the
			// server matches the name to it); TestAgentHubIdentityIsConfinedToItsOwnAddon
			// proves it by impersonation.
			if !slices.Equal(rule.Resources, []string{"agents/proxy"}) || !slices.Equal(rule.Verbs, []string{"get", "create"}) ||
				!slices.Equal(rule.APIGroups, []string{"proxy.argocd-pull.open-cluster-management.io"}) {
				t.Errorf("the resource proxy rule grants more: %v", rule)
			}
			continue
		}
		if !slices.Equal(rule.ResourceNames, []string{"argocd-pull"}) {
			t.Errorf("rule %v is not limited to the addon's own ManagedClusterAddOn", rule)
		}
		if slices.Contains(rule.Resources, "managedclusteraddons/status") && !slices.Equal(rule.Verbs, []string{"patch"}) {
			t.Errorf("status verbs %v, want patch only", rule.Verbs)
		}
	}
}

// TestMirrorImage: the registries' rewrites, as the framework's own addons get them.
func TestMirrorImage(t *testing.T) {
	const image = "quay.io/ocm-gitops/argocd-pull-addon:v1"
	for _, tc := range []struct {
		name       string
		registries []addonv1beta1.ImageMirror
		want       string
	}{
		{name: "none", want: image},
		{name: "source prefix", registries: []addonv1beta1.ImageMirror{{Source: "quay.io/ocm-gitops/", Mirror: "m.local/gitops/"}},
			want: "m.local/gitops/argocd-pull-addon:v1"},
		{name: "no source: every registry", registries: []addonv1beta1.ImageMirror{{Mirror: "m.local/all"}},
			want: "m.local/all/argocd-pull-addon:v1"},
		{name: "neither: the last segment", registries: []addonv1beta1.ImageMirror{{}}, want: "argocd-pull-addon:v1"},
		{name: "other source", registries: []addonv1beta1.ImageMirror{{Source: "registry.redhat.io", Mirror: "m.local"}}, want: image},
		{name: "the last match wins", registries: []addonv1beta1.ImageMirror{
			{Source: "quay.io", Mirror: "first.local"}, {Source: "quay.io/ocm-gitops", Mirror: "second.local"}, {Source: "docker.io", Mirror: "third.local"}},
			want: "second.local/argocd-pull-addon:v1"},
	} {
		if got := mirrorImage(tc.registries, image); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

// TestContainerIDMatches: "*" matches any part, any other part only itself, and a
// containerID not of three parts is an error.
func TestContainerIDMatches(t *testing.T) {
	const id = "deployments:argocd-pull-agent:agent"
	for _, tc := range []struct {
		containerID string
		want        bool
		wantErr     bool
	}{
		{containerID: id, want: true},
		{containerID: "*:*:*", want: true},
		{containerID: "deployments:*:agent", want: true},
		{containerID: "deployments:argocd-pull-agent:other"},
		{containerID: "daemonsets:*:*"},
		{containerID: "deployments:argocd.pull.agent:agent"},
		{containerID: "deployments:agent", wantErr: true},
		{containerID: "a:b:c:d", wantErr: true},
	} {
		got, err := containerIDMatches(tc.containerID, id)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("containerIDMatches(%q) = %v, %v; want %v, error %v", tc.containerID, got, err, tc.want, tc.wantErr)
		}
	}
}
