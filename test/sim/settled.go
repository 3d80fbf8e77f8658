package sim

import (
	"context"
	"fmt"
	"strconv"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/ocm-gitops/argocd-pull-addon/pkg/apis/apps/v1alpha1"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
)

// StatusSettled says what does not show the clusters' status yet, or "": every one of
// the apps hub Applications of AppNamespace Synced, Healthy and with every one of its
// resources (the agents report resources of each), every one of the appSets
// ApplicationSet reports counting every one of the clusters Synced and Healthy. reader
// is a cache or the apiserver.
func StatusSettled(ctx context.Context, reader client.Reader, apps, clusters, appSets, resources int) (string, error) {
	list := argoapp.NewApplicationList()
	if err := reader.List(ctx, list, client.InNamespace(AppNamespace)); err != nil {
		return "", err
	}
	if len(list.Items) != apps {
		return fmt.Sprintf("%d Applications, want %d", len(list.Items), apps), nil
	}
	for i := range list.Items {
		app := &list.Items[i]
		syncStatus, _, _ := unstructured.NestedString(app.Object, "status", "sync", "status")
		health, _, _ := unstructured.NestedString(app.Object, "status", "health", "status")
		listed, _, _ := unstructured.NestedSlice(app.Object, "status", "resources")
		if syncStatus != "Synced" || health != "Healthy" || len(listed) != resources {
			return fmt.Sprintf("%s: %s/%s with %d resources, want %d", app.GetName(), syncStatus, health, len(listed), resources), nil
		}
	}
	reports := &appsv1alpha1.MulticlusterApplicationSetReportList{}
	if err := reader.List(ctx, reports, client.InNamespace(AppNamespace)); err != nil {
		return "", err
	}
	if len(reports.Items) != appSets {
		return fmt.Sprintf("%d reports, want %d", len(reports.Items), appSets), nil
	}
	want := strconv.Itoa(clusters)
	for _, report := range reports.Items {
		if s := report.Statuses.Summary; s.Clusters != want || s.Synced != want || s.Healthy != want {
			return fmt.Sprintf("report %s: %+v", report.Name, s), nil
		}
	}
	return "", nil
}

// IsPulledWork reports whether work carries a pulled Application: it points back to a
// hub Application. The addon framework's works do not.
func IsPulledWork(work *workv1.ManifestWork) bool {
	return work.Annotations[argoapp.AnnotationHubApplicationName] != ""
}

// CountWorks counts the ManifestWorks of every namespace for which match is true, as
// reader sees them.
func CountWorks(ctx context.Context, reader client.Reader, match func(*workv1.ManifestWork) bool) (int, error) {
	works := &workv1.ManifestWorkList{}
	if err := reader.List(ctx, works); err != nil {
		return 0, fmt.Errorf("list ManifestWorks: %w", err)
	}
	n := 0
	for i := range works.Items {
		if match(&works.Items[i]) {
			n++
		}
	}
	return n, nil
}

// CountPulledWorks counts the ManifestWorks of pulled Applications, as reader sees them.
func CountPulledWorks(ctx context.Context, reader client.Reader) (int, error) {
	return CountWorks(ctx, reader, IsPulledWork)
}
