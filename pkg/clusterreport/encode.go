package clusterreport

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
)

// Encoding is a Report encoded as the agent's conditions.
type Encoding struct {
	// Conditions are the agent's conditions, sorted by type: the diagnostics, the summary
	// and one per reported Application. Their LastTransitionTime is unset; the agent
	// carries it over from the conditions on the hub.
	Conditions []metav1.Condition
	// Bytes is the size of Conditions as measured against MaxBytes (see ConditionSize).
	Bytes int
	// Cut says what the budget removed.
	Cut Cut
}

// Cut counts the Applications whose detail the budget removed. It does not count what
// the per-app caps remove at full detail (MaxResourcesPerApp, MaxMessageBytes): every
// report is cut that way, and the payload says it.
type Cut struct {
	// ResourceLists counts the apps whose resource list was shortened.
	ResourceLists int
	// Warnings counts the apps whose warning conditions were left out.
	Warnings int
	// Messages counts the apps whose messages were cut below MaxMessageBytes.
	Messages int
	// Apps counts the apps left out of the report: only the summary counts them.
	Apps int
}

// Any reports whether the budget removed anything.
func (c Cut) Any() bool {
	return c != Cut{}
}

// detail is how much of an Application an app condition carries. Encode lowers it, app
// by app, until the report fits MaxBytes.
type detail int

const (
	// detailFull carries up to MaxResourcesPerApp resources (those not Synced and
	// Healthy first), every condition, and messages of MaxMessageBytes.
	detailFull detail = iota
	// detailProblems carries only the resources that are not Synced and Healthy.
	detailProblems
	// detailReduced carries no resources, no warnings, and messages of
	// ReducedMessageBytes. Errors stay.
	detailReduced
	// detailMinimal drops the health and operation messages and the hub back-pointers
	// (the hub reads them from the ManifestWork), and cuts the messages of the error
	// conditions to MinimalMessageBytes. Errors stay.
	detailMinimal
)

// Encode encodes a report as the agent's conditions. The result is deterministic: the
// same report, in any order, encodes to the same conditions.
//
// Every Application gets a condition at full detail when they all fit in MaxBytes.
// Otherwise Encode lowers the detail of the largest apps first, one at a time, until they
// fit: the resource lists of the Synced and Healthy apps without errors, then all their
// detail but the status; then the same for the other apps, keeping their error conditions
// (cut shorter) to the end. Only when even that does not fit does it leave whole apps out:
// healthy ones first, apps with errors last. The summary says what was cut. A report of
// AppsInSlices gets no condition per app, and nothing is cut: the summary counts the
// apps and says where they are.
//
// It fails on a report that is not valid: an app without a namespace or name, or with a
// name longer than a Kubernetes name, two apps with the same key, or a diagnostic of
// another type, status or reason than the API allows.
func Encode(r Report) (Encoding, error) {
	diagnostics, err := diagnosticConditions(r.Diagnostics)
	if err != nil {
		return Encoding{}, err
	}
	plans, err := planApps(r.Apps)
	if err != nil {
		return Encoding{}, err
	}
	scope, err := normalScope(r.Scope)
	if err != nil {
		return Encoding{}, err
	}

	fixed := summaryReserve
	for _, c := range diagnostics {
		fixed += ConditionSize(c)
	}
	if scope != nil {
		// Room for the scope with every app left out: the count only gets shorter.
		reserve, err := scopeCondition(*scope, len(plans))
		if err != nil {
			return Encoding{}, err
		}
		fixed += ConditionSize(reserve)
	}
	budget := MaxBytes - fixed
	total := 0
	for _, p := range plans {
		if r.AppsInSlices {
			break // no condition per app: only the summary counts them
		}
		if err := p.render(detailFull); err != nil {
			return Encoding{}, err
		}
		total += p.size
	}

	// Lower the detail, phase by phase, until the apps fit.
	phases := []struct {
		healthy bool
		level   detail
	}{
		{true, detailProblems}, {true, detailReduced}, {true, detailMinimal},
		{false, detailProblems}, {false, detailReduced}, {false, detailMinimal},
	}
	for _, phase := range phases {
		for _, p := range largestFirst(plans, func(p *appPlan) bool { return p.healthy == phase.healthy && p.level < phase.level }) {
			if total <= budget {
				break
			}
			total -= p.size
			if err := p.render(phase.level); err != nil {
				return Encoding{}, err
			}
			total += p.size
		}
	}
	// Leave whole apps out as a last resort: healthy ones, then those without errors,
	// then the rest.
	dropOrder := []func(*appPlan) bool{
		func(p *appPlan) bool { return p.healthy },
		func(p *appPlan) bool { return !p.app.HasErrors() },
		func(p *appPlan) bool { return true },
	}
	for _, eligible := range dropOrder {
		for _, p := range largestFirst(plans, func(p *appPlan) bool { return !p.dropped && eligible(p) }) {
			if total <= budget {
				break
			}
			total -= p.size
			p.dropped = true
		}
	}

	var cut Cut
	conditions := diagnostics
	for _, p := range plans {
		if r.AppsInSlices {
			break
		}
		if p.dropped {
			cut.Apps++
			continue
		}
		if p.resourcesCut {
			cut.ResourceLists++
		}
		if p.warningsCut {
			cut.Warnings++
		}
		if p.level >= detailReduced {
			cut.Messages++
		}
		conditions = append(conditions, p.condition)
	}
	summary := summaryCondition(plans, cut, r.AppsInSlices)
	conditions = append(conditions, summary)
	if scope != nil {
		c, err := scopeCondition(*scope, cut.Apps)
		if err != nil {
			return Encoding{}, err
		}
		conditions = append(conditions, c)
	}
	slices.SortFunc(conditions, func(a, b metav1.Condition) int { return strings.Compare(a.Type, b.Type) })

	size := 0
	for _, c := range conditions {
		size += ConditionSize(c)
	}
	if size > MaxBytes {
		// The phases above leave out apps until the rest fits; this is a bug.
		return Encoding{}, fmt.Errorf("encoded report takes %d bytes, more than the budget of %d", size, MaxBytes)
	}
	return Encoding{Conditions: conditions, Bytes: size, Cut: cut}, nil
}

