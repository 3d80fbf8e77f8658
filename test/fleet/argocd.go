package fleet

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/alicebob/miniredis/v2"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/ocm-gitops/argocd-pull-addon/test/loopback"
)

// ArgoCDNamespace is where Argo CD runs, on the hub and on every managed cluster.
const ArgoCDNamespace = "argocd"

// argoSetup is applied after Argo CD's core-install.yaml: the server secret key, the
// default project that argocd-server would create, and, on the hub, what the OCM
// integration guide adds so that the ApplicationSet controller can read PlacementDecisions.
const argoSetup = `
apiVersion: v1
kind: Secret
metadata:
  name: argocd-secret
  labels: {app.kubernetes.io/name: argocd-secret, app.kubernetes.io/part-of: argocd}
data:
  server.secretkey: %s
---
apiVersion: argoproj.io/v1alpha1
kind: AppProject
metadata:
  name: default
spec:
  sourceRepos: ['*']
  destinations: [{server: '*', namespace: '*'}]
  clusterResourceWhitelist: [{group: '*', kind: '*'}]
`

// argoHubSetup is applied on a hub without the addon: with it, the chart installs the
// same objects (applicationSet.placementGenerator), as a user's install does.
const argoHubSetup = `
apiVersion: v1
kind: ConfigMap
metadata:
  name: ocm-placement-generator
data:
  apiVersion: cluster.open-cluster-management.io/v1beta1
  kind: placementdecisions
  statusListKey: decisions
  matchKey: clusterName
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: ocm-placement-consumer
rules:
- apiGroups: [cluster.open-cluster-management.io]
  resources: [placementdecisions]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: ocm-placement-consumer:argocd-applicationset-controller
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: ocm-placement-consumer}
subjects:
- {kind: ServiceAccount, name: argocd-applicationset-controller, namespace: argocd}
`

// tokenTTL is how long the service-account tokens of the fleet's processes live.
const tokenTTL = 7 * 24 * time.Hour

// installArgoCD applies Argo CD's core install (CRDs, service accounts, RBAC, config) to
// the cluster, in the argocd namespace.
func installArgoCD(ctx context.Context, cp *ControlPlane, argoDir string, hub, addon bool) error {
	if err := ensureNamespaces(ctx, cp.Kube, ArgoCDNamespace); err != nil {
		return err
	}
	applier, err := NewApplier(cp.Config)
	if err != nil {
		return err
	}
	data, err := os.ReadFile(filepath.Join(argoDir, "manifests/core-install.yaml"))
	if err != nil {
		return err
	}
	all, err := DecodeYAML(data)
	if err != nil {
		return err
	}
	// The fleet runs Argo CD's components as processes: their Deployments and StatefulSet
	// are left out, so that no workload controller makes Pods of them as well.
	var objs []*unstructured.Unstructured
	for _, obj := range all {
		if kind := obj.GetKind(); kind != "Deployment" && kind != "StatefulSet" {
			objs = append(objs, obj)
		}
	}
	if err := applier.Apply(ctx, ArgoCDNamespace, objs...); err != nil {
		return err
	}
	if err := applier.WaitForCRDs(ctx, objs...); err != nil {
		return err
	}
	key := base64.StdEncoding.EncodeToString([]byte("fleet-" + cp.Name + "-secret-key"))
	if err := applier.ApplyYAML(ctx, ArgoCDNamespace, fmt.Appendf(nil, argoSetup, key)); err != nil {
		return err
	}
	if hub && !addon {
		return applier.ApplyYAML(ctx, ArgoCDNamespace, []byte(argoHubSetup))
	}
	return nil
}

