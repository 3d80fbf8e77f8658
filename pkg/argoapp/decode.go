package argoapp

import (
	"errors"
	"fmt"
	"strconv"
	"time"
	"unique"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// ErrMalformedField is wrapped by DecodeSpec and DecodeStatus when a field holds a value
// of the wrong type. A missing field, or an explicit null, is not an error: it decodes
// to the zero value.
var ErrMalformedField = errors.New("malformed field")

// Spec holds the fields of an Application's spec that the addon reads.
type Spec struct {
	// Project is spec.project as written; see ProjectName for the effective project.
	Project     string
	Destination Destination
	// Source is spec.source, nil when absent.
	Source *Source
	// Sources is spec.sources of a multi-source Application.
	Sources []Source
}

// ProjectName returns the AppProject the Application uses: spec.project, or
// DefaultProject when it is empty, as Argo CD reads it.
func (s Spec) ProjectName() string {
	if s.Project == "" {
		return DefaultProject
	}
	return s.Project
}

// IsMultiSource reports whether the Application uses spec.sources. Argo CD then ignores
// spec.source, and reports the revisions in status.sync.revisions.
func (s Spec) IsMultiSource() bool {
	return len(s.Sources) > 0
}

// Destination is spec.destination.
type Destination struct {
	Server    string
	Name      string
	Namespace string
}

// Source is one entry of spec.sources, or spec.source.
type Source struct {
	RepoURL        string
	Path           string
	TargetRevision string
	Chart          string
	Ref            string
}

// Status holds the fields of an Application's status that the addon reads.
type Status struct {
	Sync           SyncStatus
	Health         HealthStatus
	OperationState OperationState
	Resources      []ResourceStatus
	Conditions     []Condition
	// History is the last HistoryLimit entries of status.history, oldest first.
	History []RevisionHistory
	// ReconciledAt is status.reconciledAt as written (RFC 3339): when Argo CD's
	// application-controller last compared the Application with its sources.
	ReconciledAt string
}

// SyncStatus is status.sync. Revision is set for a single-source Application, Revisions
// for a multi-source one.
type SyncStatus struct {
	Status    string
	Revision  string
	Revisions []string
}

// HealthStatus is status.health, or the health of one resource.
type HealthStatus struct {
	Status  string
	Message string
}

// OperationState is status.operationState. StartedAt is kept as written (RFC 3339), the
// form in which the status feedback carries it.
type OperationState struct {
	Phase     string
	StartedAt string
	// FinishedAt is set once the operation reached a final phase.
	FinishedAt string
	Message    string
	// SyncResult is the result of a sync operation; nil before Argo CD wrote one.
	SyncResult *SyncResult
	// ComparedBeforeFinish: the operation is finished, and status.reconciledAt is before
	// its finishedAt. The Application's sync status and resources are then those Argo CD
	// compared before the operation ended; it compares again right after. Argo CD's CLI
	// waits for that comparison (argocd app sync, app wait).
	ComparedBeforeFinish bool
}

// SyncResult is status.operationState.syncResult: the revision (Revisions for a
// multi-source Application) that the sync applied, and the result of each resource it
// touched, which Argo CD's CLI reads (argocd app sync counts those whose prune was
// skipped).
type SyncResult struct {
	Revision  string
	Revisions []string
	Resources []ResourceResult
}

// ResourceResult is one entry of syncResult.resources: a resource and what the sync did
// with it (Status: Synced, SyncFailed, Pruned, PruneSkipped), with the hook it ran as, if
// any.
type ResourceResult struct {
	Group, Version, Kind, Namespace, Name string
	Status, Message                       string
	HookType, HookPhase, SyncPhase        string
}

// ResourceStatus is one entry of status.resources.
type ResourceStatus struct {
	Group     string
	Version   string
	Kind      string
	Namespace string
	Name      string
	// Status is the sync status of the resource.
	Status string
	Health HealthStatus
}

// Condition is one entry of status.conditions.
type Condition struct {
	Type    string
	Message string
}

// DecodeSpec decodes the spec of an Application. Missing fields decode to zero values;
// a field of the wrong type returns an error wrapping ErrMalformedField that names its
// path.
func DecodeSpec(app *unstructured.Unstructured) (Spec, error) {
	if app == nil {
		return Spec{}, errors.New("decode application spec: nil application")
	}
	var r fieldReader
	spec := r.object(app.Object, "", "spec")
	out := Spec{
		Project:     r.str(spec, ".spec", "project"),
		Destination: r.destination(spec, ".spec"),
	}
	if source := r.object(spec, ".spec", "source"); source != nil {
		s := r.source(source, ".spec.source")
		out.Source = &s
	}
	for i, item := range r.list(spec, ".spec", "sources") {
		path := ".spec.sources[" + strconv.Itoa(i) + "]"
		out.Sources = append(out.Sources, r.source(r.element(item, path), path))
	}
	if r.err != nil {
		return Spec{}, fmt.Errorf("decode spec of application %s/%s: %w", app.GetNamespace(), app.GetName(), r.err)
	}
	return out, nil
}

// DecodeStatus decodes the status of an Application. Missing fields decode to zero
// values; a field of the wrong type returns an error wrapping ErrMalformedField that
// names its path.
func DecodeStatus(app *unstructured.Unstructured) (Status, error) {
	if app == nil {
		return Status{}, errors.New("decode application status: nil application")
	}
	var r fieldReader
	status := r.object(app.Object, "", "status")

	sync := r.object(status, ".status", "sync")
	out := Status{
		Sync: SyncStatus{
			Status:   r.str(sync, ".status.sync", "status"),
			Revision: r.str(sync, ".status.sync", "revision"),
		},
		Health:       r.health(status, ".status"),
		ReconciledAt: r.str(status, ".status", "reconciledAt"),
	}
	for i, item := range r.list(sync, ".status.sync", "revisions") {
		path := ".status.sync.revisions[" + strconv.Itoa(i) + "]"
		revision, ok := item.(string)
		if !ok && item != nil {
			r.fail(path, "string", item)
		}
		out.Sync.Revisions = append(out.Sync.Revisions, revision)
	}

	operation := r.object(status, ".status", "operationState")
	out.OperationState = OperationState{
		Phase:      r.str(operation, ".status.operationState", "phase"),
		StartedAt:  r.str(operation, ".status.operationState", "startedAt"),
		FinishedAt: r.str(operation, ".status.operationState", "finishedAt"),
		Message:    r.str(operation, ".status.operationState", "message"),
	}
	out.OperationState.ComparedBeforeFinish = OperationCompleted(out.OperationState.Phase) &&
		ComparedBefore(out.ReconciledAt, out.OperationState.FinishedAt)
	if result := r.object(operation, ".status.operationState", "syncResult"); result != nil {
		const path = ".status.operationState.syncResult"
		sr := &SyncResult{Revision: r.str(result, path, "revision")}
		for i, item := range r.list(result, path, "revisions") {
			revision, ok := item.(string)
			if !ok && item != nil {
				r.fail(path+".revisions["+strconv.Itoa(i)+"]", "string", item)
			}
			sr.Revisions = append(sr.Revisions, revision)
		}
		for i, item := range r.list(result, path, "resources") {
			at := path + ".resources[" + strconv.Itoa(i) + "]"
			res := r.element(item, at)
			sr.Resources = append(sr.Resources, ResourceResult{
				Group:     Intern(r.str(res, at, "group")),
				Version:   Intern(r.str(res, at, "version")),
				Kind:      Intern(r.str(res, at, "kind")),
				Namespace: Intern(r.str(res, at, "namespace")),
				Name:      r.str(res, at, "name"),
				Status:    Intern(r.str(res, at, "status")),
				Message:   r.str(res, at, "message"),
				HookType:  Intern(r.str(res, at, "hookType")),
				HookPhase: Intern(r.str(res, at, "hookPhase")),
				SyncPhase: Intern(r.str(res, at, "syncPhase")),
			})
		}
		out.OperationState.SyncResult = sr
	}

	// An app's resources repeat a few groups, versions, kinds, namespaces and statuses:
	// the decoded list holds one copy of each.
	resources := r.list(status, ".status", "resources")
	if len(resources) > 0 {
		out.Resources = make([]ResourceStatus, 0, len(resources))
	}
	for i, item := range resources {
		path := ".status.resources[" + strconv.Itoa(i) + "]"
		resource := r.element(item, path)
		health := r.health(resource, path)
		health.Status = Intern(health.Status)
		out.Resources = append(out.Resources, ResourceStatus{
			Group:     Intern(r.str(resource, path, "group")),
			Version:   Intern(r.str(resource, path, "version")),
			Kind:      Intern(r.str(resource, path, "kind")),
			Namespace: Intern(r.str(resource, path, "namespace")),
			Name:      r.str(resource, path, "name"),
			Status:    Intern(r.str(resource, path, "status")),
			Health:    health,
		})
	}

	for i, item := range r.list(status, ".status", "conditions") {
		path := ".status.conditions[" + strconv.Itoa(i) + "]"
		condition := r.element(item, path)
		out.Conditions = append(out.Conditions, Condition{
			Type:    r.str(condition, path, "type"),
			Message: r.str(condition, path, "message"),
		})
	}

	out.History = r.history(status, ".status")

	if r.err != nil {
		return Status{}, fmt.Errorf("decode status of application %s/%s: %w", app.GetNamespace(), app.GetName(), r.err)
	}
	return out, nil
}

// ComparedBefore reports whether reconciledAt is before finishedAt, both RFC 3339 times:
// Argo CD's CLI's test for a status not compared since the operation finished. It is
// false when either is missing or unreadable.
func ComparedBefore(reconciledAt, finishedAt string) bool {
	reconciled, err1 := time.Parse(time.RFC3339, reconciledAt)
	finished, err2 := time.Parse(time.RFC3339, finishedAt)
	return err1 == nil && err2 == nil && reconciled.Before(finished)
}

// Intern returns the canonical copy of s (unique.Make): for the strings that an app's
// resources and resource tree repeat (groups, versions, kinds, namespaces, statuses),
// so that decoded apps hold one copy of each.
func Intern(s string) string {
	if s == "" {
		return ""
	}
	return unique.Make(s).Value()
}

// fieldReader reads typed fields out of unstructured content. A field of the wrong type
// reads as the zero value and the first such error is kept, so that decoding reads as a
// list of assignments with one error check at the end. A missing field and an explicit
// null both read as the zero value.
type fieldReader struct {
	err error
}

// fail records that the field at path holds got where a want was expected.
func (r *fieldReader) fail(path, want string, got any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s is %T, want %s", ErrMalformedField, path, got, want)
	}
}