// appPlan is one Application on its way to a condition.
type appPlan struct {
	app App
	// conditionType is AppConditionType of the app.
	conditionType string
	// healthy: Synced and Healthy and no errors; the budget cuts these first.
	healthy bool
	// resources are the app's resources in the order they are kept: those not Synced
	// and Healthy first, then by key.
	resources []argoapp.ResourceStatus
	// problems is how many of resources are not Synced and Healthy.
	problems int
	// conditions are the app's Argo CD conditions, errors first, then by type and
	// message.
	conditions []argoapp.Condition

	level     detail
	condition metav1.Condition
	size      int
	dropped   bool
	// resourcesCut and warningsCut say whether the budget, rather than the per-app caps,
	// removed resources or warnings.
	resourcesCut bool
	warningsCut  bool
}

// planApps validates the apps and orders them by key.
func planApps(apps []App) ([]*appPlan, error) {
	plans := make([]*appPlan, 0, len(apps))
	seen := make(map[string]bool, len(apps))
	for _, app := range apps {
		if app.Namespace == "" || app.Name == "" {
			return nil, fmt.Errorf("encode report: application %q has no namespace or no name", app.Key())
		}
		if len(app.Namespace) > MaxNameBytes || len(app.Name) > MaxNameBytes {
			return nil, fmt.Errorf("encode report: application %q: namespace or name longer than %d bytes", app.Key(), MaxNameBytes)
		}
		if seen[app.Key()] {
			return nil, fmt.Errorf("encode report: application %s listed twice", app.Key())
		}
		seen[app.Key()] = true
		plans = append(plans, newAppPlan(app))
	}
	slices.SortFunc(plans, func(a, b *appPlan) int {
		return cmp.Or(strings.Compare(a.app.Namespace, b.app.Namespace), strings.Compare(a.app.Name, b.app.Name))
	})
	return plans, nil
}

// newAppPlan orders the resources and conditions of app. Lists already in order (see
// SortResources) are shared with app, not copied: a plan never changes them.
func newAppPlan(app App) *appPlan {
	p := &appPlan{
		app:           app,
		conditionType: AppConditionType(app.Namespace, app.Name),
		healthy:       app.SyncedAndHealthy() && !app.HasErrors(),
		resources:     app.Resources,
		conditions:    app.Conditions,
	}
	if !slices.IsSortedFunc(p.resources, compareResourcesInReport) {
		p.resources = slices.Clone(p.resources)
		slices.SortFunc(p.resources, compareResourcesInReport)
	}
	for _, r := range p.resources {
		if isProblem(r) {
			p.problems++
		}
	}
	if !slices.IsSortedFunc(p.conditions, compareConditions) {
		p.conditions = slices.Clone(p.conditions)
		slices.SortFunc(p.conditions, compareConditions)
	}
	return p
}

