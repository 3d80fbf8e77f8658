package appsetreport

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// TestEveryFieldIsSet keeps everyField complete: every field of the statuses, at every
// depth, is set, so that a schema that cuts nothing of it cuts nothing of any report.
func TestEveryFieldIsSet(t *testing.T) {
	var check func(path string, v reflect.Value)
	check = func(path string, v reflect.Value) {
		if v.IsZero() {
			t.Errorf("everyField%s is not set", path)
			return
		}
		switch v.Kind() {
		case reflect.Pointer:
			check(path, v.Elem())
		case reflect.Struct:
			if v.Type() == reflect.TypeFor[metav1.Time]() {
				return
			}
			for i := range v.NumField() {
				check(path+"."+v.Type().Field(i).Name, v.Field(i))
			}
		case reflect.Slice:
			for i := range v.Len() {
				check(path+"[]", v.Index(i))
			}
		}
	}
	check("", reflect.ValueOf(everyField))
}

// TestDeclaresEverything: the chart's CRD declares every field the controller writes,
// so fit leaves reports as they are; ACM's, with only the documented fields, does not.
func TestDeclaresEverything(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "..", "manifests", "crds", "apps.open-cluster-management.io_multiclusterapplicationsetreports.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(raw, crd); err != nil {
		t.Fatal(err)
	}
	if !declaresEverything(statusesSchema(crd.Spec.Versions[0].Schema.OpenAPIV3Schema)) {
		t.Error("the chart's CRD does not declare every field of the reports")
	}
	if declaresEverything(statusesSchema(documentedReportSchema())) {
		t.Error("a CRD with only the documented fields declares them all")
	}
}
