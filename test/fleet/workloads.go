package fleet

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
)

// ApplicationGVR is the resource of Argo CD Applications.
var ApplicationGVR = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "applications"}

// AppProjectGVR is the resource of Argo CD's AppProjects.
var AppProjectGVR = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "appprojects"}

// GuestbookNamespace is where the guestbook app deploys to.
const GuestbookNamespace = "guestbook"

// GuestbookApplication is an Argo CD Application, in the argocd namespace, that deploys the
// guestbook app of the fleet's git repository to its own cluster with automated sync.
func GuestbookApplication(name, repoURL string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1",
		"kind":       "Application",
		"metadata":   map[string]any{"name": name, "namespace": ArgoCDNamespace},
		"spec": map[string]any{
			"project": "default",
			"source":  map[string]any{"repoURL": repoURL, "targetRevision": "main", "path": GuestbookPath},
			"destination": map[string]any{
				"server": "https://kubernetes.default.svc", "namespace": GuestbookNamespace,
			},
			"syncPolicy": map[string]any{
				"automated":   map[string]any{"prune": true, "selfHeal": true},
				"syncOptions": []any{"CreateNamespace=true"},
			},
		},
	}}
}

// ManifestWork wraps objects in a ManifestWork for cluster.
func ManifestWork(name, cluster string, objs ...runtime.Object) *workv1.ManifestWork {
	mw := &workv1.ManifestWork{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: cluster}}
	for _, obj := range objs {
		mw.Spec.Workload.Manifests = append(mw.Spec.Workload.Manifests, workv1.Manifest{RawExtension: runtime.RawExtension{Object: obj}})
	}
	return mw
}

// ApplicationStatusFeedback asks the work agent to report an Application's sync and health
// status on the ManifestWork, with the names existing consoles read.
func ApplicationStatusFeedback(app *unstructured.Unstructured) workv1.ManifestConfigOption {
	return workv1.ManifestConfigOption{
		ResourceIdentifier: workv1.ResourceIdentifier{Group: ApplicationGVR.Group, Resource: ApplicationGVR.Resource,
			Namespace: app.GetNamespace(), Name: app.GetName()},
		FeedbackRules: []workv1.FeedbackRule{{Type: workv1.JSONPathsType, JsonPaths: []workv1.JsonPath{
			{Name: "syncStatus", Path: ".status.sync.status"},
			{Name: "healthStatus", Path: ".status.health.status"},
		}}},
	}
}

// DemoConfigMap is a ConfigMap to deliver through a ManifestWork.
func DemoConfigMap(name, namespace string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Data:       map[string]string{"delivered-by": "ManifestWork"},
	}
}

// FeedbackValue returns the named string feedback value the work agent reported for the
// manifest at ordinal, and whether it was there.
func FeedbackValue(mw *workv1.ManifestWork, ordinal int32, name string) (string, bool) {
	for _, m := range mw.Status.ResourceStatus.Manifests {
		if m.ResourceMeta.Ordinal != ordinal {
			continue
		}
		for _, v := range m.StatusFeedbacks.Values {
			if v.Name == name && v.Value.String != nil {
				return *v.Value.String, true
			}
		}
	}
	return "", false
}

// AddonPlacementYAML binds the default ManagedClusterSet to a namespace and places, as
// name, onto the clusters where the argocd-pull addon is available: the tenant binding
// that the addon's gate checks.
func AddonPlacementYAML(name string) []byte {
	return PlacementYAML(name, map[string]string{"feature.open-cluster-management.io/addon-argocd-pull": "available"})
}

// PlacementYAML binds the default ManagedClusterSet to a namespace and places, as name,
// onto its clusters with the labels matchLabels (every cluster when it is empty).
func PlacementYAML(name string, matchLabels map[string]string) []byte {
	y := fmt.Appendf(nil, `
apiVersion: cluster.open-cluster-management.io/v1beta2
kind: ManagedClusterSetBinding
metadata: {name: default}
spec: {clusterSet: default}
---
apiVersion: cluster.open-cluster-management.io/v1beta1
kind: Placement
metadata: {name: %q}
spec:
  clusterSets: [default]
`, name)
	if len(matchLabels) == 0 {
		return y
	}
	y = append(y, "  predicates:\n  - requiredClusterSelector:\n      labelSelector:\n        matchLabels:\n"...)
	for _, key := range slices.Sorted(maps.Keys(matchLabels)) {
		y = fmt.Appendf(y, "          %q: %q\n", key, matchLabels[key])
	}
	return y
}

// placementDecisionsGVR is the resource of OCM PlacementDecisions.
var placementDecisionsGVR = schema.GroupVersionResource{Group: "cluster.open-cluster-management.io", Version: "v1beta1", Resource: "placementdecisions"}

