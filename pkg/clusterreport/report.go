// Package clusterreport is the wire format in which the spoke agent reports the Argo CD
// Applications of its managed cluster to the hub. The agent encodes a Report with Encode
// and applies the resulting conditions to the status of its ManagedClusterAddOn; the hub
// reads them back with Decode. This package is the only definition of the format: both
// sides import it, and docs/design.md describes it with an example.
//
// The report is a set of metav1.Conditions, all owned by the agent:
//   - one per Application, of type AppConditionType(namespace, name), whose message is a
//     compact JSON payload carrying a Version, unless the agent publishes its apps in
//     ApplicationStatusSlices (Report.AppsInSlices);
//   - one summary (ConditionSummary) that a person reads in kubectl describe;
//   - the agent's prerequisite diagnostics (ConditionApplicationCRD and friends);
//   - the scope (ConditionReportScope): the namespaces the agent watches, and how many
//     apps the budget left out, as a versioned JSON payload.
//
// The encoding is bounded (MaxBytes in all, MaxConditionMessageBytes per condition, with
// per-app caps on resources and messages), deterministic (an unchanged state encodes to
// identical conditions), and safe to decode (Decode returns typed errors for malformed,
// oversized or unknown-version input, and never panics).
package clusterreport

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
)

// Version is the version of the app payload that Encode writes and Decode reads. Fields
// may be added to a version; a change that an older decoder would misread takes a new
// version. The hub installs the agents, so the hub is upgraded first and must decode
// every version its agents may still write.
const Version = 1

// DefaultAddonName is the default name of the ClusterManagementAddOn, and so of the
// ManagedClusterAddOn, in each cluster namespace, whose status carries the report.
const DefaultAddonName = "argocd-pull"

// DefaultInstallNamespace is where the klusterlet installs addon agents unless the
// ManagedClusterAddOn or an AddOnDeploymentConfig says otherwise.
const DefaultInstallNamespace = "open-cluster-management-agent-addon"

// Condition types of the report. Every type the agent owns is under ConditionDomain, so
// that the hub tells them from the conditions of the addon framework and the klusterlet
// (Available, ManifestApplied, RegistrationApplied, Progressing, Configured).
const (
	// ConditionDomain prefixes the agent's own condition types.
	ConditionDomain = "argocd-pull.open-cluster-management.io"

	// AppConditionPrefix prefixes the type of each Application's condition; see
	// AppConditionType.
	AppConditionPrefix = "app." + ConditionDomain + "/"

	// ConditionSummary is the summary of the report, for people. It is True when every
	// Application is Synced and Healthy. Its message says what the budget cut.
	ConditionSummary = ConditionDomain + "/Applications"

	// ConditionApplicationCRD is True when the managed cluster serves Argo CD's
	// Application API.
	ConditionApplicationCRD = ConditionDomain + "/ApplicationCRDPresent"

	// ConditionApplicationController is True when Argo CD's application-controller has
	// recently reconciled the reported Applications.
	ConditionApplicationController = ConditionDomain + "/ApplicationControllerAlive"

	// ConditionApplicationControllerRBAC is False when the reported Applications show
	// RBAC errors ("... is forbidden") of the application-controller.
	ConditionApplicationControllerRBAC = ConditionDomain + "/ApplicationControllerAuthorized"

	// ConditionStatusSlices is True while the hub takes the agent's
	// ApplicationStatusSlices, False while it refuses them (a ResourceQuota, a narrowed
	// Role, an admission webhook): the apps the agent could not write are then not
	// reported, and its message quotes the refusal. Unknown on a hub that does not serve
	// them, where the apps are in conditions of their own.
	ConditionStatusSlices = ConditionDomain + "/StatusSlicesWritten"

	// ConditionReportScope says what the report covers: the namespaces whose
	// Applications the agent watches, and how many Applications the budget left out. Its
	// message is a versioned JSON payload (see Scope), so that the hub can tell an app
	// the agent cannot see from one it does not report. It is True when the report
	// carries every Application from the hub in those namespaces. Agents older than it
	// do not write it; the hub then cannot tell, and says nothing specific.
	ConditionReportScope = ConditionDomain + "/ReportScope"
)

