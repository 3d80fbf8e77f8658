// Package argoapp is what the hub and the spoke share about Argo CD Applications: the
// labels, annotations and status feedback names of the OCM pull model, the Argo CD API
// coordinates, and typed decoding of the Application fields the addon reads.
//
// The addon does not import github.com/argoproj/argo-cd. Applications are handled as
// *unstructured.Unstructured and decoded here, so that a field the addon does not know
// survives a round trip unchanged.
package argoapp

import "k8s.io/apimachinery/pkg/runtime/schema"

// Labels and annotations of the OCM pull model. Users already write ApplicationSets and
// dashboards against these exact names.
const (
	// LabelPullToOCMManagedCluster opts a hub Application into the pull model when its
	// value parses as true with strconv.ParseBool.
	LabelPullToOCMManagedCluster = "apps.open-cluster-management.io/pull-to-ocm-managed-cluster"

	// AnnotationOCMManagedCluster names the target ManagedCluster, and so the hub
	// namespace that holds the ManifestWork.
	AnnotationOCMManagedCluster = "apps.open-cluster-management.io/ocm-managed-cluster"

	// AnnotationOCMManagedClusterAppNamespace names the namespace on the managed cluster
	// where the pulled Application is created.
	AnnotationOCMManagedClusterAppNamespace = "apps.open-cluster-management.io/ocm-managed-cluster-app-namespace"

	// AnnotationDestinationName overrides spec.destination.name of the pulled Application.
	AnnotationDestinationName = "apps.open-cluster-management.io/destination-name"

	// AnnotationDestinationServer overrides spec.destination.server of the pulled
	// Application.
	AnnotationDestinationServer = "apps.open-cluster-management.io/destination-server"

	// AnnotationSkipReconcile stops an Argo CD instance from reconciling the Application.
	// On the hub it keeps the hub Argo CD from pushing a pulled app.
	AnnotationSkipReconcile = "argocd.argoproj.io/skip-reconcile"

	// AnnotationAdoptSpokeApplication, "true" on a hub Application, lets its first
	// ManifestWork take over an Application of the same namespace and name that the
	// managed cluster already has and that no hub Application pulled; without it, the
	// hub Application is refused (propagation's SpokeApplicationNotPulled).
	AnnotationAdoptSpokeApplication = "argocd-pull.open-cluster-management.io/adopt-spoke-application"

	// AnnotationRefresh asks Argo CD to refresh the Application ("normal" or "hard").
	AnnotationRefresh = "argocd.argoproj.io/refresh"

	// AnnotationHubApplicationNamespace, on a ManifestWork, names the namespace of the hub
	// Application it was rendered from.
	AnnotationHubApplicationNamespace = "apps.open-cluster-management.io/hub-application-namespace"

	// AnnotationHubApplicationName, on a ManifestWork, names the hub Application it was
	// rendered from.
	AnnotationHubApplicationName = "apps.open-cluster-management.io/hub-application-name"

	// AnnotationOperationID, on a ManifestWork, is set while the work delivers the hub
	// Application's .operation to the managed cluster: the id the manager gave that
	// operation (OperationInfoID), which the spoke's operationState carries back.
	AnnotationOperationID = "argocd-pull.open-cluster-management.io/operation-id"

	// AnnotationOperationRequest, on the Application a work carries, is the hub
	// Application's .operation as JSON, its info carrying its id (OperationInfoID). The
	// cluster's agent sets the spoke Application's .operation from it, once per id, and
	// only when no other operation runs there (docs/propagation.md, "Operations").
	AnnotationOperationRequest = "argocd-pull.open-cluster-management.io/operation"

	// AnnotationOperationTerminate, on the Application a work carries, is the id of the
	// delivered operation that a hub user terminated (argocd app terminate-op): the agent
	// terminates it on the managed cluster, or cancels it when it has not started.
	AnnotationOperationTerminate = "argocd-pull.open-cluster-management.io/terminate-operation"

	// AnnotationOperationDelivered, on a spoke Application, is written by the cluster's
	// agent: the id of the last operation it delivered or cancelled there. An operation
	// of that id is never delivered again.
	AnnotationOperationDelivered = "argocd-pull.open-cluster-management.io/operation-delivered"

	// AnnotationRefreshID, on the Application a work carries beside Argo CD's refresh
	// annotation, is the id the manager gave that refresh request. Argo CD on the spoke
	// removes the refresh annotation when it has refreshed; the cluster's agent then
	// records the id in AnnotationRefreshed, which its report carries back, and the hub
	// Application's refresh annotation leaves in the status mirror's write of that report
	// (docs/propagation.md, "Operations").
	AnnotationRefreshID = "argocd-pull.open-cluster-management.io/refresh-id"

	// AnnotationRefreshed, on a spoke Application, is written by the cluster's agent: the
	// id of the last hub refresh that the spoke Argo CD completed.
	AnnotationRefreshed = "argocd-pull.open-cluster-management.io/refreshed"

	// OperationInfoID names the entry of a delivered operation's info
	// (.operation.info[].name) that holds its id. Argo CD copies the operation into
	// status.operationState.operation when it starts it, so the spoke's operationState
	// says which hub operation it is of.
	OperationInfoID = AnnotationOperationID

	// AnnotationHostingApplicationSet holds "<namespace>/<name>" of the ApplicationSet that
	// owns the Application, on both the ManifestWork and the pulled Application.
	AnnotationHostingApplicationSet = "apps.open-cluster-management.io/hosting-applicationset"

	// LabelApplicationSet is "true" on the ManifestWork and the pulled Application of an
	// Application that an ApplicationSet owns.
	LabelApplicationSet = "apps.open-cluster-management.io/application-set"

	// LabelApplicationSetHash, on a ManifestWork, holds ApplicationSetHash of the owning
	// ApplicationSet, so that one ApplicationSet's works can be listed with a selector.
	LabelApplicationSetHash = "apps.open-cluster-management.io/application-set-hash"

	// ResourcesFinalizer makes Argo CD prune the deployed resources before the
	// Application is deleted.
	ResourcesFinalizer = "resources-finalizer.argocd.argoproj.io"

	// LabelSecretType, set to SecretTypeCluster, marks a Secret as an Argo CD cluster: the
	// Argo CD instance of the Secret's namespace, and its ApplicationSet cluster
	// generator, list it as a destination cluster.
	LabelSecretType   = "argocd.argoproj.io/secret-type"
	SecretTypeCluster = "cluster"
)