// str reads the string field key of m, found at path.
func (r *fieldReader) str(m map[string]any, path, key string) string {
	value := m[key]
	if value == nil {
		return ""
	}
	s, ok := value.(string)
	if !ok {
		r.fail(path+"."+key, "string", value)
	}
	return s
}

// object reads the object field key of m, found at path.
func (r *fieldReader) object(m map[string]any, path, key string) map[string]any {
	return r.element(m[key], path+"."+key)
}

// list reads the list field key of m, found at path.
func (r *fieldReader) list(m map[string]any, path, key string) []any {
	value := m[key]
	if value == nil {
		return nil
	}
	items, ok := value.([]any)
	if !ok {
		r.fail(path+"."+key, "list", value)
	}
	return items
}

// element reads value, found at path, as an object.
func (r *fieldReader) element(value any, path string) map[string]any {
	if value == nil {
		return nil
	}
	m, ok := value.(map[string]any)
	if !ok {
		r.fail(path, "object", value)
	}
	return m
}

// destination reads the destination field of m, found at path.
func (r *fieldReader) destination(m map[string]any, path string) Destination {
	destination := r.object(m, path, "destination")
	path += ".destination"
	return Destination{
		Server:    r.str(destination, path, "server"),
		Name:      r.str(destination, path, "name"),
		Namespace: r.str(destination, path, "namespace"),
	}
}

// source reads the source object m, found at path.
func (r *fieldReader) source(m map[string]any, path string) Source {
	return Source{
		RepoURL:        r.str(m, path, "repoURL"),
		Path:           r.str(m, path, "path"),
		TargetRevision: r.str(m, path, "targetRevision"),
		Chart:          r.str(m, path, "chart"),
		Ref:            r.str(m, path, "ref"),
	}
}

// health reads the health field of m, found at path.
func (r *fieldReader) health(m map[string]any, path string) HealthStatus {
	health := r.object(m, path, "health")
	path += ".health"
	return HealthStatus{
		Status:  r.str(health, path, "status"),
		Message: r.str(health, path, "message"),
	}
}
