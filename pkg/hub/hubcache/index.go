package hubcache

// This file holds the cache's indexes across namespaces.

import (
	"context"
	"fmt"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// IndexAcrossNamespaces indexes the cached objects of obj's kind by field, as the
// manager's FieldIndexer.IndexField does, for a List with client.MatchingFields{field:
// value} and no namespace, which finds the objects of every namespace whose extract
// holds value. IndexField indexes each namespaced object under each of its values twice:
// in all namespaces, and in its own namespace, for a List in one namespace. An index
// whose every value names one or a few objects, as the works of one Application or of
// one ApplicationSet in each cluster namespace, then costs a set of its own per object:
// 7 MB of the manager's heap at 10,000 works. Without that half, a List in one namespace
// with field finds nothing; no reader makes one.
//
// The index and its values are named as controller-runtime's cache reader (v0.23,
// pkg/cache/internal: FieldIndexName, KeyToNamespacedKey) looks them up: the envtests of
// the indexes' readers (propagation, appsetreport) and TestIndexAcrossNamespaces fail if
// it names them otherwise.
func IndexAcrossNamespaces(ctx context.Context, c cache.Cache, obj client.Object, field string, extract client.IndexerFunc) error {
	informer, err := c.GetInformer(ctx, obj)
	if err != nil {
		return fmt.Errorf("index %s: %w", field, err)
	}
	return informer.AddIndexers(toolscache.Indexers{"field:" + field: func(o any) ([]string, error) {
		obj, ok := o.(client.Object)
		if !ok {
			return nil, nil
		}
		values := extract(obj)
		keys := make([]string, len(values))
		for i, v := range values {
			keys[i] = "__all_namespaces/" + v
		}
		return keys, nil
	}})
}
