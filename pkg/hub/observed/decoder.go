package observed

// This file decodes the agents' reports, once per version of each ManagedClusterAddOn,
// and keeps the last good entry of an app whose new entry is rejected.

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	addonv1beta1 "open-cluster-management.io/api/addon/v1beta1"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/clusterreport"
)

// ConditionInvalidReport is the condition type, on the report's cluster entry and on the
// hub Application, that says the cluster's latest report of the app could not be
// decoded, and the data shown is the last good one. It ends in "Warning" too.
const ConditionInvalidReport = "InvalidAgentReportWarning"

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

// Decoder decodes the agents' reports, once per resourceVersion of each
// ManagedClusterAddOn, and keeps the result: which apps each report holds, and the
// condition that carries each, decoded again when an app is asked for. It holds no decoded
// copy of the reports, which the manager's cache holds already. It is safe for concurrent
// use; the report controller and the status mirror share one.
type Decoder struct {
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
// slices). pkg/hub sets it once, on the decoder it hands to every controller.
func (r *Decoder) WithSlices(s SliceFinder) *Decoder {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.slices = s
	return r
}

type decoded struct {
	resourceVersion string
	// apps are the apps that decoded, and the last good version of those whose entry
	// was rejected, sorted by key.
	apps []reportedApp
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
	// slicesRefused is the message of the agent's slices diagnostic while the hub refuses
	// its slices; empty otherwise.
	slicesRefused string
}

// reportedApp is an app of a decoded report: what finds it, and the condition that
// carries it. The condition's message is the string of the addon the decoder was given
// (the manager's cache), not a copy.
type reportedApp struct {
	namespace, name, manifestWork string
	hub                           types.NamespacedName
	condition                     metav1.Condition
}

func (a reportedApp) key() string { return clusterreport.AppKey(a.namespace, a.name) }

// app decodes the app again; it decoded when it was kept.
func (a reportedApp) app() clusterreport.App {
	app, err := clusterreport.DecodeApp(a.condition)
	if err != nil {
		// Not reached: only conditions that decoded are kept.
		return clusterreport.App{Namespace: a.namespace, Name: a.name, ManifestWork: a.manifestWork,
			HubNamespace: a.hub.Namespace, HubName: a.hub.Name}
	}
	return app
}

// keptApps returns the apps of a decoded report, each with the condition that carries it.
func keptApps(apps []clusterreport.App, conditions []metav1.Condition) []reportedApp {
	byType := make(map[string]metav1.Condition, len(conditions))
	for _, c := range conditions {
		if clusterreport.IsAppCondition(c.Type) {
			byType[c.Type] = c
		}
	}
	out := make([]reportedApp, 0, len(apps))
	for _, app := range apps {
		out = append(out, reportedApp{
			namespace: app.Namespace, name: app.Name, manifestWork: app.ManifestWork,
			hub:       types.NamespacedName{Namespace: app.HubNamespace, Name: app.HubName},
			condition: byType[clusterreport.AppConditionType(app.Namespace, app.Name)],
		})
	}
	return out
}

// NewDecoder returns an empty decoder cache.
func NewDecoder() *Decoder {
	return &Decoder{entries: map[types.NamespacedName]decoded{}, absenceGrace: DefaultAbsenceGrace}
}

// WithAbsenceGrace sets how long an app may be missing from its agent's report, after
// its work was applied, before Observe says so (DefaultAbsenceGrace); for tests.
func (r *Decoder) WithAbsenceGrace(d time.Duration) *Decoder {
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
func (r *Decoder) Get(addon *addonv1beta1.ManagedClusterAddOn) (apps []clusterreport.App, err error, first bool) {
	if addon == nil {
		return nil, nil, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	e, first := r.decodeLocked(addon)
	for _, a := range e.apps {
		apps = append(apps, a.app())
	}
	return apps, e.err, first
}

// ClaimError returns the error of decoding the addon's current version, to the first
// caller of ClaimError for that version only, whoever called Get before; nil otherwise.
// The caller records it (an Event), so that each invalid version is recorded once.
func (r *Decoder) ClaimError(addon *addonv1beta1.ManagedClusterAddOn) error {
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
func (r *Decoder) decodeLocked(addon *addonv1beta1.ManagedClusterAddOn) (e decoded, decodedNow bool) {
	key := types.NamespacedName{Namespace: addon.Namespace, Name: addon.Name}
	if e, ok := r.entries[key]; ok && e.resourceVersion == addon.ResourceVersion {
		return e, false
	}
	report, err := clusterreport.Decode(addon.Status.Conditions)
	e = decoded{resourceVersion: addon.ResourceVersion, apps: keptApps(report.Apps, addon.Status.Conditions), err: err,
		scope: report.Scope, published: published(addon.Status.Conditions), slicesRefused: slicesRefusal(report.Diagnostics)}
	if err != nil {
		e.keepLastGood(r.entries[key].apps)
	}
	r.entries[key] = e
	return e, true
}

// slicesRefusal returns the message of the slices diagnostic when it says that the hub
// refuses the agent's slices; empty otherwise.
func slicesRefusal(diagnostics []clusterreport.Diagnostic) string {
	for _, d := range diagnostics {
		if d.Type == clusterreport.ConditionStatusSlices && d.Status == string(metav1.ConditionFalse) {
			return d.Message
		}
	}
	return ""
}

// keepLastGood puts back into e.apps the last good version, from previous, of each app
// whose entry e.err rejected: all of them when the whole report was rejected, else
// those whose rejected condition is of their type. A rejected entry of an app the hub
// never decoded cannot be told apart from garbage; it only shows in e.err.
func (e *decoded) keepLastGood(previous []reportedApp) {
	e.rejected = map[string]error{}
	decodedNow := map[string]bool{}
	for _, app := range e.apps {
		decodedNow[app.key()] = true
	}
	for _, de := range clusterreport.DecodeErrors(e.err) {
		for _, app := range previous {
			if decodedNow[app.key()] || e.rejected[app.key()] != nil {
				continue
			}
			if de.ConditionType == "" || de.ConditionType == clusterreport.AppConditionType(app.namespace, app.name) {
				e.apps = append(e.apps, app)
				e.rejected[app.key()] = de
			}
		}
		if de.ConditionType == "" {
			e.whole = de
		}
	}
	slices.SortFunc(e.apps, func(a, b reportedApp) int {
		return cmp.Or(strings.Compare(a.namespace, b.namespace), strings.Compare(a.name, b.name))
	})
}

// Forget drops a deleted addon's report.
func (r *Decoder) Forget(namespace, name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.entries, types.NamespacedName{Namespace: namespace, Name: name})
}

// findApp returns the app of a decoded report that the ManifestWork workName carries, or
// that points back to the hub Application hub, decoded; nil when the cluster has not
// reported it.
func findApp(apps []reportedApp, workName string, hub types.NamespacedName) *clusterreport.App {
	i := slices.IndexFunc(apps, func(a reportedApp) bool {
		return (workName != "" && a.manifestWork == workName) ||
			(a.hub.Name != "" && a.hub == hub)
	})
	if i < 0 {
		return nil
	}
	app := apps[i].app()
	return &app
}