// SortResources sorts resources in the order in which an app's report carries them:
// those not Synced and Healthy first, then by group, kind, namespace, name and version.
// The agent sorts each app's resources once, when it decodes the app, so that encoding
// its report at every publish copies none.
func SortResources(resources []argoapp.ResourceStatus) {
	slices.SortFunc(resources, compareResourcesInReport)
}

// compareResourcesInReport orders resources as the report carries them.
func compareResourcesInReport(a, b argoapp.ResourceStatus) int {
	if pa, pb := isProblem(a), isProblem(b); pa != pb {
		if pa {
			return -1
		}
		return 1
	}
	return compareResources(a, b)
}

// isProblem reports whether a resource is not Synced, or has a health other than
// Healthy. Many kinds have no health at all.
func isProblem(r argoapp.ResourceStatus) bool {
	return r.Status != argoapp.SyncSynced || (r.Health.Status != "" && r.Health.Status != argoapp.HealthHealthy)
}

// compareResources orders resources by group, kind, namespace, name and version.
func compareResources(a, b argoapp.ResourceStatus) int {
	return cmp.Or(
		strings.Compare(a.Group, b.Group),
		strings.Compare(a.Kind, b.Kind),
		strings.Compare(a.Namespace, b.Namespace),
		strings.Compare(a.Name, b.Name),
		strings.Compare(a.Version, b.Version),
		strings.Compare(a.Status, b.Status),
		strings.Compare(a.Health.Status, b.Health.Status),
	)
}

// render encodes the app at the given detail. When the payload is over the API's limit
// on a message, it keeps fewer resources, then lowers the detail, then keeps fewer
// conditions, until it fits.
func (p *appPlan) render(level detail) error {
	for ; ; level++ {
		candidates := p.resourcesAt(level)
		// Most apps fit with all their candidates: one encoding, no search.
		w := p.wire(level, candidates, len(p.conditions))
		if message, fits, err := fitsMessage(w); err != nil {
			return err
		} else if fits {
			p.set(level, w, message)
			return nil
		}
		// The most resources that fit: a binary search over how many to keep.
		lo, hi := 0, candidates-1
		var best *wireApp
		var bestMessage string
		for lo <= hi {
			keep := (lo + hi) / 2
			w := p.wire(level, keep, len(p.conditions))
			if message, fits, err := fitsMessage(w); err != nil {
				return err
			} else if fits {
				best, bestMessage, lo = w, message, keep+1
			} else {
				hi = keep - 1
			}
		}
		if best != nil {
			p.set(level, best, bestMessage)
			return nil
		}
		if level == detailMinimal {
			break
		}
	}
	// Even the minimal payload is too large: an app with hundreds of errors. Keep the
	// first conditions that fit.
	for keep := len(p.conditions) - 1; keep >= 0; keep-- {
		w := p.wire(detailMinimal, 0, keep)
		if message, fits, err := fitsMessage(w); err != nil {
			return err
		} else if fits {
			p.set(detailMinimal, w, message)
			return nil
		}
	}
	return fmt.Errorf("encode report: application %s does not fit in a condition", p.app.Key())
}

// resourcesAt returns how many resources the app carries at a detail level.
func (p *appPlan) resourcesAt(level detail) int {
	switch level {
	case detailFull:
		return min(len(p.resources), MaxResourcesPerApp)
	case detailProblems:
		return min(p.problems, MaxResourcesPerApp)
	default:
		return 0
	}
}

