package observed

// This file tells why the agent's report has no entry for a pulled app whose work is
// applied, so that the hub says so instead of showing the last thing it knew.

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	addonv1beta1 "open-cluster-management.io/api/addon/v1beta1"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/clusterreport"
)

// ConditionNotReported is the condition type, on the hub Application and on the
// report's cluster entry, that says the agent of the app's cluster does not report the
// app although its ManifestWork is applied: the hub then shows only the feedback's
// scalars, and no resources or error conditions. It ends in "Warning", so Argo CD's UI
// shows it as a warning.
const ConditionNotReported = "NotReportedWarning"

// Why an app is not reported: the reasons of the Warning Event on the hub Application
// and of the log line that go with ConditionNotReported.
const (
	// ReasonNamespaceNotWatched: the agent publishes the namespaces it watches, and the
	// app was delivered to another one. The agent never sees it.
	ReasonNamespaceNotWatched = "NamespaceNotWatched"
	// ReasonLeftOutOfReport: the agent left apps out of its report to fit the budget.
	ReasonLeftOutOfReport = "LeftOutOfReport"
	// ReasonNoAgentReport: the agent has published no report at all.
	ReasonNoAgentReport = "NoAgentReport"
	// ReasonNotInAgentReport: the agent reports, but not this app.
	ReasonNotInAgentReport = "NotInAgentReport"
	// ReasonSlicesRefused: the agent reports, but the hub refuses its status slices.
	ReasonSlicesRefused = "SlicesRefused"
)

// DefaultAbsenceGrace is how long after its ManifestWork was applied an app may be
// missing from the agent's report before the hub says so (unless the agent's scope
// already tells that it cannot see it). The agent reports a new app within about a
// second; the grace covers an agent that retries a refusing hub (up to 30 s).
const DefaultAbsenceGrace = 30 * time.Second

// shownInstead is what the hub shows of an app that its cluster's agent does not report.
const shownInstead = "the hub shows only the sync, health and operation status from the ManifestWork, without resources or error conditions"

// Absence says why the agent's report has no entry for an app whose work is applied.
type Absence struct {
	// Reason is one of the Reason constants above.
	Reason string
	// Cluster is the managed cluster, and Addon the ManagedClusterAddOn's name.
	Cluster, Addon string
	// Namespace and Name are the Application on the managed cluster, ManifestWork the
	// work that delivered it.
	Namespace, Name, ManifestWork string
	// WatchNamespaces are the namespaces the agent says it watches; nil when it does not
	// say (an older agent).
	WatchNamespaces []string
	// LeftOut is how many apps the agent's budget left out of its report.
	LeftOut int
	// Refusal is what the agent says of the hub's refusal of its status slices
	// (ReasonSlicesRefused).
	Refusal string
}

// Condition returns the not-reported condition. Its message holds no time, so that it
// changes only when the reason does.
func (a *Absence) Condition() argoapp.Condition {
	app := clusterreport.AppKey(a.Namespace, a.Name)
	var msg string
	switch a.Reason {
	case ReasonNamespaceNotWatched:
		msg = fmt.Sprintf("The agent of cluster %s watches the namespaces [%s]; this application was delivered to namespace %s, so the agent does not see it and %s. "+
			"Add %s to the agent's namespaces (chart value agent.watchNamespaces), or deliver the application to a watched namespace (annotation %s).",
			a.Cluster, listNamespaces(a.WatchNamespaces), a.Namespace, shownInstead, a.Namespace, argoapp.AnnotationOCMManagedClusterAppNamespace)
	case ReasonLeftOutOfReport:
		msg = fmt.Sprintf("The agent of cluster %s left applications out of its report to fit its size budget, this one (%s) among them, so %s. "+
			"The summary condition of ManagedClusterAddOn %s/%s says what was cut; fewer applications per cluster, or fixing the failing ones, makes room.",
			a.Cluster, app, shownInstead, a.Cluster, a.Addon)
	case ReasonSlicesRefused:
		msg = fmt.Sprintf("The agent of cluster %s cannot write its ApplicationStatusSlices on the hub, so %s for this application (%s). Its condition %s on ManagedClusterAddOn %s/%s says: %s",
			a.Cluster, shownInstead, app, clusterreport.ConditionStatusSlices, a.Cluster, a.Addon, a.Refusal)
	case ReasonNoAgentReport:
		msg = fmt.Sprintf("The agent of cluster %s has published no report on ManagedClusterAddOn %s/%s, so %s for this application (%s). "+
			"Check the agent's Pod and logs on the cluster.",
			a.Cluster, a.Cluster, a.Addon, shownInstead, app)
	default:
		check := fmt.Sprintf("Check that the Application exists on the cluster (kubectl get application -n %s %s)", a.Namespace, a.Name)
		if a.WatchNamespaces == nil {
			check += fmt.Sprintf(" and that the agent watches namespace %s (chart value agent.watchNamespaces; this agent does not publish the namespaces it watches)", a.Namespace)
		}
		msg = fmt.Sprintf("The agent of cluster %s reports applications, but not this one (%s, delivered by ManifestWork %s), so %s. %s.",
			a.Cluster, app, a.ManifestWork, shownInstead, check)
	}
	return argoapp.Condition{Type: ConditionNotReported, Message: msg}
}

