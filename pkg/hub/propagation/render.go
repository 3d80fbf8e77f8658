package propagation

// This file holds the pure rendering: from a hub Application (and, optionally, its
// AppProject) to the ManifestWork that carries it, exactly as described in sections 1, 2
// and 4 of docs/pull-model.md. It does no I/O.

import (
	"encoding/json"
	"fmt"
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
)

const (
	// MaxManifestsSize is the largest total size, in bytes, of a rendered work's
	// manifests. It is the default limit of the OCM work webhook (500 KiB), measured the
	// way the webhook measures it; a larger work would be refused by the hub.
	MaxManifestsSize = 500 * 1024
)

// IgnorePathRefreshAnnotation is the JSONPath of the pulled Application that the work
// agent does not re-apply when the spoke changes it. Argo CD on the spoke clears the
// refresh annotation once it has refreshed; were it re-applied, the app would refresh
// forever.
const IgnorePathRefreshAnnotation = `.metadata.annotations["` + argoapp.AnnotationRefresh + `"]`

// Reasons of a RenderError, fit for the reason of a status condition and of an Event.
const (
	// ReasonInvalidApplication: the object is not a stored Argo CD Application (no name
	// or UID, another kind) or a field the addon reads has the wrong type.
	ReasonInvalidApplication = "InvalidApplication"
	// ReasonMissingClusterAnnotation: the target cluster annotation is empty.
	ReasonMissingClusterAnnotation = "MissingClusterAnnotation"
	// ReasonInvalidClusterName: the target cluster annotation is not a namespace name.
	ReasonInvalidClusterName = "InvalidClusterName"
	// ReasonInvalidAppNamespace: the app-namespace annotation is not a namespace name.
	ReasonInvalidAppNamespace = "InvalidAppNamespace"
	// ReasonInvalidDestination: both destination override annotations are set; Argo CD
	// refuses a destination with both a name and a server.
	ReasonInvalidDestination = "InvalidDestination"
	// ReasonInvalidAppProject: the AppProject given in RenderOptions is not the one the
	// Application uses.
	ReasonInvalidAppProject = "InvalidAppProject"
	// ReasonPayloadTooLarge: the manifests exceed MaxManifestsSize.
	ReasonPayloadTooLarge = "PayloadTooLarge"
)

// RenderError reports input that can never render, whatever is retried: the controller
// should record it (an Event and a condition with Reason) and not requeue.
type RenderError struct {
	// Reason is one of the Reason constants of this package.
	Reason string
	// Err says what is wrong, naming the Application.
	Err error
}

// Error returns the message of the underlying error.
func (e *RenderError) Error() string { return e.Err.Error() }

// Unwrap returns the underlying error.
func (e *RenderError) Unwrap() error { return e.Err }

// renderErrorf returns a RenderError with the given reason and formatted message.
func renderErrorf(reason, format string, args ...any) *RenderError {
	return &RenderError{Reason: reason, Err: fmt.Errorf(format, args...)}
}

// RenderOptions holds the inputs of RenderManifestWork besides the Application.
type RenderOptions struct {
	// AppProject is the hub AppProject named by the Application's spec.project, or nil.
	// When the project is not "default" and AppProject is set, the work also carries the
	// AppProject and a Namespace for the app namespace, and orphans both on deletion.
	// When it is nil, the work carries the Application alone and the managed cluster
	// must already have the project. It is ignored for the default project, which every
	// Argo CD has and which the hub must not overwrite.
	AppProject *unstructured.Unstructured
}

