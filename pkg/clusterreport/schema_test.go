package clusterreport

import (
	"os"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// TestSliceSchemaBoundsAreTheEncoders: the generated CRD of ApplicationStatusSlice bounds
// each string and list as the encoder does, so that the apiserver refuses what the agent
// never writes, and never what it does. Every string and list of the schema is bounded.
func TestSliceSchemaBoundsAreTheEncoders(t *testing.T) {
	raw, err := os.ReadFile("../../manifests/crds/argocd-pull.open-cluster-management.io_applicationstatusslices.yaml")
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(raw, crd); err != nil {
		t.Fatal(err)
	}
	root := crd.Spec.Versions[0].Schema.OpenAPIV3Schema
	at := func(path string) *apiextensionsv1.JSONSchemaProps {
		s := root
		for _, step := range strings.Split(path, ".") {
			if step == "[]" {
				s = s.Items.Schema
				continue
			}
			child, ok := s.Properties[step]
			if !ok {
				t.Fatalf("the schema has no %s", path)
			}
			s = &child
		}
		return s
	}
	maxLength := map[string]int{
		"apps.[].namespace": MaxNameBytes, "apps.[].name": MaxNameBytes,
		"apps.[].hub.namespace": MaxNameBytes, "apps.[].hub.name": MaxNameBytes,
		"apps.[].applicationSet": 2*MaxNameBytes + 1, "apps.[].manifestWork": MaxNameBytes,
		"apps.[].sync.status": maxStatusBytes, "apps.[].sync.revision": MaxNameBytes, "apps.[].sync.revisions.[]": MaxNameBytes,
		"apps.[].health.status": maxStatusBytes, "apps.[].health.message": MaxMessageBytes,
		"apps.[].operation.phase": maxStatusBytes, "apps.[].operation.startedAt": maxStatusBytes,
		"apps.[].operation.finishedAt": maxStatusBytes, "apps.[].operation.message": MaxMessageBytes,
		"apps.[].conditions.[].type": maxStatusBytes, "apps.[].conditions.[].message": MaxMessageBytes,
		"apps.[].treeMessage": MaxMessageBytes,
	}
	for _, list := range []string{"apps.[].resources.[]", "apps.[].nodes.[]"} {
		for _, field := range []string{"group", "version", "kind", "namespace", "name"} {
			maxLength[list+"."+field] = MaxNameBytes
		}
		maxLength[list+".health.status"] = maxStatusBytes
		maxLength[list+".health.message"] = MaxMessageBytes
		maxLength[list+".images.[]"] = maxImageBytes
	}
	maxLength["apps.[].resources.[].status"] = maxStatusBytes
	for _, field := range []string{"group", "kind", "namespace", "name"} {
		maxLength["apps.[].diffs.[]."+field] = MaxNameBytes
	}
	for _, field := range []string{"liveState", "targetState", "predictedLiveState"} {
		maxLength["apps.[].diffs.[]."+field] = MaxDiffBytesPerApp
	}
	maxLength["apps.[].diffsMessage"] = MaxMessageBytes
	for _, field := range []string{"group", "kind", "namespace", "name"} {
		maxLength["apps.[].nodes.[].parentRefs.[]."+field] = MaxNameBytes
	}
	for _, source := range []string{"apps.[].history.[].source", "apps.[].history.[].sources.[]"} {
		for field, bound := range map[string]int{"repoURL": MaxHistorySourceBytes, "path": MaxHistorySourceBytes, "chart": MaxHistorySourceBytes,
			"targetRevision": MaxNameBytes, "ref": MaxNameBytes, "name": MaxNameBytes, "details": MaxHistorySourceDetailsBytes} {
			maxLength[source+"."+field] = bound
		}
	}
	maxLength["apps.[].history.[].revision"] = MaxNameBytes
	maxLength["apps.[].history.[].revisions.[]"] = MaxNameBytes
	maxLength["apps.[].history.[].deployedAt"] = maxStatusBytes
	maxLength["apps.[].history.[].deployStartedAt"] = maxStatusBytes
	maxLength["apps.[].history.[].initiatedBy.username"] = MaxNameBytes
	maxItems := map[string]int{
		"apps.[].history": MaxHistoryEntries, "apps.[].history.[].revisions": MaxRevisions, "apps.[].history.[].sources": MaxRevisions,
		"apps": MaxAppsPerSlice, "apps.[].sync.revisions": MaxRevisions, "apps.[].conditions": MaxSliceConditionsPerApp,
		"apps.[].resources": MaxSliceResourcesPerApp, "apps.[].nodes": MaxSliceNodesPerApp,
		"apps.[].resources.[].images": MaxImagesPerResource, "apps.[].nodes.[].images": MaxImagesPerResource,
		"apps.[].nodes.[].parentRefs": MaxParentRefsPerNode, "apps.[].diffs": MaxDiffsPerApp,
	}
	for path, want := range maxLength {
		if got := at(path).MaxLength; got == nil || *got != int64(want) {
			t.Errorf("%s: maxLength %v, want the encoder's %d", path, deref(got), want)
		}
	}
	for path, want := range maxItems {
		if got := at(path).MaxItems; got == nil || *got != int64(want) {
			t.Errorf("%s: maxItems %v, want the encoder's %d", path, deref(got), want)
		}
	}
	if enum := at("apps.[].treeSource").Enum; len(enum) != 2 {
		t.Errorf("treeSource: enum %v, want ArgoCDCache and None", enum)
	}
	// Nothing is left unbounded.
	var walk func(path string, s *apiextensionsv1.JSONSchemaProps)
	walk = func(path string, s *apiextensionsv1.JSONSchemaProps) {
		switch s.Type {
		case "string":
			if s.MaxLength == nil && len(s.Enum) == 0 && s.Format != "date-time" && path != "apiVersion" && path != "kind" {
				t.Errorf("%s: a string without maxLength", path)
			}
		case "array":
			if s.MaxItems == nil {
				t.Errorf("%s: a list without maxItems", path)
			}
			walk(path+".[]", s.Items.Schema)
		}
		for name, child := range s.Properties {
			if path == "" && name == "metadata" {
				continue
			}
			walk(strings.TrimPrefix(path+"."+name, "."), &child)
		}
	}
	walk("", root)
	if len(root.XValidations) > 0 {
		t.Error("the schema has CEL rules; its bounds are plain maxLength and maxItems")
	}
}

func deref(p *int64) any {
	if p == nil {
		return "none"
	}
	return *p
}