// maxListedNamespaces bounds the namespaces a message lists.
const maxListedNamespaces = 10

// listNamespaces returns the namespaces for a message, at most maxListedNamespaces.
func listNamespaces(namespaces []string) string {
	if len(namespaces) <= maxListedNamespaces {
		return strings.Join(namespaces, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(namespaces[:maxListedNamespaces], ", "), len(namespaces)-maxListedNamespaces)
}

// Observation is what the agent's report says of one pulled app.
type Observation struct {
	// App is the agent's entry; nil when the report has none.
	App *clusterreport.App
	// Rejection is non-nil when the latest entry of the app (or the whole report) could
	// not be decoded; App is then the last good entry, if any.
	Rejection *Rejection
	// Absence is non-nil when the report has no entry for the app while its work is
	// applied and its cluster's addon available, and says why.
	Absence *Absence
	// RecheckAfter, when positive, says that the app is missing from the report, but
	// since too short a time to tell: look again then.
	RecheckAfter time.Duration
}

// Observe returns what the agent says of the app that work delivers, which points back to
// the hub Application hub: its entry in the agent's status slices when they hold it
// (WithSlices), else what the addon's report says. now is the time of the reconcile.
func (r *Decoder) Observe(addon *addonv1beta1.ManagedClusterAddOn, work *workv1.ManifestWork, hub types.NamespacedName, now time.Time) Observation {
	if addon == nil || work == nil {
		return Observation{}
	}
	r.mu.Lock()
	finder := r.slices
	r.mu.Unlock()
	// The slices first, outside the lock: the finder lists and decodes them.
	if finder != nil {
		if app := finder.Find(addon.Namespace, work.Name, hub); app != nil {
			return Observation{App: app}
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	e, _ := r.decodeLocked(addon)
	app := findApp(e.apps, work.Name, hub)
	switch {
	case app != nil && e.rejected[app.Key()] != nil:
		return Observation{App: app, Rejection: &Rejection{Err: e.rejected[app.Key()], LastGood: true}}
	case app != nil:
		return Observation{App: app}
	case e.whole != nil:
		return Observation{Rejection: &Rejection{Err: e.whole}}
	}
	if StalenessOf(addon) != nil {
		return Observation{} // the stale condition says why
	}
	delivered, ok := AppliedApplication(work)
	if !ok {
		return Observation{} // nothing on the cluster for the agent to see yet
	}
	conditionType := clusterreport.AppConditionType(delivered.Namespace, delivered.Name)
	for _, de := range clusterreport.DecodeErrors(e.err) {
		if de.ConditionType == conditionType {
			return Observation{Rejection: &Rejection{Err: de}}
		}
	}
	absence := &Absence{
		Reason: ReasonNotInAgentReport, Cluster: addon.Namespace, Addon: addon.Name,
		Namespace: delivered.Namespace, Name: delivered.Name, ManifestWork: work.Name,
	}
	if e.scope != nil {
		absence.WatchNamespaces = e.scope.WatchNamespaces
		absence.LeftOut = e.scope.AppsLeftOut
	}
	if watches, known := e.scope.Watches(delivered.Namespace); known && !watches {
		absence.Reason = ReasonNamespaceNotWatched
		return Observation{Absence: absence}
	}
	if wait := delivered.Since.Add(r.absenceGrace).Sub(now); wait > 0 {
		return Observation{RecheckAfter: wait}
	}
	switch {
	case !e.published:
		absence.Reason = ReasonNoAgentReport
	case e.slicesRefused != "":
		absence.Reason, absence.Refusal = ReasonSlicesRefused, e.slicesRefused
	case absence.LeftOut > 0:
		absence.Reason = ReasonLeftOutOfReport
	}
	return Observation{Absence: absence}
}

// Delivered is the Application that an applied ManifestWork put on its cluster.
type Delivered struct {
	Namespace, Name string
	// Since is when the work became applied.
	Since time.Time
}

// AppliedApplication returns the Application that work delivered, when the work is
// applied (its Applied condition is True) and its status names the Application.
func AppliedApplication(work *workv1.ManifestWork) (Delivered, bool) {
	if work == nil {
		return Delivered{}, false
	}
	applied := meta.FindStatusCondition(work.Status.Conditions, workv1.WorkApplied)
	if applied == nil || applied.Status != metav1.ConditionTrue {
		return Delivered{}, false
	}
	for _, m := range work.Status.ResourceStatus.Manifests {
		if m.ResourceMeta.Group == argoapp.Group && m.ResourceMeta.Kind == argoapp.KindApplication && m.ResourceMeta.Name != "" {
			return Delivered{Namespace: m.ResourceMeta.Namespace, Name: m.ResourceMeta.Name, Since: applied.LastTransitionTime.Time}, true
		}
	}
	return Delivered{}, false
}
