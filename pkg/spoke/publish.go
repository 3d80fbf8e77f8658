package spoke

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	addonv1beta1 "open-cluster-management.io/api/addon/v1beta1"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/clusterreport"
)

// Reasons of the agent's Events, besides the reasons of the diagnostics, which name the
// Events of their transitions.
const (
	// EventReasonReportTruncated: the report did not fit clusterreport.MaxBytes, and the
	// agent cut detail from it. The summary condition says what.
	EventReasonReportTruncated = "ReportTruncated"
)

// errAddonMissing is returned by publish while the ManagedClusterAddOn does not exist:
// the agent cannot create it, and waits for it with backoff and its watch.
var errAddonMissing = errors.New("the ManagedClusterAddOn does not exist")

// publisher is the state of the publish loop.
type publisher struct {
	// observations remember, per app key, the content last seen and since when, so that
	// an unchanged app keeps its ObservedAt.
	observations map[string]observation
	// truncated: the last published report was cut by the budget.
	truncated bool
	// entries are the apps' status-channel entries as last built, by key.
	entries map[string]entryState
	// held are the entries on the hub of the apps whose newer entries the agent holds
	// back (holdBack), by key, and holding when it began to.
	held    map[string]entryState
	holding argoapp.SettleHolds[struct{}]
	// applied is when the agent last wrote its conditions on the ManagedClusterAddOn.
	applied time.Time
}

// observation is the content of an app (its clusterreport.Fingerprint, computed from
// the Application at resourceVersion) and when the agent first saw it.
type observation struct {
	fingerprint     string
	resourceVersion string
	at              time.Time
}

// newPublisher returns the state of a publish loop that has published nothing.
func newPublisher() publisher {
	return publisher{observations: map[string]observation{}, entries: map[string]entryState{}, held: map[string]entryState{}}
}

// publish builds the report from what the agent sees, and applies it to the
// ManagedClusterAddOn when it differs from what the hub has.
func (a *agent) publish(ctx context.Context) error {
	if a.fullResync.Swap(false) {
		a.forgetHub()
	}
	state := crdState(a.crd.Load())
	if state == crdUnknown || state == crdPresent && !a.appsSynced.Load() {
		// Publishing now would drop the apps the agent has not listed yet.
		return nil
	}
	channel := a.slices.channel()
	if channel == channelUnknown {
		return nil // the informer's sync or its first error asks for a publish
	}
	now := time.Now().UTC().Truncate(time.Second)
	apps := a.observeApplications(state)
	spokeLocal := a.spokeLocalApplications(state)

	hub, err := a.currentHub(ctx)
	if err != nil {
		return err
	}
	if !hub.exists {
		return errAddonMissing
	}
	// Once the hub serves the status slices, they carry every app, and the report on the
	// ManagedClusterAddOn only their summary: the slices are written first, so that an
	// app is never in neither. Before (a hub without the slices), the report carries a
	// condition per app.
	inSlices := channel == channelSlices
	var writes sliceWrites
	var slicesErr error
	if inSlices {
		writes, slicesErr = a.publishSlices(ctx, apps, spokeLocal, a.hubSnapshot().object, now)
		if slicesErr != nil && slices.ContainsFunc(hub.conditions, func(c metav1.Condition) bool { return clusterreport.IsAppCondition(c.Type) }) {
			// The report still carries the apps: it keeps them until the slices do.
			return slicesErr
		}
		// Otherwise the report goes on, with the diagnostics, while the slices are
		// retried: their apps stay on the hub as last written.
	}
	report := clusterreport.Report{
		Apps:         a.publisher.stamp(apps, hub.conditions, now, inSlices),
		AppsInSlices: inSlices,
		Diagnostics: []clusterreport.Diagnostic{
			crdDiagnostic(state),
			controllerDiagnostic(state, apps, now, a.tuning.controllerStaleAfter),
			rbacDiagnostic(state, apps),
			slicesDiagnostic(inSlices, slicesErr),
		},
		// The hub compares it with where each app was delivered, to tell an app the
		// agent cannot see from one it does not report.
		Scope: &clusterreport.Scope{WatchNamespaces: a.opts.WatchNamespaces},
	}
	encoding, err := clusterreport.Encode(report)
	if err != nil {
		return fmt.Errorf("encode the report: %w", err)
	}
	desired := withTransitionTimes(encoding.Conditions, hub.conditions, metav1.NewTime(now))
	if wait := a.publisher.summaryWait(desired, hub.conditions, inSlices, a.tuning.summaryInterval, time.Now()); wait > 0 {
		a.queue.AddAfter(reportKey, wait)
	} else if !sameConditions(desired, hub.conditions) {
		updated, err := a.applyConditions(ctx, desired)
		if apierrors.IsNotFound(err) {
			a.observeHubDeletion(nil)
			return errAddonMissing
		}
		if err != nil {
			return fmt.Errorf("apply the report to ManagedClusterAddOn %s/%s: %w", a.opts.ClusterName, a.opts.AddonName, err)
		}
		a.publisher.applied = time.Now()
		a.recordHub(updated)
		a.recordEvents(hub, desired, encoding)
		a.log.V(1).Info("published the report", "applications", len(report.Apps), "bytes", encoding.Bytes, "cut", encoding.Cut)
	}

	a.trees.retain(apps)
	if writes.applied+writes.deleted > 0 {
		a.log.V(1).Info("published the status slices", "applications", len(apps), "applied", writes.applied, "deleted", writes.deleted)
	}
	if writes.heldFor > 0 {
		a.log.V(1).Info("holding back the status slices while their changes pass", "applications", writes.held, "for", writes.heldFor)
		a.queue.AddAfter(reportKey, writes.heldFor)
	}
	return slicesErr
}