// set records the payload w, rendered at level and encoded as message, as the app's
// condition.
func (p *appPlan) set(level detail, w *wireApp, message string) {
	status := metav1.ConditionFalse
	switch {
	case p.app.SyncedAndHealthy():
		status = metav1.ConditionTrue
	case p.app.Sync.Status == "" && p.app.Health.Status == "":
		status = metav1.ConditionUnknown
	}
	p.level = level
	p.condition = metav1.Condition{
		Type:    p.conditionType,
		Status:  status,
		Reason:  AppReason(p.app.Sync.Status, p.app.Health.Status),
		Message: message,
	}
	p.size = ConditionSize(p.condition)
	full := min(len(p.resources), MaxResourcesPerApp)
	p.resourcesCut = len(w.Resources) < full
	p.warningsCut = level >= detailReduced && len(p.conditions) > p.errorCount()
}

// errorCount returns how many of the app's conditions are errors.
func (p *appPlan) errorCount() int {
	n := 0
	for _, c := range p.conditions {
		if IsErrorCondition(c.Type) {
			n++
		}
	}
	return n
}

// fitsMessage encodes the payload, and reports whether it fits in a condition message.
func fitsMessage(w *wireApp) (string, bool, error) {
	message, err := marshalCompact(w)
	if err != nil {
		return "", false, fmt.Errorf("encode report: application %s/%s: %w", w.Namespace, w.Name, err)
	}
	return message, len(message) <= MaxConditionMessageBytes, nil
}

// wire builds the payload of the app at a detail level, with at most keepResources
// resources and keepConditions conditions.
func (p *appPlan) wire(level detail, keepResources, keepConditions int) *wireApp {
	app := p.app
	// messageBytes cuts the messages of conditions, statusBytes those of the health and
	// the operation.
	messageBytes, statusBytes := MaxMessageBytes, MaxMessageBytes
	switch level {
	case detailReduced:
		messageBytes, statusBytes = ReducedMessageBytes, ReducedMessageBytes
	case detailMinimal:
		messageBytes, statusBytes = MinimalMessageBytes, 0
	}
	w := &wireApp{
		V:              Version,
		Namespace:      app.Namespace,
		Name:           app.Name,
		ApplicationSet: TruncateMessage(app.ApplicationSet, 2*MaxNameBytes+1),
		ManifestWork:   TruncateMessage(app.ManifestWork, MaxNameBytes),
		Sync: wireSync{
			Status:   TruncateMessage(app.Sync.Status, maxStatusBytes),
			Revision: TruncateMessage(app.Sync.Revision, MaxNameBytes),
		},
		Health: wireHealth{
			Status:  TruncateMessage(app.Health.Status, maxStatusBytes),
			Message: TruncateMessage(app.Health.Message, statusBytes),
		},
		ObservedAt: formatTime(app.ObservedAt),
	}
	if level == detailMinimal {
		w.ApplicationSet = ""
	} else if app.HubNamespace != "" || app.HubName != "" {
		w.Hub = &wireRef{Namespace: TruncateMessage(app.HubNamespace, MaxNameBytes), Name: TruncateMessage(app.HubName, MaxNameBytes)}
	}
	for i, revision := range app.Sync.Revisions {
		if i == MaxRevisions {
			break
		}
		w.Sync.Revisions = append(w.Sync.Revisions, TruncateMessage(revision, MaxNameBytes))
	}
	if op := app.Operation; op != (argoapp.OperationState{}) {
		w.Operation = &wireOperation{
			Phase:     TruncateMessage(op.Phase, maxStatusBytes),
			StartedAt: TruncateMessage(op.StartedAt, maxStatusBytes),
			Message:   TruncateMessage(op.Message, statusBytes),
		}
	}

	kept := p.resources[:keepResources]
	if !slices.IsSortedFunc(kept, compareResources) {
		kept = slices.Clone(kept)
		slices.SortFunc(kept, compareResources)
	}
	if len(kept) > 0 {
		// One array holds the cells of every row.
		cells := make([]string, 0, resourceColumns*len(kept))
		w.Resources = make([][]string, 0, len(kept))
		for _, r := range kept {
			cells = append(cells,
				TruncateMessage(r.Group, MaxNameBytes),
				TruncateMessage(r.Version, MaxNameBytes),
				TruncateMessage(r.Kind, MaxNameBytes),
				TruncateMessage(r.Namespace, MaxNameBytes),
				TruncateMessage(r.Name, MaxNameBytes),
				TruncateMessage(r.Status, maxStatusBytes),
				TruncateMessage(r.Health.Status, maxStatusBytes),
			)
			w.Resources = append(w.Resources, cells[len(cells)-resourceColumns:len(cells):len(cells)])
		}
	}
	w.ResourcesOmitted = app.ResourcesOmitted + len(p.resources) - keepResources

	w.ConditionsOmitted = app.ConditionsOmitted
	for i, c := range p.conditions {
		switch {
		case c.Type == "":
			// Decode requires a type: a condition without one is counted, not carried.
			w.ConditionsOmitted++
		case i >= keepConditions || len(w.Conditions) == MaxConditionsPerApp:
			w.ConditionsOmitted++
		case level >= detailReduced && !IsErrorCondition(c.Type):
			w.ConditionsOmitted++
		default:
			w.Conditions = append(w.Conditions, wireCondition{
				Type:    TruncateMessage(c.Type, maxStatusBytes),
				Message: TruncateMessage(c.Message, messageBytes),
			})
		}
	}
	return w
}

