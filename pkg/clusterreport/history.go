package clusterreport

// This file carries an app's deployment history (status.history) in its status-channel
// entry, for `argocd app history` and `argocd app rollback` on the hub.

import (
	"encoding/json"
	"slices"

	statusv1alpha1 "github.com/ocm-gitops/argocd-pull-addon/pkg/apis/argocdpull/v1alpha1"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
)

// Bounds of an app's history in its entry. The schema of ApplicationStatusSlice says
// the same (TestSliceSchemaBoundsAreTheEncoders).
const (
	// MaxHistoryEntries is how many entries of status.history an app carries, the last:
	// Argo CD's default revisionHistoryLimit (argoapp.HistoryLimit).
	MaxHistoryEntries = argoapp.HistoryLimit

	// MaxHistorySourceBytes bounds the repoURL, path and chart of a history source, and
	// MaxHistorySourceDetailsBytes the JSON of its other fields (helm, kustomize,
	// directory, plugin: value files, parameters, a values object of a few hundred lines).
	// A source over either is not carried (see HistoryOf).
	MaxHistorySourceBytes        = 1024
	MaxHistorySourceDetailsBytes = 4096

	// MaxHistoryBytes bounds an app's history, in bytes of JSON with every entry's
	// sources written out: the newest entries that fit are carried. Ten entries of a plain
	// git source take about 3 KiB so (2 KiB in the slice, where an entry of the same
	// sources as the one before it does not repeat them); this leaves a quarter of
	// SliceTargetBytes for an app whose sources carry large helm values.
	MaxHistoryBytes = 32 * 1024
)

// HistoryOf returns the entry's history of the app's history (oldest first): its last
// MaxHistoryEntries entries, the newest first kept that fit in MaxHistoryBytes together.
// Strings that are only shown (dates, the initiator) are cut to their bounds. What a
// rollback reads (the revisions and the sources) is never cut: an entry whose revision,
// a source field or its details exceed their bounds, or with more sources than
// MaxRevisions, is carried without its sources, which Argo CD then refuses to roll back
// to ("sync to revision instead"), rather than roll back to something else. An entry
// of the same sources as the entry before it says so (SameSourcesAsPrevious) instead of
// repeating them. Nil for no history.
func HistoryOf(history []argoapp.RevisionHistory) []statusv1alpha1.RevisionHistory {
	if len(history) > MaxHistoryEntries {
		history = history[len(history)-MaxHistoryEntries:]
	}
	var out []statusv1alpha1.RevisionHistory
	total := 2 // []
	for i := len(history) - 1; i >= 0; i-- {
		e, whole := historyEntry(history[i])
		size := historyEntrySize(e) + 1 // and a comma
		if total+size > MaxHistoryBytes && whole {
			e = withoutSources(e)
			size = historyEntrySize(e) + 1
		}
		if total+size > MaxHistoryBytes {
			break
		}
		total += size
		out = append(out, e)
	}
	slices.Reverse(out)
	// An entry of the same sources as the one before it says so instead of repeating
	// them (HistoryFromEntry puts them back).
	for i := len(out) - 1; i > 0; i-- {
		if e, previous := &out[i], out[i-1]; carriesSources(*e) && carriesSources(previous) && sameSources(*e, previous) {
			e.Source, e.Sources, e.SameSourcesAsPrevious = nil, nil, true
		}
	}
	return out
}

func carriesSources(e statusv1alpha1.RevisionHistory) bool {
	return e.Source != nil || len(e.Sources) > 0
}

func sameSources(a, b statusv1alpha1.RevisionHistory) bool {
	return (a.Source == nil) == (b.Source == nil) && (a.Source == nil || *a.Source == *b.Source) && slices.Equal(a.Sources, b.Sources)
}

