package hubcache

// This file holds the form in which the cache keeps hub Applications: their metadata as
// it is, and each other top-level field (spec, operation, status) frozen as its JSON text.

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
)

// An Application decoded from JSON is a tree of small Go maps, each of which costs about
// 300 bytes however few its entries: 6 KB for a pulled app whose JSON is 1.3 KB, most of
// the manager's heap at 10,000 apps. The cache keeps each field but the metadata (which
// the informers, indexes and watches read) as its JSON text instead, about half the
// size, and of the metadata the two fields that nothing reads from the cache
// (frozenMetadataFields), and thaws it for its readers:
//   - a read through NewClient's client (Get, List) thaws the Applications it returns,
//     so every reconcile sees the Application as the apiserver serves it (less its managed
//     fields, and status.resources and status.history as their ResourcesDigest);
//   - a watch's predicate, map function or index that reads more than the metadata of an
//     Application from the cache calls Thawed.

// frozen reports whether the top-level field key of an Application is one that
// TransformApplication freezes: all but the type and the metadata.
func frozen(key string) bool {
	return key != "apiVersion" && key != "kind" && key != "metadata"
}

// frozenMetadataKey is the top-level field of a frozen Application that holds, as JSON
// text, the fields of its metadata that no reader of the cache's own objects reads
// (frozenMetadataFields); thaw puts them back in the metadata.
const frozenMetadataKey = "argocd-pull.frozenMetadata"

// frozenMetadataFields are the metadata fields that freeze moves to frozenMetadataKey:
// without them the metadata of a pulled app has at most eight fields (name, namespace,
// uid, resourceVersion, labels, annotations, ownerReferences, finalizers), which a Go
// map holds in one group of slots, half the size of the map of ten. No watch, predicate,
// index or KeepFrozen read of Applications reads them.
var frozenMetadataFields = []string{"creationTimestamp", "generation"}

// freeze replaces each frozen field of obj that is not frozen yet with its JSON text,
// and moves frozenMetadataFields to frozenMetadataKey. Every top-level field of an
// Application but apiVersion and kind is an object (the metadata, spec, operation,
// status), so a string there is one that freeze made.
func freeze(obj map[string]any) error {
	if metadata, ok := obj["metadata"].(map[string]any); ok {
		moved := map[string]any{}
		for _, field := range frozenMetadataFields {
			if value, ok := metadata[field]; ok {
				moved[field] = value
			}
		}
		if len(moved) > 0 {
			// A new map of the fields kept: a Go map does not shrink when entries go.
			kept := make(map[string]any, len(metadata)-len(moved))
			for field, value := range metadata {
				if _, ok := moved[field]; !ok {
					kept[field] = value
				}
			}
			obj["metadata"] = kept
			obj[frozenMetadataKey] = moved
		}
	}
	for key, value := range obj {
		if _, done := value.(string); done || !frozen(key) {
			continue
		}
		text, err := json.Marshal(value)
		if err != nil {
			return fmt.Errorf("freeze %s: %w", key, err)
		}
		if key == "spec" {
			obj[key] = sharedSpecs.keyed(text, string(text))
			continue
		}
		obj[key] = string(text)
	}
	return nil
}

// sharedSpecs holds once the frozen specs that many Applications have alike: in the pull
// model an ApplicationSet's template often deploys each app to its own cluster
// (https://kubernetes.default.svc), so that its apps' specs differ only where the
// template names the cluster. The statuses, which differ in their times, are not shared.
var sharedSpecs = &sharedValues[string]{}

// isFrozen reports whether app is in the cache's form, with frozen fields to thaw.
func isFrozen(app *unstructured.Unstructured) bool {
	for key, value := range app.Object {
		if _, text := value.(string); text && frozen(key) {
			return true
		}
	}
	return false
}

// thaw decodes the frozen fields of an Application from the cache, in a new top-level
// map, and puts the frozen metadata fields back in a copy of the metadata: the maps that
// app held, which may be the cache's own, are left as they were, and the labels,
// annotations and other fields of the metadata stay shared with them. An Application
// that is not frozen is left as it is.
func thaw(app *unstructured.Unstructured) error {
	if !isFrozen(app) {
		return nil
	}
	thawed := make(map[string]any, len(app.Object))
	var frozenMetadata map[string]any
	for key, value := range app.Object {
		text, ok := value.(string)
		if !ok || !frozen(key) {
			thawed[key] = value
			continue
		}
		var decoded any
		// As the apiserver's JSON is decoded into an unstructured object: whole numbers
		// as int64.
		if err := utiljson.Unmarshal([]byte(text), &decoded); err != nil {
			return fmt.Errorf("thaw %s of Application %s/%s: %w", key, app.GetNamespace(), app.GetName(), err)
		}
		if key == frozenMetadataKey {
			frozenMetadata, _ = decoded.(map[string]any)
			continue
		}
		thawed[key] = decoded
	}
	if metadata, ok := thawed["metadata"].(map[string]any); ok && len(frozenMetadata) > 0 {
		metadata = maps.Clone(metadata)
		maps.Copy(metadata, frozenMetadata)
		thawed["metadata"] = metadata
	}
	app.Object = thawed
	return nil
}

// Thawed returns obj as an Application whose fields can be read, for a watch's
// predicate, map function or index, which receive the cache's objects: a thawed copy of
// an Application from the cache, or obj itself when it is not frozen. It returns nil
// when obj is not an unstructured object, or its frozen fields do not decode (which the
// cache's own transform never makes).
func Thawed(obj client.Object) *unstructured.Unstructured {
	app, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil
	}
	if !isFrozen(app) {
		return app
	}
	thawed := &unstructured.Unstructured{Object: app.Object}
	if err := thaw(thawed); err != nil {
		return nil
	}
	return thawed
}

// MayHold reports whether the field of app may hold text: false only when the field is
// frozen and its JSON text does not contain it. A reader of the cache's objects that
// looks for one thing in a field (a condition's type) thaws it only when it may be there.
func MayHold(app *unstructured.Unstructured, field, text string) bool {
	frozenText, ok := app.Object[field].(string)
	return !ok || !frozen(field) || strings.Contains(frozenText, text)
}

// KeepFrozen is a Get and List option of NewClient's client: the Applications read stay
// as the cache holds them, for a reader of their metadata alone, which reads a field
// through Thawed (or after MayHold). A thaw of a thousand Applications took a sixth of
// the ApplicationSet report's time.
var KeepFrozen = keepFrozen{}

type keepFrozen struct{}

func (keepFrozen) ApplyToList(*client.ListOptions) {}

func (keepFrozen) ApplyToGet(*client.GetOptions) {}

// thawingReads is a client whose reads of Applications thaw what the cache holds.
type thawingReads struct {
	client.WithWatch
}

func (c *thawingReads) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := c.WithWatch.Get(ctx, key, obj, opts...); err != nil {
		return err
	}
	if app, ok := obj.(*unstructured.Unstructured); ok && app.GetKind() == argoapp.KindApplication &&
		!slices.Contains(opts, client.GetOption(KeepFrozen)) {
		return thaw(app)
	}
	return nil
}

func (c *thawingReads) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := c.WithWatch.List(ctx, list, opts...); err != nil {
		return err
	}
	items, ok := list.(*unstructured.UnstructuredList)
	if !ok || slices.Contains(opts, client.ListOption(KeepFrozen)) {
		return nil
	}
	for i := range items.Items {
		if app := &items.Items[i]; app.GetKind() == argoapp.KindApplication {
			if err := thaw(app); err != nil {
				return err
			}
		}
	}
	return nil
}
