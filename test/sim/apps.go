package sim

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
)

// ApplicationSetName returns the name of the i-th simulated ApplicationSet.
func ApplicationSetName(i int) string { return fmt.Sprintf("appset-%02d", i) }

// ApplicationName is the name the ApplicationSet controller would give the Application
// of appSet for cluster.
func ApplicationName(appSet, cluster string) string { return appSet + "-" + cluster }

// CreateApplicationSets creates n ApplicationSets in AppNamespace. Nothing on the
// simulated hub generates their Applications: CreateApplications plays the
// ApplicationSet controller.
func (h *Hub) CreateApplicationSets(ctx context.Context, n int) ([]*unstructured.Unstructured, error) {
	var appSets []*unstructured.Unstructured
	for i := range n {
		appSet := argoapp.NewApplicationSet()
		appSet.SetNamespace(AppNamespace)
		appSet.SetName(ApplicationSetName(i))
		appSet.Object["spec"] = map[string]any{
			"generators": []any{map[string]any{"clusterDecisionResource": map[string]any{
				"configMapRef": "acm-placement", "requeueAfterSeconds": int64(30),
				"labelSelector": map[string]any{"matchLabels": map[string]any{"cluster.open-cluster-management.io/placement": PlacementName}},
			}}},
			"template": map[string]any{
				"metadata": map[string]any{"name": appSet.GetName() + "-{{name}}"},
				"spec": map[string]any{
					"project": argoapp.DefaultProject,
					"source": map[string]any{
						"repoURL": "https://git.example.com/fleet.git", "targetRevision": "main", "path": "apps/" + appSet.GetName(),
					},
					"destination": map[string]any{"server": argoapp.InClusterServer, "namespace": appSet.GetName()},
				},
			},
		}
		if err := h.Client.Create(ctx, appSet); err != nil {
			return nil, fmt.Errorf("create ApplicationSet %s: %w", appSet.GetName(), err)
		}
		appSets = append(appSets, appSet)
	}
	return appSets, nil
}

// Application returns the Application the ApplicationSet controller generates from
// appSet for cluster: pulled, owned by the ApplicationSet, skipped by the hub Argo CD.
func Application(appSet *unstructured.Unstructured, cluster string) *unstructured.Unstructured {
	app := argoapp.NewApplication()
	app.SetNamespace(appSet.GetNamespace())
	app.SetName(ApplicationName(appSet.GetName(), cluster))
	app.SetLabels(map[string]string{argoapp.LabelPullToOCMManagedCluster: "true"})
	app.SetAnnotations(map[string]string{
		argoapp.AnnotationOCMManagedCluster: cluster,
		argoapp.AnnotationSkipReconcile:     "true",
	})
	app.SetOwnerReferences([]metav1.OwnerReference{{
		APIVersion: argoapp.GroupVersion.String(), Kind: argoapp.ApplicationSetGVK.Kind,
		Name: appSet.GetName(), UID: appSet.GetUID(), Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	}})
	app.Object["spec"] = map[string]any{
		"project": argoapp.DefaultProject,
		"source": map[string]any{
			"repoURL": "https://git.example.com/fleet.git", "targetRevision": "main", "path": "apps/" + appSet.GetName(),
		},
		"destination": map[string]any{"server": argoapp.InClusterServer, "namespace": appSet.GetName()},
		"syncPolicy": map[string]any{
			"automated":   map[string]any{"prune": true, "selfHeal": true},
			"syncOptions": []any{"CreateNamespace=true"},
		},
	}
	return app
}

// CreateApplications creates the Application of every ApplicationSet for every cluster,
// parallel at a time, and returns their keys.
func (h *Hub) CreateApplications(ctx context.Context, appSets []*unstructured.Unstructured, clusters []string, parallel int) ([]client.ObjectKey, error) {
	return h.CreateApplicationsTimed(ctx, appSets, clusters, parallel, nil)
}

// CreateApplicationsTimed is CreateApplications that calls created, when not nil, with
// the key of each Application and the time its create returned (from any goroutine).
func (h *Hub) CreateApplicationsTimed(ctx context.Context, appSets []*unstructured.Unstructured, clusters []string, parallel int,
	created func(client.ObjectKey, time.Time)) ([]client.ObjectKey, error) {
	var apps []*unstructured.Unstructured
	// Cluster by cluster, so that every cluster gets its first app early.
	for _, cluster := range clusters {
		for _, appSet := range appSets {
			apps = append(apps, Application(appSet, cluster))
		}
	}
	keys := make([]client.ObjectKey, len(apps))
	for i, app := range apps {
		keys[i] = client.ObjectKeyFromObject(app)
	}
	err := forEach(ctx, apps, parallel, func(ctx context.Context, app *unstructured.Unstructured) error {
		if err := createIgnoringExisting(ctx, h.Client, app); err != nil {
			return err
		}
		if created != nil {
			created(client.ObjectKeyFromObject(app), time.Now())
		}
		return nil
	})
	return keys, err
}
