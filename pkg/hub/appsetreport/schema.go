package appsetreport

// This file fits a report to the CRD that the hub serves. The chart's CRD declares every
// field this controller writes; the CRD that Red Hat ACM installs (crds.install=false)
// declares only the documented ones, and the apiserver refuses an apply with a field
// its schema does not declare. So the controller reads the served schema and writes
// only what it declares: the counts stay exact, the additions (lastUpdateTime,
// summary.stale, syncRevisions, ...) are left out.

import (
	"context"
	"fmt"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/ocm-gitops/argocd-pull-addon/pkg/apis/apps/v1alpha1"
)

// ReportCRDName is the name of the MulticlusterApplicationSetReport CRD.
const ReportCRDName = "multiclusterapplicationsetreports.apps.open-cluster-management.io"

// servedSchema holds the schema of the served report version, read once from the
// apiserver and again after a write fails.
type servedSchema struct {
	reader client.Reader

	mu     sync.Mutex
	schema *apiextensionsv1.JSONSchemaProps
	loaded bool
	// complete: the schema declares every field this controller writes (the chart's
	// CRD), so fit has nothing to cut.
	complete bool
}

// everyField is a report's statuses with every field this controller writes set:
// a schema that cuts nothing of it cuts nothing of any report (the statuses have no map
// whose keys vary). TestEveryFieldIsSet keeps it complete.
var everyField = appsv1alpha1.AppConditions{
	Resources: []appsv1alpha1.ResourceRef{{APIVersion: "v1", Kind: "ConfigMap", Name: "n", Namespace: "ns"}},
	ClusterConditions: []appsv1alpha1.ClusterCondition{{
		Cluster: "c", App: "a", SyncStatus: "Synced", HealthStatus: "Healthy", SyncRevision: "r", SyncRevisions: []string{"r"},
		OperationStatePhase: "Succeeded", OperationStateStartedAt: "2026-01-01T00:00:00Z",
		Conditions: []appsv1alpha1.Condition{{Type: "SyncError", Message: "m"}},
	}},
	Summary: appsv1alpha1.ReportSummary{Clusters: "1", Synced: "1", NotSynced: "0", Healthy: "1", NotHealthy: "0", InProgress: "0", Stale: "0",
		Truncated: &appsv1alpha1.ReportTruncation{BudgetBytes: 1, Clusters: 1, Conditions: 1, Messages: 1, Details: 1, Resources: 1, Message: "m"}},
	LastUpdateTime: &metav1.Time{Time: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)},
}

// fit returns statuses without the fields that the served schema does not declare. With
// the chart's CRD, which declares them all, it returns statuses as they are: the round
// trip through unstructured content of a report of a thousand clusters was the largest
// allocation of the manager.
func (s *servedSchema) fit(ctx context.Context, statuses appsv1alpha1.AppConditions) (appsv1alpha1.AppConditions, error) {
	schema, complete := s.get(ctx)
	if schema == nil || complete {
		return statuses, nil
	}
	return pruneStatuses(statuses, schema)
}

// statusesSchema returns the schema of the statuses in the report's schema, or nil.
func statusesSchema(schema *apiextensionsv1.JSONSchemaProps) *apiextensionsv1.JSONSchemaProps {
	if schema == nil {
		return nil
	}
	statuses, ok := schema.Properties["statuses"]
	if !ok {
		return nil
	}
	return &statuses
}

// pruneStatuses returns statuses without the fields that schema, the statuses' schema,
// does not declare.
func pruneStatuses(statuses appsv1alpha1.AppConditions, schema *apiextensionsv1.JSONSchemaProps) (appsv1alpha1.AppConditions, error) {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&statuses)
	if err != nil {
		return statuses, fmt.Errorf("encode the report statuses: %w", err)
	}
	pruneToSchema(obj, schema)
	var fitted appsv1alpha1.AppConditions
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj, &fitted); err != nil {
		return statuses, fmt.Errorf("decode the fitted report statuses: %w", err)
	}
	return fitted, nil
}

// declaresEverything reports whether schema, the statuses' schema, cuts nothing of
// everyField.
func declaresEverything(schema *apiextensionsv1.JSONSchemaProps) bool {
	fitted, err := pruneStatuses(everyField, schema)
	return err == nil && equality.Semantic.DeepEqual(fitted, everyField)
}

// get returns the schema of the statuses in the served schema, loading it on first use,
// and whether it declares every field this controller writes. Without it (the CRD cannot
// be read, or declares no statuses), every field is written, and the apply says what the
// apiserver refuses.
func (s *servedSchema) get(ctx context.Context) (schema *apiextensionsv1.JSONSchemaProps, complete bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.loaded {
		return s.schema, s.complete
	}
	s.loaded = true
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := s.reader.Get(ctx, types.NamespacedName{Name: ReportCRDName}, crd); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "cannot read the report CRD; writing every field of the reports", "crd", ReportCRDName)
		return nil, false
	}
	for _, version := range crd.Spec.Versions {
		if version.Name == appsv1alpha1.GroupVersion.Version && version.Served && version.Schema != nil {
			s.schema = statusesSchema(version.Schema.OpenAPIV3Schema)
		}
	}
	s.complete = s.schema != nil && declaresEverything(s.schema)
	return s.schema, s.complete
}

// forget makes the next write read the schema again: after a failed write, the CRD may
// have changed.
func (s *servedSchema) forget() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.loaded, s.schema, s.complete = false, nil, false
}

// pruneToSchema removes from obj, recursively, the fields that schema does not declare,
// as the apiserver prunes unknown fields of a custom resource.
func pruneToSchema(obj map[string]any, schema *apiextensionsv1.JSONSchemaProps) {
	if schema == nil || (schema.XPreserveUnknownFields != nil && *schema.XPreserveUnknownFields) {
		return
	}
	for key, value := range obj {
		if _, declared := schema.Properties[key]; !declared {
			if schema.AdditionalProperties != nil && schema.AdditionalProperties.Schema != nil {
				pruneValue(value, schema.AdditionalProperties.Schema)
				continue
			}
			if schema.AdditionalProperties == nil || !schema.AdditionalProperties.Allows {
				delete(obj, key)
			}
			continue
		}
		switch value.(type) {
		case map[string]any, []any:
			// Copied only for the values that have fields of their own.
			prop := schema.Properties[key]
			pruneValue(value, &prop)
		}
	}
}

func pruneValue(value any, schema *apiextensionsv1.JSONSchemaProps) {
	switch v := value.(type) {
	case map[string]any:
		pruneToSchema(v, schema)
	case []any:
		if schema.Items == nil || schema.Items.Schema == nil {
			return
		}
		for _, item := range v {
			pruneValue(item, schema.Items.Schema)
		}
	}
}
