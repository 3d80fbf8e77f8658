package fleet

import (
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"

	"github.com/ocm-gitops/argocd-pull-addon/test/loopback"
)

// Namespaces of the OCM hub, as the cluster-manager operator creates them.
const (
	hubNamespace          = "open-cluster-management-hub"
	bootstrapNamespace    = "open-cluster-management"
	bootstrapSA           = "cluster-bootstrap"
	bootstrapClusterRole  = "open-cluster-management:bootstrap"
	addonWebhookTemplated = "{{ .AddonAPIServiceCABundle }}"
)

// bootstrapRBAC is the ClusterRole that `clusteradm init` binds to the bootstrap identity
// (ocm deploy/cluster-manager/chart/cluster-manager/templates/bootstrap_cluster_role.yaml).
const bootstrapRBAC = `
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: open-cluster-management:bootstrap
rules:
- apiGroups: [""]
  resources: [configmaps]
  verbs: [get]
- apiGroups: [certificates.k8s.io]
  resources: [certificatesigningrequests]
  verbs: [create, get, list, watch]
- apiGroups: [cluster.open-cluster-management.io]
  resources: [managedclusters]
  verbs: [get, create, list, watch]
- apiGroups: [cluster.open-cluster-management.io]
  resources: [managedclustersets/join]
  verbs: [create]
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: cluster-bootstrap
  namespace: open-cluster-management
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: open-cluster-management:bootstrap:cluster-bootstrap
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: open-cluster-management:bootstrap
subjects:
- kind: ServiceAccount
  name: cluster-bootstrap
  namespace: open-cluster-management
`

// startOCMHub installs the OCM hub on cp as the cluster-manager operator would (CRDs,
// namespaces, bootstrap RBAC) and runs its controllers as processes: registration, work,
// placement, the addon manager and the addon conversion webhook.
func startOCMHub(ctx context.Context, sup *supervisor, bin string, cp *ControlPlane, ocmDir string) error {
	if err := ensureNamespaces(ctx, cp.Kube, hubNamespace, bootstrapNamespace); err != nil {
		return err
	}
	applier, err := NewApplier(cp.Config)
	if err != nil {
		return err
	}

	// The addon API is served as v1alpha1 (storage) and v1beta1; the webhook converts.
	// There is no Service here, so the CRDs point at the process on loopback.
	webhookDir := filepath.Join(cp.Dir, "addon-webhook")
	serving, err := cp.ca.issueServing("cluster-manager-addon-webhook")
	if err != nil {
		return err
	}
	if err := writeFiles(webhookDir, map[string][]byte{"tls.crt": serving.CertPEM, "tls.key": serving.KeyPEM}); err != nil {
		return err
	}
	ports, err := loopback.FreePorts(6)
	if err != nil {
		return err
	}
	webhookURL := fmt.Sprintf("https://127.0.0.1:%d/convert", ports[0])
	crds, err := hubCRDs(filepath.Join(ocmDir, "manifests/cluster-manager/hub/crds"), webhookURL, cp.ca.CertPEM)
	if err != nil {
		return err
	}
	if err := checkWebhookPortsFree(); err != nil {
		return err
	}
	kubeconfigs, err := installHubRBAC(ctx, applier, cp, ocmDir)
	if err != nil {
		return err
	}
	if _, err := sup.start(processSpec{Name: "hub-addon-webhook", Path: filepath.Join(bin, "addon"), Args: []string{
		"webhook-server", "--port=" + strconv.Itoa(ports[0]), "--certdir=" + webhookDir, "--kubeconfig=" + kubeconfigs["hub-addon-webhook"],
	}}); err != nil {
		return err
	}
	if err := applier.Apply(ctx, "", crds...); err != nil {
		return err
	}
	if err := applier.WaitForCRDs(ctx, crds...); err != nil {
		return err
	}
	if err := applier.ApplyYAML(ctx, "", []byte(bootstrapRBAC)); err != nil {
		return err
	}

	common := func(process string, port int) []string {
		return []string{"--kubeconfig=" + kubeconfigs[process], "--namespace=" + hubNamespace,
			"--disable-leader-election", "--listen=127.0.0.1:" + strconv.Itoa(port)}
	}
	for i, c := range []struct{ name, binary, sub string }{
		{"hub-registration", "registration", "controller"},
		{"hub-work", "work", "manager"},
		{"hub-placement", "placement", "controller"},
		{"hub-addon-manager", "addon", "manager"},
	} {
		if _, err := sup.start(processSpec{Name: c.name, Path: filepath.Join(bin, c.binary),
			Args: append([]string{c.sub}, common(c.name, ports[i+1])...)}); err != nil {
			return err
		}
	}
	return nil
}

// addonWebhookFixedPorts are the ports `addon webhook-server` always binds, on every
// address, for health and metrics: only one fleet can run on a host.
var addonWebhookFixedPorts = []string{":8000", ":8080"}

func checkWebhookPortsFree() error {
	for _, addr := range addonWebhookFixedPorts {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("port %s is taken (%w): the addon webhook needs it; is another fleet running? `make fleet-down` stops it", addr, err)
		}
		l.Close()
	}
	return nil
}

// hubCRDs reads the hub CRDs that ocm's cluster-manager operator installs, and renders the
// two templated addon CRDs with a conversion webhook at url, trusted through caPEM.
func hubCRDs(dir, url string, caPEM []byte) ([]*unstructured.Unstructured, error) {
	files, err := yamlFiles(dir)
	if err != nil {
		return nil, err
	}
	var crds []*unstructured.Unstructured
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		templated := strings.Contains(string(data), addonWebhookTemplated)
		if templated {
			// Make the template parse as YAML; the clientConfig is replaced below.
			data = []byte(strings.NewReplacer(addonWebhookTemplated, "placeholder",
				"{{ .ClusterManagerNamespace }}", hubNamespace).Replace(string(data)))
		}
		objs, err := DecodeYAML(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		for _, obj := range objs {
			if templated {
				if err := unstructured.SetNestedMap(obj.Object, map[string]any{
					"url": url, "caBundle": base64.StdEncoding.EncodeToString(caPEM),
				}, "spec", "conversion", "webhook", "clientConfig"); err != nil {
					return nil, err
				}
			}
			crds = append(crds, obj)
		}
	}
	return crds, nil
}

func ensureNamespaces(ctx context.Context, kube kubernetes.Interface, names ...string) error {
	for _, name := range names {
		_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create namespace %s: %w", name, err)
		}
	}
	return nil
}