// Reasons of the summary and diagnostic conditions.
const (
	ReasonAllSyncedAndHealthy    = "AllSyncedAndHealthy"
	ReasonNotAllSyncedAndHealthy = "NotAllSyncedAndHealthy"
	ReasonNoApplications         = "NoApplications"

	ReasonCRDFound        = "CRDFound"
	ReasonCRDNotFound     = "CRDNotFound"
	ReasonDiscoveryFailed = "DiscoveryFailed"

	ReasonReconciling           = "Reconciling"
	ReasonNotReconciling        = "NotReconciling"
	ReasonNoForbidden           = "NoForbiddenErrors"
	ReasonForbidden             = "ForbiddenErrors"
	ReasonApplicationCRDMissing = "ApplicationCRDMissing"

	ReasonSlicesWritten   = "SlicesWritten"
	ReasonSlicesRefused   = "SlicesRefused"
	ReasonSlicesNotServed = "SlicesNotServed"

	ReasonAllApplicationsReported = "AllApplicationsReported"
	ReasonApplicationsLeftOut     = "ApplicationsLeftOut"
)

// ConditionStatusDecodeError is the type of the app condition that the agent reports when
// it cannot read a local Application's status. It ends in "Error", so it counts as an
// error condition.
const ConditionStatusDecodeError = "StatusDecodeError"

// Limits of the encoding. Decode rejects input beyond them.
const (
	// MaxBytes bounds the agent's conditions together, measured as their JSON encoding
	// (see ConditionSize). It leaves most of the object size limit of etcd (1.5 MiB) to
	// the rest of the ManagedClusterAddOn.
	MaxBytes = 256 * 1024

	// MaxConditionMessageBytes is the API's limit on a condition message.
	MaxConditionMessageBytes = 32768

	// MaxConditionTypeLength is the API's limit on a condition type.
	MaxConditionTypeLength = 316

	// MaxResourcesPerApp caps the resource list of one Application; the payload counts
	// the rest in resourcesOmitted.
	MaxResourcesPerApp = 100

	// MaxConditionsPerApp caps the Argo CD conditions of one Application, errors first;
	// the payload counts the rest in conditionsOmitted.
	MaxConditionsPerApp = 20

	// MaxRevisions caps status.sync.revisions of a multi-source Application.
	MaxRevisions = 64

	// MaxMessageBytes cuts each message (health, operation, condition) at full detail.
	MaxMessageBytes = 1024

	// ReducedMessageBytes and MinimalMessageBytes cut messages when the budget is hit.
	ReducedMessageBytes = 256
	MinimalMessageBytes = 128

	// MaxSummaryMessageBytes cuts the summary's message.
	MaxSummaryMessageBytes = 2048

	// MaxScopeNamespaces caps the namespaces that the scope lists; it counts the rest in
	// namespacesOmitted. An agent rarely watches more than a few.
	MaxScopeNamespaces = 64

	// MaxNameBytes cuts names, namespaces, groups, kinds and revisions: the longest a
	// Kubernetes name can be.
	MaxNameBytes = 253

	// maxStatusBytes cuts a sync or health status; Argo CD's are single words.
	maxStatusBytes = 64
)

// Ellipsis ends every message that the encoding cut.
const Ellipsis = "..."

// Report is what the agent knows about the Argo CD Applications of its managed cluster.
type Report struct {
	// Apps are the Applications that came from the hub. Decode returns them sorted by
	// namespace and name.
	Apps []App
	// Diagnostics are the agent's prerequisite checks, one condition each, of the types
	// ConditionApplicationCRD, ConditionApplicationController, ConditionStatusSlices and
	// ConditionApplicationControllerRBAC. Their LastTransitionTime is not part of the
	// encoding.
	Diagnostics []Diagnostic
	// Scope is what the report covers; nil when the agent does not say (an agent older
	// than the scope condition: Decode returns nil for it too).
	Scope *Scope
	// AppsInSlices says that the agent publishes every app, complete, in its
	// ApplicationStatusSlices (docs/design.md, section 4): Encode then writes no condition per
	// app, only the summary of Apps, which says where they are. An agent sets it once
	// the hub serves the slices; an agent of a hub without them (or older than them)
	// writes a condition per app. Decode returns no apps for such a report.
	AppsInSlices bool
}

