// Package observed is what the hub knows of a pulled Application on its managed cluster,
// from the two channels of docs/design.md: the ManifestWork's status feedback (five
// scalars, fast) and the agent's report on the ManagedClusterAddOn (resources, errors,
// revisions of multi-source apps, messages). The report controller (pkg/hub/report) and
// the status mirror (pkg/hub/appstatus) both read them through this package, so that
// both show the same thing.
package observed

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	addonv1beta1 "open-cluster-management.io/api/addon/v1beta1"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/clusterreport"
)

// Values shown for what is not known.
const (
	// StatusUnknown is the sync and health status of an Application whose cluster has not
	// reported it yet.
	StatusUnknown = "Unknown"

	// ConditionStale is the condition type, on the report's cluster entry and on the hub
	// Application, that says the data is the last reported before the cluster's addon
	// became unavailable. It ends in "Warning", so Argo CD's UI shows it as a warning.
	ConditionStale = "StaleStatusWarning"

	// ConditionInvalidReport is the condition type, on the report's cluster entry and on
	// the hub Application, that says the cluster's latest report of the app could not be
	// decoded, and the data shown is the last good one. It ends in "Warning" too.
	ConditionInvalidReport = "InvalidAgentReportWarning"
)

// maxRejectionBytes bounds the decode error quoted in an InvalidAgentReportWarning.
const maxRejectionBytes = 512

// Rejection says why the latest report of an app could not be decoded.
type Rejection struct {
	// Err is the *clusterreport.DecodeError of the app's entry, or of the whole report.
	Err error
	// LastGood is true when the hub shows the last good entry of the app instead.
	LastGood bool
}

// Condition returns the invalid-report condition of cluster.
func (r *Rejection) Condition(cluster string) argoapp.Condition {
	shown := "this is the last good status it reported"
	if !r.LastGood {
		shown = "the hub has no earlier report of this application from it"
	}
	return argoapp.Condition{
		Type: ConditionInvalidReport,
		Message: fmt.Sprintf("The report of cluster %s on this application could not be decoded (%s); %s.",
			cluster, clusterreport.TruncateMessage(r.Err.Error(), maxRejectionBytes), shown),
	}
}

// Feedback holds the five status feedback values of a work's Application manifest.
type Feedback struct {
	HealthStatus            string
	SyncStatus              string
	SyncRevision            string
	OperationStatePhase     string
	OperationStateStartedAt string
}

// Empty reports whether no value came back.
func (f Feedback) Empty() bool { return f == Feedback{} }

// FeedbackOf returns the feedback of the Argo CD Application manifest of work.
func FeedbackOf(work *workv1.ManifestWork) Feedback {
	var f Feedback
	if work == nil {
		return f
	}
	for _, m := range work.Status.ResourceStatus.Manifests {
		if m.ResourceMeta.Group != argoapp.Group || m.ResourceMeta.Kind != argoapp.KindApplication {
			continue
		}
		for _, v := range m.StatusFeedbacks.Values {
			if v.Value.String == nil {
				continue
			}
			s := *v.Value.String
			switch v.Name {
			case argoapp.FeedbackHealthStatus:
				f.HealthStatus = s
			case argoapp.FeedbackSyncStatus:
				f.SyncStatus = s
			case argoapp.FeedbackSyncRevision:
				f.SyncRevision = s
			case argoapp.FeedbackOperationStatePhase:
				f.OperationStatePhase = s
			case argoapp.FeedbackOperationStateStartedAt:
				f.OperationStateStartedAt = s
			}
		}
	}
	return f
}

// Staleness says since when a cluster's addon is unavailable.
type Staleness struct {
	// Since is the last transition time of the addon's Available condition.
	Since metav1.Time
	// Status and Reason are those of the Available condition.
	Status metav1.ConditionStatus
	Reason string
}

// StalenessOf returns the staleness of the cluster of addon: non-nil when its Available
// condition is False or Unknown, which the addon framework sets when the agent's lease
// expires. Without an Available condition the addon is not known to be unavailable.
func StalenessOf(addon *addonv1beta1.ManagedClusterAddOn) *Staleness {
	if addon == nil {
		return nil
	}
	c := meta.FindStatusCondition(addon.Status.Conditions, addonv1beta1.ManagedClusterAddOnConditionAvailable)
	if c == nil || c.Status == metav1.ConditionTrue {
		return nil
	}
	return &Staleness{Since: c.LastTransitionTime, Status: c.Status, Reason: c.Reason}
}