// Markers that the hub propagation controller puts on the hub Applications it pulls.
const (
	// FinalizerManifestWorkCleanup holds a pulled hub Application until its ManifestWorks
	// are deleted. It is never copied to the managed cluster.
	FinalizerManifestWorkCleanup = "apps.open-cluster-management.io/manifestwork-cleanup"

	// LabelAddon, on a ManifestWork, names the addon (its ClusterManagementAddOn) whose
	// manager made the work. A manager updates and deletes only the works that carry
	// its own addon name: another pull controller, such as Red Hat ACM's, selects the
	// same pull label and names its works the same way.
	LabelAddon = "argocd-pull.open-cluster-management.io/addon"

	// ConditionOCMPropagationError is the type of the status condition that says why a
	// hub Application is not propagated to its managed cluster. Its message starts with
	// a reason, such as "AddonNotEnabled: ". The propagation controller owns it: it sets
	// and removes only this type, and other writers of status.conditions keep it.
	ConditionOCMPropagationError = "OCMPropagationError"

	// ReasonServedByAnotherController starts the OCMPropagationError message of a hub
	// Application that another pull controller serves (Red Hat ACM's, or this addon
	// under another name): one of its ManifestWorks does not carry LabelAddon of this
	// addon. The manager leaves the Application, its works and its report alone.
	ReasonServedByAnotherController = "ServedByAnotherController"
)

