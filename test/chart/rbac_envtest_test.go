package chart

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	addonv1beta1 "open-cluster-management.io/api/addon/v1beta1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/ocm-gitops/argocd-pull-addon/pkg/apis/apps/v1alpha1"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/test/fleet"
	"github.com/ocm-gitops/argocd-pull-addon/test/testenv"
)

// The manager's identity, as the chart's ServiceAccount presents it to the apiserver.
var (
	managerUser   = "system:serviceaccount:" + namespace + ":" + managerName
	managerGroups = []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"}
)

// TestRBACAgainstAPIServer installs the chart's rendered objects on a real apiserver and
// checks, as the manager's ServiceAccount, that every permission the manager needs is
// granted and that a set of doors stays closed; then it runs the real manager with
// exactly that identity and checks that it works without a forbidden error.
func TestRBACAgainstAPIServer(t *testing.T) {
	paths(t) // skips without bin/helm
	objs := render(t, "createNamespace=true")
	env, kube := installChart(t, objs)

	t.Run("every needed permission is granted", func(t *testing.T) {
		for _, p := range needed {
			if allowed, reason := access(t, kube, p); !allowed {
				t.Errorf("the manager needs %s (%s), but it is refused: %s", p, p.why, reason)
			}
		}
	})

	t.Run("the rest is refused", func(t *testing.T) {
		refused := concat(
			perms(cluster, "", "secrets", "", "", "get", "list", "watch"),
			perms("default", "", "secrets", "", "", "get", "list", "create"),
			perms("cluster1", "", "secrets", "", "", "get", "list", "create", "delete"),
			perms("kube-system", "", "secrets", "", "", "get", "list"),
			perms(argocdScope, "", "configmaps", "", "", "get", "list"),
			// No Secret of the Argo CD namespace by name but the Redis password's.
			perms(argocdScope, "", "secrets", "", "", "get", "update", "deletecollection"),
			perms(argocdScope, "", "secrets", "argocd-secret", "", "get"),
			perms(cluster, "", "pods", "", "", "create"),
			perms(cluster, "apps", "deployments", "", "", "create", "update"),
			perms(releaseScope, "apps", "deployments", managerName, "", "update", "patch"),
			perms(releaseScope, "apps", "deployments/scale", "someone-else", "", "update"),
			perms(cluster, "", "serviceaccounts/token", "", "", "create"),
			perms(cluster, "", "users", "", "", "impersonate"),
			perms(cluster, "rbac.authorization.k8s.io", "clusterroles", "", "", "create", "update", "bind", "escalate"),
			perms(cluster, "rbac.authorization.k8s.io", "clusterrolebindings", "", "", "create"),
			perms(cluster, "rbac.authorization.k8s.io", "roles", "", "", "escalate", "bind", "delete"),
			perms(cluster, "certificates.k8s.io", "signers", "kubernetes.io/kubelet-serving", "", "approve"),
			perms(cluster, "certificates.k8s.io", "signers", apiClientSigner, "", "sign"),
			perms(cluster, "certificates.k8s.io", "certificatesigningrequests", "", "", "create", "delete"),
			perms(cluster, "certificates.k8s.io", "certificatesigningrequests/status", "", "", "update"),
			perms(cluster, "cluster.open-cluster-management.io", "managedclusters", "", "", "create", "update", "delete"),
			perms(cluster, "cluster.open-cluster-management.io", "managedclustersets", "", "", "create"),
			perms(cluster, "cluster.open-cluster-management.io", "managedclustersets/bind", "", "", "create"),
			perms(cluster, "cluster.open-cluster-management.io", "placements", "", "", "create", "update", "get"),
			perms(cluster, "work.open-cluster-management.io", "manifestworks", "", "", "deletecollection"),
			perms(cluster, "addon.open-cluster-management.io", "managedclusteraddons", "", "", "create", "delete"),
			perms("cluster1", "addon.open-cluster-management.io", "managedclusteraddons", "another-addon", "", "get", "update"),
			perms("cluster1", "addon.open-cluster-management.io", "managedclusteraddons/status", "another-addon", "", "patch"),
			perms(cluster, "addon.open-cluster-management.io", "clustermanagementaddons", "another-addon", "", "get", "patch"),
			perms("cluster1", "rbac.authorization.k8s.io", "roles", "another-role", "", "get", "update"),
			perms("cluster1", "rbac.authorization.k8s.io", "rolebindings", "another-binding", "", "get", "update"),
			perms("cluster1", "", "resourcequotas", "another-quota", "", "get", "update", "delete"),
			perms(cluster, "", "resourcequotas", "", "", "delete", "patch"),
			perms(cluster, "addon.open-cluster-management.io", "clustermanagementaddons", "", "", "create", "update", "delete"),
			perms(cluster, "addon.open-cluster-management.io", "addondeploymentconfigs", "", "", "create", "update"),
			perms(cluster, "argoproj.io", "applications", "", "", "create", "delete"),
			perms(cluster, "argoproj.io", "appprojects", "", "", "list", "get"),
			perms(argocdScope, "argoproj.io", "appprojects", "", "", "create", "update", "delete"),
			perms(cluster, "argoproj.io", "applicationsets", "", "", "create", "update", "delete"),
			perms(releaseScope, "coordination.k8s.io", "leases", "someone-elses-lease", "", "get", "update"),
			perms(cluster, "coordination.k8s.io", "leases", "", "", "create", "list"),
			perms(cluster, "apiextensions.k8s.io", "customresourcedefinitions", "", "", "create", "update"),
		)
		for _, p := range refused {
			if allowed, _ := access(t, kube, p); allowed {
				t.Errorf("the manager must not %s", p)
			}
		}
	})

	t.Run("the manager runs with it", func(t *testing.T) {
		runManager(t, env, objs, true)
	})
}

