package clusterreport

import (
	"bytes"
	"encoding/json"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
)

// wireApp is version 1 of an app payload: the message of an app condition. The field
// order here is the order in the JSON.
type wireApp struct {
	V              int      `json:"v"`
	Namespace      string   `json:"namespace"`
	Name           string   `json:"name"`
	Hub            *wireRef `json:"hub,omitempty"`
	ApplicationSet string   `json:"applicationSet,omitempty"`
	ManifestWork   string   `json:"manifestWork,omitempty"`

	Sync      wireSync       `json:"sync"`
	Health    wireHealth     `json:"health"`
	Operation *wireOperation `json:"operation,omitempty"`

	// Resources are rows of resourceColumns strings: group, version, kind, namespace,
	// name, sync status, health status. Rows keep the payload about half the size of
	// objects with named fields.
	Resources        [][]string `json:"resources,omitempty"`
	ResourcesOmitted int        `json:"resourcesOmitted,omitempty"`

	Conditions        []wireCondition `json:"conditions,omitempty"`
	ConditionsOmitted int             `json:"conditionsOmitted,omitempty"`

	// ObservedAt is RFC 3339, in UTC, to the second.
	ObservedAt string `json:"observedAt"`
}

// resourceColumns is the number of columns of a resource row. A later payload may add
// columns at the end; Decode reads the first resourceColumns.
const resourceColumns = 7

// wireRef points to a namespaced object.
type wireRef struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// wireSync is status.sync: revision for a single-source Application, revisions for a
// multi-source one.
type wireSync struct {
	Status    string   `json:"status,omitempty"`
	Revision  string   `json:"revision,omitempty"`
	Revisions []string `json:"revisions,omitempty"`
}

// wireHealth is status.health.
type wireHealth struct {
	Status  string `json:"status,omitempty"`
	Message string `json:"message,omitempty"`
}

// wireOperation is status.operationState.
type wireOperation struct {
	Phase     string `json:"phase,omitempty"`
	StartedAt string `json:"startedAt,omitempty"`
	Message   string `json:"message,omitempty"`
}

// wireCondition is one of Argo CD's conditions of the Application.
type wireCondition struct {
	Type    string `json:"type"`
	Message string `json:"message,omitempty"`
}

// wireScope is the message of the scope condition, ConditionReportScope. Its version is
// Version too.
type wireScope struct {
	V                 int      `json:"v"`
	WatchNamespaces   []string `json:"watchNamespaces"`
	NamespacesOmitted int      `json:"namespacesOmitted,omitempty"`
	AppsLeftOut       int      `json:"appsLeftOut,omitempty"`
}

// marshalCompact encodes v as JSON without HTML escaping (an app payload holds many
// '<', '>' and '&' in messages, which would take six bytes each) and without the
// trailing newline.
func marshalCompact(v any) (string, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	return string(bytes.TrimSuffix(buf.Bytes(), []byte("\n"))), nil
}

// formatTime formats an observation time for the wire.
func formatTime(t time.Time) string {
	return t.UTC().Truncate(time.Second).Format(time.RFC3339)
}

// appFromWire converts a decoded payload, already checked by validate, to an App.
func appFromWire(w *wireApp, observedAt time.Time) App {
	app := App{
		Namespace:      w.Namespace,
		Name:           w.Name,
		ApplicationSet: w.ApplicationSet,
		ManifestWork:   w.ManifestWork,
		Sync: argoapp.SyncStatus{
			Status:    w.Sync.Status,
			Revision:  w.Sync.Revision,
			Revisions: w.Sync.Revisions,
		},
		Health:            argoapp.HealthStatus{Status: w.Health.Status, Message: w.Health.Message},
		ResourcesOmitted:  w.ResourcesOmitted,
		ConditionsOmitted: w.ConditionsOmitted,
		ObservedAt:        observedAt,
	}
	if w.Hub != nil {
		app.HubNamespace, app.HubName = w.Hub.Namespace, w.Hub.Name
	}
	if w.Operation != nil {
		app.Operation = argoapp.OperationState{Phase: w.Operation.Phase, StartedAt: w.Operation.StartedAt, Message: w.Operation.Message}
	}
	for _, row := range w.Resources {
		app.Resources = append(app.Resources, argoapp.ResourceStatus{
			Group: row[0], Version: row[1], Kind: row[2], Namespace: row[3], Name: row[4],
			Status: row[5], Health: argoapp.HealthStatus{Status: row[6]},
		})
	}
	for _, c := range w.Conditions {
		app.Conditions = append(app.Conditions, argoapp.Condition{Type: c.Type, Message: c.Message})
	}
	return app
}

// sizeProbeTime stands in for the LastTransitionTime of a condition whose size is
// measured: every time of the API's second precision encodes to the same width.
var sizeProbeTime = metav1.NewTime(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC))

// ConditionSize returns the size, in bytes, that a condition counts against MaxBytes:
// the length of its JSON encoding, with any LastTransitionTime and without
// ObservedGeneration. Encode and Decode measure with it, so that what one writes the
// other accepts.
func ConditionSize(c metav1.Condition) int {
	c.LastTransitionTime = sizeProbeTime
	c.ObservedGeneration = 0
	raw, err := json.Marshal(c)
	if err != nil {
		// A metav1.Condition always encodes; count it as too large if it ever does not.
		return MaxBytes + 1
	}
	return len(raw)
}