// Scope is what an agent's report covers.
type Scope struct {
	// WatchNamespaces are the namespaces whose Applications from the hub the agent
	// watches and reports, sorted. Encode lists at most MaxScopeNamespaces and counts
	// the rest in NamespacesOmitted.
	WatchNamespaces   []string
	NamespacesOmitted int
	// AppsLeftOut counts the Applications that the budget left out of the report. Encode
	// sets it from its Cut; the value given to Encode is ignored.
	AppsLeftOut int
}

// Watches reports whether the agent watches namespace; known is false when the scope
// cannot tell (nil, or namespaces were omitted from it).
func (s *Scope) Watches(namespace string) (watches, known bool) {
	if s == nil || len(s.WatchNamespaces) == 0 {
		return false, false
	}
	if slices.Contains(s.WatchNamespaces, namespace) {
		return true, true
	}
	return false, s.NamespacesOmitted == 0
}

// Diagnostic is one prerequisite check of the agent.
type Diagnostic struct {
	// Type is one of the diagnostic condition types.
	Type string
	// Status is metav1.ConditionTrue, False or Unknown.
	Status string
	// Reason is CamelCase, one of the Reason constants.
	Reason string
	// Message says what the agent saw, for people. It must not hold timestamps, or the
	// condition would change at every evaluation.
	Message string
}

// App is the report of one Application on the managed cluster.
type App struct {
	// Namespace and Name identify the Application on the managed cluster. Its name is the
	// hub Application's name; its namespace may differ.
	Namespace string
	Name      string

	// HubNamespace and HubName point back to the hub Application when the Application
	// carries the hub-application annotations; empty otherwise.
	HubNamespace string
	HubName      string
	// ApplicationSet is "<namespace>/<name>" of the hub ApplicationSet that owns the hub
	// Application, from the hosting-applicationset annotation; empty for a standalone app.
	ApplicationSet string
	// ManifestWork is the name of the ManifestWork, in the cluster namespace on the hub,
	// that carries the Application, when the agent can tell it (from the
	// AppliedManifestWork that owns the Application).
	ManifestWork string
	// Refreshed is the id of the last hub refresh the spoke Argo CD completed
	// (argoapp.AnnotationRefreshed); empty when none.
	Refreshed string

	Sync      argoapp.SyncStatus
	Health    argoapp.HealthStatus
	Operation argoapp.OperationState
	// Resources are the Application's resources, each with its sync status and health
	// status; health messages are not carried.
	Resources []argoapp.ResourceStatus
	// ResourcesOmitted counts the resources left out of Resources, by the per-app cap or
	// by the budget.
	ResourcesOmitted int
	// Conditions are Argo CD's conditions of the Application: errors (type ending in
	// "Error") first, then warnings.
	Conditions []argoapp.Condition
	// ConditionsOmitted counts the conditions left out of Conditions.
	ConditionsOmitted int
	// History is the last entries of status.history, oldest first. Only the status
	// slices carry it (HistoryOf); the app conditions do not.
	History []argoapp.RevisionHistory

	// ObservedAt is when the agent first observed the Application in its current state,
	// to the second. It does not move while the state does not change, so that an
	// unchanged state encodes to identical bytes.
	ObservedAt time.Time
}

// Key returns the AppKey of the app.
func (a App) Key() string {
	return AppKey(a.Namespace, a.Name)
}

// AppKey is how the agent and the hub key a spoke Application: "<namespace>/<name>".
func AppKey(namespace, name string) string {
	return namespace + "/" + name
}

// SyncedAndHealthy reports whether the Application is Synced and Healthy.
func (a App) SyncedAndHealthy() bool {
	return a.Sync.Status == argoapp.SyncSynced && a.Health.Status == argoapp.HealthHealthy
}

// HasErrors reports whether one of the Application's conditions is an error, or its last
// operation failed.
func (a App) HasErrors() bool {
	if a.Operation.Phase == "Failed" || a.Operation.Phase == "Error" {
		return true
	}
	for _, c := range a.Conditions {
		if IsErrorCondition(c.Type) {
			return true
		}
	}
	return false
}

// IsErrorCondition reports whether an Argo CD condition type is an error, the way Argo CD
// tells: its type ends in "Error" (SyncError, ComparisonError, InvalidSpecError, ...).
// The others are warnings.
func IsErrorCondition(conditionType string) bool {
	return strings.HasSuffix(conditionType, "Error")
}

