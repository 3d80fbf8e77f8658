package argoapp

// This file decodes status.history, which `argocd app history` prints and `argocd app
// rollback` reads (argocd-server's Rollback: the entry of the id asked for gives the
// operation's revision and source).

import (
	"encoding/json"
	"maps"
	"math"
	"strconv"
)

// HistoryLimit is how many entries of status.history the agent reads and carries: the
// last ones, as many as Argo CD keeps by default (revisionHistoryLimit, 10; Argo CD's
// application-controller cuts the history to the limit after each sync). An Application
// with a higher limit shows its last HistoryLimit deployments on the hub, and may be
// rolled back to those.
const HistoryLimit = 10

// RevisionHistory is one entry of status.history: a sync that Argo CD completed.
type RevisionHistory struct {
	ID int64
	// Revision is the revision a single-source Application was synced to; Revisions
	// those of each source of a multi-source one.
	Revision  string
	Revisions []string
	// DeployedAt and DeployStartedAt are RFC 3339 times, as written.
	DeployedAt      string
	DeployStartedAt string
	// Source is the source of a single-source sync, nil when absent; Sources those of a
	// multi-source one.
	Source  *HistorySource
	Sources []HistorySource
	// InitiatedBy is who started the sync: a user's name, or Automated (auto-sync).
	InitiatedBy OperationInitiator
}

// OperationInitiator is the initiatedBy of an operation or a history entry.
type OperationInitiator struct {
	Username  string
	Automated bool
}

// HistorySource is a source of a history entry (Argo CD's ApplicationSource), whole: its
// fields that say where the manifests are, and the rest (helm, kustomize, directory,
// plugin) as Details, so that a rollback renders what that sync rendered.
type HistorySource struct {
	RepoURL        string
	Path           string
	TargetRevision string
	Chart          string
	Ref            string
	Name           string
	// Details is the JSON of the source's other fields (keys sorted), "" when it has
	// none.
	Details string
}

// historySourceFields are the fields of a source that HistorySource holds by name.
var historySourceFields = []string{"repoURL", "path", "targetRevision", "chart", "ref", "name"}

// history reads the last HistoryLimit entries of status.history of m, found at path.
func (r *fieldReader) history(m map[string]any, path string) []RevisionHistory {
	items := r.list(m, path, "history")
	first := max(len(items)-HistoryLimit, 0)
	var out []RevisionHistory
	for i := first; i < len(items); i++ {
		at := path + ".history[" + strconv.Itoa(i) + "]"
		item := r.element(items[i], at)
		if item == nil {
			continue
		}
		entry := RevisionHistory{
			ID:              r.integer(item, at, "id"),
			Revision:        r.str(item, at, "revision"),
			DeployedAt:      r.str(item, at, "deployedAt"),
			DeployStartedAt: r.str(item, at, "deployStartedAt"),
		}
		for j, revision := range r.list(item, at, "revisions") {
			s, ok := revision.(string)
			if !ok && revision != nil {
				r.fail(at+".revisions["+strconv.Itoa(j)+"]", "string", revision)
			}
			entry.Revisions = append(entry.Revisions, s)
		}
		if source := r.object(item, at, "source"); source != nil {
			s := r.historySource(source, at+".source")
			entry.Source = &s
		}
		for j, source := range r.list(item, at, "sources") {
			sat := at + ".sources[" + strconv.Itoa(j) + "]"
			entry.Sources = append(entry.Sources, r.historySource(r.element(source, sat), sat))
		}
		initiator := r.object(item, at, "initiatedBy")
		entry.InitiatedBy = OperationInitiator{Username: r.str(initiator, at+".initiatedBy", "username"),
			Automated: r.boolean(initiator, at+".initiatedBy", "automated")}
		out = append(out, entry)
	}
	return out
}

// historySource reads a source of a history entry, m, found at path. The strings that
// every entry of an app repeats are held once (Intern).
func (r *fieldReader) historySource(m map[string]any, path string) HistorySource {
	s := HistorySource{
		RepoURL:        Intern(r.str(m, path, "repoURL")),
		Path:           Intern(r.str(m, path, "path")),
		TargetRevision: Intern(r.str(m, path, "targetRevision")),
		Chart:          Intern(r.str(m, path, "chart")),
		Ref:            Intern(r.str(m, path, "ref")),
		Name:           Intern(r.str(m, path, "name")),
	}
	rest := maps.Clone(m)
	for _, field := range historySourceFields {
		delete(rest, field)
	}
	if len(rest) > 0 {
		raw, err := json.Marshal(rest) // map keys sorted: the same source, the same text
		if err != nil {
			r.fail(path, "JSON", rest)
		}
		s.Details = Intern(string(raw))
	}
	return s
}

// integer reads the integer field key of m, found at path: an int64 as the apiserver's
// JSON decodes it, or a whole float64 as encoding/json does.
func (r *fieldReader) integer(m map[string]any, path, key string) int64 {
	switch v := m[key].(type) {
	case nil:
		return 0
	case int64:
		return v
	case int:
		return int64(v)
	case float64:
		if v == math.Trunc(v) && math.Abs(v) < 1<<53 {
			return int64(v)
		}
	case json.Number:
		if n, err := v.Int64(); err == nil {
			return n
		}
	}
	r.fail(path+"."+key, "integer", m[key])
	return 0
}

// boolean reads the bool field key of m, found at path.
func (r *fieldReader) boolean(m map[string]any, path, key string) bool {
	value := m[key]
	if value == nil {
		return false
	}
	b, ok := value.(bool)
	if !ok {
		r.fail(path+"."+key, "bool", value)
	}
	return b
}

// historySourceDetails are the fields of Argo CD's ApplicationSource (v3.2) besides
// historySourceFields: objects each.
var historySourceDetails = []string{"helm", "kustomize", "directory", "plugin"}

// SourceObject returns the source as Argo CD's ApplicationSource object: its named
// fields, and of Details the objects of Argo CD's other fields (helm, kustomize,
// directory, plugin); anything else of Details is left out. ok is false when Details is
// not a JSON object.
func (s HistorySource) SourceObject() (map[string]any, bool) {
	out := map[string]any{}
	if s.Details != "" {
		var details map[string]any
		if err := json.Unmarshal([]byte(s.Details), &details); err != nil || details == nil {
			return nil, false
		}
		for _, key := range historySourceDetails {
			if value, ok := details[key].(map[string]any); ok {
				out[key] = value
			}
		}
	}
	for key, value := range map[string]string{"repoURL": s.RepoURL, "path": s.Path, "targetRevision": s.TargetRevision,
		"chart": s.Chart, "ref": s.Ref, "name": s.Name} {
		if value != "" {
			out[key] = value
		}
	}
	return out, true
}
