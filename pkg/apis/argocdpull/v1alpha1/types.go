package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Kind, resource and label of the status channel.
//
// Every string and list of an ApplicationStatusSlice is bounded in its schema (the
// kubebuilder markers below), so that an agent cannot store more than the agent's own
// encoder (pkg/clusterreport) ever writes: the bounds are those of the encoder, which
// cuts to them, and clusterreport's TestSliceSchemaBoundsAreTheEncoders checks that the
// generated CRD says the same. maxLength counts characters; the encoder counts bytes,
// which are at least as many. The schema has no CEL rule: plain bounds cost the
// apiserver nothing to estimate.
const (
	Kind     = "ApplicationStatusSlice"
	Resource = "applicationstatusslices"

	// LabelAddon is set on each slice to the name of the addon whose agent wrote it; the
	// agent and the hub select the slices with it.
	LabelAddon = "argocd-pull.open-cluster-management.io/addon"
)

// TreeSource says where the nodes and resource health of an app came from.
// +kubebuilder:validation:Enum=ArgoCDCache;None
type TreeSource string

const (
	// TreeSourceArgoCDCache: Argo CD's application-controller's resource tree, read from
	// its cache (Redis).
	TreeSourceArgoCDCache TreeSource = "ArgoCDCache"
	// TreeSourceNone: the tree could not be read (TreeMessage says why); the app carries
	// what status.resources holds, without nodes.
	TreeSourceNone TreeSource = "None"
)

// TruncationReason says why an app was cut.
// +kubebuilder:validation:Enum=ExceedsSliceLimit
type TruncationReason string

// TruncationExceedsSliceLimit: the app alone does not fit in one slice of the maximum
// size, or has more items in a list than a slice holds; its nodes, then its messages,
// then its healthy resources were left out.
const TruncationExceedsSliceLimit TruncationReason = "ExceedsSliceLimit"

// ApplicationStatusSlice holds the complete status of some of the Argo CD Applications of
// one managed cluster. It lives in the cluster namespace on the hub and is written only
// by that cluster's agent; each slice is bounded in bytes, and there are as many as the
// apps need. An app is in exactly one slice.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=appstatusslice;appstatusslices
// +kubebuilder:printcolumn:name="Apps",type=integer,JSONPath=`.appCount`
// +kubebuilder:printcolumn:name="Format",type=integer,JSONPath=`.formatVersion`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ApplicationStatusSlice struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// FormatVersion is the version of the meaning of the content; the hub rejects a
	// slice of a version it does not know.
	FormatVersion int32 `json:"formatVersion"`

	// AppCount is len(apps), for kubectl get.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	AppCount int32 `json:"appCount,omitempty"`

	// Apps are the slice's Applications, sorted by namespace and name; at most
	// clusterreport.MaxAppsPerSlice.
	// +optional
	// +kubebuilder:validation:MaxItems=1000
	// +listType=map
	// +listMapKey=namespace
	// +listMapKey=name
	Apps []AppStatus `json:"apps,omitempty"`
}

