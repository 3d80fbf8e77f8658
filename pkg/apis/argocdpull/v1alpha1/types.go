package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Kind, resource and label of the status channel.
const (
	Kind     = "ApplicationStatusSlice"
	Resource = "applicationstatusslices"

	// LabelAddon is set on each slice to the name of the addon whose agent wrote it; the
	// agent and the hub select the slices with it.
	LabelAddon = "argocd-pull.open-cluster-management.io/addon"
)

// TreeSource says where the nodes and resource health of an app came from.
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
type TruncationReason string

// TruncationExceedsSliceLimit: the app alone does not fit in one slice of the maximum
// size; its nodes, then its messages, then its healthy resources were left out.
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
	AppCount int32 `json:"appCount,omitempty"`

	// Apps are the slice's Applications, sorted by namespace and name.
	// +optional
	// +listType=map
	// +listMapKey=namespace
	// +listMapKey=name
	Apps []AppStatus `json:"apps,omitempty"`
}

// AppStatus is the status of one Application on the managed cluster.
type AppStatus struct {
	// Namespace and Name identify the Application on the managed cluster.
	Namespace string `json:"namespace"`
	Name      string `json:"name"`

	// Hub points back to the hub Application, when the Application carries the
	// hub-application annotations.
	// +optional
	Hub *ObjectRef `json:"hub,omitempty"`
	// ApplicationSet is "<namespace>/<name>" of the hub ApplicationSet.
	// +optional
	ApplicationSet string `json:"applicationSet,omitempty"`
	// ManifestWork is the ManifestWork, in the cluster namespace, that carries the
	// Application.
	// +optional
	ManifestWork string `json:"manifestWork,omitempty"`

	// +optional
	Sync SyncStatus `json:"sync,omitempty"`
	// +optional
	Health *Health `json:"health,omitempty"`
	// +optional
	Operation *OperationState `json:"operation,omitempty"`

	// Conditions are Argo CD's conditions of the Application: errors (type ending in
	// "Error") first, then warnings.
	// +optional
	// +listType=atomic
	Conditions []Condition `json:"conditions,omitempty"`

	// Resources are every managed resource of the Application.
	// +optional
	// +listType=atomic
	Resources []ResourceStatus `json:"resources,omitempty"`

	// Nodes are the other nodes of Argo CD's resource tree: the children it tracks
	// (ReplicaSets, Pods, ...), with their parents.
	// +optional
	// +listType=atomic
	Nodes []ResourceNode `json:"nodes,omitempty"`

	// TreeSource says where Nodes and the resources' health came from.
	// +optional
	TreeSource TreeSource `json:"treeSource,omitempty"`
	// TreeMessage says why the tree could not be read.
	// +optional
	TreeMessage string `json:"treeMessage,omitempty"`

	// ObservedAt is when the agent first observed the Application in its current state.
	ObservedAt metav1.Time `json:"observedAt"`

	// Truncated is set when the app alone did not fit in a slice and was cut.
	// +optional
	Truncated *Truncation `json:"truncated,omitempty"`

	// Digest is not part of the API and never serialized: the hub's cache sets it to the
	// bytes of clusterreport.EntryDigest of the entry as the agent wrote it, before it
	// drops the tree's nodes and the resources' images, so that a change of those is
	// still seen.
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
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// SyncStatus is status.sync.
type SyncStatus struct {
	// +optional
	Status string `json:"status,omitempty"`
	// Revision is the synced revision of a single-source Application.
	// +optional
	Revision string `json:"revision,omitempty"`
	// Revisions are the synced revisions of a multi-source Application, one per source.
	// +optional
	// +listType=atomic
	Revisions []string `json:"revisions,omitempty"`
}

// Health is the health of an Application or of one resource.
type Health struct {
	// +optional
	Status string `json:"status,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
}

// OperationState is status.operationState.
type OperationState struct {
	// +optional
	Phase string `json:"phase,omitempty"`
	// +optional
	StartedAt string `json:"startedAt,omitempty"`
	// +optional
	FinishedAt string `json:"finishedAt,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
}

// Condition is one of Argo CD's conditions of an Application.
type Condition struct {
	// +optional
	Type string `json:"type,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
}

// ResourceStatus is one managed resource of an Application.
type ResourceStatus struct {
	// +optional
	Group string `json:"group,omitempty"`
	// +optional
	Version string `json:"version,omitempty"`
	// +optional
	Kind string `json:"kind,omitempty"`
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// +optional
	Name string `json:"name,omitempty"`
	// Status is the resource's sync status.
	// +optional
	Status string `json:"status,omitempty"`
	// +optional
	Health *Health `json:"health,omitempty"`
	// Images are the container images of the resource, from the tree.
	// +optional
	// +listType=atomic
	Images []string `json:"images,omitempty"`
}

// ResourceNode is a node of Argo CD's resource tree that is not a managed resource.
type ResourceNode struct {
	// +optional
	Group string `json:"group,omitempty"`
	// +optional
	Version string `json:"version,omitempty"`
	// +optional
	Kind string `json:"kind,omitempty"`
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// +optional
	Name string `json:"name,omitempty"`
	// ParentRefs are the node's owners in the tree.
	// +optional
	// +listType=atomic
	ParentRefs []ResourceRef `json:"parentRefs,omitempty"`
	// +optional
	Health *Health `json:"health,omitempty"`
	// +optional
	// +listType=atomic
	Images []string `json:"images,omitempty"`
}

// ResourceRef names a resource of the tree.
type ResourceRef struct {
	// +optional
	Group string `json:"group,omitempty"`
	// +optional
	Kind string `json:"kind,omitempty"`
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// +optional
	Name string `json:"name,omitempty"`
}

// Truncation says what was left out of an app that alone exceeds a slice.
type Truncation struct {
	Reason TruncationReason `json:"reason"`
	// +optional
	ResourcesOmitted int32 `json:"resourcesOmitted,omitempty"`
	// +optional
	NodesOmitted int32 `json:"nodesOmitted,omitempty"`
	// +optional
	ConditionsOmitted int32 `json:"conditionsOmitted,omitempty"`
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
