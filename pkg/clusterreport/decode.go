package clusterreport

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Errors that a DecodeError wraps, for errors.Is.
var (
	// ErrMalformed: a payload is not JSON, has a field of the wrong type, breaks a limit
	// of the encoding, or does not match its condition type.
	ErrMalformed = errors.New("malformed report")
	// ErrTooLarge: a message, or the agent's conditions together, exceed the limits
	// (MaxConditionMessageBytes, MaxBytes).
	ErrTooLarge = errors.New("report too large")
	// ErrUnsupportedVersion: a payload of a version this package does not read.
	ErrUnsupportedVersion = errors.New("unsupported report version")
)

// DecodeError is a condition that Decode rejected, or, with an empty ConditionType, the
// whole report.
type DecodeError struct {
	// ConditionType is the type of the rejected condition; empty when Decode rejected
	// the report as a whole.
	ConditionType string
	// Err wraps ErrMalformed, ErrTooLarge or ErrUnsupportedVersion.
	Err error
}

// Error says which condition was rejected, and why.
func (e *DecodeError) Error() string {
	if e.ConditionType == "" {
		return "decode report: " + e.Err.Error()
	}
	return fmt.Sprintf("decode report condition %s: %v", e.ConditionType, e.Err)
}

// Unwrap returns the reason.
func (e *DecodeError) Unwrap() error { return e.Err }

// DecodeErrors returns the *DecodeError values that an error of Decode joins, in order.
func DecodeErrors(err error) []*DecodeError {
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		var out []*DecodeError
		for _, e := range joined.Unwrap() {
			out = append(out, DecodeErrors(e)...)
		}
		return out
	}
	var de *DecodeError
	if errors.As(err, &de) {
		return []*DecodeError{de}
	}
	return nil
}