// AppStatus is the status of one Application on the managed cluster. An Application
// that no hub pulled (made on the cluster) is reported by its identity and observedAt
// alone, so that the hub never pulls another Application over it.
type AppStatus struct {
	// Namespace and Name identify the Application on the managed cluster.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Namespace string `json:"namespace"`
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// Hub points back to the hub Application, when the Application carries the
	// hub-application annotations.
	// +optional
	Hub *ObjectRef `json:"hub,omitempty"`
	// ApplicationSet is "<namespace>/<name>" of the hub ApplicationSet.
	// +optional
	// +kubebuilder:validation:MaxLength=507
	ApplicationSet string `json:"applicationSet,omitempty"`
	// ManifestWork is the ManifestWork, in the cluster namespace, that carries the
	// Application.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	ManifestWork string `json:"manifestWork,omitempty"`
	// Refreshed is the id of the last hub refresh that the managed cluster's Argo CD
	// completed (the Application's annotation
	// argocd-pull.open-cluster-management.io/refreshed): the entry's status is from after
	// that refresh.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Refreshed string `json:"refreshed,omitempty"`

	// +optional
	Sync SyncStatus `json:"sync,omitempty"`
	// +optional
	Health *Health `json:"health,omitempty"`
	// +optional
	Operation *OperationState `json:"operation,omitempty"`

	// Conditions are Argo CD's conditions of the Application: errors (type ending in
	// "Error") first, then warnings.
	// +optional
	// +kubebuilder:validation:MaxItems=1000
	// +listType=atomic
	Conditions []Condition `json:"conditions,omitempty"`

	// Resources are every managed resource of the Application.
	// +optional
	// +kubebuilder:validation:MaxItems=20000
	// +listType=atomic
	Resources []ResourceStatus `json:"resources,omitempty"`

	// Nodes are the other nodes of Argo CD's resource tree: the children it tracks
	// (ReplicaSets, Pods, ...), with their parents.
	// +optional
	// +kubebuilder:validation:MaxItems=20000
	// +listType=atomic
	Nodes []ResourceNode `json:"nodes,omitempty"`

	// TreeSource says where Nodes and the resources' health came from.
	// +optional
	TreeSource TreeSource `json:"treeSource,omitempty"`
	// TreeMessage says why the tree could not be read.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	TreeMessage string `json:"treeMessage,omitempty"`

	// Diffs are, for each OutOfSync resource, the states Argo CD's diff compares, as the
	// managed cluster's application-controller cached them (Secrets redacted as it
	// redacts them): what `argocd app diff` and the UI's diff show on the hub. Synced
	// resources have none. At most clusterreport.MaxDiffsPerApp, their states together
	// at most clusterreport.MaxDiffBytesPerApp.
	// +optional
	// +kubebuilder:validation:MaxItems=1000
	// +listType=atomic
	Diffs []ResourceDiff `json:"diffs,omitempty"`
	// DiffsOmitted counts the OutOfSync resources that Diffs leaves out, and DiffsMessage
	// says why (the app's budget, a state the agent could not read or check).
	// +optional
	// +kubebuilder:validation:Minimum=0
	DiffsOmitted int32 `json:"diffsOmitted,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	DiffsMessage string `json:"diffsMessage,omitempty"`
	// History is the last entries of the Application's status.history, oldest first
	// (clusterreport.MaxHistoryEntries).
	// +optional
	// +kubebuilder:validation:MaxItems=10
	// +listType=atomic
	History []RevisionHistory `json:"history,omitempty"`

	// ObservedAt is when the agent first observed the Application in its current state.
	ObservedAt metav1.Time `json:"observedAt"`

	// Truncated is set when the app alone did not fit in a slice and was cut.
	// +optional
	Truncated *Truncation `json:"truncated,omitempty"`

	// Digest is not part of the API and never serialized: the hub's cache sets it to the
	// bytes of clusterreport.EntryDigest of the entry as the agent wrote it, before it
	// drops the tree's nodes, the diffs and the resources' images, so that a change of
	// those is still seen.
	Digest string `json:"-"`
	// Size is not part of the API and never serialized: the hub's cache sets it to the
	// clusterreport.EntrySize of the entry as the agent wrote it, which EntrySize returns
	// for the entry the cache keeps, so that the hub checks a slice's size as the agent
	// wrote it.
	Size int `json:"-"`
	// PackedResources is not part of the API and never serialized: the hub's cache holds
	// the entry's Resources here, packed (hubcache.PackResources), and Resources empty.
	PackedResources string `json:"-"`
}

// ObjectRef points to a namespaced object.
type ObjectRef struct {
	// +kubebuilder:validation:MaxLength=253
	Namespace string `json:"namespace"`
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// SyncStatus is status.sync.
type SyncStatus struct {
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Status string `json:"status,omitempty"`
	// Revision is the synced revision of a single-source Application.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Revision string `json:"revision,omitempty"`
	// Revisions are the synced revisions of a multi-source Application, one per source.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=253
	// +listType=atomic
	Revisions []string `json:"revisions,omitempty"`
}

// Health is the health of an Application or of one resource.
type Health struct {
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Status string `json:"status,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
}