// RenderManifestWork renders the ManifestWork that carries a pulled hub Application to
// its managed cluster. It does not check whether the Application asks to be pulled (see
// argoapp.IsPullRequested), only that it can be rendered. Input that can never render
// returns a *RenderError.
//
// The work, in the namespace of the target cluster, points back to the hub Application
// with annotations, and carries an ApplicationSet's markers when one owns the
// Application. Its payload is the Application with rebuilt metadata, the OCM pull
// labels and annotations removed, the finalizers kept, and the destination rewritten
// for the managed cluster. The Application reports its health, sync and operation state
// back as status feedback, watched rather than polled, and is applied server-side,
// ignoring the refresh annotation when the spoke changes it. The hub Application's
// .operation is not in the payload: setOperationRequest delivers it, with its id.
func RenderManifestWork(app *unstructured.Unstructured, opts RenderOptions) (*workv1.ManifestWork, error) {
	if app == nil {
		return nil, renderErrorf(ReasonInvalidApplication, "render manifestwork: nil application")
	}
	work, err := renderManifestWork(app, opts)
	if err != nil {
		return nil, fmt.Errorf("render manifestwork for application %s/%s: %w", app.GetNamespace(), app.GetName(), err)
	}
	return work, nil
}

// renderManifestWork is RenderManifestWork for a non-nil app; its errors do not name the
// app.
func renderManifestWork(app *unstructured.Unstructured, opts RenderOptions) (*workv1.ManifestWork, error) {
	if gvk := app.GroupVersionKind(); gvk != argoapp.ApplicationGVK {
		return nil, renderErrorf(ReasonInvalidApplication, "kind is %s, want %s", gvk, argoapp.ApplicationGVK)
	}
	if app.GetName() == "" || app.GetUID() == "" {
		return nil, renderErrorf(ReasonInvalidApplication, "application has no name or no UID")
	}
	spec, err := argoapp.DecodeSpec(app)
	if err != nil {
		return nil, &RenderError{Reason: ReasonInvalidApplication, Err: err}
	}

	cluster := app.GetAnnotations()[argoapp.AnnotationOCMManagedCluster]
	if cluster == "" {
		return nil, renderErrorf(ReasonMissingClusterAnnotation, "annotation %s is empty", argoapp.AnnotationOCMManagedCluster)
	}
	if errs := validation.IsDNS1123Label(cluster); len(errs) > 0 {
		return nil, renderErrorf(ReasonInvalidClusterName, "annotation %s=%q is not a cluster name: %s",
			argoapp.AnnotationOCMManagedCluster, cluster, strings.Join(errs, "; "))
	}
	appNamespace := appNamespaceOf(app)
	if errs := validation.IsDNS1123Label(appNamespace); len(errs) > 0 {
		return nil, renderErrorf(ReasonInvalidAppNamespace, "app namespace %q is not a namespace name: %s",
			appNamespace, strings.Join(errs, "; "))
	}
	workName := argoapp.ManifestWorkName(app.GetName(), app.GetUID())
	if errs := validation.IsDNS1123Subdomain(workName); len(errs) > 0 {
		return nil, renderErrorf(ReasonInvalidApplication, "work name %q is invalid: %s", workName, strings.Join(errs, "; "))
	}

	workLabels := map[string]string{argoapp.LabelPullToOCMManagedCluster: "true"}
	workAnnotations := map[string]string{
		argoapp.AnnotationHubApplicationNamespace: app.GetNamespace(),
		argoapp.AnnotationHubApplicationName:      app.GetName(),
	}
	var appSetKey string
	if appSet, ok := argoapp.OwningApplicationSet(app.GetOwnerReferences()); ok {
		appSetKey = argoapp.ApplicationSetKey(app.GetNamespace(), appSet)
		workLabels[argoapp.LabelApplicationSet] = "true"
		workLabels[argoapp.LabelApplicationSetHash] = argoapp.ApplicationSetHash(app.GetNamespace(), appSet)
		workAnnotations[argoapp.AnnotationHostingApplicationSet] = appSetKey
	}

	payload, err := renderApplication(app, appNamespace, appSetKey)
	if err != nil {
		return nil, err
	}

	objects := []*unstructured.Unstructured{payload}
	configs := []workv1.ManifestConfigOption{applicationConfig(appNamespace, app.GetName())}
	var deleteOption *workv1.DeleteOption
	if project := spec.ProjectName(); project != argoapp.DefaultProject && opts.AppProject != nil {
		appProject, err := renderAppProject(opts.AppProject, project, appNamespace)
		if err != nil {
			return nil, err
		}
		// The namespace first, so that the work agent can create the AppProject and the
		// Application in it on its first pass.
		objects = []*unstructured.Unstructured{namespaceManifest(appNamespace), appProject, payload}
		namespaceID := workv1.ResourceIdentifier{Resource: "namespaces", Name: appNamespace}
		projectID := workv1.ResourceIdentifier{Group: argoapp.Group, Resource: argoapp.ResourceAppProjects, Namespace: appNamespace, Name: project}
		configs = append(configs, serverSideApplyConfig(namespaceID), serverSideApplyConfig(projectID))
		// Other apps may use the namespace and the project: never delete them with this
		// work. Once orphaned, the work agent no longer owns them, so they also survive
		// when a later render drops them.
		deleteOption = &workv1.DeleteOption{
			PropagationPolicy: workv1.DeletePropagationPolicyTypeSelectivelyOrphan,
			SelectivelyOrphan: &workv1.SelectivelyOrphan{
				OrphaningRules: []workv1.OrphaningRule{workv1.OrphaningRule(namespaceID), workv1.OrphaningRule(projectID)},
			},
		}
	}

	manifests, err := encodeManifests(objects)
	if err != nil {
		return nil, err
	}

	return &workv1.ManifestWork{
		TypeMeta: metav1.TypeMeta{APIVersion: workv1.GroupVersion.String(), Kind: "ManifestWork"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        workName,
			Namespace:   cluster,
			Labels:      workLabels,
			Annotations: workAnnotations,
		},
		Spec: workv1.ManifestWorkSpec{
			Workload:        workv1.ManifestsTemplate{Manifests: manifests},
			ManifestConfigs: configs,
			DeleteOption:    deleteOption,
		},
	}, nil
}

