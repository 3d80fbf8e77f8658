// Package chart tests the Helm chart charts/argocd-pull-addon and the plain manifests
// rendered from it: helm lint, helm template with default and other values, the values
// schema, and (in rbac_envtest_test.go) the manager's RBAC against a real apiserver.
//
// The tests run bin/helm, built from its module by `hack/tools/build.sh helm`; without it
// they skip.
package chart

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argocdcache"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/addon"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/resourcetree"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/uninstall"
	"github.com/ocm-gitops/argocd-pull-addon/test/fleet"
	"github.com/ocm-gitops/argocd-pull-addon/test/sim"
	"github.com/ocm-gitops/argocd-pull-addon/test/testenv"
)

const (
	release   = "argocd-pull-addon"
	namespace = "argocd-pull-addon"
	// managerName is the ServiceAccount, Deployment, ClusterRole and bindings of the
	// manager with the release name above.
	managerName = "argocd-pull-addon-manager"
	addonName   = "argocd-pull"
	argocdNS    = "argocd"
	crdName     = "multiclusterapplicationsetreports.apps.open-cluster-management.io"
)

// paths returns the repository root, bin/helm and the chart, or skips the test when
// bin/helm is missing.
func paths(t *testing.T) (root, helm, chart string) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs bin/helm: skipped in -short mode")
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	helm = filepath.Join(root, "bin", "helm")
	if _, err := os.Stat(helm); err != nil {
		t.Skipf("no helm at %s: build it with `hack/tools/build.sh helm`", helm)
	}
	return root, helm, filepath.Join(root, "charts", "argocd-pull-addon")
}

// runHelm runs bin/helm with args and returns its stdout, stderr and error.
func runHelm(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	_, helm, _ := paths(t)
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(helm, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

// render runs helm template with the --set values and returns the objects.
func render(t *testing.T, set ...string) []*unstructured.Unstructured {
	t.Helper()
	_, _, chart := paths(t)
	args := []string{"template", release, chart, "--namespace", namespace}
	args = append(args, setFlags(set)...)
	out, stderr, err := runHelm(t, args...)
	if err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, stderr)
	}
	objs, err := fleet.DecodeYAML([]byte(out))
	if err != nil {
		t.Fatalf("decode the rendered chart: %v", err)
	}
	return objs
}

// setFlags turns values into --set flags; a value prefixed "string:" becomes --set-string.
func setFlags(set []string) []string {
	var flags []string
	for _, s := range set {
		if v, ok := strings.CutPrefix(s, "string:"); ok {
			flags = append(flags, "--set-string", v)
		} else {
			flags = append(flags, "--set", s)
		}
	}
	return flags
}

// find returns the objects of kind, by "<namespace>/<name>".
func find(objs []*unstructured.Unstructured, kind string) map[string]*unstructured.Unstructured {
	found := map[string]*unstructured.Unstructured{}
	for _, obj := range objs {
		if obj.GetKind() == kind {
			found[obj.GetNamespace()+"/"+obj.GetName()] = obj
		}
	}
	return found
}

func one(t *testing.T, objs []*unstructured.Unstructured, kind, key string) *unstructured.Unstructured {
	t.Helper()
	obj, ok := find(objs, kind)[key]
	if !ok {
		t.Fatalf("no %s %s among the rendered objects", kind, key)
	}
	return obj
}

func convert[T any](t *testing.T, obj *unstructured.Unstructured) *T {
	t.Helper()
	out := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, out); err != nil {
		t.Fatalf("convert %s %s: %v", obj.GetKind(), obj.GetName(), err)
	}
	return out
}

