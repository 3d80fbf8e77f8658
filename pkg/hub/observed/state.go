package observed

// This file merges the two channels into the State of one app.

import (
	"slices"

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
	// OperationReported: the agent's entry is of the operation that the phase and start
	// are of (the same phase and start).
	OperationReported bool
	// OperationFinish and OperationResult are the spoke's finishedAt and syncResult of the
	// operation that the phase and start are of; empty and nil when the agent's entry is
	// of another operation, or has none.
	OperationFinish string
	OperationResult *argoapp.SyncResult
	// OperationComparedBeforeFinish is the agent's entry's ComparedBeforeFinish of that
	// operation.
	OperationComparedBeforeFinish bool
	// Refreshed is the agent's entry's Refreshed: the id of the last hub refresh the
	// spoke Argo CD completed, whose result the entry is.
	Refreshed string
	// Reported is true when the agent's report carries the app: Resources and Conditions
	// are then known (possibly empty).
	Reported bool
	// ChannelsDiffer: the feedback and the agent's entry are of different states of the
	// app (another sync status or revision, health, operation or phase), so one of the two
	// has not caught up with the spoke yet.
	ChannelsDiffer bool
	Resources      []argoapp.ResourceStatus
	Conditions     []argoapp.Condition
	// History is the agent's entry's deployment history (status.history), oldest
	// first; nil when the entry has none (the app conditions never carry it).
	History []argoapp.RevisionHistory
}

// Known reports whether any channel said anything about the app.
func (s State) Known() bool {
	return s.Reported || s.SyncStatus != "" || s.HealthStatus != "" || s.OperationPhase != ""
}

// MaxAgentMessageBytes bounds each message of an agent's entry that reaches a hub object
// (the hub Application's health, operation, condition and resource health messages, the
// MulticlusterApplicationSetReport's): the agent's own cut, clusterreport.MaxMessageBytes.
// The schema of the slices counts characters, so a message may reach the hub longer in
// bytes; Merge shortens it, with clusterreport.Ellipsis.
const MaxAgentMessageBytes = clusterreport.MaxMessageBytes

// IsManagerCondition reports whether a condition type of a hub Application is the
// manager's own: the propagation controller's OCMPropagationError, and the notes the hub
// adds about the data it shows (ConditionStale, ConditionInvalidReport,
// ConditionNotReported). An agent's report never carries them: Merge drops them, so that
// an agent can neither hide nor replace the manager's condition, nor move the time from
// which the opt-out grace period counts (its lastTransitionTime).
func IsManagerCondition(conditionType string) bool {
	switch conditionType {
	case argoapp.ConditionOCMPropagationError, ConditionStale, ConditionInvalidReport, ConditionNotReported:
		return true
	}
	return false
}

// Merge combines the feedback and the agent's entry (nil when not reported). It is the
// one place where an agent's entry, from either channel, becomes what the hub shows: it
// drops the agent's conditions of the manager's types (IsManagerCondition) and shortens
// every message to MaxAgentMessageBytes.
func Merge(f Feedback, agent *clusterreport.App) State {
	s := State{
		SyncStatus: f.SyncStatus, SyncRevision: f.SyncRevision, HealthStatus: f.HealthStatus,
		OperationPhase: f.OperationStatePhase, OperationStart: f.OperationStateStartedAt,
	}
	if agent == nil {
		return s
	}
	s.Reported = true
	s.Refreshed = agent.Refreshed
	s.SyncStatus = firstNonEmpty(s.SyncStatus, agent.Sync.Status)
	s.SyncRevision = firstNonEmpty(s.SyncRevision, agent.Sync.Revision)
	s.SyncRevisions = agent.Sync.Revisions
	s.HealthStatus = firstNonEmpty(s.HealthStatus, agent.Health.Status)
	if s.HealthStatus == agent.Health.Status {
		s.HealthMessage = shorten(agent.Health.Message) // the message of another status would mislead
	}
	s.OperationPhase = firstNonEmpty(s.OperationPhase, agent.Operation.Phase)
	s.OperationStart = firstNonEmpty(s.OperationStart, agent.Operation.StartedAt)
	if s.OperationPhase == agent.Operation.Phase && s.OperationStart == agent.Operation.StartedAt {
		s.OperationMsg = shorten(agent.Operation.Message)
		s.OperationReported = true
		s.OperationFinish = agent.Operation.FinishedAt
		s.OperationResult = agentSyncResult(agent.Operation.SyncResult)
		s.OperationComparedBeforeFinish = agent.Operation.ComparedBeforeFinish
	}
	s.ChannelsDiffer = !f.Empty() && (differs(f.SyncStatus, agent.Sync.Status) || differs(f.SyncRevision, agent.Sync.Revision) ||
		differs(f.HealthStatus, agent.Health.Status) ||
		differs(f.OperationStatePhase, agent.Operation.Phase) || differs(f.OperationStateStartedAt, agent.Operation.StartedAt))
	s.Resources = agentResources(agent.Resources)
	s.Conditions = agentConditions(agent.Conditions)
	s.History = agent.History
	return s
}

// agentSyncResult returns r with its messages shortened: r itself when none is too long.
func agentSyncResult(r *argoapp.SyncResult) *argoapp.SyncResult {
	if r == nil || !slices.ContainsFunc(r.Resources, func(res argoapp.ResourceResult) bool { return len(res.Message) > MaxAgentMessageBytes }) {
		return r
	}
	out := *r
	out.Resources = slices.Clone(r.Resources)
	for i := range out.Resources {
		out.Resources[i].Message = shorten(out.Resources[i].Message)
	}
	return &out
}

func shorten(message string) string {
	return clusterreport.TruncateMessage(message, MaxAgentMessageBytes)
}

// agentResources returns the resources with their health messages shortened: resources
// itself when none is too long, as nearly always.
func agentResources(resources []argoapp.ResourceStatus) []argoapp.ResourceStatus {
	if !slices.ContainsFunc(resources, func(r argoapp.ResourceStatus) bool { return len(r.Health.Message) > MaxAgentMessageBytes }) {
		return resources
	}
	out := slices.Clone(resources)
	for i := range out {
		out[i].Health.Message = shorten(out[i].Health.Message)
	}
	return out
}

// agentConditions returns the conditions without those of the manager's types and with
// their messages shortened: conditions itself when that changes nothing.
func agentConditions(conditions []argoapp.Condition) []argoapp.Condition {
	if !slices.ContainsFunc(conditions, func(c argoapp.Condition) bool {
		return IsManagerCondition(c.Type) || len(c.Message) > MaxAgentMessageBytes
	}) {
		return conditions
	}
	out := make([]argoapp.Condition, 0, len(conditions))
	for _, c := range conditions {
		if !IsManagerCondition(c.Type) {
			out = append(out, argoapp.Condition{Type: c.Type, Message: shorten(c.Message)})
		}
	}
	return out
}

// differs reports whether the feedback's value of a field is known and not the agent's.
func differs(feedback, agent string) bool {
	return feedback != "" && feedback != agent
}

func firstNonEmpty(values ...string) string {
	for _, v := range values {
		if v != "" {
			return v
		}
	}
	return ""
}