// TestRBACWithoutClusterSecrets installs the chart with manager.clusterSecrets=false and
// checks, with requests impersonating the manager's ServiceAccount, that the manager may
// read the hub Argo CD's Redis password Secret by name and no other Secret of the Argo CD
// namespace (argocd-secret: not get, list, watch, patch nor delete); then it runs the
// real manager with that identity: it propagates, makes no cluster Secret, and is refused
// nothing; its uninstall leaves the cluster Secrets alone.
func TestRBACWithoutClusterSecrets(t *testing.T) {
	paths(t) // skips without bin/helm
	objs := render(t, "createNamespace=true", "manager.clusterSecrets=false")
	env, kube := installChart(t, objs)
	ctx := context.Background()
	for _, name := range []string{redisPasswordSecret, "argocd-secret"} {
		_, err := kube.CoreV1().Secrets(argocdNS).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name},
			Data: map[string][]byte{"auth": []byte("s3cret")}}, metav1.CreateOptions{})
		must(t, err)
	}

	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: managerUser, Groups: managerGroups}
	secrets := kubernetes.NewForConfigOrDie(cfg).CoreV1().Secrets(argocdNS)
	eventually(t, "the manager reads the Redis password Secret by name", func() bool {
		secret, err := secrets.Get(ctx, redisPasswordSecret, metav1.GetOptions{})
		return err == nil && string(secret.Data["auth"]) == "s3cret"
	})
	forbidden := func(what string, err error) {
		t.Helper()
		if !apierrors.IsForbidden(err) {
			t.Errorf("the manager may %s: %v, want forbidden", what, err)
		}
	}
	_, err := secrets.Get(ctx, "argocd-secret", metav1.GetOptions{})
	forbidden("get argocd-secret", err)
	_, err = secrets.List(ctx, metav1.ListOptions{})
	forbidden("list the Secrets of the Argo CD namespace", err)
	_, err = secrets.List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=argocd-secret"})
	forbidden("list argocd-secret by name", err)
	_, err = secrets.Watch(ctx, metav1.ListOptions{})
	forbidden("watch the Secrets of the Argo CD namespace", err)
	_, err = secrets.Patch(ctx, "argocd-secret", types.MergePatchType, []byte(`{}`), metav1.PatchOptions{})
	forbidden("patch argocd-secret (whose answer is the Secret)", err)
	forbidden("delete argocd-secret", secrets.Delete(ctx, "argocd-secret", metav1.DeleteOptions{}))
	_, err = secrets.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "made-up"}}, metav1.CreateOptions{})
	forbidden("create a Secret", err)

	runManager(t, env, objs, false)
}

// concat concatenates permission lists.
func concat(lists ...[]permission) []permission {
	var out []permission
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

// access asks the apiserver whether the manager's ServiceAccount may do p.
func access(t *testing.T, kube kubernetes.Interface, p permission) (bool, string) {
	t.Helper()
	attrs := &authorizationv1.ResourceAttributes{Group: p.group, Verb: p.verb, Name: p.named}
	attrs.Resource, attrs.Subresource, _ = strings.Cut(p.resource, "/")
	switch p.scope {
	case cluster:
		// Namespaced resources: every namespace, as an informer lists them.
	case argocdScope:
		attrs.Namespace = argocdNS
	case releaseScope:
		attrs.Namespace = namespace
	default:
		attrs.Namespace = string(p.scope)
	}
	review, err := kube.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{User: managerUser, Groups: managerGroups, ResourceAttributes: attrs},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("SubjectAccessReview for %s: %v", p, err)
	}
	return review.Status.Allowed, review.Status.Reason
}