func TestLint(t *testing.T) {
	_, _, chart := paths(t)
	for name, set := range map[string][]string{
		"defaults":   nil,
		"placements": {"installStrategy.type=Placements", "string:installStrategy.placement.labelSelector.matchLabels.argocd=true"},
		"no crd, no adc, namespaces": {"crds.install=false", "addOnDeploymentConfig.create=false",
			"manager.watchNamespaces={team-a,team-b}", "createNamespace=true"},
	} {
		t.Run(name, func(t *testing.T) {
			args := append([]string{"lint", "--strict", chart}, setFlags(set)...)
			out, stderr, err := runHelm(t, args...)
			if err != nil {
				t.Fatalf("helm lint: %v\n%s%s", err, out, stderr)
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	objs := render(t)
	var kinds []string
	for _, obj := range objs {
		kinds = append(kinds, obj.GetKind()+" "+obj.GetNamespace()+"/"+obj.GetName())
	}
	slices.Sort(kinds)
	want := []string{
		"AddOnDeploymentConfig " + namespace + "/" + addonName + "-default",
		"ClusterManagementAddOn /" + addonName,
		"ClusterRole /" + managerName,
		"ClusterRole /" + managerName + "-metrics-reader",
		"ClusterRoleBinding /" + managerName,
		"Job " + namespace + "/" + release + "-uninstall", // the pre-delete hook
		"ConfigMap " + argocdNS + "/ocm-placement-generator",
		"CustomResourceDefinition /" + crdName,
		"CustomResourceDefinition /applicationstatusslices.argocd-pull.open-cluster-management.io",
		"Deployment " + namespace + "/" + managerName,
		"Role " + argocdNS + "/" + managerName,
		"Role " + namespace + "/" + managerName + "-leader-election",
		"RoleBinding " + argocdNS + "/" + managerName,
		"RoleBinding " + namespace + "/" + managerName + "-leader-election",
		"Role " + argocdNS + "/argocd-pull-addon-placement-decisions-reader",
		"RoleBinding " + argocdNS + "/argocd-pull-addon-placement-decisions-reader",
		"Service " + namespace + "/" + managerName + "-metrics",
		"ServiceAccount " + namespace + "/" + managerName,
		"NetworkPolicy " + argocdNS + "/" + managerName + "-redis",
		// The resource proxy (docs/operations.md, "The resource proxy").
		"APIService /v1alpha1.proxy.argocd-pull.open-cluster-management.io",
		"Service " + namespace + "/" + addonName + "-resource-proxy",
		"ServiceAccount " + argocdNS + "/" + addonName + "-resource-proxy",
		"Secret " + argocdNS + "/" + addonName + "-resource-proxy-token",
		"ClusterRole /" + addonName + "-resource-proxy-client",
		"ClusterRoleBinding /" + addonName + "-resource-proxy-client",
		"ClusterRole /" + managerName + "-resource-proxy",
		"ClusterRoleBinding /" + managerName + "-resource-proxy",
		"Role " + argocdNS + "/" + managerName + "-resource-proxy",
		"RoleBinding " + argocdNS + "/" + managerName + "-resource-proxy",
		"RoleBinding kube-system/" + managerName + "-resource-proxy",
	}
	slices.Sort(want)
	if !slices.Equal(kinds, want) {
		t.Errorf("rendered objects:\n  %s\nwant:\n  %s", strings.Join(kinds, "\n  "), strings.Join(want, "\n  "))
	}
	// Names must not collide with the upstream argocd-pull-integration or with ACM.
	for _, obj := range objs {
		if strings.HasPrefix(obj.GetName(), "argocd-pull-integration") ||
			strings.HasPrefix(obj.GetName(), "multicluster-operators") ||
			strings.HasPrefix(obj.GetName(), "open-cluster-management") {
			t.Errorf("%s %s takes a name of another project", obj.GetKind(), obj.GetName())
		}
	}

	cma := one(t, objs, "ClusterManagementAddOn", "/"+addonName)
	if typ, _, _ := unstructured.NestedString(cma.Object, "spec", "installStrategy", "type"); typ != "Manual" {
		t.Errorf("install strategy %q, want Manual", typ)
	}
	configs, _, _ := unstructured.NestedSlice(cma.Object, "spec", "supportedConfigs")
	if len(configs) != 1 {
		t.Fatalf("supportedConfigs %v, want the AddOnDeploymentConfigs", configs)
	}
	defaultConfig, _, _ := unstructured.NestedStringMap(configs[0].(map[string]any), "defaultConfig")
	if defaultConfig["name"] != addonName+"-default" || defaultConfig["namespace"] != namespace {
		t.Errorf("default config %v, want %s/%s-default", defaultConfig, namespace, addonName)
	}

	crd := one(t, objs, "CustomResourceDefinition", "/"+crdName)
	if crd.GetAnnotations()["helm.sh/resource-policy"] != "keep" {
		t.Errorf("the CRD must survive helm uninstall: annotations %v", crd.GetAnnotations())
	}

	deploy := one(t, objs, "Deployment", namespace+"/"+managerName)
	containers, _, _ := unstructured.NestedSlice(deploy.Object, "spec", "template", "spec", "containers")
	container := containers[0].(map[string]any)
	// The tag is the chart's appVersion, the manager's default agent image.
	image := "quay.io/ocm-gitops/argocd-pull-addon:" + appVersion(t)
	if container["image"] != image || container["imagePullPolicy"] != "IfNotPresent" {
		t.Errorf("image %v, pull policy %v; want %s, IfNotPresent", container["image"], container["imagePullPolicy"], image)
	}
	if image != addon.DefaultAgentImage {
		t.Errorf("the chart's image %s is not the manager's default agent image %s", image, addon.DefaultAgentImage)
	}
	args, _, _ := unstructured.NestedStringSlice(container, "args")
	for _, arg := range []string{"--addon-name=argocd-pull", "--argocd-namespace=argocd", "--watch-namespaces=",
		"--require-placement-binding=true", "--concurrency=16", "--kube-api-qps=-1", "--kube-api-burst=2000", "--agent-image=" + image, "--agent-image-pull-policy=IfNotPresent",
		"--agent-watch-namespaces=argocd", "--leader-elect=true", "--leader-election-namespace=" + namespace, "--v=2",
		// A stock Argo CD install's Redis (hubArgoCDCache).
		"--argocd-redis=argocd-redis.argocd.svc:6379", "--argocd-redis-password-secret=argocd-redis", "--argocd-redis-password-key=auth",
		"--argocd-redis-use-tls=false", "--argocd-redis-compress=gzip", "--argocd-app-state-cache-expiration=1h"} {
		if !slices.Contains(args, arg) {
			t.Errorf("the manager's args %v lack %s", args, arg)
		}
	}
	if slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--agent-image-pull-secrets") }) {
		t.Errorf("the manager's args %v name agent pull secrets that nobody set", args)
	}
	// The manager's default, which lives in appsetreport.DefaultSettings only.
	if slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--report-budget-bytes") }) {
		t.Errorf("the manager's args %v set a report budget that nobody set", args)
	}
	if slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--max-status-slices-per-cluster") }) {
		t.Errorf("the manager's args %v set a slice quota that nobody set", args)
	}
	if sa, _, _ := unstructured.NestedString(deploy.Object, "spec", "template", "spec", "serviceAccountName"); sa != managerName {
		t.Errorf("service account %q", sa)
	}
	if nonRoot, _, _ := unstructured.NestedBool(deploy.Object, "spec", "template", "spec", "securityContext", "runAsNonRoot"); !nonRoot {
		t.Error("the manager must run as non-root")
	}
}

// TestManagerRuntimeEnvironment checks that the chart's manager runs with GOMEMLIMIT at
// its memory limit and the GOGC of values goGC, and that test/sim starts the manager of
// the benchmarks and the fault suite with the same environment.
func TestManagerRuntimeEnvironment(t *testing.T) {
	for _, tc := range []struct {
		set  []string
		want []string
	}{
		{nil, sim.ManagerEnv()},
		{[]string{"goGC=100", "resources.limits.memory=1Gi"}, []string{"GOMEMLIMIT=1073741824", "GOGC=100"}},
	} {
		deploy := convert[appsv1.Deployment](t, one(t, render(t, tc.set...), "Deployment", namespace+"/"+managerName))
		container := deploy.Spec.Template.Spec.Containers[0]
		var env []string
		for _, e := range container.Env {
			value, err := fleet.ContainerEnvValue(container, e)
			if err != nil {
				t.Fatal(err)
			}
			env = append(env, e.Name+"="+value)
		}
		if !slices.Equal(env, tc.want) {
			t.Errorf("with %v the manager's environment is %v, want %v", tc.set, env, tc.want)
		}
	}
}

func TestNonDefaultValues(t *testing.T) {
	objs := render(t,
		"image.repository=registry.example.com/gitops/pull", "image.tag=v1.2.3", "replicas=2",
		"manager.addonName=my-pull", "manager.argocdNamespace=openshift-gitops",
		"manager.watchNamespaces={team-a,team-b}", "manager.requirePlacementBinding=false",
		"manager.concurrency=8", "manager.logVerbosity=4", "manager.reportBudgetBytes=2097152", "manager.maxStatusSlicesPerCluster=300", "agent.watchNamespaces={openshift-gitops}",
		"agent.image=registry.example.com/gitops/agent:v9", "resources.limits.memory=1Gi",
		"addOnDeploymentConfig.create=false", "metrics.service=false", "resourceProxy.enabled=false",
		// OpenShift GitOps' Redis (docs/operations.md).
		"hubArgoCDCache.tls.enabled=true", "hubArgoCDCache.tls.caConfigMap.name=openshift-service-ca.crt",
		"hubArgoCDCache.tls.caConfigMap.key=service-ca.crt", "hubArgoCDCache.passwordSecret.name=openshift-gitops-redis-initial-password",
		"hubArgoCDCache.passwordSecret.key=admin.password", "hubArgoCDCache.redisAddress=openshift-gitops-redis.openshift-gitops.svc:6379",
		"hubArgoCDCache.networkPolicy.redisPodSelector.app\\.kubernetes\\.io/name=openshift-gitops-redis")
	deploy := one(t, objs, "Deployment", namespace+"/"+managerName)
	if replicas, _, _ := unstructured.NestedFieldNoCopy(deploy.Object, "spec", "replicas"); fmt.Sprint(replicas) != "2" {
		t.Errorf("replicas %v, want 2", replicas)
	}
	containers, _, _ := unstructured.NestedSlice(deploy.Object, "spec", "template", "spec", "containers")
	container := containers[0].(map[string]any)
	if container["image"] != "registry.example.com/gitops/pull:v1.2.3" {
		t.Errorf("image %v", container["image"])
	}
	if mem, _, _ := unstructured.NestedString(container, "resources", "limits", "memory"); mem != "1Gi" {
		t.Errorf("memory limit %q", mem)
	}
	args, _, _ := unstructured.NestedStringSlice(container, "args")
	for _, arg := range []string{"--addon-name=my-pull", "--argocd-namespace=openshift-gitops", "--watch-namespaces=team-a,team-b",
		"--require-placement-binding=false", "--concurrency=8", "--agent-image=registry.example.com/gitops/agent:v9",
		"--agent-watch-namespaces=openshift-gitops", "--v=4", "--report-budget-bytes=2097152", "--max-status-slices-per-cluster=300",
		"--argocd-redis=openshift-gitops-redis.openshift-gitops.svc:6379", "--argocd-redis-use-tls=true",
		"--argocd-redis-password-secret=openshift-gitops-redis-initial-password", "--argocd-redis-password-key=admin.password",
		"--argocd-redis-ca-certificate=/etc/argocd-pull/redis-ca/service-ca.crt"} {
		if !slices.Contains(args, arg) {
			t.Errorf("the manager's args %v lack %s", args, arg)
		}
	}
	one(t, objs, "ClusterManagementAddOn", "/my-pull")
	one(t, objs, "Role", "openshift-gitops/"+managerName)
	policy := one(t, objs, "NetworkPolicy", "openshift-gitops/"+managerName+"-redis")
	if redis, _, _ := unstructured.NestedStringMap(policy.Object, "spec", "podSelector", "matchLabels"); redis["app.kubernetes.io/name"] != "openshift-gitops-redis" {
		t.Errorf("the NetworkPolicy selects %v, want OpenShift GitOps' Redis", redis)
	}
	if volumes, _, _ := unstructured.NestedSlice(deploy.Object, "spec", "template", "spec", "volumes"); len(volumes) != 1 {
		t.Errorf("volumes %v, want the Redis CA ConfigMap", volumes)
	}
	lease := convert[rbacv1.Role](t, one(t, objs, "Role", namespace+"/"+managerName+"-leader-election"))
	if !slices.ContainsFunc(lease.Rules, func(r rbacv1.PolicyRule) bool {
		return slices.Equal(r.ResourceNames, []string{"my-pull-addon-manager"})
	}) {
		t.Errorf("the leader election Role does not name the manager's Lease my-pull-addon-manager: %+v", lease.Rules)
	}
	if len(find(objs, "AddOnDeploymentConfig")) != 0 || len(find(objs, "Service")) != 0 || len(find(objs, "APIService")) != 0 {
		t.Error("addOnDeploymentConfig.create=false, metrics.service=false and resourceProxy.enabled=false still render them")
	}
	cma := one(t, objs, "ClusterManagementAddOn", "/my-pull")
	configs, _, _ := unstructured.NestedSlice(cma.Object, "spec", "supportedConfigs")
	if _, ok := configs[0].(map[string]any)["defaultConfig"]; ok {
		t.Error("the CMA names a default config the chart does not create")
	}
}

// TestManagerArgsAreTheManagersFlags renders the chart with values that add each of the
// manager's optional args, and parses the args with the manager's own flags
// (hub.Options.AddFlags, klog's): each arg is a flag of the manager, and the options they
// give are valid.
func TestManagerArgsAreTheManagersFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  []string
		want func(o *hub.Options)
	}{
		{"defaults", nil, nil},
		{"every optional arg", []string{"manager.reportBudgetBytes=2097152", "manager.maxStatusSlicesPerCluster=0", "manager.clusterSecrets=false",
			"manager.watchNamespaces={team-a,team-b}", "manager.takeOverForeignWorks=true", "manager.optOutGracePeriod=10m",
			"agent.imagePullSecrets[0].name=pull-a", "agent.imagePullSecrets[1].name=pull-b", "agent.watchNamespaces={argocd,gitops}",
			"hubArgoCDCache.sentinels={sentinel-0:26379}", "hubArgoCDCache.db=2", "hubArgoCDCache.username=argocd-pull-manager"},
			func(o *hub.Options) {
				if o.AppSetReport.BudgetBytes != 2<<20 || o.Addon.MaxStatusSlicesPerCluster != 0 || o.ClusterSecret.Enabled ||
					!slices.Equal(o.WatchNamespaces, []string{"team-a", "team-b"}) || !o.Propagation.TakeOverForeignWorks ||
					o.Propagation.OptOutGracePeriod != 10*time.Minute || !slices.Equal(o.Addon.AgentImagePullSecrets, []string{"pull-a", "pull-b"}) ||
					!slices.Equal(o.Addon.WatchNamespaces, []string{"argocd", "gitops"}) ||
					!slices.Equal(o.ResourceTree.Redis.SentinelAddrs, []string{"sentinel-0:26379"}) || o.ResourceTree.Redis.DB != 2 ||
					o.ResourceTree.Redis.Username != "argocd-pull-manager" {
					t.Errorf("the values give the options %+v", o)
				}
			}},
		{"no resource trees", []string{"hubArgoCDCache.enabled=false"}, func(o *hub.Options) {
			if o.ResourceTree.Enabled() {
				t.Errorf("the resource trees are on: %+v", o.ResourceTree)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			deploy := convert[appsv1.Deployment](t, one(t, render(t, tc.set...), "Deployment", namespace+"/"+managerName))
			args := deploy.Spec.Template.Spec.Containers[0].Args
			opts := hub.DefaultOptions()
			fs := flag.NewFlagSet("manager", flag.ContinueOnError)
			parsed := opts.AddFlags(fs)
			klog.InitFlags(fs)
			if err := fs.Parse(args); err != nil {
				t.Fatalf("the manager's flags refuse its args %v: %v", args, err)
			}
			if fs.NArg() != 0 {
				t.Errorf("the manager's args %v leave %v that no flag takes", args, fs.Args())
			}
			parsed()
			if err := opts.Validate(); err != nil {
				t.Errorf("the manager's args %v give invalid options: %v", args, err)
			}
			if tc.want != nil {
				tc.want(&opts)
			}
		})
	}
}

