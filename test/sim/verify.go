package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/propagation"
)

// WorkCheck compares the ManifestWorks of pulled Applications with the Applications.
type WorkCheck struct {
	// Apps counts the pulled hub Applications.
	Apps int
	// Correct counts the apps with exactly one work, named and placed as the manager
	// names them, whose payload is what the manager renders from the app now.
	Correct int
	// Missing counts the apps without a work, Stale those whose work differs from the
	// render, Duplicated those with more than one work.
	Missing, Stale, Duplicated int
	// Orphaned counts the works whose hub Application does not exist.
	Orphaned int
	// Examples names a few of the problems.
	Examples []string
}

// OK reports whether every app has its one correct work and no work is orphaned.
func (c WorkCheck) OK() bool {
	return c.Correct == c.Apps && c.Missing+c.Stale+c.Duplicated+c.Orphaned == 0
}

// Propagated reports whether every app has exactly one work and no work is orphaned,
// whatever the works are named and hold: how the bench times a controller that names
// and renders works its own way (the upstream peer of test/bench -peer).
func (c WorkCheck) Propagated() bool {
	return c.Correct+c.Stale == c.Apps && c.Missing+c.Duplicated+c.Orphaned == 0
}

func (c WorkCheck) String() string {
	return fmt.Sprintf("%d apps: %d correct, %d missing, %d stale, %d duplicated; %d orphaned works %v",
		c.Apps, c.Correct, c.Missing, c.Stale, c.Duplicated, c.Orphaned, c.Examples)
}

func (c *WorkCheck) example(format string, args ...any) {
	if len(c.Examples) < 5 {
		c.Examples = append(c.Examples, fmt.Sprintf(format, args...))
	}
}

// CheckWorks compares every pulled Application of AppNamespace with the ManifestWorks of
// all namespaces, as reader (a cache or the apiserver) sees them. Works without the
// hub-application annotations, such as the addon framework's, are not counted.
func CheckWorks(ctx context.Context, reader client.Reader) (WorkCheck, error) {
	apps := argoapp.NewApplicationList()
	if err := reader.List(ctx, apps, client.InNamespace(AppNamespace)); err != nil {
		return WorkCheck{}, fmt.Errorf("list Applications: %w", err)
	}
	works := &workv1.ManifestWorkList{}
	if err := reader.List(ctx, works); err != nil {
		return WorkCheck{}, fmt.Errorf("list ManifestWorks: %w", err)
	}
	worksOfApp := map[string][]*workv1.ManifestWork{}
	for i := range works.Items {
		w := &works.Items[i]
		name := w.Annotations[argoapp.AnnotationHubApplicationName]
		if name == "" {
			continue
		}
		key := w.Annotations[argoapp.AnnotationHubApplicationNamespace] + "/" + name
		worksOfApp[key] = append(worksOfApp[key], w)
	}
	var check WorkCheck
	for i := range apps.Items {
		app := &apps.Items[i]
		if pulled, err := argoapp.IsPullRequested(app.GetLabels(), app.GetAnnotations()); !pulled || err != nil || app.GetDeletionTimestamp() != nil {
			continue
		}
		check.Apps++
		key := app.GetNamespace() + "/" + app.GetName()
		found := worksOfApp[key]
		delete(worksOfApp, key)
		switch {
		case len(found) == 0:
			check.Missing++
			check.example("%s has no work", key)
		case len(found) > 1:
			check.Duplicated++
			check.example("%s has %d works", key, len(found))
		default:
			if problem := workProblem(app, found[0]); problem != "" {
				check.Stale++
				check.example("%s: %s", key, problem)
			} else {
				check.Correct++
			}
		}
	}
	for key, ws := range worksOfApp {
		check.Orphaned += len(ws)
		check.example("work %s/%s of missing app %s", ws[0].Namespace, ws[0].Name, key)
	}
	return check, nil
}

// workProblem says how work differs from what the manager renders for app, or "".
func workProblem(app *unstructured.Unstructured, work *workv1.ManifestWork) string {
	desired, err := propagation.RenderManifestWork(app, propagation.RenderOptions{})
	if err != nil {
		return "does not render: " + err.Error()
	}
	cluster := app.GetAnnotations()[argoapp.AnnotationOCMManagedCluster]
	if work.Namespace != cluster || work.Name != desired.Name {
		return fmt.Sprintf("work %s/%s, want %s/%s", work.Namespace, work.Name, cluster, desired.Name)
	}
	if len(work.Spec.Workload.Manifests) != len(desired.Spec.Workload.Manifests) {
		return fmt.Sprintf("%d manifests, want %d", len(work.Spec.Workload.Manifests), len(desired.Spec.Workload.Manifests))
	}
	for i, m := range desired.Spec.Workload.Manifests {
		var got, want any
		if err := json.Unmarshal(work.Spec.Workload.Manifests[i].Raw, &got); err != nil {
			return fmt.Sprintf("manifest %d: %v", i, err)
		}
		raw := m.Raw
		if raw == nil {
			var err error
			if raw, err = json.Marshal(m.Object); err != nil {
				return fmt.Sprintf("manifest %d: %v", i, err)
			}
		}
		if err := json.Unmarshal(raw, &want); err != nil {
			return fmt.Sprintf("manifest %d: %v", i, err)
		}
		if !reflect.DeepEqual(got, want) {
			return fmt.Sprintf("manifest %d differs from the render", i)
		}
	}
	return ""
}
