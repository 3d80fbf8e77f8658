package observed

// This file merges the two channels into the State of one app.

import (
	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/clusterreport"
)

// StatusUnknown is the sync and health status of an Application whose cluster has not
// reported it yet.
const StatusUnknown = "Unknown"

// State is the status of one pulled Application as the hub sees it: the feedback's
// scalars first (the faster channel), the agent's report for the rest.
type State struct {
	SyncStatus     string
	SyncRevision   string
	SyncRevisions  []string
	HealthStatus   string
	HealthMessage  string
	OperationPhase string
	OperationStart string
	OperationMsg   string
	// Reported is true when the agent's report carries the app: Resources and Conditions
	// are then known (possibly empty).
	Reported   bool
	Resources  []argoapp.ResourceStatus
	Conditions []argoapp.Condition
}

// Known reports whether any channel said anything about the app.
func (s State) Known() bool {
	return s.Reported || s.SyncStatus != "" || s.HealthStatus != "" || s.OperationPhase != ""
}

// Merge combines the feedback and the agent's entry (nil when not reported).
func Merge(f Feedback, agent *clusterreport.App) State {
	s := State{
		SyncStatus: f.SyncStatus, SyncRevision: f.SyncRevision, HealthStatus: f.HealthStatus,
		OperationPhase: f.OperationStatePhase, OperationStart: f.OperationStateStartedAt,
	}
	if agent == nil {
		return s
	}
	s.Reported = true
	s.SyncStatus = firstNonEmpty(s.SyncStatus, agent.Sync.Status)
	s.SyncRevision = firstNonEmpty(s.SyncRevision, agent.Sync.Revision)
	s.SyncRevisions = agent.Sync.Revisions
	s.HealthStatus = firstNonEmpty(s.HealthStatus, agent.Health.Status)
	if s.HealthStatus == agent.Health.Status {
		s.HealthMessage = agent.Health.Message // the message of another status would mislead
	}
	s.OperationPhase = firstNonEmpty(s.OperationPhase, agent.Operation.Phase)
	s.OperationStart = firstNonEmpty(s.OperationStart, agent.Operation.StartedAt)
	if s.OperationPhase == agent.Operation.Phase && s.OperationStart == agent.Operation.StartedAt {
		s.OperationMsg = agent.Operation.Message
	}
	s.Resources = agent.Resources
	s.Conditions = agent.Conditions
	return s
}

func firstNonEmpty(values ...string) string {
	for _, v := range values {
		if v != "" {
			return v
		}
	}
	return ""
}
