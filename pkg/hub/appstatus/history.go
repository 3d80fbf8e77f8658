package appstatus

import (
	"time"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
)

// historyList returns status.history of the agent's entry's history, as Argo CD's
// Application CRD takes it: each entry with its id and deployedAt (a time; an entry
// without a readable one is left out), and a source only with a repoURL, and with only
// the fields of Argo CD's ApplicationSource (argoapp.HistorySource.SourceObject). A multi-source entry keeps its sources only
// when every one of them is kept: a rollback to part of them would deploy something
// else. Argo CD's `argocd app rollback` refuses an entry without sources. Nil for none.
func historyList(history []argoapp.RevisionHistory) []any {
	var out []any
	for _, h := range history {
		deployedAt, ok := rfc3339(h.DeployedAt)
		if !ok {
			continue
		}
		entry := map[string]any{"id": h.ID, "deployedAt": deployedAt}
		if started, ok := rfc3339(h.DeployStartedAt); ok {
			entry["deployStartedAt"] = started
		}
		setOrDelete(entry, "revision", h.Revision)
		if len(h.Revisions) > 0 {
			entry["revisions"] = anyList(h.Revisions)
		}
		if h.Source != nil {
			if source, ok := sourceObject(*h.Source); ok {
				entry["source"] = source
			}
		}
		if len(h.Sources) > 0 {
			sources := make([]any, 0, len(h.Sources))
			for _, s := range h.Sources {
				if source, ok := sourceObject(s); ok {
					sources = append(sources, source)
				}
			}
			if len(sources) == len(h.Sources) {
				entry["sources"] = sources
			}
		}
		if h.InitiatedBy != (argoapp.OperationInitiator{}) {
			initiatedBy := map[string]any{}
			setOrDelete(initiatedBy, "username", h.InitiatedBy.Username)
			if h.InitiatedBy.Automated {
				initiatedBy["automated"] = true
			}
			entry["initiatedBy"] = initiatedBy
		}
		out = append(out, entry)
	}
	return out
}

// sourceObject returns the ApplicationSource object of s (argoapp.HistorySource.
// SourceObject); false for a source without a repoURL (the CRD requires one) or with
// details that are not a JSON object.
func sourceObject(s argoapp.HistorySource) (map[string]any, bool) {
	if s.RepoURL == "" {
		return nil, false
	}
	return s.SourceObject()
}

// rfc3339 returns t, an RFC 3339 time, in the form Argo CD writes (UTC, to the second).
func rfc3339(t string) (string, bool) {
	parsed, err := time.Parse(time.RFC3339, t)
	if err != nil {
		return "", false
	}
	return parsed.UTC().Format(time.RFC3339), true
}