// largestFirst returns the plans that are eligible, largest condition first, then by
// key, so that the budget touches as few apps as it can, and always the same ones.
func largestFirst(plans []*appPlan, eligible func(*appPlan) bool) []*appPlan {
	var out []*appPlan
	for _, p := range plans {
		if !p.dropped && eligible(p) {
			out = append(out, p)
		}
	}
	slices.SortStableFunc(out, func(a, b *appPlan) int { return cmp.Compare(b.size, a.size) })
	return out
}

// diagnosticConditions validates the diagnostics and returns them as conditions.
func diagnosticConditions(diagnostics []Diagnostic) ([]metav1.Condition, error) {
	var out []metav1.Condition
	seen := map[string]bool{}
	for _, d := range diagnostics {
		if !IsDiagnostic(d.Type) {
			return nil, fmt.Errorf("encode report: %q is not a diagnostic condition type", d.Type)
		}
		if seen[d.Type] {
			return nil, fmt.Errorf("encode report: diagnostic %s listed twice", d.Type)
		}
		seen[d.Type] = true
		switch metav1.ConditionStatus(d.Status) {
		case metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionUnknown:
		default:
			return nil, fmt.Errorf("encode report: diagnostic %s has status %q", d.Type, d.Status)
		}
		if !reasonPattern.MatchString(d.Reason) {
			return nil, fmt.Errorf("encode report: diagnostic %s has reason %q, not a CamelCase word", d.Type, d.Reason)
		}
		out = append(out, metav1.Condition{
			Type:    d.Type,
			Status:  metav1.ConditionStatus(d.Status),
			Reason:  d.Reason,
			Message: TruncateMessage(d.Message, MaxMessageBytes),
		})
	}
	return out, nil
}

// normalScope validates a scope, and returns it with its namespaces sorted, without
// duplicates, and capped at MaxScopeNamespaces; nil for nil.
func normalScope(scope *Scope) (*Scope, error) {
	if scope == nil {
		return nil, nil
	}
	if len(scope.WatchNamespaces) == 0 {
		return nil, fmt.Errorf("encode report: the scope lists no namespace")
	}
	for _, ns := range scope.WatchNamespaces {
		if ns == "" || len(ns) > MaxNameBytes {
			return nil, fmt.Errorf("encode report: the scope lists %q, not a namespace name", ns)
		}
	}
	namespaces := slices.Compact(slices.Sorted(slices.Values(scope.WatchNamespaces)))
	out := &Scope{NamespacesOmitted: max(scope.NamespacesOmitted, 0)}
	if len(namespaces) > MaxScopeNamespaces {
		out.NamespacesOmitted += len(namespaces) - MaxScopeNamespaces
		namespaces = namespaces[:MaxScopeNamespaces]
	}
	out.WatchNamespaces = namespaces
	return out, nil
}

// scopeCondition returns the scope condition, with appsLeftOut apps left out by the
// budget.
func scopeCondition(scope Scope, appsLeftOut int) (metav1.Condition, error) {
	message, err := marshalCompact(wireScope{
		V: Version, WatchNamespaces: scope.WatchNamespaces, NamespacesOmitted: scope.NamespacesOmitted, AppsLeftOut: appsLeftOut,
	})
	if err != nil {
		return metav1.Condition{}, fmt.Errorf("encode the report scope: %w", err)
	}
	c := metav1.Condition{Type: ConditionReportScope, Status: metav1.ConditionTrue, Reason: ReasonAllApplicationsReported, Message: message}
	if appsLeftOut > 0 {
		c.Status, c.Reason = metav1.ConditionFalse, ReasonApplicationsLeftOut
	}
	return c, nil
}