// Decode reads the report out of the conditions of a ManagedClusterAddOn. It ignores the
// conditions the agent does not own (see IsAgentCondition) and the summary. A report
// without the scope condition (an older agent) has a nil Scope; a scope that does not
// decode is left nil and joins the errors.
//
// When the agent's conditions together take more than MaxBytes, Decode returns an empty
// report and a *DecodeError for the whole report. Otherwise it returns every app and
// diagnostic that decodes, sorted, and, when some app conditions did not decode, an error
// that joins one *DecodeError for each. An app that more than one condition reports is
// left out, with a *DecodeError. Use errors.Is with ErrMalformed, ErrTooLarge and
// ErrUnsupportedVersion, or errors.As with *DecodeError, to tell why. Decode never panics.
func Decode(conditions []metav1.Condition) (Report, error) {
	total := 0
	for _, c := range conditions {
		if IsAgentCondition(c.Type) {
			total += ConditionSize(c)
		}
	}
	if total > MaxBytes {
		return Report{}, &DecodeError{Err: fmt.Errorf("%w: the agent's conditions take %d bytes, more than %d", ErrTooLarge, total, MaxBytes)}
	}

	var report Report
	var errs []error
	copies := map[string]int{}
	for _, c := range conditions {
		switch {
		case IsAppCondition(c.Type):
			app, err := DecodeApp(c)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			copies[app.Key()]++
			report.Apps = append(report.Apps, app)
		case c.Type == ConditionReportScope:
			scope, err := decodeScope(c)
			if err != nil {
				errs = append(errs, &DecodeError{ConditionType: c.Type, Err: err})
				continue
			}
			report.Scope = scope
		case IsDiagnostic(c.Type):
			report.Diagnostics = append(report.Diagnostics, Diagnostic{
				Type: c.Type, Status: string(c.Status), Reason: c.Reason, Message: c.Message,
			})
		}
	}
	// An app reported more than once has no copy to trust over the others, and keeping
	// the first would make the answer depend on the order of the conditions: every copy
	// is rejected.
	report.Apps = slices.DeleteFunc(report.Apps, func(app App) bool {
		n := copies[app.Key()]
		if n > 1 {
			errs = append(errs, &DecodeError{ConditionType: AppConditionType(app.Namespace, app.Name), Err: fmt.Errorf("%w: application %s reported %d times", ErrMalformed, app.Key(), n)})
		}
		return n > 1
	})
	slices.SortFunc(report.Apps, func(a, b App) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	slices.SortFunc(report.Diagnostics, func(a, b Diagnostic) int { return strings.Compare(a.Type, b.Type) })
	return report, errors.Join(errs...)
}

// DecodeApp decodes one app condition. A rejected condition returns a *DecodeError.
func DecodeApp(c metav1.Condition) (App, error) {
	app, err := decodeApp(c)
	if err != nil {
		return App{}, &DecodeError{ConditionType: c.Type, Err: err}
	}
	return app, nil
}

// decodeApp decodes one app condition; its errors do not name the condition.
func decodeApp(c metav1.Condition) (App, error) {
	if !IsAppCondition(c.Type) {
		return App{}, fmt.Errorf("%w: not an app condition type", ErrMalformed)
	}
	if len(c.Message) > MaxConditionMessageBytes {
		return App{}, fmt.Errorf("%w: message of %d bytes, more than %d", ErrTooLarge, len(c.Message), MaxConditionMessageBytes)
	}
	var head struct {
		V *int `json:"v"`
	}
	if err := json.Unmarshal([]byte(c.Message), &head); err != nil {
		return App{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if head.V == nil {
		return App{}, fmt.Errorf("%w: no version", ErrMalformed)
	}
	if *head.V != Version {
		return App{}, fmt.Errorf("%w: version %d, this hub reads %d", ErrUnsupportedVersion, *head.V, Version)
	}
	var w wireApp
	if err := json.Unmarshal([]byte(c.Message), &w); err != nil {
		return App{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	observedAt, err := w.validate()
	if err != nil {
		return App{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if want := AppConditionType(w.Namespace, w.Name); c.Type != want {
		return App{}, fmt.Errorf("%w: the payload is application %s/%s, whose condition type is %s", ErrMalformed, w.Namespace, w.Name, want)
	}
	return appFromWire(&w, observedAt), nil
}

// decodeScope decodes the scope condition; its errors do not name the condition.
func decodeScope(c metav1.Condition) (*Scope, error) {
	if len(c.Message) > MaxConditionMessageBytes {
		return nil, fmt.Errorf("%w: message of %d bytes, more than %d", ErrTooLarge, len(c.Message), MaxConditionMessageBytes)
	}
	var head struct {
		V *int `json:"v"`
	}
	if err := json.Unmarshal([]byte(c.Message), &head); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if head.V == nil {
		return nil, fmt.Errorf("%w: no version", ErrMalformed)
	}
	if *head.V != Version {
		return nil, fmt.Errorf("%w: version %d, this hub reads %d", ErrUnsupportedVersion, *head.V, Version)
	}
	var w wireScope
	if err := json.Unmarshal([]byte(c.Message), &w); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	var v limitChecker
	if len(w.WatchNamespaces) == 0 {
		v.fail("watchNamespaces is empty")
	}
	v.count("watchNamespaces", len(w.WatchNamespaces), MaxScopeNamespaces)
	for i, ns := range w.WatchNamespaces {
		v.required(fmt.Sprintf("watchNamespaces[%d]", i), ns, MaxNameBytes)
	}
	v.nonNegative("namespacesOmitted", w.NamespacesOmitted)
	v.nonNegative("appsLeftOut", w.AppsLeftOut)
	if v.err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, v.err)
	}
	return &Scope{
		WatchNamespaces:   slices.Compact(slices.Sorted(slices.Values(w.WatchNamespaces))),
		NamespacesOmitted: w.NamespacesOmitted,
		AppsLeftOut:       w.AppsLeftOut,
	}, nil
}

// validate checks the payload against the limits of the encoding, and returns its
// observation time.
func (w *wireApp) validate() (time.Time, error) {
	var v limitChecker
	v.required("namespace", w.Namespace, MaxNameBytes)
	v.required("name", w.Name, MaxNameBytes)
	if w.Hub != nil {
		v.check("hub.namespace", w.Hub.Namespace, MaxNameBytes)
		v.check("hub.name", w.Hub.Name, MaxNameBytes)
	}
	v.check("applicationSet", w.ApplicationSet, 2*MaxNameBytes+1)
	v.check("manifestWork", w.ManifestWork, MaxNameBytes)
	v.check("sync.status", w.Sync.Status, maxStatusBytes)
	v.check("sync.revision", w.Sync.Revision, MaxNameBytes)
	v.count("sync.revisions", len(w.Sync.Revisions), MaxRevisions)
	for i, revision := range w.Sync.Revisions {
		v.check(fmt.Sprintf("sync.revisions[%d]", i), revision, MaxNameBytes)
	}
	v.check("health.status", w.Health.Status, maxStatusBytes)
	v.check("health.message", w.Health.Message, MaxMessageBytes)
	if op := w.Operation; op != nil {
		v.check("operation.phase", op.Phase, maxStatusBytes)
		v.check("operation.startedAt", op.StartedAt, maxStatusBytes)
		v.check("operation.message", op.Message, MaxMessageBytes)
	}
	v.count("resources", len(w.Resources), MaxResourcesPerApp)
	for i, row := range w.Resources {
		if len(row) < resourceColumns {
			v.fail(fmt.Sprintf("resources[%d] has %d columns, want %d", i, len(row), resourceColumns))
			break
		}
		for j, cell := range row[:resourceColumns] {
			limit := MaxNameBytes
			if j >= 5 { // the sync and health status
				limit = maxStatusBytes
			}
			v.check(fmt.Sprintf("resources[%d][%d]", i, j), cell, limit)
		}
	}
	v.nonNegative("resourcesOmitted", w.ResourcesOmitted)
	v.count("conditions", len(w.Conditions), MaxConditionsPerApp)
	for i, c := range w.Conditions {
		v.required(fmt.Sprintf("conditions[%d].type", i), c.Type, maxStatusBytes)
		v.check(fmt.Sprintf("conditions[%d].message", i), c.Message, MaxMessageBytes)
	}
	v.nonNegative("conditionsOmitted", w.ConditionsOmitted)
	if v.err != nil {
		return time.Time{}, v.err
	}
	observedAt, err := time.Parse(time.RFC3339, w.ObservedAt)
	if err != nil {
		return time.Time{}, fmt.Errorf("observedAt: %w", err)
	}
	return observedAt, nil
}

// limitChecker keeps the first limit that a payload breaks.
type limitChecker struct {
	err error
}

// fail records a broken limit.
func (v *limitChecker) fail(msg string) {
	if v.err == nil {
		v.err = errors.New(msg)
	}
}

// check fails when value is longer than maxBytes.
func (v *limitChecker) check(field, value string, maxBytes int) {
	if len(value) > maxBytes {
		v.fail(fmt.Sprintf("%s has %d bytes, more than %d", field, len(value), maxBytes))
	}
}

// required fails when value is empty or longer than maxBytes.
func (v *limitChecker) required(field, value string, maxBytes int) {
	if value == "" {
		v.fail(field + " is empty")
	}
	v.check(field, value, maxBytes)
}

// count fails when a list has more than maxItems items.
func (v *limitChecker) count(field string, n, maxItems int) {
	if n > maxItems {
		v.fail(fmt.Sprintf("%s has %d items, more than %d", field, n, maxItems))
	}
}

// nonNegative fails when a count is negative.
func (v *limitChecker) nonNegative(field string, n int) {
	if n < 0 {
		v.fail(fmt.Sprintf("%s is negative", field))
	}
}
