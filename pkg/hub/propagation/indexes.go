package propagation

// This file holds the cache indexes that the watches and the reconcile read through.

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/hubcache"
)

// Cache indexes.
const (
	// indexWorkByApplication indexes the pulled ManifestWorks by "<namespace>/<name>" of
	// their hub Application.
	indexWorkByApplication = "argocd-pull.hubApplication"
	// indexApplicationByCluster indexes the hub Applications by their target cluster.
	indexApplicationByCluster = "argocd-pull.targetCluster"
	// indexApplicationByProject indexes the hub Applications by their AppProject.
	indexApplicationByProject = "argocd-pull.project"
)

// Each entry of an index costs the cache a set of its own, twice when controller-runtime
// indexes it (a namespaced object under its namespace and under all namespaces): at
// 10,000 Applications, tens of MiB for an index whose every value names one object. So
// every index here is read across namespaces and indexed that way only
// (hubcache.IndexAcrossNamespaces); the only one whose values name one object each is
// the one of the works of an Application, whose works may be in any namespace; the works
// and Applications of a spoke Application (conflict.go) are found among those of its
// cluster, through the namespace index and indexApplicationByCluster.

func registerIndexes(ctx context.Context, c cache.Cache) error {
	// The works of an Application, in whichever namespace (one work each); the
	// Applications of a cluster, and of an AppProject (whose Applications may be in any
	// namespace).
	indexes := []struct {
		obj     client.Object
		field   string
		extract client.IndexerFunc
	}{
		{&workv1.ManifestWork{}, indexWorkByApplication, func(obj client.Object) []string {
			if key, ok := argoapp.ApplicationOfWork(obj); ok {
				return []string{key.String()}
			}
			return nil
		}},
		{argoapp.NewApplication(), indexApplicationByCluster, func(obj client.Object) []string {
			if cluster := obj.GetAnnotations()[argoapp.AnnotationOCMManagedCluster]; cluster != "" {
				return []string{cluster}
			}
			return nil
		}},
		{argoapp.NewApplication(), indexApplicationByProject, func(obj client.Object) []string {
			app := hubcache.Thawed(obj) // the cache's Application, frozen
			if app == nil {
				return nil
			}
			project, _, _ := unstructured.NestedString(app.Object, "spec", "project")
			if project == "" {
				project = argoapp.DefaultProject // as Argo CD reads it
			}
			return []string{project}
		}},
	}
	for _, index := range indexes {
		if err := hubcache.IndexAcrossNamespaces(ctx, c, index.obj, index.field, index.extract); err != nil {
			return err
		}
	}
	return nil
}