// runManager builds cmd/manager and runs it as the chart's ServiceAccount (kubeconfig
// impersonation) against env, then checks that a pulled Application becomes a
// ManifestWork, that the cluster Secret (with clusterSecrets, else none) and the agent's
// hub Role appear, and that the log holds no forbidden error.
func runManager(t *testing.T, env *testenv.Env, objs []*unstructured.Unstructured, clusterSecrets bool) {
	root, _, _ := paths(t)
	dir := t.TempDir()
	manager := filepath.Join(dir, "manager")
	build := exec.Command("go", "build", "-o", manager, "./cmd/manager")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/manager: %v\n%s", err, out)
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["envtest"] = &clientcmdapi.Cluster{Server: env.Config.Host, CertificateAuthorityData: env.Config.CAData}
	cfg.AuthInfos["manager"] = &clientcmdapi.AuthInfo{
		ClientCertificateData: env.Config.CertData, ClientKeyData: env.Config.KeyData,
		Impersonate: managerUser, ImpersonateGroups: managerGroups,
	}
	cfg.Contexts["manager"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "manager"}
	cfg.CurrentContext = "manager"
	if err := clientcmd.WriteToFile(*cfg, kubeconfig); err != nil {
		t.Fatal(err)
	}

	ctx := context.Background()
	c := env.Client
	// What a real hub holds: a cluster that opted in (its ManagedClusterAddOn owned by the
	// ClusterManagementAddOn, as OCM's addon-manager creates it), a Placement that decides
	// the cluster for team-a, and a pulled Application of team-a.
	must(t, c.Create(ctx, &clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: "cluster1"},
		Spec: clusterv1.ManagedClusterSpec{HubAcceptsClient: true}}))
	cma := &addonv1beta1.ClusterManagementAddOn{}
	must(t, c.Get(ctx, types.NamespacedName{Name: addonName}, cma))
	must(t, c.Create(ctx, &addonv1beta1.ManagedClusterAddOn{ObjectMeta: metav1.ObjectMeta{
		Name: addonName, Namespace: "cluster1",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "addon.open-cluster-management.io/v1beta1",
			Kind: "ClusterManagementAddOn", Name: addonName, UID: cma.UID}},
	}}))
	// The hub Argo CD's default project lists team-a, so that its Applications may use it.
	must(t, c.Create(ctx, testenv.AppProject(argocdNS, argoapp.DefaultProject, "team-a")))
	_, err := testenv.CreatePlacementDecision(ctx, c, "team-a", "guestbook", 1, "cluster1")
	must(t, err)
	// The Application belongs to an ApplicationSet, so that the report controller writes
	// its MulticlusterApplicationSetReport under the chart's identity too.
	appSet := argoapp.NewApplicationSet()
	appSet.SetNamespace("team-a")
	appSet.SetName("guestbook")
	appSet.Object["spec"] = map[string]any{
		"generators": []any{map[string]any{"list": map[string]any{"elements": []any{}}}},
		"template": map[string]any{"metadata": map[string]any{}, "spec": map[string]any{
			"project": "default", "destination": map[string]any{"server": argoapp.InClusterServer, "namespace": "guestbook"},
		}},
	}
	must(t, c.Create(ctx, appSet))
	app := &unstructured.Unstructured{}
	app.SetGroupVersionKind(argoapp.ApplicationGVK)
	app.SetNamespace("team-a")
	app.SetName("guestbook")
	app.SetOwnerReferences([]metav1.OwnerReference{{
		APIVersion: argoapp.GroupVersion.String(), Kind: argoapp.KindApplicationSet,
		Name: appSet.GetName(), UID: appSet.GetUID(), Controller: ptr.To(true),
	}})
	app.SetLabels(map[string]string{argoapp.LabelPullToOCMManagedCluster: "true"})
	app.SetAnnotations(map[string]string{argoapp.AnnotationOCMManagedCluster: "cluster1", argoapp.AnnotationSkipReconcile: "true"})
	app.Object["spec"] = map[string]any{
		"project":     "default",
		"source":      map[string]any{"repoURL": "https://git.example.com/apps.git", "path": "guestbook", "targetRevision": "main"},
		"destination": map[string]any{"server": "https://kubernetes.default.svc", "namespace": "guestbook"},
	}
	must(t, c.Create(ctx, app))

	metricsPort, err := freePort()
	must(t, err)
	metricsAddr := "127.0.0.1:" + strconv.Itoa(metricsPort)
	var log bytes.Buffer
	cmd := exec.Command(manager, "--kubeconfig="+kubeconfig, "--leader-election-namespace="+namespace,
		"--metrics-bind-address="+metricsAddr, "--health-probe-bind-address=0", "--v=4")
	// The chart's own flags, but the manager runs outside a Pod.
	for _, arg := range managerArgs(t, objs) {
		if !strings.HasPrefix(arg, "--metrics-bind-address") && !strings.HasPrefix(arg, "--health-probe-bind-address") {
			cmd.Args = append(cmd.Args, arg)
		}
	}
	cmd.Stdout, cmd.Stderr = &log, &log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			t.Logf("manager log:\n%s", log.String())
		}
	})

	eventually(t, "a ManifestWork for the pulled Application in cluster1", func() bool {
		works := &workv1.ManifestWorkList{}
		return c.List(ctx, works, client.InNamespace("cluster1"), client.HasLabels{argoapp.LabelPullToOCMManagedCluster}) == nil && len(works.Items) == 1
	})
	clusterSecret := types.NamespacedName{Namespace: argocdNS, Name: "cluster1-" + addonName + "-cluster"}
	if clusterSecrets {
		eventually(t, "the Argo CD cluster Secret of cluster1", func() bool {
			return c.Get(ctx, clusterSecret, &corev1.Secret{}) == nil
		})
	}
	eventually(t, "the agent's hub Role and RoleBinding in cluster1 (granted by the manager)", func() bool {
		name := "open-cluster-management:" + addonName + ":agent"
		return c.Get(ctx, types.NamespacedName{Namespace: "cluster1", Name: name}, &rbacv1.Role{}) == nil &&
			c.Get(ctx, types.NamespacedName{Namespace: "cluster1", Name: name}, &rbacv1.RoleBinding{}) == nil
	})
	eventually(t, "the ApplicationSet's MulticlusterApplicationSetReport", func() bool {
		return c.Get(ctx, types.NamespacedName{Namespace: "team-a", Name: "guestbook"}, &appsv1alpha1.MulticlusterApplicationSetReport{}) == nil
	})
	eventually(t, "the leader election Lease", func() bool {
		_, err := kubernetes.NewForConfigOrDie(env.Config).CoordinationV1().Leases(namespace).Get(ctx, addonName+"-addon-manager", metav1.GetOptions{})
		return err == nil
	})
	scrapeMetrics(t, env, "https://"+metricsAddr+"/metrics")
	// Let the remaining controllers (the framework's deploy, config and CSR controllers)
	// sync once more before reading the log.
	time.Sleep(3 * time.Second)
	if !clusterSecrets {
		if err := c.Get(ctx, clusterSecret, &corev1.Secret{}); !apierrors.IsNotFound(err) {
			t.Errorf("the cluster Secret of cluster1 without manager.clusterSecrets: %v, want none", err)
		}
	}
	stop()
	uninstallAsManager(t, env, manager, kubeconfig, &log, clusterSecrets)
	if !strings.Contains(log.String(), "starting the hub addon-manager") {
		t.Errorf("the manager did not log its start")
	}
	forbidden := regexp.MustCompile(`(?i)forbidden|cannot (get|list|watch|create|update|patch|delete)`)
	for _, line := range strings.Split(log.String(), "\n") {
		if forbidden.MatchString(line) {
			t.Errorf("the manager was refused something: %s", line)
		}
	}
}

