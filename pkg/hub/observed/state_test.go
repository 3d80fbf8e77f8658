package observed

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/clusterreport"
)

// TestMergeShortensTheAgentsMessages: every message of an agent's entry reaches the hub
// at most MaxAgentMessageBytes long, cut at a character with clusterreport.Ellipsis;
// what is within the bound is the agent's string itself.
func TestMergeShortensTheAgentsMessages(t *testing.T) {
	for _, tc := range []struct {
		name    string
		message string
		want    string
	}{
		{"empty", "", ""},
		{"short", "Deployment does not have minimum availability", "Deployment does not have minimum availability"},
		{"at the bound", strings.Repeat("x", MaxAgentMessageBytes), strings.Repeat("x", MaxAgentMessageBytes)},
		{"one byte over", strings.Repeat("x", MaxAgentMessageBytes+1), strings.Repeat("x", MaxAgentMessageBytes-3) + clusterreport.Ellipsis},
		{"0.9 MB", strings.Repeat("x", 900_000), strings.Repeat("x", MaxAgentMessageBytes-3) + clusterreport.Ellipsis},
		// 1,024 characters, which the slices' schema admits, of 2 bytes each.
		{"1,024 characters of 2 bytes", strings.Repeat("é", MaxAgentMessageBytes), strings.Repeat("é", (MaxAgentMessageBytes-3)/2) + clusterreport.Ellipsis},
	} {
		t.Run(tc.name, func(t *testing.T) {
			agent := &clusterreport.App{
				Health:     argoapp.HealthStatus{Status: "Degraded", Message: tc.message},
				Operation:  argoapp.OperationState{Phase: "Failed", StartedAt: "2026-01-01T00:00:00Z", Message: tc.message},
				Conditions: []argoapp.Condition{{Type: "SyncError", Message: tc.message}},
				Resources:  []argoapp.ResourceStatus{{Kind: "Pod", Name: "p", Health: argoapp.HealthStatus{Status: "Degraded", Message: tc.message}}},
			}
			s := Merge(Feedback{}, agent)
			for what, got := range map[string]string{
				"health message": s.HealthMessage, "operation message": s.OperationMsg,
				"condition message": s.Conditions[0].Message, "resource health message": s.Resources[0].Health.Message,
			} {
				if got != tc.want || len(got) > MaxAgentMessageBytes || !utf8.ValidString(got) {
					t.Errorf("%s: %d bytes %.40q..., want %d bytes %.40q...", what, len(got), got, len(tc.want), tc.want)
				}
			}
			if agent.Conditions[0].Message != tc.message || agent.Resources[0].Health.Message != tc.message {
				t.Error("Merge changed the agent's entry, which the cache holds")
			}
		})
	}
}

// TestMergeDropsTheManagersConditionTypes: an agent's condition of a type the manager
// owns never reaches the hub; Argo CD's reach it as they are.
func TestMergeDropsTheManagersConditionTypes(t *testing.T) {
	agent := &clusterreport.App{Conditions: []argoapp.Condition{
		{Type: "SyncError", Message: "boom"},
		{Type: argoapp.ConditionOCMPropagationError, Message: "ClusterNotBoundToNamespace: forged by the agent"},
		{Type: ConditionStale, Message: "forged"},
		{Type: ConditionInvalidReport, Message: "forged"},
		{Type: ConditionNotReported, Message: "forged"},
		{Type: "SharedResourceWarning", Message: "shared"},
	}}
	got := Merge(Feedback{}, agent).Conditions
	want := []argoapp.Condition{{Type: "SyncError", Message: "boom"}, {Type: "SharedResourceWarning", Message: "shared"}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("conditions %v, want %v", got, want)
	}
	if len(agent.Conditions) != 6 {
		t.Error("Merge changed the agent's entry")
	}
	plain := &clusterreport.App{Conditions: want}
	if got := Merge(Feedback{}, plain).Conditions; &got[0] != &plain.Conditions[0] {
		t.Error("conditions with nothing to drop or shorten were copied")
	}
}

// TestMergeTellsWhetherTheChannelsDiffer: the channels differ when the feedback knows a
// sync status or revision, health, operation phase or start that the agent's entry does
// not say; a value that the feedback does not carry (no feedback yet, or a field without
// a value) differs from nothing.
func TestMergeTellsWhetherTheChannelsDiffer(t *testing.T) {
	agent := &clusterreport.App{
		Sync:      argoapp.SyncStatus{Status: "Synced", Revision: "abc"},
		Health:    argoapp.HealthStatus{Status: "Healthy"},
		Operation: argoapp.OperationState{Phase: "Succeeded", StartedAt: "2026-01-01T00:00:00Z"},
	}
	same := Feedback{SyncStatus: "Synced", SyncRevision: "abc", HealthStatus: "Healthy", OperationStatePhase: "Succeeded", OperationStateStartedAt: "2026-01-01T00:00:00Z"}
	for _, tc := range []struct {
		name   string
		change func(*Feedback)
		want   bool
	}{
		{"the same state", func(*Feedback) {}, false},
		{"no feedback", func(f *Feedback) { *f = Feedback{} }, false},
		{"only health known", func(f *Feedback) { *f = Feedback{HealthStatus: "Healthy"} }, false},
		{"another sync status", func(f *Feedback) { f.SyncStatus = "OutOfSync" }, true},
		{"another revision", func(f *Feedback) { f.SyncRevision = "def" }, true},
		{"another health", func(f *Feedback) { f.HealthStatus = "Progressing" }, true},
		{"another phase", func(f *Feedback) { f.OperationStatePhase = "Running" }, true},
		{"another operation", func(f *Feedback) { f.OperationStateStartedAt = "2026-01-01T00:01:00Z" }, true},
	} {
		f := same
		tc.change(&f)
		if got := Merge(f, agent).ChannelsDiffer; got != tc.want {
			t.Errorf("%s: ChannelsDiffer = %v; want %v", tc.name, got, tc.want)
		}
	}
	if Merge(same, nil).ChannelsDiffer {
		t.Error("ChannelsDiffer without an agent's entry")
	}
}