// argoDataDir makes the directories an Argo CD process of cp keeps its data in.
func argoDataDir(cp *ControlPlane) (string, error) {
	dir := filepath.Join(cp.Dir, "argocd")
	for _, d := range []string{"tls", "ssh", "gpg", "tmp"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// argoEnv is the environment every Argo CD process gets: its data paths inside the run
// directory, and a temp dir of its own, since repo-servers check repositories out there.
func argoEnv(dir, kubeconfig, binaryName string) []string {
	return []string{
		"ARGOCD_BINARY_NAME=" + binaryName,
		"KUBECONFIG=" + kubeconfig,
		"ARGOCD_TLS_DATA_PATH=" + filepath.Join(dir, "tls"),
		"ARGOCD_SSH_DATA_PATH=" + filepath.Join(dir, "ssh"),
		"ARGOCD_GNUPGHOME=" + filepath.Join(dir, "gpg"),
		"ARGOCD_GPG_ENABLED=false",
		"TMPDIR=" + filepath.Join(dir, "tmp"),
		"HOME=" + dir,
	}
}

// startArgoCDSpoke runs the application-controller and the repo-server of a managed
// cluster, each as its own service account, with an embedded redis.
func startArgoCDSpoke(ctx context.Context, sup *supervisor, bin string, cp *ControlPlane) (*miniredis.Miniredis, error) {
	redis, err := miniredis.Run()
	if err != nil {
		return nil, fmt.Errorf("start redis for %s: %w", cp.Name, err)
	}
	// Resync quickly: no webhook tells the controller about new commits here.
	_, err = startArgoCDControllers(ctx, sup, bin, cp, redis.Addr(), "", "--app-resync=30")
	return redis, err
}

// startArgoCDControllers runs the repo-server and the application-controller of cp, each
// as its own service account, on the Redis at redisAddr (with redisPassword, as
// REDIS_PASSWORD, when set), and returns the repo-server's host:port. controllerArgs are
// added to the application-controller's.
func startArgoCDControllers(ctx context.Context, sup *supervisor, bin string, cp *ControlPlane, redisAddr, redisPassword string, controllerArgs ...string) (string, error) {
	dir, err := argoDataDir(cp)
	if err != nil {
		return "", err
	}
	controllerKC := filepath.Join(dir, "application-controller.kubeconfig")
	repoKC := filepath.Join(dir, "repo-server.kubeconfig")
	if err := cp.ServiceAccountKubeconfig(ctx, ArgoCDNamespace, "argocd-application-controller", controllerKC, tokenTTL); err != nil {
		return "", err
	}
	if err := cp.ServiceAccountKubeconfig(ctx, ArgoCDNamespace, "argocd-repo-server", repoKC, tokenTTL); err != nil {
		return "", err
	}
	ports, err := loopback.FreePorts(3)
	if err != nil {
		return "", err
	}
	var redisEnv []string
	if redisPassword != "" {
		redisEnv = []string{"REDIS_PASSWORD=" + redisPassword}
	}
	repoAddr := "127.0.0.1:" + strconv.Itoa(ports[0])
	if _, err := sup.start(processSpec{Name: cp.Name + "-argocd-repo-server", Path: filepath.Join(bin, "argocd"),
		Env: append(argoEnv(dir, repoKC, "argocd-repo-server"), redisEnv...),
		Args: []string{"--address=127.0.0.1", "--port=" + strconv.Itoa(ports[0]),
			"--metrics-address=127.0.0.1", "--metrics-port=" + strconv.Itoa(ports[1]),
			"--redis=" + redisAddr, "--disable-tls", "--loglevel=info"},
	}); err != nil {
		return "", err
	}
	// ARGOCD_FAKE_IN_CLUSTER makes https://kubernetes.default.svc mean $KUBECONFIG's
	// cluster, as it means the pod's own cluster in a real install.
	if _, err := sup.start(processSpec{Name: cp.Name + "-argocd-application-controller", Path: filepath.Join(bin, "argocd"),
		Env: append(append(argoEnv(dir, controllerKC, "argocd-application-controller"), "ARGOCD_FAKE_IN_CLUSTER=true"), redisEnv...),
		Args: append([]string{"--kubeconfig=" + controllerKC, "--namespace=" + ArgoCDNamespace,
			"--redis=" + redisAddr, "--repo-server=" + repoAddr, "--repo-server-plaintext",
			"--metrics-port=" + strconv.Itoa(ports[2]), "--loglevel=info"}, controllerArgs...),
	}); err != nil {
		return "", err
	}
	return repoAddr, nil
}

// startArgoCDHub runs the ApplicationSet controller on the hub, as its service account.
func startArgoCDHub(ctx context.Context, sup *supervisor, bin string, cp *ControlPlane) error {
	dir, err := argoDataDir(cp)
	if err != nil {
		return err
	}
	kc := filepath.Join(dir, "applicationset-controller.kubeconfig")
	if err := cp.ServiceAccountKubeconfig(ctx, ArgoCDNamespace, "argocd-applicationset-controller", kc, tokenTTL); err != nil {
		return err
	}
	ports, err := loopback.FreePorts(3)
	if err != nil {
		return err
	}
	_, err = sup.start(processSpec{Name: "hub-argocd-applicationset-controller", Path: filepath.Join(bin, "argocd"),
		Env: argoEnv(dir, kc, "argocd-applicationset-controller"),
		Args: []string{"--kubeconfig=" + kc, "--namespace=" + ArgoCDNamespace,
			"--metrics-addr=127.0.0.1:" + strconv.Itoa(ports[0]), "--probe-addr=127.0.0.1:" + strconv.Itoa(ports[1]),
			"--webhook-addr=127.0.0.1:" + strconv.Itoa(ports[2]), "--logformat=text",
			// RollingSync ApplicationSets (progressive syncs) work, as with the
			// ARGOCD_APPLICATIONSET_CONTROLLER_ENABLE_PROGRESSIVE_SYNCS of argocd-cmd-params-cm.
			"--enable-progressive-syncs"},
	})
	return err
}

// ArgoCDServerFile, in the run directory, holds the host:port of the hub's argocd-server.
const ArgoCDServerFile = "argocd-server"

// argoCDServerObjects are the objects of Argo CD's full install (install.yaml) that
// argocd-server runs as: its ServiceAccount and RBAC. core-install.yaml has no server.
var argoCDServerObjects = map[string]bool{"ServiceAccount": true, "Role": true, "RoleBinding": true, "ClusterRole": true, "ClusterRoleBinding": true}

// startArgoCDServer runs the hub's Redis, repo-server, application-controller and
// argocd-server, as a stock install does: the Redis password in the Secret argocd-redis
// (key auth), which each gets as REDIS_PASSWORD; each as its own service account, the
// server with the RBAC of Argo CD's install.yaml, its in-cluster the hub, plaintext on
// loopback (--insecure). The application-controller skips the pulled apps
// (skip-reconcile), and reconciles any other hub Application, as on a real hub. The server
// makes the admin password itself, in argocd-initial-admin-secret. It returns the Redis
// and the server's host:port.
func startArgoCDServer(ctx context.Context, sup *supervisor, bin string, cp *ControlPlane, argoDir string) (*miniredis.Miniredis, string, error) {
	applier, err := NewApplier(cp.Config)
	if err != nil {
		return nil, "", err
	}
	data, err := os.ReadFile(filepath.Join(argoDir, "manifests/install.yaml"))
	if err != nil {
		return nil, "", err
	}
	all, err := DecodeYAML(data)
	if err != nil {
		return nil, "", err
	}
	var objs []*unstructured.Unstructured
	for _, obj := range all {
		if argoCDServerObjects[obj.GetKind()] && obj.GetName() == "argocd-server" {
			objs = append(objs, obj)
		}
	}
	if len(objs) != len(argoCDServerObjects) {
		return nil, "", fmt.Errorf("install.yaml of Argo CD has %d of argocd-server's %d identity objects", len(objs), len(argoCDServerObjects))
	}
	if err := applier.Apply(ctx, ArgoCDNamespace, objs...); err != nil {
		return nil, "", err
	}
	password := "fleet-" + cp.Name + "-redis"
	if err := applier.ApplyYAML(ctx, ArgoCDNamespace, fmt.Appendf(nil, argoRedisSecret, base64.StdEncoding.EncodeToString([]byte(password)))); err != nil {
		return nil, "", err
	}
	redis, err := miniredis.Run()
	if err != nil {
		return nil, "", fmt.Errorf("start redis for %s: %w", cp.Name, err)
	}
	redis.RequireAuth(password)
	dir, err := argoDataDir(cp)
	if err != nil {
		return redis, "", err
	}
	kc := filepath.Join(dir, "server.kubeconfig")
	if err := cp.ServiceAccountKubeconfig(ctx, ArgoCDNamespace, "argocd-server", kc, tokenTTL); err != nil {
		return redis, "", err
	}
	repoServer, err := startArgoCDControllers(ctx, sup, bin, cp, redis.Addr(), password)
	if err != nil {
		return redis, "", err
	}
	ports, err := loopback.FreePorts(2)
	if err != nil {
		return redis, "", err
	}
	addr := "127.0.0.1:" + strconv.Itoa(ports[0])
	// ARGOCD_FAKE_IN_CLUSTER makes https://kubernetes.default.svc mean the hub, as
	// argocd-server's service account, as it does for an argocd-server in a Pod: the
	// resource endpoints of an in-cluster app act on the hub's objects.
	if _, err := sup.start(processSpec{Name: "hub-argocd-server", Path: filepath.Join(bin, "argocd"),
		Env: append(argoEnv(dir, kc, "argocd-server"), "REDIS_PASSWORD="+password, "ARGOCD_FAKE_IN_CLUSTER=true"),
		Args: []string{"--kubeconfig=" + kc, "--namespace=" + ArgoCDNamespace, "--insecure",
			"--address=127.0.0.1", "--port=" + strconv.Itoa(ports[0]), "--metrics-port=" + strconv.Itoa(ports[1]),
			"--redis=" + redis.Addr(), "--loglevel=info",
			// No Dex: the fleet logs in as admin.
			"--repo-server=" + repoServer, "--repo-server-plaintext", "--dex-server="},
	}); err != nil {
		return redis, "", err
	}
	if err := waitForHTTP(ctx, "http://"+addr+"/healthz", 2*time.Minute); err != nil {
		return redis, "", fmt.Errorf("argocd-server on %s: %w", addr, err)
	}
	return redis, addr, nil
}

// argoRedisSecret is the Secret that Argo CD's redis-secret-init Job makes in a stock
// install: Redis' password, which every component reads.
const argoRedisSecret = `
apiVersion: v1
kind: Secret
metadata:
  name: argocd-redis
  labels: {app.kubernetes.io/part-of: argocd}
data:
  auth: %s
`

// waitForHTTP waits until url answers 200.
func waitForHTTP(ctx context.Context, url string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no answer at %s: %w", url, errors.Join(ctx.Err(), err))
		case <-time.After(500 * time.Millisecond):
		}
	}
}
