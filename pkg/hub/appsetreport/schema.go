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

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
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
}

// fit returns statuses without the fields that the served schema does not declare.
func (s *servedSchema) fit(ctx context.Context, statuses appsv1alpha1.AppConditions) (appsv1alpha1.AppConditions, error) {
	schema := s.get(ctx)
	if schema == nil {
		return statuses, nil
	}
	statusesSchema, ok := schema.Properties["statuses"]
	if !ok {
		return statuses, nil
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&statuses)
	if err != nil {
		return statuses, fmt.Errorf("encode the report statuses: %w", err)
	}
	pruneToSchema(obj, &statusesSchema)
	var fitted appsv1alpha1.AppConditions
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj, &fitted); err != nil {
		return statuses, fmt.Errorf("decode the fitted report statuses: %w", err)
	}
	return fitted, nil
}

// get returns the served schema, loading it on first use. Without it (the CRD cannot be
// read), every field is written, and the apply says what the apiserver refuses.
func (s *servedSchema) get(ctx context.Context) *apiextensionsv1.JSONSchemaProps {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.loaded {
		return s.schema
	}
	s.loaded = true
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := s.reader.Get(ctx, types.NamespacedName{Name: ReportCRDName}, crd); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "cannot read the report CRD; writing every field of the reports", "crd", ReportCRDName)
		return nil
	}
	for _, version := range crd.Spec.Versions {
		if version.Name == appsv1alpha1.GroupVersion.Version && version.Served && version.Schema != nil {
			s.schema = version.Schema.OpenAPIV3Schema
		}
	}
	return s.schema
}

// forget makes the next write read the schema again: after a failed write, the CRD may
// have changed.
func (s *servedSchema) forget() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.loaded, s.schema = false, nil
}

// pruneToSchema removes from obj, recursively, the fields that schema does not declare,
// as the apiserver prunes unknown fields of a custom resource.
func pruneToSchema(obj map[string]any, schema *apiextensionsv1.JSONSchemaProps) {
	if schema == nil || (schema.XPreserveUnknownFields != nil && *schema.XPreserveUnknownFields) {
		return
	}
	for key, value := range obj {
		prop, declared := schema.Properties[key]
		if !declared {
			if schema.AdditionalProperties != nil && schema.AdditionalProperties.Schema != nil {
				pruneValue(value, schema.AdditionalProperties.Schema)
				continue
			}
			if schema.AdditionalProperties == nil || !schema.AdditionalProperties.Allows {
				delete(obj, key)
			}
			continue
		}
		pruneValue(value, &prop)
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