// DecidedClusters returns the clusters that the PlacementDecisions of the Placement
// namespace/placement select; none before the placement controller has decided.
//
// What reads a Placement's decisions must wait for them: Argo CD's ApplicationSet
// controller (v3.2) retries an ApplicationSet whose clusterDecisionResource generator
// finds no PlacementDecision only after 3 minutes (ReconcileRequeueOnValidationError),
// and it does not watch PlacementDecisions.
func (a *Applier) DecidedClusters(ctx context.Context, namespace, placement string) ([]string, error) {
	list, err := a.dyn.Resource(placementDecisionsGVR).Namespace(namespace).List(ctx,
		metav1.ListOptions{LabelSelector: clusterv1beta1.PlacementLabel + "=" + placement})
	if err != nil {
		return nil, err
	}
	var clusters []string
	for _, item := range list.Items {
		var d clusterv1beta1.PlacementDecision
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(item.Object, &d); err != nil {
			return nil, fmt.Errorf("PlacementDecision %s/%s: %w", namespace, item.GetName(), err)
		}
		for _, decision := range d.Status.Decisions {
			clusters = append(clusters, decision.ClusterName)
		}
	}
	return clusters, nil
}

// GuestbookApplicationSetYAML is the documented pull-model ApplicationSet (reference
// section 7): the OCM placement generator over placement, the template's pull label and
// annotations, multi-source, with the resources finalizer, deploying the guestbook of
// repoURL to namespace. Its Applications are called <cluster>-<app>.
func GuestbookApplicationSetYAML(name, app, placement, repoURL, namespace string) []byte {
	return PulledApplicationSetYAML(name, app, placement, repoURL, GuestbookPath, namespace, AppTemplate{})
}

// AppTemplate is what a pulled ApplicationSet's template has beyond the documented one;
// its zero value adds nothing.
type AppTemplate struct {
	// SyncOptions are added to CreateNamespace=true.
	SyncOptions []string
	// Finalizer is the form of Argo CD's resources finalizer, which the apps carry:
	// argoapp.ResourcesFinalizer when empty (foreground deletion of their resources), or
	// its /background or /foreground form.
	Finalizer string
}

// PulledApplicationSetYAML is GuestbookApplicationSetYAML for the app at path in the
// repository, with tmpl's additions.
func PulledApplicationSetYAML(name, app, placement, repoURL, path, namespace string, tmpl AppTemplate) []byte {
	return pulledApplicationSetYAML(name, placementGenerator(placement), "{{name}}-"+app, repoURL, path, namespace, tmpl)
}

// PulledMatrixApplicationSetYAML is an ApplicationSet of perCluster pulled apps of the
// app at path on each cluster of placement: the matrix of the placement generator and a
// list of i = 0 .. perCluster-1. Its Applications are called <cluster>-<name>-<i>, and
// deploy to the namespace <name>-<i>.
func PulledMatrixApplicationSetYAML(name, placement, repoURL, path string, perCluster int) []byte {
	elements := make([]string, perCluster)
	for i := range perCluster {
		elements[i] = fmt.Sprintf("{i: '%d'}", i)
	}
	generators := fmt.Sprintf(`
  - matrix:
      generators:%s
      - list:
          elements: [%s]`, strings.ReplaceAll(placementGenerator(placement), "\n", "\n    "), strings.Join(elements, ", "))
	return pulledApplicationSetYAML(name, generators, "{{name}}-"+name+"-{{i}}", repoURL, path, "'"+name+"-{{i}}'", AppTemplate{})
}

// placementGenerator is the generator of the clusters of an OCM Placement.
func placementGenerator(placement string) string {
	return fmt.Sprintf(`
  - clusterDecisionResource:
      configMapRef: ocm-placement-generator
      labelSelector:
        matchLabels: {cluster.open-cluster-management.io/placement: %s}
      requeueAfterSeconds: 30`, placement)
}

// pulledApplicationSetYAML is the documented pull-model ApplicationSet with generators,
// whose apps are called appName and deploy the app at path to namespace, with tmpl's
// additions.
func pulledApplicationSetYAML(name, generators, appName, repoURL, path, namespace string, tmpl AppTemplate) []byte {
	return fmt.Appendf(nil, `
apiVersion: argoproj.io/v1alpha1
kind: ApplicationSet
metadata: {name: %[1]s}
spec:
  generators:%[2]s
  template:
    metadata:
      name: '%[3]s'
      labels: {apps.open-cluster-management.io/pull-to-ocm-managed-cluster: "true"}
      annotations:
        apps.open-cluster-management.io/ocm-managed-cluster: '{{name}}'
        apps.open-cluster-management.io/ocm-managed-cluster-app-namespace: argocd
        argocd.argoproj.io/skip-reconcile: "true"
      finalizers: [%[8]s]
    spec:
      project: default
      sources:
      - {repoURL: '%[4]s', targetRevision: main, path: '%[5]s'}
      destination: {server: https://kubernetes.default.svc, namespace: %[6]s}
      syncPolicy:
        automated: {}
        syncOptions: [%[7]s]
`, name, generators, appName, repoURL, path, namespace, strings.Join(append([]string{"CreateNamespace=true"}, tmpl.SyncOptions...), ", "),
		cmp.Or(tmpl.Finalizer, argoapp.ResourcesFinalizer))
}