// appNamespaceOf returns the namespace of the pulled Application on the managed
// cluster: the app-namespace annotation, else the hub Application's namespace, else
// argoapp.DefaultAppNamespace.
func appNamespaceOf(app *unstructured.Unstructured) string {
	if ns := app.GetAnnotations()[argoapp.AnnotationOCMManagedClusterAppNamespace]; ns != "" {
		return ns
	}
	if ns := app.GetNamespace(); ns != "" {
		return ns
	}
	return argoapp.DefaultAppNamespace
}

// renderApplication returns the payload Application: metadata rebuilt from name,
// namespace, the kept labels, annotations and finalizers, plus the ApplicationSet
// markers when appSetKey is set; .spec copied; the destination rewritten. Status,
// .operation and every server-set field are left out.
func renderApplication(app *unstructured.Unstructured, appNamespace, appSetKey string) (*unstructured.Unstructured, error) {
	payload := &unstructured.Unstructured{Object: map[string]any{}}
	payload.SetGroupVersionKind(argoapp.ApplicationGVK)
	payload.SetName(app.GetName())
	payload.SetNamespace(appNamespace)
	setSanitizedMetadata(payload, app)
	if appSetKey != "" {
		payload.SetLabels(withEntry(payload.GetLabels(), argoapp.LabelApplicationSet, "true"))
		payload.SetAnnotations(withEntry(payload.GetAnnotations(), argoapp.AnnotationHostingApplicationSet, appSetKey))
	}
	if finalizers := argoCDFinalizers(app.GetFinalizers()); len(finalizers) > 0 {
		payload.SetFinalizers(finalizers)
	}

	spec, _ := runtime.DeepCopyJSONValue(app.Object["spec"]).(map[string]any)
	if spec == nil {
		spec = map[string]any{}
	}
	if err := rewriteDestination(spec, app.GetAnnotations()); err != nil {
		return nil, err
	}
	payload.Object["spec"] = spec
	return payload, nil
}