// Condition returns the stale condition of cluster.
func (s *Staleness) Condition(cluster string) argoapp.Condition {
	return argoapp.Condition{
		Type: ConditionStale,
		Message: fmt.Sprintf("The status from cluster %s is stale: its addon has been unavailable (Available=%s, %s) since %s; this is the last status it reported.",
			cluster, s.Status, s.Reason, s.Since.UTC().Format(time.RFC3339)),
	}
}

// AvailabilityChanged reports whether the Available condition of an addon changed
// between two versions of its conditions.
func AvailabilityChanged(old, new []metav1.Condition) bool {
	a := meta.FindStatusCondition(old, addonv1beta1.ManagedClusterAddOnConditionAvailable)
	b := meta.FindStatusCondition(new, addonv1beta1.ManagedClusterAddOnConditionAvailable)
	if a == nil || b == nil {
		return (a == nil) != (b == nil)
	}
	return a.Status != b.Status || !a.LastTransitionTime.Equal(&b.LastTransitionTime) || a.Reason != b.Reason
}

// OverBudgetChanged reports whether the agent's conditions crossed clusterreport.MaxBytes
// between two versions of an addon's conditions: the whole report is then rejected, or
// accepted again, which concerns every app of the cluster.
func OverBudgetChanged(old, new []metav1.Condition) bool {
	return overBudget(old) != overBudget(new)
}

func overBudget(conditions []metav1.Condition) bool {
	total := 0
	for _, c := range conditions {
		if clusterreport.IsAgentCondition(c.Type) {
			total += clusterreport.ConditionSize(c)
		}
	}
	return total > clusterreport.MaxBytes
}

// ChangedAppConditions returns the app conditions of the agent that were added, removed
// or changed between two versions of an addon's conditions: the old version of a removed
// or changed one, the new version of an added or changed one.
func ChangedAppConditions(old, new []metav1.Condition) []metav1.Condition {
	index := func(cs []metav1.Condition) map[string]metav1.Condition {
		m := map[string]metav1.Condition{}
		for _, c := range cs {
			if clusterreport.IsAppCondition(c.Type) {
				m[c.Type] = c
			}
		}
		return m
	}
	before, after := index(old), index(new)
	var changed []metav1.Condition
	for t, a := range after {
		b, ok := before[t]
		if !ok || a.Message != b.Message {
			changed = append(changed, a)
		}
		if ok && a.Message != b.Message {
			changed = append(changed, b)
		}
	}
	for t, b := range before {
		if _, ok := after[t]; !ok {
			changed = append(changed, b)
		}
	}
	return changed
}

// Reports decodes the agents' reports, once per resourceVersion of each
// ManagedClusterAddOn, and keeps the result. It is safe for concurrent use; the report
// controller and the status mirror share one.
type Reports struct {
	mu      sync.Mutex
	entries map[types.NamespacedName]decoded
	// absenceGrace: see DefaultAbsenceGrace.
	absenceGrace time.Duration
	// slices finds an app in the agents' status slices, which Observe prefers.
	slices SliceFinder
}

// SliceFinder finds an app in a cluster's status slices (pkg/hub/statusslices): its
// complete status, which the agent's report on the ManagedClusterAddOn may have cut.
type SliceFinder interface {
	Find(cluster, workName string, hub types.NamespacedName) *clusterreport.App
}

// WithSlices makes Observe take an app from the agents' status slices when they hold it,
// and from the report on the ManagedClusterAddOn otherwise (an agent older than the
// slices).
func (r *Reports) WithSlices(s SliceFinder) *Reports {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.slices = s
	return r
}

type decoded struct {
	resourceVersion string
	// apps are the apps that decoded, and the last good version of those whose entry
	// was rejected.
	apps []clusterreport.App
	err  error
	// whole is the error of a report rejected as a whole (too large); every app of the
	// cluster is then rejected.
	whole error
	// rejected holds the errors of the rejected entries whose app the hub knows from an
	// earlier version, by App.Key; that earlier version is in apps.
	rejected map[string]error
	// errClaimed is true once ClaimError returned err.
	errClaimed bool
	// scope is the report's scope; nil when the agent does not publish one.
	scope *clusterreport.Scope
	// published is true when the agent has written any of its conditions.
	published bool
}

// NewReports returns an empty decoder cache.
func NewReports() *Reports {
	return &Reports{entries: map[types.NamespacedName]decoded{}, absenceGrace: DefaultAbsenceGrace}
}

// WithAbsenceGrace sets how long an app may be missing from its agent's report, after
// its work was applied, before Observe says so (DefaultAbsenceGrace); for tests.
func (r *Reports) WithAbsenceGrace(d time.Duration) *Reports {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.absenceGrace = d
	return r
}