// TestUninstallArgsAreTheUninstallFlags parses the args of the chart's pre-delete hook
// with the flags of `manager uninstall` (uninstall.Options.AddFlags, klog's): each arg
// is one of its flags, and they name the manager's Deployment and Lease.
func TestUninstallArgsAreTheUninstallFlags(t *testing.T) {
	job := convert[batchv1.Job](t, one(t, render(t, "manager.clusterSecrets=false"), "Job", namespace+"/"+release+"-uninstall"))
	args := job.Spec.Template.Spec.Containers[0].Args
	if len(args) == 0 || args[0] != "uninstall" {
		t.Fatalf("the hook's args %v do not start with uninstall", args)
	}
	opts := uninstall.Options{}
	fs := flag.NewFlagSet("uninstall", flag.ContinueOnError)
	opts.AddFlags(fs)
	klog.InitFlags(fs)
	if err := fs.Parse(args[1:]); err != nil {
		t.Fatalf("the uninstall flags refuse the hook's args %v: %v", args, err)
	}
	want := uninstall.Options{Mode: uninstall.LeaveRunning, AddonName: addonName, ArgoCDNamespace: argocdNS, ClusterSecrets: false,
		Namespace: namespace, Deployment: managerName, Lease: addonName + "-addon-manager", Timeout: opts.Timeout}
	if fs.NArg() != 0 || opts != want || opts.Timeout <= 0 {
		t.Errorf("the hook's args %v give %+v, want %+v and a timeout", args, opts, want)
	}
}