// observeApplications returns the local Applications that came from the hub, or none
// when the cluster does not serve the Application API.
func (a *agent) observeApplications(state crdState) []observedApp {
	if state != crdPresent {
		return nil
	}
	var apps []observedApp
	for _, informer := range a.appInformers {
		for _, obj := range informer.GetStore().List() {
			if l, ok := obj.(*localApplication); ok && l.fromHub {
				apps = append(apps, l.app)
			}
		}
	}
	slices.SortFunc(apps, func(x, y observedApp) int { return strings.Compare(x.report.Key(), y.report.Key()) })
	return apps
}

// spokeLocalApplications returns the namespace and name of each local Application that
// no hub pulled, sorted, or none when the cluster does not serve the
// Application API.
func (a *agent) spokeLocalApplications(state crdState) []types.NamespacedName {
	if state != crdPresent {
		return nil
	}
	var out []types.NamespacedName
	for _, informer := range a.appInformers {
		for _, obj := range informer.GetStore().List() {
			if l, ok := obj.(*localApplication); ok && !l.fromHub {
				out = append(out, types.NamespacedName{Namespace: l.Namespace, Name: l.Name})
			}
		}
	}
	slices.SortFunc(out, func(x, y types.NamespacedName) int { return strings.Compare(x.String(), y.String()) })
	return out
}

// currentHub returns the known state of the ManagedClusterAddOn, reading it from the
// hub when the agent does not know it.
func (a *agent) currentHub(ctx context.Context) (hubState, error) {
	if hub := a.hubSnapshot(); hub.known {
		return hub, nil
	}
	ctx, cancel := context.WithTimeout(ctx, a.tuning.requestTimeout)
	defer cancel()
	addon, err := a.hubAddons.Get(ctx, a.opts.AddonName)
	if apierrors.IsNotFound(err) {
		return hubState{known: true}, nil
	}
	if err != nil {
		return hubState{}, fmt.Errorf("read ManagedClusterAddOn %s/%s: %w", a.opts.ClusterName, a.opts.AddonName, err)
	}
	a.recordHub(addon)
	return a.hubSnapshot(), nil
}

// addonStatusApply is the server-side apply configuration of the agent: the
// ManagedClusterAddOn's identity and the conditions the agent owns. Conditions are a map
// keyed by type, so the agent owns its entries, and an entry it no longer applies is
// removed; every other entry keeps its owner.
type addonStatusApply struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        addonStatusApplyMetadata `json:"metadata"`
	Status          addonStatusApplyStatus   `json:"status"`
}

type addonStatusApplyMetadata struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
}