// Defaults of Argo CD and of the pull model.
const (
	// DefaultProject is the AppProject an Application with an empty spec.project uses.
	DefaultProject = "default"

	// DefaultAppNamespace is the namespace of the pulled Application when neither the
	// app-namespace annotation nor the hub Application's namespace gives one.
	DefaultAppNamespace = "argocd"

	// InClusterServer is the destination server of an Application that deploys to the
	// cluster its Argo CD runs in.
	InClusterServer = "https://kubernetes.default.svc"
)

// Names of the status feedback values that the hub requests for a pulled Application,
// and the JSONPaths the work agent reads them from. Existing consoles read these names.
const (
	FeedbackHealthStatus            = "healthStatus"
	FeedbackSyncStatus              = "syncStatus"
	FeedbackSyncRevision            = "syncRevision"
	FeedbackOperationStatePhase     = "operationStatePhase"
	FeedbackOperationStateStartedAt = "operationStateStartedAt"
	FeedbackOperationStateID        = "operationStateID"

	PathHealthStatus            = ".status.health.status"
	PathSyncStatus              = ".status.sync.status"
	PathSyncRevision            = ".status.sync.revision"
	PathOperationStatePhase     = ".status.operationState.phase"
	PathOperationStateStartedAt = ".status.operationState.startedAt"
	// PathOperationStateID reads the id of a delivered operation (OperationInfoID) from
	// the copy of the operation that Argo CD keeps in the operation state.
	PathOperationStateID = `.status.operationState.operation.info[?(@.name=="` + OperationInfoID + `")].value`
)

// FeedbackField pairs a status feedback name with the JSONPath it is read from.
type FeedbackField struct {
	Name string
	Path string
}

// FeedbackFields returns the status feedback requested for every pulled Application, in a
// stable order. The caller owns the returned slice.
func FeedbackFields() []FeedbackField {
	return []FeedbackField{
		{Name: FeedbackHealthStatus, Path: PathHealthStatus},
		{Name: FeedbackSyncStatus, Path: PathSyncStatus},
		{Name: FeedbackSyncRevision, Path: PathSyncRevision},
		{Name: FeedbackOperationStatePhase, Path: PathOperationStatePhase},
		{Name: FeedbackOperationStateStartedAt, Path: PathOperationStateStartedAt},
		{Name: FeedbackOperationStateID, Path: PathOperationStateID},
	}
}

// Coordinates of the Argo CD API.
const (
	Group   = "argoproj.io"
	Version = "v1alpha1"

	KindApplication    = "Application"
	KindAppProject     = "AppProject"
	KindApplicationSet = "ApplicationSet"

	ResourceApplications    = "applications"
	ResourceAppProjects     = "appprojects"
	ResourceApplicationSets = "applicationsets"
)

// Group-version kinds and resources of the Argo CD API.
var (
	GroupVersion = schema.GroupVersion{Group: Group, Version: Version}

	ApplicationGVK    = GroupVersion.WithKind(KindApplication)
	AppProjectGVK     = GroupVersion.WithKind(KindAppProject)
	ApplicationSetGVK = GroupVersion.WithKind(KindApplicationSet)

	ApplicationGVR    = GroupVersion.WithResource(ResourceApplications)
	AppProjectGVR     = GroupVersion.WithResource(ResourceAppProjects)
	ApplicationSetGVR = GroupVersion.WithResource(ResourceApplicationSets)
)

// Argo CD's sync statuses and health statuses (of an Application and of each of its
// resources) that the pull model reads.
const (
	SyncSynced        = "Synced"
	SyncOutOfSync     = "OutOfSync"
	HealthHealthy     = "Healthy"
	HealthProgressing = "Progressing"
)

// Argo CD's operation phases (status.operationState.phase).
const (
	OperationRunning     = "Running"
	OperationTerminating = "Terminating"
	OperationSucceeded   = "Succeeded"
	OperationFailed      = "Failed"
	OperationError       = "Error"
)

// OperationCompleted reports whether an Argo CD operation phase is final: Succeeded,
// Failed or Error (Running and Terminating are not).
func OperationCompleted(phase string) bool {
	return phase == OperationSucceeded || phase == OperationFailed || phase == OperationError
}