// TestHubArgoCDCacheValuesAreTheManagersRedisOptions renders the chart with values of
// hubArgoCDCache and parses the manager's args with the manager's own Redis flags
// (argocdcache.ClientOptions.AddFlags, from resourcetree.DefaultSettings): each value sets its
// option and nothing else, the options are valid, and the CA and client certificate
// files are in the volumes of the ConfigMap and the Secret that the values name.
func TestHubArgoCDCacheValuesAreTheManagersRedisOptions(t *testing.T) {
	defaults := resourcetree.DefaultSettings().Redis.ClientOptions
	for _, tc := range []struct {
		name string
		set  []string
		want func(o *argocdcache.ClientOptions)
		// volumes are the sources, "configMap <name>" or "secret <name>", of the files
		// the options name.
		volumes []string
	}{
		{"defaults", nil, func(o *argocdcache.ClientOptions) { o.Addr = "argocd-redis.argocd.svc:6379" }, nil},
		{"address, database, user", []string{"hubArgoCDCache.redisAddress=redis.example:6380", "hubArgoCDCache.db=3",
			"hubArgoCDCache.username=argocd-pull-manager", "hubArgoCDCache.passwordSecret.name=argocd-pull-redis", "hubArgoCDCache.passwordSecret.key=password"},
			func(o *argocdcache.ClientOptions) {
				o.Addr, o.DB, o.Username, o.PasswordSecret, o.PasswordKey = "redis.example:6380", 3, "argocd-pull-manager", "argocd-pull-redis", "password"
			}, nil},
		{"Sentinels", []string{"hubArgoCDCache.sentinels={argocd-redis-ha-announce-0:26379,argocd-redis-ha-announce-1:26379}",
			"hubArgoCDCache.sentinelMaster=argocd"},
			func(o *argocdcache.ClientOptions) {
				o.SentinelAddrs, o.SentinelMaster = []string{"argocd-redis-ha-announce-0:26379", "argocd-redis-ha-announce-1:26379"}, "argocd"
			}, nil},
		{"TLS with a CA and a client certificate", []string{"hubArgoCDCache.tls.enabled=true", "hubArgoCDCache.tls.caConfigMap.name=redis-ca",
			"hubArgoCDCache.tls.caConfigMap.key=ca.pem", "hubArgoCDCache.tls.clientCertSecret.name=argocd-pull-redis-client"},
			func(o *argocdcache.ClientOptions) {
				o.Addr = "argocd-redis.argocd.svc:6379"
				o.TLS = argocdcache.TLSOptions{Enabled: true, CAFile: "/etc/argocd-pull/redis-ca/ca.pem",
					ClientCertFile: "/etc/argocd-pull/redis-client/tls.crt", ClientKeyFile: "/etc/argocd-pull/redis-client/tls.key"}
			}, []string{"configMap redis-ca", "secret argocd-pull-redis-client", "secret argocd-pull-redis-client"}},
		{"TLS unverified", []string{"hubArgoCDCache.tls.enabled=true", "hubArgoCDCache.tls.insecureSkipVerify=true"},
			func(o *argocdcache.ClientOptions) {
				o.Addr, o.TLS = "argocd-redis.argocd.svc:6379", argocdcache.TLSOptions{Enabled: true, InsecureSkipVerify: true}
			}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			deploy := convert[appsv1.Deployment](t, one(t, render(t, tc.set...), "Deployment", namespace+"/"+managerName))
			want := defaults
			tc.want(&want)
			testenv.ExpectRedisOptions(t, "manager", deploy.Spec.Template.Spec, defaults, want, tc.volumes)
		})
	}
}