type addonStatusApplyStatus struct {
	Conditions []metav1.Condition `json:"conditions"`
}

// ReportApplyPatch is the server-side apply patch, for the status subresource of
// ManagedClusterAddOn addonName in namespace cluster, that makes conditions the complete
// set of the agent's conditions. Apply it with FieldManager and force.
func ReportApplyPatch(addonName, cluster string, conditions []metav1.Condition) ([]byte, error) {
	body, err := json.Marshal(addonStatusApply{
		TypeMeta: metav1.TypeMeta{APIVersion: addonv1beta1.GroupVersion.String(), Kind: "ManagedClusterAddOn"},
		Metadata: addonStatusApplyMetadata{Name: addonName, Namespace: cluster},
		Status:   addonStatusApplyStatus{Conditions: conditions},
	})
	if err != nil {
		return nil, fmt.Errorf("encode the apply configuration: %w", err)
	}
	return body, nil
}

// applyConditions applies the agent's conditions to the status of the
// ManagedClusterAddOn, server-side, as FieldManager.
func (a *agent) applyConditions(ctx context.Context, conditions []metav1.Condition) (*addonv1beta1.ManagedClusterAddOn, error) {
	body, err := ReportApplyPatch(a.opts.AddonName, a.opts.ClusterName, conditions)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, a.tuning.requestTimeout)
	defer cancel()
	return a.hubAddons.ApplyStatus(ctx, a.opts.AddonName, body)
}

// recordEvents emits, on the hub, an Event for each diagnostic that failed or
// recovered, and one when the report starts being cut by the budget.
func (a *agent) recordEvents(before hubState, after []metav1.Condition, encoding clusterreport.Encoding) {
	object := a.hubSnapshot().object
	for _, c := range after {
		if !clusterreport.IsDiagnostic(c.Type) {
			continue
		}
		previous := findCondition(before.conditions, c.Type)
		switch {
		case c.Status == metav1.ConditionFalse && (previous == nil || previous.Status != metav1.ConditionFalse):
			a.recorder.Event(&object, corev1.EventTypeWarning, c.Reason, c.Message)
		case c.Status == metav1.ConditionTrue && previous != nil && previous.Status == metav1.ConditionFalse:
			a.recorder.Event(&object, corev1.EventTypeNormal, c.Reason, c.Message)
		}
	}
	truncated := encoding.Cut.Any()
	if truncated && !a.publisher.truncated {
		summary := findCondition(after, clusterreport.ConditionSummary)
		message := "The report did not fit the budget."
		if summary != nil {
			message = summary.Message
		}
		a.recorder.Event(&object, corev1.EventTypeWarning, EventReasonReportTruncated, message)
	}
	a.publisher.truncated = truncated
}

// stamp returns the apps' reports with their ObservedAt: kept while an app's content
// does not change, taken from the report on the hub (onHub, the agent's conditions there)
// when the agent first sees an app that did not change since, and now otherwise. Apps
// reported in the status slices (inSlices) only count in the summary, which has no time:
// their reports are returned as they are, and their entries keep their own ObservedAt.
func (p *publisher) stamp(apps []observedApp, onHub []metav1.Condition, now time.Time, inSlices bool) []clusterreport.App {
	out := make([]clusterreport.App, 0, len(apps))
	if inSlices {
		for _, observed := range apps {
			out = append(out, observed.report)
		}
		clear(p.observations)
		return out
	}
	var published map[string]clusterreport.App // decoded on first need
	seen := make(map[string]bool, len(apps))
	for _, observed := range apps {
		app := observed.report
		key := app.Key()
		seen[key] = true
		last, known := p.observations[key]
		fingerprint := last.fingerprint
		if !known || observed.resourceVersion == "" || last.resourceVersion != observed.resourceVersion {
			var err error
			if fingerprint, err = clusterreport.Fingerprint(app); err != nil {
				fingerprint = "" // never equal to a computed one
			}
		}
		if !known || last.fingerprint != fingerprint || fingerprint == "" {
			last = observation{fingerprint: fingerprint, resourceVersion: observed.resourceVersion, at: now}
			if !known {
				if published == nil {
					published = decodedApps(onHub)
				}
				if previous, ok := published[key]; ok {
					if f, err := clusterreport.Fingerprint(previous); err == nil && f == fingerprint {
						last.at = previous.ObservedAt
					}
				}
			}
			p.observations[key] = last
		} else if last.resourceVersion != observed.resourceVersion {
			last.resourceVersion = observed.resourceVersion
			p.observations[key] = last
		}
		app.ObservedAt = last.at
		out = append(out, app)
	}
	for key := range p.observations {
		if !seen[key] {
			delete(p.observations, key)
		}
	}
	return out
}

