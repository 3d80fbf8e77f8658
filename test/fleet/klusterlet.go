package fleet

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	clusterclient "open-cluster-management.io/api/client/cluster/clientset/versioned"
	clusterv1 "open-cluster-management.io/api/cluster/v1"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/clusterreport"
	"github.com/ocm-gitops/argocd-pull-addon/test/loopback"
)

const (
	klusterletNamespace = "open-cluster-management-agent"
	// AddonNamespace is where the klusterlet installs addon agents by default.
	AddonNamespace = clusterreport.DefaultInstallNamespace
	// clusterNameLabel marks the CSRs and objects of one managed cluster on the hub.
	clusterNameLabel = "open-cluster-management.io/cluster-name"
	// clusterSetLabel puts a ManagedCluster in a ManagedClusterSet.
	clusterSetLabel   = "cluster.open-cluster-management.io/clusterset"
	defaultClusterSet = "default"
)

// joinCluster installs the klusterlet's CRDs and RBAC on the managed cluster, runs the
// klusterlet agent (registration and work in one process, "singleton" mode) as its service
// account with a bootstrap token for the hub, and accepts the cluster on the hub as
// `clusteradm accept` does.
func joinCluster(ctx context.Context, sup *supervisor, bin string, hub, spoke *ControlPlane, ocmDir string) error {
	applier, err := NewApplier(spoke.Config)
	if err != nil {
		return err
	}
	managed := filepath.Join(ocmDir, "manifests/klusterlet/managed")
	crdFiles := []string{
		filepath.Join(managed, "0000_01_work.open-cluster-management.io_appliedmanifestworks.crd.yaml"),
		filepath.Join(managed, "0000_02_clusters.open-cluster-management.io_clusterclaims.crd.yaml"),
		filepath.Join(managed, "clusterproperties.crd.yaml"),
	}
	if err := applier.ApplyFiles(ctx, "", crdFiles...); err != nil {
		return err
	}
	if err := ensureNamespaces(ctx, spoke.Kube, klusterletNamespace, AddonNamespace); err != nil {
		return err
	}
	// The klusterlet agent runs as the klusterlet operator runs it: as its service account,
	// with the RBAC of the operator's manifests, never as an admin of the cluster.
	agentKubeconfig := filepath.Join(spoke.Dir, "klusterlet-agent", "kubeconfig")
	if err := installKlusterletRBAC(ctx, applier, spoke, ocmDir); err != nil {
		return err
	}
	if err := spoke.ServiceAccountKubeconfig(ctx, klusterletNamespace, KlusterletServiceAccount, agentKubeconfig, tokenTTL); err != nil {
		return err
	}

	bootstrap, err := serviceAccountToken(ctx, hub, bootstrapNamespace, bootstrapSA, 24*time.Hour)
	if err != nil {
		return err
	}
	bootstrapKubeconfig := filepath.Join(spoke.Dir, "bootstrap-hub-kubeconfig", "kubeconfig")
	if err := writeKubeconfig(bootstrapKubeconfig, hub.URL, hub.ca.CertPEM, clientcmdapi.AuthInfo{Token: bootstrap}); err != nil {
		return err
	}
	hubKubeconfigDir := filepath.Join(spoke.Dir, "hub-kubeconfig")
	ports, err := loopback.FreePorts(1)
	if err != nil {
		return err
	}
	if _, err := sup.start(processSpec{Name: spoke.Name + "-klusterlet", Path: filepath.Join(bin, "registration-operator"), Args: []string{
		"agent", "--cluster-name=" + spoke.Name,
		"--bootstrap-kubeconfig=" + bootstrapKubeconfig,
		"--hub-kubeconfig-dir=" + hubKubeconfigDir,
		"--workload-source-config=" + filepath.Join(hubKubeconfigDir, "kubeconfig"),
		"--kubeconfig=" + agentKubeconfig, "--spoke-kubeconfig=" + agentKubeconfig,
		"--namespace=" + klusterletNamespace,
		"--disable-leader-election", "--listen=127.0.0.1:" + strconv.Itoa(ports[0]),
	}}); err != nil {
		return err
	}
	return acceptCluster(ctx, sup, hub, spoke.Name)
}