// appKeyPattern is what the name part of a condition type allows (after the "/").
var appKeyPattern = regexp.MustCompile(`^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`)

// appKeyHashLength is how many hex characters of the SHA-256 of "<namespace>/<name>" end
// a shortened app condition type.
const appKeyHashLength = 16

// AppConditionType returns the condition type of the Application namespace/name:
// AppConditionPrefix + "<namespace>.<name>". A namespace has no dots, so the first dot
// separates the two. When that is longer than MaxConditionTypeLength, or not a valid
// condition type, the key is shortened to a prefix of it, "-", and 16 hex characters of
// the SHA-256 of "<namespace>/<name>". Decode takes the identity of an app from its
// payload, and checks it against its type with this function.
func AppConditionType(namespace, name string) string {
	key := namespace + "." + name
	if len(AppConditionPrefix)+len(key) <= MaxConditionTypeLength && appKeyPattern.MatchString(key) {
		return AppConditionPrefix + key
	}
	sum := sha256.Sum256([]byte(namespace + "/" + name))
	suffix := hex.EncodeToString(sum[:])[:appKeyHashLength]
	room := MaxConditionTypeLength - len(AppConditionPrefix) - len(suffix) - 1
	prefix := []byte(key)
	if len(prefix) > room {
		prefix = prefix[:room]
	}
	for i, c := range prefix {
		if !(c == '-' || c == '_' || c == '.' || isAlphanumeric(c)) {
			prefix[i] = '_'
		}
	}
	start := 0
	for start < len(prefix) && !isAlphanumeric(prefix[start]) {
		start++
	}
	prefix = prefix[start:]
	if len(prefix) == 0 {
		return AppConditionPrefix + suffix
	}
	return AppConditionPrefix + string(prefix) + "-" + suffix
}

// isAlphanumeric reports whether c is an ASCII letter or digit.
func isAlphanumeric(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// IsAppCondition reports whether a condition type is the condition of an Application.
func IsAppCondition(conditionType string) bool {
	return strings.HasPrefix(conditionType, AppConditionPrefix)
}

// IsDiagnostic reports whether a condition type is one of the agent's diagnostics.
func IsDiagnostic(conditionType string) bool {
	switch conditionType {
	case ConditionApplicationCRD, ConditionApplicationController, ConditionApplicationControllerRBAC, ConditionStatusSlices:
		return true
	}
	return false
}

// IsAgentCondition reports whether the agent owns a condition type: an app condition, the
// summary, a diagnostic, or the scope. Every other condition of the ManagedClusterAddOn belongs to
// someone else, and the agent never writes it.
func IsAgentCondition(conditionType string) bool {
	return IsAppCondition(conditionType) || conditionType == ConditionSummary || IsDiagnostic(conditionType) ||
		conditionType == ConditionReportScope
}

// reasonPattern is what the API allows in a condition reason.
var reasonPattern = regexp.MustCompile(`^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$`)

// AppReason returns the reason of an Application's condition: "<sync>_<health>", such as
// "Synced_Healthy" or "OutOfSync_Degraded", each part reduced to letters and digits, and
// "Unknown" when empty.
func AppReason(syncStatus, healthStatus string) string {
	return reasonWord(syncStatus) + "_" + reasonWord(healthStatus)
}

// reasonWord returns the letters and digits of s, at most maxStatusBytes of them,
// starting with a letter, or "Unknown" when none are left.
func reasonWord(s string) string {
	var b strings.Builder
	for i := 0; i < len(s) && b.Len() < maxStatusBytes; i++ {
		c := s[i]
		if isAlphanumeric(c) && (b.Len() > 0 || !(c >= '0' && c <= '9')) {
			b.WriteByte(c)
		}
	}
	if b.Len() == 0 {
		return "Unknown"
	}
	return b.String()
}

// TruncateMessage returns s when it has at most maxBytes bytes, and otherwise its longest
// prefix, cut at a UTF-8 character boundary, that fits with Ellipsis appended. The hub
// cuts the error messages it copies with it too.
func TruncateMessage(s string, maxBytes int) string {
	if len(s) <= maxBytes {
		return s
	}
	if maxBytes < len(Ellipsis) {
		return Ellipsis[:max(maxBytes, 0)]
	}
	cut := maxBytes - len(Ellipsis)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + Ellipsis
}