// Get returns the apps of the addon's report, and the error of its decoding (the apps
// that decoded are returned all the same). first is true when this call decoded this
// version of the addon. It does not tell who records the error: any reader (the status
// mirror, a reconcile) may decode a version first; the one that records it uses
// ClaimError.
func (r *Reports) Get(addon *addonv1beta1.ManagedClusterAddOn) (apps []clusterreport.App, err error, first bool) {
	if addon == nil {
		return nil, nil, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	e, first := r.decodeLocked(addon)
	return e.apps, e.err, first
}

// ClaimError returns the error of decoding the addon's current version, to the first
// caller of ClaimError for that version only, whoever called Get before; nil otherwise.
// The caller records it (an Event), so that each invalid version is recorded once.
func (r *Reports) ClaimError(addon *addonv1beta1.ManagedClusterAddOn) error {
	if addon == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	e, _ := r.decodeLocked(addon)
	if e.err == nil || e.errClaimed {
		return nil
	}
	e.errClaimed = true
	r.entries[types.NamespacedName{Namespace: addon.Namespace, Name: addon.Name}] = e
	return e.err
}

// decodeLocked returns the decoded version of addon, decoding it when it is not the one
// kept; decodedNow says it was. r.mu is held.
func (r *Reports) decodeLocked(addon *addonv1beta1.ManagedClusterAddOn) (e decoded, decodedNow bool) {
	key := types.NamespacedName{Namespace: addon.Namespace, Name: addon.Name}
	if e, ok := r.entries[key]; ok && e.resourceVersion == addon.ResourceVersion {
		return e, false
	}
	report, err := clusterreport.Decode(addon.Status.Conditions)
	e = decoded{resourceVersion: addon.ResourceVersion, apps: report.Apps, err: err, scope: report.Scope, published: published(addon.Status.Conditions)}
	if err != nil {
		e.keepLastGood(r.entries[key].apps)
	}
	r.entries[key] = e
	return e, true
}

// keepLastGood puts back into e.apps the last good version, from previous, of each app
// whose entry e.err rejected: all of them when the whole report was rejected, else
// those whose rejected condition is of their type. A rejected entry of an app the hub
// never decoded cannot be told apart from garbage; it only shows in e.err.
func (e *decoded) keepLastGood(previous []clusterreport.App) {
	e.rejected = map[string]error{}
	decodedNow := map[string]bool{}
	for _, app := range e.apps {
		decodedNow[app.Key()] = true
	}
	for _, de := range clusterreport.DecodeErrors(e.err) {
		for _, app := range previous {
			if decodedNow[app.Key()] || e.rejected[app.Key()] != nil {
				continue
			}
			if de.ConditionType == "" || de.ConditionType == clusterreport.AppConditionType(app.Namespace, app.Name) {
				e.apps = append(e.apps, app)
				e.rejected[app.Key()] = de
			}
		}
		if de.ConditionType == "" {
			e.whole = de
		}
	}
	slices.SortFunc(e.apps, func(a, b clusterreport.App) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
}

// Forget drops a deleted addon's report.
func (r *Reports) Forget(namespace, name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.entries, types.NamespacedName{Namespace: namespace, Name: name})
}

// FindApp returns the app of a report that the ManifestWork workName carries, or that
// points back to the hub Application hub; nil when the cluster has not reported it.
func FindApp(apps []clusterreport.App, workName string, hub types.NamespacedName) *clusterreport.App {
	i := slices.IndexFunc(apps, func(a clusterreport.App) bool {
		return (workName != "" && a.ManifestWork == workName) ||
			(a.HubName != "" && a.HubNamespace == hub.Namespace && a.HubName == hub.Name)
	})
	if i < 0 {
		return nil
	}
	return &apps[i]
}

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

// WorkObservationChanged reports whether an update of a ManifestWork changes what the
// report and the status mirror read of it: its feedback, its annotations (the hub
// back-pointers), or the Application it applied (see AppliedApplication). An object that is not a work counts as changed.
func WorkObservationChanged(oldObj, newObj client.Object) bool {
	o, ok1 := oldObj.(*workv1.ManifestWork)
	n, ok2 := newObj.(*workv1.ManifestWork)
	if !ok1 || !ok2 || FeedbackOf(o) != FeedbackOf(n) || !equality.Semantic.DeepEqual(o.Annotations, n.Annotations) {
		return true
	}
	a, appliedBefore := AppliedApplication(o)
	b, appliedAfter := AppliedApplication(n)
	return appliedBefore != appliedAfter || a.Namespace != b.Namespace || a.Name != b.Name || !a.Since.Equal(b.Since)
}