// acceptCluster approves the cluster's registration CSR and sets hubAcceptsClient, then
// waits until the ManagedCluster is Available. kube-controller-manager signs the CSR.
func acceptCluster(ctx context.Context, sup *supervisor, hub *ControlPlane, name string) error {
	clusters, err := clusterclient.NewForConfig(hub.Config)
	if err != nil {
		return err
	}
	var state string
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := sup.failed(); err != nil {
			return false, err
		}
		// As `clusteradm accept` does, act only once the agent created its ManagedCluster:
		// approving the CSR earlier ends the agent's bootstrap phase, which can cancel the
		// creation, and the agent never retries it.
		mc, err := clusters.ClusterV1().ManagedClusters().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			state = "waiting for the ManagedCluster to be created"
			return false, nil
		}
		csrs, err := hub.Kube.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{LabelSelector: clusterNameLabel + "=" + name})
		if err != nil {
			return false, nil
		}
		for i := range csrs.Items {
			if err := approveCSR(ctx, hub, &csrs.Items[i]); err != nil {
				state = err.Error()
				return false, nil
			}
		}
		if !mc.Spec.HubAcceptsClient || mc.Labels[clusterSetLabel] == "" {
			mc.Spec.HubAcceptsClient = true
			// The registration webhook's default, which does not run here: a new cluster
			// joins the "default" ManagedClusterSet.
			if mc.Labels[clusterSetLabel] == "" {
				metav1.SetMetaDataLabel(&mc.ObjectMeta, clusterSetLabel, defaultClusterSet)
			}
			if _, err := clusters.ClusterV1().ManagedClusters().Update(ctx, mc, metav1.UpdateOptions{}); err != nil {
				state = err.Error()
			}
			return false, nil
		}
		for _, c := range mc.Status.Conditions {
			if c.Type == clusterv1.ManagedClusterConditionAvailable && c.Status == metav1.ConditionTrue {
				return true, nil
			}
		}
		state = "waiting for the ManagedCluster to be Available"
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("join %s (%s): %w", name, state, err)
	}
	return nil
}

func approveCSR(ctx context.Context, hub *ControlPlane, csr *certificatesv1.CertificateSigningRequest) error {
	for _, c := range csr.Status.Conditions {
		if c.Type == certificatesv1.CertificateApproved || c.Type == certificatesv1.CertificateDenied {
			return nil
		}
	}
	csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue,
		Reason: "AutoApprovedByFleet", Message: "Approved by the local fleet, as clusteradm accept does",
	})
	_, err := hub.Kube.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, csr.Name, csr, metav1.UpdateOptions{})
	return err
}

// serviceAccountToken asks the apiserver for a token of the service account, as the kubelet
// does for a projected token volume.
func serviceAccountToken(ctx context.Context, cp *ControlPlane, namespace, name string, ttl time.Duration) (string, error) {
	seconds := int64(ttl.Seconds())
	tr, err := cp.Kube.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token for %s/%s on %s: %w", namespace, name, cp.Name, err)
	}
	return tr.Status.Token, nil
}

// ServiceAccountKubeconfig writes a kubeconfig for the service account, with a token valid
// for ttl: the credentials a Pod running as that account would have.
func (cp *ControlPlane) ServiceAccountKubeconfig(ctx context.Context, namespace, name, path string, ttl time.Duration) error {
	token, err := serviceAccountToken(ctx, cp, namespace, name, ttl)
	if err != nil {
		return err
	}
	return writeKubeconfig(path, cp.URL, cp.ca.CertPEM, clientcmdapi.AuthInfo{Token: token})
}