// summaryReserve is the room kept in MaxBytes for the summary condition.
var summaryReserve = ConditionSize(metav1.Condition{
	Type:    ConditionSummary,
	Status:  metav1.ConditionFalse,
	Reason:  ReasonNotAllSyncedAndHealthy,
	Message: strings.Repeat("x", MaxSummaryMessageBytes),
})

// summaryListed is how many apps that are not Synced and Healthy the summary names.
const summaryListed = 5

// summaryCondition returns the summary of the report, for people; inSlices says that
// the apps are in the agent's status slices rather than in conditions of their own.
func summaryCondition(plans []*appPlan, cut Cut, inSlices bool) metav1.Condition {
	var notOK []*appPlan
	for _, p := range plans {
		if !p.app.SyncedAndHealthy() {
			notOK = append(notOK, p)
		}
	}
	c := metav1.Condition{Type: ConditionSummary, Status: metav1.ConditionTrue, Reason: ReasonAllSyncedAndHealthy}
	var b strings.Builder
	switch {
	case len(plans) == 0:
		c.Reason = ReasonNoApplications
		b.WriteString("No Application from the hub on this cluster.")
	case len(notOK) == 0:
		fmt.Fprintf(&b, "%s: all Synced and Healthy.", countApps(len(plans)))
	default:
		c.Status, c.Reason = metav1.ConditionFalse, ReasonNotAllSyncedAndHealthy
		fmt.Fprintf(&b, "%s: %d Synced and Healthy, %d not:", countApps(len(plans)), len(plans)-len(notOK), len(notOK))
		for i, p := range notOK {
			if i == summaryListed {
				fmt.Fprintf(&b, " and %d more", len(notOK)-summaryListed)
				break
			}
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, " %s (%s/%s)", p.app.Key(), statusWord(p.app.Sync.Status), statusWord(p.app.Health.Status))
		}
		b.WriteString(".")
	}
	if cut.Any() {
		var parts []string
		for _, part := range []struct {
			n    int
			what string
		}{
			{cut.ResourceLists, "shortened the resource lists of %s"},
			{cut.Warnings, "left out the warnings of %s"},
			{cut.Messages, "shortened the messages of %s"},
			{cut.Apps, "left out %s"},
		} {
			if part.n > 0 {
				parts = append(parts, fmt.Sprintf(part.what, countApps(part.n)))
			}
		}
		fmt.Fprintf(&b, " To fit the report in %d KiB, the agent %s.", MaxBytes/1024, strings.Join(parts, ", "))
	}
	if inSlices && len(plans) > 0 {
		b.WriteString(" The status of each application is in the ApplicationStatusSlices of this addon in this namespace.")
	}
	c.Message = TruncateMessage(b.String(), MaxSummaryMessageBytes)
	for ConditionSize(c) > summaryReserve {
		// Escaped characters made the message larger than its reserve.
		c.Message = TruncateMessage(c.Message, len(c.Message)-len(Ellipsis)-16)
	}
	return c
}

// countApps returns "1 application" or "<n> applications".
func countApps(n int) string {
	if n == 1 {
		return "1 application"
	}
	return fmt.Sprintf("%d applications", n)
}

// statusWord returns a status for the summary: the status cut short, or "Unknown".
func statusWord(s string) string {
	if s == "" {
		return "Unknown"
	}
	return TruncateMessage(s, maxStatusBytes)
}

// Fingerprint returns a digest of an app's content at full detail, without ObservedAt.
// It is the same for an app and its decoding when the budget cut nothing from it, so
// that the agent can tell, from the report on the hub, whether an app changed while it
// was not running, and keep its ObservedAt when it did not.
func Fingerprint(app App) (string, error) {
	app.ObservedAt = sizeProbeTime.Time
	p := newAppPlan(app)
	message, err := marshalCompact(p.wire(detailFull, min(len(p.resources), MaxResourcesPerApp), len(p.conditions)))
	if err != nil {
		return "", fmt.Errorf("fingerprint application %s: %w", app.Key(), err)
	}
	sum := sha256.Sum256([]byte(message))
	return hex.EncodeToString(sum[:]), nil
}
