package fleet

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"
)

// fieldManager owns everything the fleet applies.
const fieldManager = "fleet"

// Applier server-side applies YAML or unstructured objects to one cluster, as
// `kubectl apply --server-side --force-conflicts` would.
type Applier struct {
	dyn    dynamic.Interface
	mapper *restmapper.DeferredDiscoveryRESTMapper
}

// NewApplier returns an Applier for the cluster behind cfg.
func NewApplier(cfg *rest.Config) (*Applier, error) {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Applier{dyn: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc))}, nil
}

// Apply applies every object, in order. An object without a namespace whose kind is
// namespaced goes to defaultNamespace.
func (a *Applier) Apply(ctx context.Context, defaultNamespace string, objs ...*unstructured.Unstructured) error {
	for _, obj := range objs {
		if err := a.applyOne(ctx, defaultNamespace, obj); err != nil {
			return fmt.Errorf("apply %s %s/%s: %w", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
		}
	}
	return nil
}

// ApplyYAML applies every document of a multi-document YAML stream.
func (a *Applier) ApplyYAML(ctx context.Context, defaultNamespace string, data []byte) error {
	objs, err := DecodeYAML(data)
	if err != nil {
		return err
	}
	return a.Apply(ctx, defaultNamespace, objs...)
}

func (a *Applier) applyOne(ctx context.Context, defaultNamespace string, obj *unstructured.Unstructured) error {
	gvk := obj.GroupVersionKind()
	var mapping *meta.RESTMapping
	// A kind whose CRD was applied a moment ago is unknown until discovery is refreshed.
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		var err error
		mapping, err = a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if meta.IsNoMatchError(err) {
			a.mapper.Reset()
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		return fmt.Errorf("find the resource for %s: %w", gvk, err)
	}
	var ri dynamic.ResourceInterface = a.dyn.Resource(mapping.Resource)
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		if obj.GetNamespace() == "" {
			obj = obj.DeepCopy()
			obj.SetNamespace(defaultNamespace)
		}
		ri = a.dyn.Resource(mapping.Resource).Namespace(obj.GetNamespace())
	}
	_, err = ri.Apply(ctx, obj.GetName(), obj, metav1.ApplyOptions{FieldManager: fieldManager, Force: true})
	return err
}

// ApplyFiles applies the YAML files, each a path or a directory whose *.yaml files are
// applied in name order.
func (a *Applier) ApplyFiles(ctx context.Context, defaultNamespace string, paths ...string) error {
	files, err := yamlFiles(paths...)
	if err != nil {
		return err
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		if err := a.ApplyYAML(ctx, defaultNamespace, data); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
	}
	return nil
}

// WaitForCRDs waits until every CRD among objs is Established.
func (a *Applier) WaitForCRDs(ctx context.Context, objs ...*unstructured.Unstructured) error {
	crdGVR := apiextensionsv1.SchemeGroupVersion.WithResource("customresourcedefinitions")
	for _, obj := range objs {
		if obj.GetKind() != "CustomResourceDefinition" {
			continue
		}
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			got, err := a.dyn.Resource(crdGVR).Get(ctx, obj.GetName(), metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
			for _, c := range conds {
				m, _ := c.(map[string]any)
				if m["type"] == "Established" && m["status"] == "True" {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("CRD %s not established: %w", obj.GetName(), err)
		}
	}
	a.mapper.Reset()
	return nil
}

// Resource returns a dynamic client for one resource.
func (a *Applier) Resource(gvr schema.GroupVersionResource) dynamic.NamespaceableResourceInterface {
	return a.dyn.Resource(gvr)
}

// DecodeYAML splits a multi-document YAML stream into objects, skipping empty documents
// and unwrapping `kind: List`.
func DecodeYAML(data []byte) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, err
		}
		if len(strings.TrimSpace(string(doc))) == 0 {
			continue
		}
		var m map[string]any
		if err := yaml.Unmarshal(doc, &m); err != nil {
			return nil, err
		}
		if len(m) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		if u.IsList() {
			list, err := u.ToList()
			if err != nil {
				return nil, err
			}
			for i := range list.Items {
				objs = append(objs, &list.Items[i])
			}
			continue
		}
		objs = append(objs, u)
	}
}

func yamlFiles(paths ...string) ([]string, error) {
	var files []string
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !st.IsDir() {
			files = append(files, p)
			continue
		}
		matches, err := filepath.Glob(filepath.Join(p, "*.yaml"))
		if err != nil {
			return nil, err
		}
		sort.Strings(matches)
		files = append(files, matches...)
	}
	return files, nil
}
