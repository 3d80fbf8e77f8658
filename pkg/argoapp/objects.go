package argoapp

import "k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

// NewApplication returns an empty Application to read into or to watch.
func NewApplication() *unstructured.Unstructured { return newObject(ApplicationGVK.Kind) }

// NewApplicationList returns an empty list of Applications to read into.
func NewApplicationList() *unstructured.UnstructuredList {
	apps := &unstructured.UnstructuredList{}
	apps.SetGroupVersionKind(GroupVersion.WithKind(KindApplication + "List"))
	return apps
}

// NewAppProject returns an empty AppProject to read into or to watch.
func NewAppProject() *unstructured.Unstructured { return newObject(AppProjectGVK.Kind) }

// NewApplicationSet returns an empty ApplicationSet to read into or to watch.
func NewApplicationSet() *unstructured.Unstructured { return newObject(ApplicationSetGVK.Kind) }

func newObject(kind string) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(GroupVersion.WithKind(kind))
	return obj
}