// rewriteDestination points the destination of spec at the managed cluster: the
// destination-name or destination-server annotation when one is set, else the
// in-cluster server. The destination namespace is kept.
func rewriteDestination(spec map[string]any, annotations map[string]string) error {
	name := annotations[argoapp.AnnotationDestinationName]
	server := annotations[argoapp.AnnotationDestinationServer]
	if name != "" && server != "" {
		return renderErrorf(ReasonInvalidDestination, "annotations %s and %s are both set; Argo CD accepts only one of a destination name and server",
			argoapp.AnnotationDestinationName, argoapp.AnnotationDestinationServer)
	}
	// DecodeSpec has checked that a present destination is an object.
	destination, _ := spec["destination"].(map[string]any)
	if destination == nil {
		destination = map[string]any{}
		spec["destination"] = destination
	}
	delete(destination, "name")
	delete(destination, "server")
	switch {
	case name != "":
		destination["name"] = name
	case server != "":
		destination["server"] = server
	default:
		destination["server"] = argoapp.InClusterServer
	}
	return nil
}

// renderAppProject returns the payload AppProject: the hub AppProject's name, kept
// labels and annotations, and spec, in the app namespace.
func renderAppProject(hubProject *unstructured.Unstructured, project, appNamespace string) (*unstructured.Unstructured, error) {
	if gvk := hubProject.GroupVersionKind(); gvk != argoapp.AppProjectGVK {
		return nil, renderErrorf(ReasonInvalidAppProject, "app project %s/%s is a %s, want %s",
			hubProject.GetNamespace(), hubProject.GetName(), gvk, argoapp.AppProjectGVK)
	}
	if hubProject.GetName() != project {
		return nil, renderErrorf(ReasonInvalidAppProject, "app project %s/%s is not the project %q the application uses",
			hubProject.GetNamespace(), hubProject.GetName(), project)
	}
	payload := &unstructured.Unstructured{Object: map[string]any{}}
	payload.SetGroupVersionKind(argoapp.AppProjectGVK)
	payload.SetName(project)
	payload.SetNamespace(appNamespace)
	setSanitizedMetadata(payload, hubProject)
	if spec, ok := hubProject.Object["spec"]; ok && spec != nil {
		payload.Object["spec"] = runtime.DeepCopyJSONValue(spec)
	}
	return payload, nil
}

// namespaceManifest returns a Namespace with the given name.
func namespaceManifest(name string) *unstructured.Unstructured {
	ns := &unstructured.Unstructured{Object: map[string]any{}}
	ns.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	ns.SetName(name)
	return ns
}

// hubOnlyLabels and hubOnlyAnnotations are the metadata of a hub object that the
// managed cluster must not receive: the OCM pull model's own keys, the hub's
// skip-reconcile, and kubectl's last-applied copy of the whole hub object, which
// repeats all of them.
var (
	hubOnlyLabels      = []string{argoapp.LabelPullToOCMManagedCluster}
	hubOnlyAnnotations = []string{
		argoapp.AnnotationOCMManagedCluster,
		argoapp.AnnotationOCMManagedClusterAppNamespace,
		argoapp.AnnotationDestinationName,
		argoapp.AnnotationDestinationServer,
		argoapp.AnnotationSkipReconcile,
		argoapp.AnnotationAdoptSpokeApplication,
		corev1.LastAppliedConfigAnnotation,
		// The operation protocol's: only the manager sets them (setOperationRequest), from
		// a .operation it checked; the agent writes the last.
		argoapp.AnnotationOperationRequest,
		argoapp.AnnotationOperationTerminate,
		argoapp.AnnotationOperationDelivered,
		argoapp.AnnotationRefreshID,
		argoapp.AnnotationRefreshed,
	}
)