// OperationState is status.operationState.
type OperationState struct {
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Phase string `json:"phase,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=64
	StartedAt string `json:"startedAt,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=64
	FinishedAt string `json:"finishedAt,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
	// SyncResult is the result of a sync operation: what Argo CD's CLI reads of it.
	// +optional
	SyncResult *SyncResult `json:"syncResult,omitempty"`
	// ComparedBeforeFinish: the operation is finished, and the app's status was compared
	// before it finished (status.reconciledAt before finishedAt); Argo CD compares again
	// right after.
	// +optional
	ComparedBeforeFinish bool `json:"comparedBeforeFinish,omitempty"`
}

// SyncResult is status.operationState.syncResult.
type SyncResult struct {
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Revision string `json:"revision,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=253
	// +listType=atomic
	Revisions []string `json:"revisions,omitempty"`
	// Resources are the results of the resources the sync touched.
	// +optional
	// +kubebuilder:validation:MaxItems=20000
	// +listType=atomic
	Resources []ResourceResult `json:"resources,omitempty"`
}

// ResourceResult is what a sync did with one resource.
type ResourceResult struct {
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Group string `json:"group,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Version string `json:"version,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Kind string `json:"kind,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Namespace string `json:"namespace,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`
	// Status is the result: Synced, SyncFailed, Pruned or PruneSkipped.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Status string `json:"status,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=64
	HookType string `json:"hookType,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=64
	HookPhase string `json:"hookPhase,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=64
	SyncPhase string `json:"syncPhase,omitempty"`
}

// Condition is one of Argo CD's conditions of an Application.
type Condition struct {
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Type string `json:"type,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
}

// ResourceStatus is one managed resource of an Application.
type ResourceStatus struct {
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Group string `json:"group,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Version string `json:"version,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Kind string `json:"kind,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Namespace string `json:"namespace,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`
	// Status is the resource's sync status.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Status string `json:"status,omitempty"`
	// +optional
	Health *Health `json:"health,omitempty"`
	// Images are the container images of the resource, from the tree.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=512
	// +listType=atomic
	Images []string `json:"images,omitempty"`
}

// ResourceNode is a node of Argo CD's resource tree that is not a managed resource.
type ResourceNode struct {
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Group string `json:"group,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Version string `json:"version,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Kind string `json:"kind,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Namespace string `json:"namespace,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`
	// ParentRefs are the node's owners in the tree.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +listType=atomic
	ParentRefs []ResourceRef `json:"parentRefs,omitempty"`
	// +optional
	Health *Health `json:"health,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=512
	// +listType=atomic
	Images []string `json:"images,omitempty"`
}

// ResourceDiff is what Argo CD's diff compares of one OutOfSync managed resource: the
// JSON of its normalized live state, of its target state, and of the live state Argo CD
// predicts after a sync (Argo CD's ResourceDiff NormalizedLiveState, TargetState and
// PredictedLiveState). An empty state is one Argo CD has not: no live object (to be
// created), no target (to be pruned). A Secret's data and stringData hold only Argo CD's
// "+" masks (clusterreport.RedactedState).
type ResourceDiff struct {
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Group string `json:"group,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Kind string `json:"kind,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Namespace string `json:"namespace,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=262144
	LiveState string `json:"liveState,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=262144
	TargetState string `json:"targetState,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=262144
	PredictedLiveState string `json:"predictedLiveState,omitempty"`
}

// ResourceRef names a resource of the tree.
type ResourceRef struct {
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Group string `json:"group,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Kind string `json:"kind,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Namespace string `json:"namespace,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`
}

// Truncation says what was left out of an app that alone exceeds a slice.
type Truncation struct {
	Reason TruncationReason `json:"reason"`
	// +optional
	// +kubebuilder:validation:Minimum=0
	ResourcesOmitted int32 `json:"resourcesOmitted,omitempty"`
	// +optional
	// +kubebuilder:validation:Minimum=0
	NodesOmitted int32 `json:"nodesOmitted,omitempty"`
	// +optional
	// +kubebuilder:validation:Minimum=0
	ConditionsOmitted int32 `json:"conditionsOmitted,omitempty"`
	// +optional
	// +kubebuilder:validation:Minimum=0
	SyncResultsOmitted int32 `json:"syncResultsOmitted,omitempty"`
	// MessagesShortened: messages were cut below their usual limit.
	// +optional
	MessagesShortened bool `json:"messagesShortened,omitempty"`
}

// ApplicationStatusSliceList is a list of slices.
//
// +kubebuilder:object:root=true
type ApplicationStatusSliceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ApplicationStatusSlice `json:"items"`
}

func init() {
	SchemeBuilder.Register(&ApplicationStatusSlice{}, &ApplicationStatusSliceList{})
}
