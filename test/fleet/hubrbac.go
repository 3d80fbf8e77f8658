package fleet

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
)

// clusterManagerName is the name of the ClusterManager that `clusteradm init` creates.
const clusterManagerName = "cluster-manager"

// hubRBACFiles are the static RBAC files the cluster-manager operator of the pinned ocm
// module applies for a Default-mode hub (clustermanager_hub_reconcile.go:
// hubRbacResourceFiles, workControllerResourceFiles, hubAddOnManagerRbacResourceFiles).
var hubRBACFiles = []string{
	"registration/clusterrole.yaml",
	"registration/clusterrolebinding.yaml",
	"registration/serviceaccount.yaml",
	"registration/webhook-clusterrole.yaml",
	"registration/webhook-clusterrolebinding.yaml",
	"registration/webhook-serviceaccount.yaml",
	"work/webhook-clusterrole.yaml",
	"work/webhook-clusterrolebinding.yaml",
	"work/webhook-serviceaccount.yaml",
	"work/executor-admin-clusterrole.yaml",
	"placement/clusterrole.yaml",
	"placement/clusterrolebinding.yaml",
	"placement/serviceaccount.yaml",
	"addon-manager/webhook-serviceaccount.yaml",
	"work/clusterrole.yaml",
	"work/clusterrolebinding.yaml",
	"work/serviceaccount.yaml",
	"addon-manager/clusterrole.yaml",
	"addon-manager/clusterrolebinding.yaml",
	"addon-manager/work-executor-admin-clusterrolebinding.yaml",
	"addon-manager/serviceaccount.yaml",
}

// hubServiceAccounts are the identities of the hub's processes, as the operator's
// Deployments (manifests/cluster-manager/management) run them.
var hubServiceAccounts = map[string]string{
	"hub-registration":  "registration-controller-sa",
	"hub-work":          "work-controller-sa",
	"hub-placement":     "placement-controller-sa",
	"hub-addon-manager": "addon-manager-controller-sa",
	"hub-addon-webhook": "addon-webhook-sa",
}

// clusterManagerConfig holds what the operator's hub templates read for a Default-mode
// ClusterManager with no optional feature. A template that reads a field this struct
// lacks fails to render, naming the file.
type clusterManagerConfig struct {
	ClusterManagerName                string
	ClusterManagerNamespace           string
	Labels                            map[string]string
	ManagedClusterIdentityCreatorRole string
	ClusterImporterEnabled            bool
	ClusterProfileEnabled             bool
	GRPCAuthEnabled                   bool
}

// installHubRBAC gives the OCM hub controllers the service accounts and RBAC the
// cluster-manager operator gives them, and writes a kubeconfig of each identity: the
// controllers run as these, never as an admin of the hub.
func installHubRBAC(ctx context.Context, applier *Applier, cp *ControlPlane, ocmDir string) (map[string]string, error) {
	cfg := clusterManagerConfig{ClusterManagerName: clusterManagerName, ClusterManagerNamespace: hubNamespace}
	rendered, err := renderOperatorTemplates(filepath.Join(ocmDir, "manifests/cluster-manager/hub"), hubRBACFiles, cfg)
	if err != nil {
		return nil, err
	}
	objs, err := DecodeYAML(rendered)
	if err != nil {
		return nil, fmt.Errorf("OCM hub RBAC: %w", err)
	}
	for _, obj := range objs {
		// library-go's resourceapply, which the operator applies with, reads an annotation
		// key ending in "-" as "remove this annotation" (the registration service account
		// carries "eks.amazonaws.com/role-arn-" without an identity creator role).
		annotations := obj.GetAnnotations()
		for k := range annotations {
			if strings.HasSuffix(k, "-") {
				delete(annotations, k)
			}
		}
		obj.SetAnnotations(annotations)
	}
	if err := applier.Apply(ctx, hubNamespace, objs...); err != nil {
		return nil, fmt.Errorf("OCM hub RBAC: %w", err)
	}
	kubeconfigs := map[string]string{}
	for process, sa := range hubServiceAccounts {
		path := filepath.Join(cp.Dir, "ocm-hub", process+".kubeconfig")
		if err := cp.ServiceAccountKubeconfig(ctx, hubNamespace, sa, path, tokenTTL); err != nil {
			return nil, err
		}
		kubeconfigs[process] = path
	}
	return kubeconfigs, nil
}