// setSanitizedMetadata copies the labels and annotations of hub to payload, without the
// hub-only ones.
func setSanitizedMetadata(payload, hub *unstructured.Unstructured) {
	payload.SetLabels(without(hub.GetLabels(), hubOnlyLabels))
	payload.SetAnnotations(without(hub.GetAnnotations(), hubOnlyAnnotations))
}

// without returns a copy of m without the given keys, or nil when nothing is left.
func without(m map[string]string, keys []string) map[string]string {
	out := maps.Clone(m)
	for _, k := range keys {
		delete(out, k)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// withEntry returns m, allocated if nil, with key set to value.
func withEntry(m map[string]string, key, value string) map[string]string {
	if m == nil {
		m = map[string]string{}
	}
	m[key] = value
	return m
}

// argoCDFinalizers returns the finalizers that Argo CD handles, such as
// argoapp.ResourcesFinalizer and its /background and /foreground forms. Other
// finalizers, for example one a hub controller adds to clean up, would have nobody to
// remove them on the managed cluster and would block the deletion of the pulled app.
func argoCDFinalizers(finalizers []string) []string {
	var out []string
	for _, f := range finalizers {
		if argoapp.IsArgoCDFinalizer(f) {
			out = append(out, f)
		}
	}
	return out
}

// applicationConfig returns the manifest configuration of the pulled Application: the
// status feedback, watched rather than polled, and a forced server-side apply that
// ignores the fields the spoke Argo CD clears.
func applicationConfig(appNamespace, name string) workv1.ManifestConfigOption {
	var paths []workv1.JsonPath
	for _, f := range argoapp.FeedbackFields() {
		paths = append(paths, workv1.JsonPath{Name: f.Name, Path: f.Path})
	}
	config := serverSideApplyConfig(workv1.ResourceIdentifier{
		Group:     argoapp.Group,
		Resource:  argoapp.ResourceApplications,
		Namespace: appNamespace,
		Name:      name,
	})
	config.FeedbackRules = []workv1.FeedbackRule{{Type: workv1.JSONPathsType, JsonPaths: paths}}
	config.FeedbackScrapeType = workv1.FeedbackWatchType
	config.UpdateStrategy.ServerSideApply.IgnoreFields = []workv1.IgnoreField{{
		Condition: workv1.IgnoreFieldsConditionOnSpokeChange,
		JSONPaths: []string{IgnorePathRefreshAnnotation},
	}}
	return config
}

// serverSideApplyConfig returns a manifest configuration that applies the identified
// resource server-side, with force: the hub is the source of truth for the fields it
// sends, and fields other actors set on the spoke (a namespace's labels, say) are kept.
func serverSideApplyConfig(id workv1.ResourceIdentifier) workv1.ManifestConfigOption {
	return workv1.ManifestConfigOption{
		ResourceIdentifier: id,
		UpdateStrategy: &workv1.UpdateStrategy{
			Type:            workv1.UpdateStrategyTypeServerSideApply,
			ServerSideApply: &workv1.ServerSideApplyConfig{Force: true},
		},
	}
}

// encodeManifests encodes the objects as JSON manifests, and refuses them when their
// total size exceeds MaxManifestsSize.
func encodeManifests(objects []*unstructured.Unstructured) ([]workv1.Manifest, error) {
	manifests := make([]workv1.Manifest, 0, len(objects))
	size := 0
	for _, obj := range objects {
		raw, err := json.Marshal(obj.Object)
		if err != nil {
			return nil, fmt.Errorf("encode %s %s/%s: %w", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
		}
		manifest := workv1.Manifest{RawExtension: runtime.RawExtension{Raw: raw}}
		size += manifest.Size()
		manifests = append(manifests, manifest)
	}
	if size > MaxManifestsSize {
		return nil, renderErrorf(ReasonPayloadTooLarge, "manifests take %d bytes, more than the limit of %d", size, MaxManifestsSize)
	}
	return manifests, nil
}
