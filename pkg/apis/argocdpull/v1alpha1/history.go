package v1alpha1

// RevisionHistory is one entry of the Application's status.history on the managed
// cluster: a sync that Argo CD completed there. The hub writes it into the hub
// Application's status.history, which `argocd app history` prints and `argocd app
// rollback` reads (the entry's revision and source become the rollback's sync). The
// encoder (clusterreport) carries a source whole or not at all: a source cut short would
// roll back to something else.
type RevisionHistory struct {
	// ID is Argo CD's id of the entry.
	// +kubebuilder:validation:Minimum=0
	ID int64 `json:"id"`
	// Revision is the revision a single-source Application was synced to.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Revision string `json:"revision,omitempty"`
	// Revisions are the revisions of each source of a multi-source Application.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=253
	// +listType=atomic
	Revisions []string `json:"revisions,omitempty"`
	// DeployedAt and DeployStartedAt are when the sync finished and started, RFC 3339.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	DeployedAt string `json:"deployedAt,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=64
	DeployStartedAt string `json:"deployStartedAt,omitempty"`
	// Source is the source of a single-source sync; absent when it did not fit.
	// +optional
	Source *HistorySource `json:"source,omitempty"`
	// Sources are the sources of a multi-source sync; absent when they did not fit.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +listType=atomic
	Sources []HistorySource `json:"sources,omitempty"`
	// SameSourcesAsPrevious: the entry's source (or sources) is that of the entry before
	// it in the list, which is not repeated. Most syncs of an app are of the same source.
	// +optional
	SameSourcesAsPrevious bool `json:"sameSourcesAsPrevious,omitempty"`
	// InitiatedBy is who started the sync.
	// +optional
	InitiatedBy *HistoryInitiator `json:"initiatedBy,omitempty"`
}

// HistorySource is Argo CD's ApplicationSource of a history entry: the fields that say
// where the manifests are, and its other fields (helm, kustomize, directory, plugin) as
// JSON.
type HistorySource struct {
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	RepoURL string `json:"repoURL,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Path string `json:"path,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=253
	TargetRevision string `json:"targetRevision,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Chart string `json:"chart,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Ref string `json:"ref,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`
	// Details is the JSON object of the source's other fields (helm, kustomize,
	// directory, plugin).
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Details string `json:"details,omitempty"`
}

// HistoryInitiator is who started a sync: a user, or Argo CD's auto-sync.
type HistoryInitiator struct {
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Username string `json:"username,omitempty"`
	// +optional
	Automated bool `json:"automated,omitempty"`
}