// appVersion reads the chart's appVersion.
func appVersion(t *testing.T) string {
	t.Helper()
	_, _, chart := paths(t)
	data, err := os.ReadFile(filepath.Join(chart, "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "appVersion:"); ok {
			v = strings.Trim(strings.TrimSpace(v), `"`)
			if v == "" || v == "latest" {
				t.Fatalf("appVersion %q: the default tag must be a version, not a moving tag", v)
			}
			return v
		}
	}
	t.Fatal("Chart.yaml has no appVersion")
	return ""
}

// TestImageReferences: a digest pins repository@digest (never "repo:@sha256:..."), for the
// manager and the agent; pull policy and the agent's pull secrets reach the manager's
// flags, and the manager's own pull secrets stay on the hub.
func TestImageReferences(t *testing.T) {
	digest := "sha256:" + strings.Repeat("0123456789abcdef", 4)
	imageOf := func(objs []*unstructured.Unstructured) (image, policy string, args []string, secrets []any) {
		deploy := one(t, objs, "Deployment", namespace+"/"+managerName)
		containers, _, _ := unstructured.NestedSlice(deploy.Object, "spec", "template", "spec", "containers")
		c := containers[0].(map[string]any)
		args, _, _ = unstructured.NestedStringSlice(c, "args")
		secrets, _, _ = unstructured.NestedSlice(deploy.Object, "spec", "template", "spec", "imagePullSecrets")
		return c["image"].(string), c["imagePullPolicy"].(string), args, secrets
	}
	flag := func(args []string, name string) string {
		for _, a := range args {
			if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
				return v
			}
		}
		return "<unset>"
	}

	image, _, args, _ := imageOf(render(t, "image.repository=registry.example.com:5000/gitops/pull", "image.tag=1.2.3",
		"image.digest="+digest))
	want := "registry.example.com:5000/gitops/pull@" + digest
	if image != want || flag(args, "agent-image") != want {
		t.Errorf("with a digest: image %s, agent image %s; want %s for both", image, flag(args, "agent-image"), want)
	}

	image, policy, args, secrets := imageOf(render(t, "image.repository=registry.example.com:5000/gitops/pull",
		"image.pullPolicy=Always", "imagePullSecrets[0].name=hub-creds",
		"agent.imagePullSecrets[0].name=open-cluster-management-image-pull-credentials", "agent.imagePullSecrets[1].name=mirror"))
	if want := "registry.example.com:5000/gitops/pull:" + appVersion(t); image != want || flag(args, "agent-image") != want {
		t.Errorf("without a tag: image %s, agent image %s; want %s", image, flag(args, "agent-image"), want)
	}
	if policy != "Always" || flag(args, "agent-image-pull-policy") != "Always" {
		t.Errorf("pull policy %s, agent's %s; want Always for both", policy, flag(args, "agent-image-pull-policy"))
	}
	if got := flag(args, "agent-image-pull-secrets"); got != "open-cluster-management-image-pull-credentials,mirror" {
		t.Errorf("--agent-image-pull-secrets=%s", got)
	}
	if fmt.Sprint(secrets) != "[map[name:hub-creds]]" {
		t.Errorf("the manager's imagePullSecrets %v, want hub-creds only", secrets)
	}
}