// decodedApps returns the apps of a published report by key; entries that do not decode
// are left out.
func decodedApps(conditions []metav1.Condition) map[string]clusterreport.App {
	report, _ := clusterreport.Decode(conditions)
	out := make(map[string]clusterreport.App, len(report.Apps))
	for _, app := range report.Apps {
		out[app.Key()] = app
	}
	return out
}

// ownConditions returns copies of the agent's own conditions among conditions, sorted
// by type.
func ownConditions(conditions []metav1.Condition) []metav1.Condition {
	var out []metav1.Condition
	for _, c := range conditions {
		if clusterreport.IsAgentCondition(c.Type) {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(x, y metav1.Condition) int { return strings.Compare(x.Type, y.Type) })
	return out
}

// withTransitionTimes sets the LastTransitionTime of each desired condition: the one on
// the hub when the status did not change, now otherwise.
func withTransitionTimes(desired, onHub []metav1.Condition, now metav1.Time) []metav1.Condition {
	out := slices.Clone(desired)
	for i := range out {
		out[i].LastTransitionTime = now
		if previous := findCondition(onHub, out[i].Type); previous != nil && previous.Status == out[i].Status && !previous.LastTransitionTime.IsZero() {
			out[i].LastTransitionTime = previous.LastTransitionTime
		}
	}
	return out
}

// summaryWait returns how long the write of desired, the agent's conditions, onto the
// ManagedClusterAddOn that holds onHub may wait: zero to write now. While the apps are
// in the status slices, a change of the summary alone (which counts and names the apps
// that are not Synced and Healthy, for people) is written at most once per interval, so
// that a rollout, which changes it with every step of every app, costs the hub a few
// writes of it; the slices carry the apps at once. Any other change is written now, and
// takes the summary along.
func (p *publisher) summaryWait(desired, onHub []metav1.Condition, inSlices bool, interval time.Duration, now time.Time) time.Duration {
	if !inSlices || sameConditions(desired, onHub) {
		return 0
	}
	withoutSummary := func(cs []metav1.Condition) []metav1.Condition {
		return slices.DeleteFunc(slices.Clone(cs), func(c metav1.Condition) bool { return c.Type == clusterreport.ConditionSummary })
	}
	if !sameConditions(withoutSummary(desired), withoutSummary(onHub)) || findCondition(onHub, clusterreport.ConditionSummary) == nil {
		return 0
	}
	return interval - now.Sub(p.applied)
}

// sameConditions reports whether two lists, sorted by type, hold the same conditions.
func sameConditions(x, y []metav1.Condition) bool {
	return slices.EqualFunc(x, y, func(a, b metav1.Condition) bool {
		return a.Type == b.Type && a.Status == b.Status && a.Reason == b.Reason && a.Message == b.Message &&
			a.ObservedGeneration == b.ObservedGeneration && a.LastTransitionTime.Equal(&b.LastTransitionTime)
	})
}

// findCondition returns the condition of the given type, or nil.
func findCondition(conditions []metav1.Condition, conditionType string) *metav1.Condition {
	i := slices.IndexFunc(conditions, func(c metav1.Condition) bool { return c.Type == conditionType })
	if i < 0 {
		return nil
	}
	return &conditions[i]
}

// olderResourceVersion reports whether resource version a is older than b. Resource
// versions are opaque; when either is not the integer the apiserver writes, a is taken
// as newer.
func olderResourceVersion(a, b string) bool {
	x, errX := strconv.ParseUint(a, 10, 64)
	y, errY := strconv.ParseUint(b, 10, 64)
	return errX == nil && errY == nil && x < y
}
