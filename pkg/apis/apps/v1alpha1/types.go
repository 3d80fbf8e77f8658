package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Kind, resource and label of the report.
const (
	Kind     = "MulticlusterApplicationSetReport"
	Resource = "multiclusterapplicationsetreports"

	// LabelHostingApplicationSet is set on each report to "<namespace>.<name>" of its
	// ApplicationSet, cut to 63 characters (see HostingApplicationSetLabelValue).
	LabelHostingApplicationSet = "apps.open-cluster-management.io/hosting-applicationset"
)

// MulticlusterApplicationSetReport is the status of an ApplicationSet's pulled
// Applications on every managed cluster. It has the name and namespace of its
// ApplicationSet, which owns it.
//
// Like ACM's, it has no status subresource: its data is in the top-level field
// statuses, where existing dashboards read it, and the report controller owns the whole
// object.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=appsetreport;appsetreports
// +kubebuilder:printcolumn:name="Clusters",type=string,JSONPath=`.statuses.summary.clusters`
// +kubebuilder:printcolumn:name="Synced",type=string,JSONPath=`.statuses.summary.synced`
// +kubebuilder:printcolumn:name="Healthy",type=string,JSONPath=`.statuses.summary.healthy`
// +kubebuilder:printcolumn:name="In Progress",type=string,JSONPath=`.statuses.summary.inProgress`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type MulticlusterApplicationSetReport struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Statuses are the resources, per-cluster conditions and summary of the
	// ApplicationSet's pulled Applications.
	// +optional
	Statuses AppConditions `json:"statuses,omitempty"`
}

// AppConditions is the report's content.
type AppConditions struct {
	// Resources are the resources the Applications deployed, on any cluster: the union
	// of the clusters' lists, sorted. A resource that failed to deploy is left out; the
	// error conditions of its cluster say why.
	// +optional
	// +listType=atomic
	Resources []ResourceRef `json:"resources,omitempty"`

	// ClusterConditions has one entry per pulled Application, that is per cluster.
	// +optional
	// +listType=atomic
	ClusterConditions []ClusterCondition `json:"clusterConditions,omitempty"`

	// Summary counts the entries of ClusterConditions.
	// +optional
	Summary ReportSummary `json:"summary,omitempty"`

	// LastUpdateTime is when the report controller last changed the report. An addition
	// to ACM's schema.
	// +optional
	LastUpdateTime *metav1.Time `json:"lastUpdateTime,omitempty"`
}

// ResourceRef names one deployed resource.
type ResourceRef struct {
	// APIVersion is "<group>/<version>", or "<version>" for the core group.
	// +optional
	APIVersion string `json:"apiVersion,omitempty"`
	// +optional
	Kind string `json:"kind,omitempty"`
	// +optional
	Name string `json:"name,omitempty"`
	// +optional
	Namespace string `json:"namespace,omitempty"`
}

// ClusterCondition is the status of one pulled Application on its managed cluster.
type ClusterCondition struct {
	// Cluster is the managed cluster's name.
	// +optional
	Cluster string `json:"cluster,omitempty"`
	// App is "<ApplicationSet namespace>/<hub Application name>/<cluster namespace>/<ManifestWork name>".
	// +optional
	App string `json:"app,omitempty"`
	// SyncStatus is the Application's sync status; Unknown until the cluster reports.
	// +optional
	SyncStatus string `json:"syncStatus,omitempty"`
	// HealthStatus is the Application's health status; Unknown until the cluster reports.
	// +optional
	HealthStatus string `json:"healthStatus,omitempty"`
	// SyncRevision is the synced revision of a single-source Application.
	// +optional
	SyncRevision string `json:"syncRevision,omitempty"`
	// SyncRevisions are the synced revisions of a multi-source Application, one per
	// source. An addition to ACM's schema.
	// +optional
	// +listType=atomic
	SyncRevisions []string `json:"syncRevisions,omitempty"`
	// OperationStatePhase is the phase of the Application's last operation.
	// +optional
	OperationStatePhase string `json:"operationStatePhase,omitempty"`
	// OperationStateStartedAt is when the Application's last operation started.
	// +optional
	OperationStateStartedAt string `json:"operationStateStartedAt,omitempty"`
	// Conditions are the Application's error conditions, each message cut to a bounded
	// length, and the report's own StaleStatusWarning when the cluster's addon is
	// unavailable.
	// +optional
	// +listType=atomic
	Conditions []Condition `json:"conditions,omitempty"`
}

// Condition is one condition of an Application.
type Condition struct {
	// +optional
	Type string `json:"type,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
}

// ReportSummary counts the cluster conditions. Every count is a string, as in ACM's
// schema.
type ReportSummary struct {
	// Clusters counts the entries.
	// +optional
	Clusters string `json:"clusters,omitempty"`
	// Synced counts the entries whose sync status is Synced.
	// +optional
	Synced string `json:"synced,omitempty"`
	// NotSynced counts the entries of any other sync status, Unknown included.
	// +optional
	NotSynced string `json:"notSynced,omitempty"`
	// Healthy counts the entries whose health status is Healthy.
	// +optional
	Healthy string `json:"healthy,omitempty"`
	// NotHealthy counts the entries of any other health status, Progressing and Unknown
	// included.
	// +optional
	NotHealthy string `json:"notHealthy,omitempty"`
	// InProgress counts the entries whose health status is Progressing.
	// +optional
	InProgress string `json:"inProgress,omitempty"`
	// Stale counts the entries of clusters whose addon is unavailable, whose status is
	// the last one reported. An addition to ACM's schema.
	// +optional
	Stale string `json:"stale,omitempty"`
	// Truncated says what the report left out to stay within its byte budget; absent
	// when the report is complete. The counts above are exact either way: they are
	// counted before anything is cut. An addition to ACM's schema.
	// +optional
	Truncated *ReportTruncation `json:"truncated,omitempty"`
}

// ReportTruncation says what the byte budget of the report cut, in the order of
// docs/design.md (section 2.5). Each count compares the report with
// what it would hold without a budget.
type ReportTruncation struct {
	// BudgetBytes is the budget: the most bytes the report may take as JSON, metadata
	// included (the manager's --report-budget-bytes).
	BudgetBytes int64 `json:"budgetBytes"`
	// Clusters counts the entries of clusterConditions left out; summary counts them.
	// +optional
	Clusters int32 `json:"clusters,omitempty"`
	// Conditions counts the conditions left out of the entries shown.
	// +optional
	Conditions int32 `json:"conditions,omitempty"`
	// Messages counts the condition messages of the entries shown that were shortened
	// to fit the budget (beyond the usual bound of 512 bytes of an error message).
	// +optional
	Messages int32 `json:"messages,omitempty"`
	// Details counts the entries shown without their sync revisions and operation state.
	// +optional
	Details int32 `json:"details,omitempty"`
	// Resources counts the resources left out of resources.
	// +optional
	Resources int32 `json:"resources,omitempty"`
	// Message says what was cut, in words.
	// +optional
	Message string `json:"message,omitempty"`
}

// MulticlusterApplicationSetReportList is a list of reports.
//
// +kubebuilder:object:root=true
type MulticlusterApplicationSetReportList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MulticlusterApplicationSetReport `json:"items"`
}

func init() {
	SchemeBuilder.Register(&MulticlusterApplicationSetReport{}, &MulticlusterApplicationSetReportList{})
}