func TestPlacementsInstallStrategy(t *testing.T) {
	objs := render(t, "installStrategy.type=Placements", "installStrategy.placement.clusterSet=prod",
		"installStrategy.placement.namespace=gitops", "string:installStrategy.placement.labelSelector.matchLabels.argocd=true")
	cma := one(t, objs, "ClusterManagementAddOn", "/"+addonName)
	strategy, _, _ := unstructured.NestedMap(cma.Object, "spec", "installStrategy")
	placements, _ := strategy["placements"].([]any)
	if strategy["type"] != "Placements" || len(placements) != 1 {
		t.Fatalf("install strategy %v, want Placements with one placement", strategy)
	}
	ref := placements[0].(map[string]any)
	if ref["name"] != addonName || ref["namespace"] != "gitops" {
		t.Errorf("placement ref %v, want gitops/%s", ref, addonName)
	}
	if typ, _, _ := unstructured.NestedString(ref, "rolloutStrategy", "type"); typ != "All" {
		t.Errorf("rollout strategy %v", ref["rolloutStrategy"])
	}
	placement := one(t, objs, "Placement", "gitops/"+addonName)
	if sets, _, _ := unstructured.NestedStringSlice(placement.Object, "spec", "clusterSets"); !slices.Equal(sets, []string{"prod"}) {
		t.Errorf("placement cluster sets %v", sets)
	}
	predicates, _, _ := unstructured.NestedSlice(placement.Object, "spec", "predicates")
	if len(predicates) != 1 {
		t.Errorf("placement predicates %v, want the label selector", predicates)
	}
	binding := one(t, objs, "ManagedClusterSetBinding", "gitops/prod")
	if set, _, _ := unstructured.NestedString(binding.Object, "spec", "clusterSet"); set != "prod" {
		t.Errorf("binding cluster set %q", set)
	}

	// Manual renders neither.
	manual := render(t)
	if len(find(manual, "Placement")) != 0 || len(find(manual, "ManagedClusterSetBinding")) != 0 {
		t.Error("the Manual strategy renders a Placement or a ManagedClusterSetBinding")
	}
}

