package fleet

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"text/template"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	// klusterletName is the name of the Klusterlet that `clusteradm join` creates.
	klusterletName = "klusterlet"
	// KlusterletServiceAccount is the identity of the klusterlet agent in singleton mode:
	// the operator names both the registration and the work service account
	// "<klusterlet>-work-sa" then (klusterletcontroller.serviceAccountName).
	KlusterletServiceAccount = klusterletName + "-work-sa"
	// AggregateToWorkLabel selects the ClusterRoles that the work agent's aggregate
	// ClusterRole collects: what it may apply beyond the admin ClusterRole.
	AggregateToWorkLabel = "open-cluster-management.io/aggregate-to-work"
)

// klusterletRBACFiles are the static files the klusterlet operator of the pinned ocm module
// applies for a Default-mode klusterlet: managedStaticResourceFiles
// (klusterlet_managed_reconcile.go) and the management files
// (klusterlet_management_recocile.go), the management cluster being the managed one.
var klusterletRBACFiles = []string{
	"managed/klusterlet-registration-serviceaccount.yaml",
	"managed/klusterlet-registration-clusterrole.yaml",
	"managed/klusterlet-registration-clusterrole-addon-management.yaml",
	"managed/klusterlet-registration-clusterrolebinding.yaml",
	"managed/klusterlet-registration-clusterrolebinding-addon-management.yaml",
	"managed/klusterlet-work-serviceaccount.yaml",
	"managed/klusterlet-work-clusterrole.yaml",
	"managed/klusterlet-work-clusterrole-execution.yaml",
	"managed/klusterlet-work-clusterrolebinding.yaml",
	"managed/klusterlet-work-clusterrolebinding-aggregate.yaml",
	"managed/klusterlet-work-clusterrolebinding-execution-admin.yaml",
	"management/klusterlet-role-extension-apiserver.yaml",
	"management/klusterlet-registration-role.yaml",
	"management/klusterlet-registration-rolebinding.yaml",
	"management/klusterlet-registration-rolebinding-extension-apiserver.yaml",
	"management/klusterlet-registration-clusterrole-addon-management.yaml",
	"management/klusterlet-registration-clusterrolebinding-addon-management.yaml",
	"management/klusterlet-work-role.yaml",
	"management/klusterlet-work-rolebinding.yaml",
	"management/klusterlet-work-rolebinding-extension-apiserver.yaml",
}

// klusterletConfig holds what the operator's templates read for a Default-mode singleton
// klusterlet. A template that reads a field this struct lacks fails to render, so a newer
// ocm module that changes the templates stops the fleet with the file's name.
type klusterletConfig struct {
	KlusterletName             string
	KlusterletNamespace        string
	AgentNamespace             string
	RegistrationServiceAccount string
	WorkServiceAccount         string
	Labels                     map[string]string
	ManagedClusterRoleArn      string
	RegistrationDriver         struct{ AuthType string }
}

// installKlusterletRBAC gives the klusterlet agent the service account and RBAC the
// klusterlet operator gives it: the operator's templates rendered and applied, plus the
// aggregate ClusterRole the operator creates in code (createAggregationRule). The work
// agent so applies with the admin ClusterRole and what ClusterRoles labelled
// AggregateToWorkLabel add, as on a stock OCM spoke; admin does not cover Argo CD's kinds.
func installKlusterletRBAC(ctx context.Context, applier *Applier, spoke *ControlPlane, ocmDir string) error {
	cfg := klusterletConfig{
		KlusterletName:             klusterletName,
		KlusterletNamespace:        klusterletNamespace,
		AgentNamespace:             klusterletNamespace,
		RegistrationServiceAccount: KlusterletServiceAccount,
		WorkServiceAccount:         KlusterletServiceAccount,
	}
	rendered, err := renderOperatorTemplates(filepath.Join(ocmDir, "manifests/klusterlet"), klusterletRBACFiles, cfg)
	if err != nil {
		return err
	}
	if err := applier.ApplyYAML(ctx, klusterletNamespace, rendered); err != nil {
		return fmt.Errorf("klusterlet RBAC on %s: %w", spoke.Name, err)
	}
	aggregate := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("open-cluster-management:%s-work:aggregate", klusterletName)},
		AggregationRule: &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{
			{MatchLabels: map[string]string{AggregateToWorkLabel: "true"}},
		}},
	}
	_, err = spoke.Kube.RbacV1().ClusterRoles().Create(ctx, aggregate, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("klusterlet aggregate ClusterRole on %s: %w", spoke.Name, err)
	}
	return nil
}

// renderOperatorTemplates renders the OCM operator's manifest templates files (paths
// under dir) with cfg, as one multi-document YAML. A template that reads a field cfg lacks
// fails, naming the file.
func renderOperatorTemplates(dir string, files []string, cfg any) ([]byte, error) {
	var rendered bytes.Buffer
	for _, file := range files {
		data, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			return nil, err
		}
		tmpl, err := template.New(file).Option("missingkey=error").Parse(string(data))
		if err != nil {
			return nil, fmt.Errorf("OCM operator template %s: %w", file, err)
		}
		rendered.WriteString("---\n")
		if err := tmpl.Execute(&rendered, cfg); err != nil {
			return nil, fmt.Errorf("OCM operator template %s: %w", file, err)
		}
		rendered.WriteString("\n")
	}
	return rendered.Bytes(), nil
}