// historyEntry returns the entry of h, and whether it carries its sources.
func historyEntry(h argoapp.RevisionHistory) (statusv1alpha1.RevisionHistory, bool) {
	e := statusv1alpha1.RevisionHistory{
		ID:              max(h.ID, 0),
		DeployedAt:      TruncateMessage(h.DeployedAt, maxStatusBytes),
		DeployStartedAt: TruncateMessage(h.DeployStartedAt, maxStatusBytes),
	}
	if h.InitiatedBy != (argoapp.OperationInitiator{}) {
		e.InitiatedBy = &statusv1alpha1.HistoryInitiator{Username: TruncateMessage(h.InitiatedBy.Username, MaxNameBytes), Automated: h.InitiatedBy.Automated}
	}
	fits := len(h.Revision) <= MaxNameBytes && len(h.Revisions) <= MaxRevisions && len(h.Sources) <= MaxRevisions &&
		!slices.ContainsFunc(h.Revisions, func(r string) bool { return len(r) > MaxNameBytes })
	if h.Source != nil {
		source, ok := historySource(*h.Source)
		fits = fits && ok
		e.Source = &source
	}
	for _, s := range h.Sources {
		source, ok := historySource(s)
		fits = fits && ok
		e.Sources = append(e.Sources, source)
	}
	e.Revision = TruncateMessage(h.Revision, MaxNameBytes)
	for _, r := range h.Revisions[:min(len(h.Revisions), MaxRevisions)] {
		e.Revisions = append(e.Revisions, TruncateMessage(r, MaxNameBytes))
	}
	if !fits {
		return withoutSources(e), false
	}
	return e, e.Source != nil || len(e.Sources) > 0
}

// historySource returns the entry's source of s, and whether it fits its bounds.
func historySource(s argoapp.HistorySource) (statusv1alpha1.HistorySource, bool) {
	fits := len(s.RepoURL) <= MaxHistorySourceBytes && len(s.Path) <= MaxHistorySourceBytes && len(s.Chart) <= MaxHistorySourceBytes &&
		len(s.TargetRevision) <= MaxNameBytes && len(s.Ref) <= MaxNameBytes && len(s.Name) <= MaxNameBytes &&
		len(s.Details) <= MaxHistorySourceDetailsBytes
	return statusv1alpha1.HistorySource{
		RepoURL: s.RepoURL, Path: s.Path, TargetRevision: s.TargetRevision, Chart: s.Chart, Ref: s.Ref, Name: s.Name, Details: s.Details,
	}, fits
}

func withoutSources(e statusv1alpha1.RevisionHistory) statusv1alpha1.RevisionHistory {
	e.Source, e.Sources = nil, nil
	return e
}

func historyEntrySize(e statusv1alpha1.RevisionHistory) int {
	raw, err := json.Marshal(e)
	if err != nil {
		return MaxHistoryBytes + 1
	}
	return len(raw)
}

// HistoryFromEntry returns the history of an entry as the hub reads it: an entry of
// SameSourcesAsPrevious with the sources of the entry before it (none for the first),
// and of those the newest that fit in MaxHistoryBytes, as HistoryOf measures them. So
// the hub reads all of what an agent's HistoryOf wrote, and never more than
// MaxHistoryBytes of an app, however an agent repeats its sources.
func HistoryFromEntry(history []statusv1alpha1.RevisionHistory) []argoapp.RevisionHistory {
	if len(history) == 0 {
		return nil
	}
	resolved := make([]statusv1alpha1.RevisionHistory, len(history))
	for i, e := range history {
		if e.SameSourcesAsPrevious {
			e.SameSourcesAsPrevious = false
			e.Source, e.Sources = nil, nil
			if i > 0 {
				e.Source, e.Sources = resolved[i-1].Source, resolved[i-1].Sources
			}
		}
		resolved[i] = e
	}
	first, total := len(resolved), 2
	for ; first > 0; first-- {
		size := historyEntrySize(resolved[first-1]) + 1
		if total+size > MaxHistoryBytes {
			break
		}
		total += size
	}
	out := make([]argoapp.RevisionHistory, 0, len(resolved)-first)
	for _, e := range resolved[first:] {
		h := argoapp.RevisionHistory{ID: e.ID, Revision: e.Revision, Revisions: e.Revisions,
			DeployedAt: e.DeployedAt, DeployStartedAt: e.DeployStartedAt}
		if e.InitiatedBy != nil {
			h.InitiatedBy = argoapp.OperationInitiator{Username: e.InitiatedBy.Username, Automated: e.InitiatedBy.Automated}
		}
		if e.Source != nil {
			s := sourceFromEntry(*e.Source)
			h.Source = &s
		}
		for _, s := range e.Sources {
			h.Sources = append(h.Sources, sourceFromEntry(s))
		}
		out = append(out, h)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func sourceFromEntry(s statusv1alpha1.HistorySource) argoapp.HistorySource {
	return argoapp.HistorySource{RepoURL: s.RepoURL, Path: s.Path, TargetRevision: s.TargetRevision, Chart: s.Chart, Ref: s.Ref,
		Name: s.Name, Details: s.Details}
}