func TestCRDSkippedOnRequest(t *testing.T) {
	if crds := find(render(t, "crds.install=false"), "CustomResourceDefinition"); len(crds) != 0 {
		t.Errorf("crds.install=false still renders %v", crds)
	}
	crd := one(t, render(t, "crds.keep=false"), "CustomResourceDefinition", "/"+crdName)
	if _, ok := crd.GetAnnotations()["helm.sh/resource-policy"]; ok {
		t.Error("crds.keep=false still keeps the CRD")
	}
}

// TestCRDHasOneSource checks that the chart reads the CRD from manifests/crds, where it is
// generated, rather than from a copy.
func TestCRDHasOneSource(t *testing.T) {
	root, _, chart := paths(t)
	link := filepath.Join(chart, "files", "crds")
	target, err := os.Readlink(link)
	if err != nil {
		t.Fatalf("%s must be a symbolic link to manifests/crds: %v", link, err)
	}
	resolved := filepath.Clean(filepath.Join(filepath.Dir(link), target))
	if resolved != filepath.Join(root, "manifests", "crds") {
		t.Errorf("%s points to %s, want manifests/crds", link, resolved)
	}
	source, err := os.ReadFile(filepath.Join(root, "manifests", "crds",
		"apps.open-cluster-management.io_multiclusterapplicationsetreports.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := fleet.DecodeYAML(source)
	if err != nil || len(want) != 1 {
		t.Fatalf("decode the generated CRD: %v (%d objects)", err, len(want))
	}
	got := one(t, render(t, "crds.keep=false"), "CustomResourceDefinition", "/"+crdName)
	wantSpec, _, _ := unstructured.NestedMap(want[0].Object, "spec")
	gotSpec, _, _ := unstructured.NestedMap(got.Object, "spec")
	if !equalJSON(t, wantSpec, gotSpec) {
		t.Error("the chart's CRD differs from manifests/crds")
	}
}

func TestSchemaRejectsBadValues(t *testing.T) {
	_, _, chart := paths(t)
	for _, tc := range []struct {
		set, message string
	}{
		{"replicas=-1", "at '/replicas': minimum: got -1, want 0"},
		{"installStrategy.type=Auto", "at '/installStrategy/type': value must be one of 'Manual', 'Placements'"},
		{"manager.concurrency=0", "at '/manager/concurrency': minimum: got 0, want 1"},
		{"goGC=5", "at '/goGC': minimum: got 5, want 10"},
		{"goGC=off", "at '/goGC'"},
		{"manager.reportBudgetBytes=1000", "at '/manager/reportBudgetBytes': minimum: got 1,000, want 65,536"},
		{"manager.reportBudgetBytes=1Mi", "at '/manager/reportBudgetBytes'"},
		{"manager.addonName=Argo_Pull", "at '/manager/addonName': 'Argo_Pull' does not match pattern"},
		{"manager.argocdNamespace=", "at '/manager/argocdNamespace'"},
		{"manager.watchNamespaces={team-a,team-a}", "at '/manager/watchNamespaces'"},
		{"agent.watchNamespaces=null", "at '/agent"},
		{"image.pullPolicy=Sometimes", "at '/image/pullPolicy': value must be one of"},
		{"image.pullPolicy=", "at '/image/pullPolicy': value must be one of"},
		{"image.tag=@sha256:" + strings.Repeat("a", 64), "at '/image/tag'"},
		{"image.digest=sha256:abc", "at '/image/digest'"},
		{"image.digest=" + strings.Repeat("a", 64), "at '/image/digest'"},
		{"agent.imagePullSecrets[0].name=Bad_Name", "at '/agent/imagePullSecrets/0/name'"},
		{"installStrategy.type=Placements,installStrategy.placement.clusterSet=", "at '/installStrategy/placement/clusterSet': minLength: got 0, want 1"},
		{"installStrategy.placement.rolloutStrategy.type=Fast", "at '/installStrategy/placement/rolloutStrategy/type'"},
		{"hubArgoCDCache.db=-1", "at '/hubArgoCDCache/db': minimum: got -1, want 0"},
		{"hubArgoCDCache.sentinels={argocd-redis-ha-announce-0}", "at '/hubArgoCDCache/sentinels/0'"},
		{"hubArgoCDCache.sentinelMaster=", "at '/hubArgoCDCache/sentinelMaster'"},
		{"hubArgoCDCache.username=two words", "at '/hubArgoCDCache/username'"},
		{"hubArgoCDCache.tls.clientCertSecret.name=Bad_Name", "at '/hubArgoCDCache/tls/clientCertSecret/name'"},
		{"replica=2", "additional properties 'replica' not allowed"},
	} {
		t.Run(tc.set, func(t *testing.T) {
			_, stderr, err := runHelm(t, "template", release, chart, "--namespace", namespace, "--set", tc.set)
			if err == nil {
				t.Fatalf("helm template --set %s succeeded; want the schema to reject it", tc.set)
			}
			if !strings.Contains(stderr, "values don't meet the specifications of the schema") || !strings.Contains(stderr, tc.message) {
				t.Errorf("helm template --set %s: %s\nwant a schema error with %q", tc.set, stderr, tc.message)
			}
		})
	}
}

// TestManifestsAreGenerated runs hack/verify-manifests.sh, and checks that the local fleet
// still finds one ClusterManagementAddOn, Manual, in manifests/clustermanagementaddon.yaml.
func TestManifestsAreGenerated(t *testing.T) {
	root, _, _ := paths(t)
	cmd := exec.Command(filepath.Join(root, "hack", "verify-manifests.sh"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("hack/verify-manifests.sh: %v\n%s", err, out)
	}
	data, err := os.ReadFile(filepath.Join(root, "manifests", "clustermanagementaddon.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := fleet.DecodeYAML(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 1 || objs[0].GetKind() != "ClusterManagementAddOn" || objs[0].GetName() != addonName {
		t.Fatalf("manifests/clustermanagementaddon.yaml holds %d objects, want the ClusterManagementAddOn %s", len(objs), addonName)
	}
	if typ, _, _ := unstructured.NestedString(objs[0].Object, "spec", "installStrategy", "type"); typ != "Manual" {
		t.Errorf("install strategy %q, want Manual", typ)
	}
}