// managerArgs returns the args of the manager container of the rendered Deployment.
func managerArgs(t *testing.T, objs []*unstructured.Unstructured) []string {
	t.Helper()
	deploy := one(t, objs, "Deployment", namespace+"/"+managerName)
	containers, _, _ := unstructured.NestedSlice(deploy.Object, "spec", "template", "spec", "containers")
	args, _, _ := unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
	return args
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// scrapeMetrics proves that the chart serves the manager's metrics only to whom the hub
// apiserver authenticates and authorizes: no token is refused (401), a service account
// without the chart's metrics-reader ClusterRole too (403), one bound to it reads them.
func scrapeMetrics(t *testing.T, env *testenv.Env, url string) {
	t.Helper()
	ctx := context.Background()
	kube := kubernetes.NewForConfigOrDie(env.Config)
	token := func(name string) string {
		_, err := kube.CoreV1().ServiceAccounts("other").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		must(t, client.IgnoreAlreadyExists(err))
		tr, err := kube.CoreV1().ServiceAccounts("other").CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		must(t, err)
		return tr.Status.Token
	}
	_, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "prometheus"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: managerName + "-metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "other", Name: "prometheus"}},
	}, metav1.CreateOptions{})
	must(t, err)
	// The server's certificate is self-signed, as controller-runtime makes it.
	httpClient := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the test reads the manager's self-signed metrics endpoint
	get := func(token string) (int, string) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		must(t, err)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := httpClient.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	denied, prometheus := token("denied"), token("prometheus")
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		code, body := get(prometheus)
		if code == http.StatusOK && strings.Contains(body, `controller_runtime_reconcile_total{controller="argocd-pull-propagation"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the metrics of the manager to the prometheus service account: %d %.300s", code, body)
		}
	}
	if code, body := get(""); code != http.StatusUnauthorized {
		t.Errorf("metrics without a token: %d, want 401: %.200s", code, body)
	}
	if code, body := get(denied); code != http.StatusForbidden {
		t.Errorf("metrics to a service account without the metrics-reader ClusterRole: %d, want 403: %.200s", code, body)
	}
}

// uninstallAsManager runs the chart's uninstall hook command as the chart's manager
// identity, once the manager stopped: the manager's Deployment is scaled to zero, the
// works (none has a work agent's finalizer here) are deleted, and nothing is refused. With
// clusterSecrets the cluster Secret is deleted; without, a cluster Secret the manager
// made while they were on stays, since the manager may not touch it.
func uninstallAsManager(t *testing.T, env *testenv.Env, manager, kubeconfig string, managerLog *bytes.Buffer, clusterSecrets bool) {
	t.Helper()
	ctx := context.Background()
	c := env.Client
	wantSecrets := 0
	if !clusterSecrets {
		must(t, c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "earlier-" + addonName + "-cluster", Namespace: argocdNS,
			Labels: map[string]string{argoapp.LabelSecretType: argoapp.SecretTypeCluster, "app.kubernetes.io/managed-by": addonName}}}))
		wantSecrets = 1
	}
	cmd := exec.Command(manager, "uninstall", "--kubeconfig="+kubeconfig, "--mode=remove-apps", "--addon-name="+addonName,
		"--argocd-namespace="+argocdNS, "--cluster-secrets="+strconv.FormatBool(clusterSecrets), "--namespace="+namespace, "--deployment="+managerName,
		"--lease="+addonName+"-addon-manager", "--timeout=30s", "--v=4")
	out, err := cmd.CombinedOutput()
	managerLog.WriteString("--- manager uninstall\n")
	managerLog.Write(out)
	if err != nil {
		t.Fatalf("manager uninstall: %v", err)
	}
	works := &workv1.ManifestWorkList{}
	must(t, c.List(ctx, works, client.HasLabels{argoapp.LabelAddon}))
	if len(works.Items) != 0 {
		t.Errorf("works left after uninstall: %d", len(works.Items))
	}
	secrets := &corev1.SecretList{}
	must(t, c.List(ctx, secrets, client.InNamespace(argocdNS), client.MatchingLabels{argoapp.LabelSecretType: argoapp.SecretTypeCluster}))
	if len(secrets.Items) != wantSecrets {
		t.Errorf("cluster Secrets left after uninstall: %d, want %d", len(secrets.Items), wantSecrets)
	}
	scale, err := kubernetes.NewForConfigOrDie(env.Config).AppsV1().Deployments(namespace).GetScale(ctx, managerName, metav1.GetOptions{})
	must(t, err)
	if scale.Spec.Replicas != 0 {
		t.Errorf("the manager's replicas after uninstall: %d, want 0", scale.Spec.Replicas)
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// installChart starts an apiserver with the namespaces the RBAC tests use, and applies
// the rendered chart objs to it, CRDs served.
func installChart(t *testing.T, objs []*unstructured.Unstructured) (*testenv.Env, kubernetes.Interface) {
	t.Helper()
	env := testenv.Start(t)
	ctx := context.Background()
	kube := kubernetes.NewForConfigOrDie(env.Config)
	for _, ns := range []string{argocdNS, "cluster1", "team-a", "other"} {
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	applier, err := fleet.NewApplier(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	if err := applier.Apply(ctx, namespace, objs...); err != nil {
		t.Fatalf("apply the rendered chart: %v", err)
	}
	if err := applier.WaitForCRDs(ctx, objs...); err != nil {
		t.Fatal(err)
	}
	return env, kube
}
