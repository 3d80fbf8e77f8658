package spoke

import (
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/clusterreport"
)

// crdState is what the agent knows of the Application API on the managed cluster.
type crdState int32

const (
	// crdUnknown: not checked yet, or discovery failed before the first answer.
	crdUnknown crdState = iota
	crdPresent
	crdMissing
)

// applicationAPI names the Application API in messages.
var applicationAPI = argoapp.GroupVersion.String() + " " + argoapp.ResourceApplications

// crdDiagnostic returns the diagnostic of the Application CRD.
func crdDiagnostic(state crdState) clusterreport.Diagnostic {
	d := clusterreport.Diagnostic{Type: clusterreport.ConditionApplicationCRD}
	switch state {
	case crdPresent:
		d.Status, d.Reason = string(metav1.ConditionTrue), clusterreport.ReasonCRDFound
		d.Message = "The cluster serves " + applicationAPI + "."
	case crdMissing:
		d.Status, d.Reason = string(metav1.ConditionFalse), clusterreport.ReasonCRDNotFound
		d.Message = "The cluster does not serve " + applicationAPI + ": install Argo CD on the managed cluster."
	default:
		d.Status, d.Reason = string(metav1.ConditionUnknown), clusterreport.ReasonDiscoveryFailed
		d.Message = "The agent could not yet ask the cluster whether it serves " + applicationAPI + "."
	}
	return d
}

// controllerDiagnostic returns the diagnostic of the application-controller's liveness:
// True when one of the apps was reconciled within staleAfter of now. Apps younger than
// staleAfter that were never reconciled do not count either way. Its message counts apps
// rather than naming times, so that it changes only when the verdict on an app does.
func controllerDiagnostic(state crdState, apps []observedApp, now time.Time, staleAfter time.Duration) clusterreport.Diagnostic {
	d := clusterreport.Diagnostic{Type: clusterreport.ConditionApplicationController, Status: string(metav1.ConditionUnknown)}
	if state != crdPresent {
		d.Reason = clusterreport.ReasonApplicationCRDMissing
		d.Message = "No Application to tell from: the cluster does not serve " + applicationAPI + "."
		return d
	}
	recent, stale := 0, 0
	for _, app := range apps {
		switch {
		case !app.reconciledAt.IsZero() && now.Sub(app.reconciledAt) <= staleAfter:
			recent++
		case !app.reconciledAt.IsZero() || now.Sub(app.created) > staleAfter:
			stale++
		}
	}
	switch {
	case recent > 0:
		d.Status, d.Reason = string(metav1.ConditionTrue), clusterreport.ReasonReconciling
		d.Message = fmt.Sprintf("%d of %d Applications were reconciled in the last %v.", recent, recent+stale, staleAfter)
	case stale > 0:
		d.Status, d.Reason = string(metav1.ConditionFalse), clusterreport.ReasonNotReconciling
		d.Message = fmt.Sprintf("None of %d Applications was reconciled in the last %v: is the Argo CD application-controller running, and does it watch their namespaces?", stale, staleAfter)
	default:
		d.Reason = clusterreport.ReasonNoApplications
		d.Message = "No Application from the hub has been here long enough to tell."
	}
	return d
}

// slicesRefusalBytes is how much of the hub's refusal of the slices the diagnostic
// quotes.
const slicesRefusalBytes = 512

// slicesDiagnostic returns the diagnostic of the agent's ApplicationStatusSlices:
// inSlices says that the hub serves them, refusal is the error of their last write (nil
// when it went through). An apiserver's refusal holds no time, so the message changes
// only when the cause does.
func slicesDiagnostic(inSlices bool, refusal error) clusterreport.Diagnostic {
	d := clusterreport.Diagnostic{Type: clusterreport.ConditionStatusSlices}
	switch {
	case !inSlices:
		d.Status, d.Reason = string(metav1.ConditionUnknown), clusterreport.ReasonSlicesNotServed
		d.Message = "The hub does not serve ApplicationStatusSlices: each application is a condition of this ManagedClusterAddOn."
	case refusal == nil:
		d.Status, d.Reason = string(metav1.ConditionTrue), clusterreport.ReasonSlicesWritten
		d.Message = "Every application is in the agent's ApplicationStatusSlices."
	default:
		d.Status, d.Reason = string(metav1.ConditionFalse), clusterreport.ReasonSlicesRefused
		d.Message = "The hub refuses the agent's ApplicationStatusSlices, so the applications it could not write are not reported, and the others show as last written; the agent retries. " +
			"Check the ResourceQuotas, admission webhooks and the agent's Role in this namespace; a ResourceQuota that the hub's quota controller has not counted yet, just after an install, clears by itself within a minute. " +
			"The hub said: " + clusterreport.TruncateMessage(refusal.Error(), slicesRefusalBytes)
	}
	return d
}

// forbiddenMarker is what the apiserver's RBAC refusals say, and Argo CD copies into
// the conditions and the operation message of an app it cannot sync.
const forbiddenMarker = " is forbidden"

// rbacListed is how many apps with RBAC errors the diagnostic names, and
// rbacMessageBytes how much of each error it quotes.
const (
	rbacListed       = 3
	rbacMessageBytes = 300
)

// rbacDiagnostic returns the diagnostic that summarises the RBAC errors of the
// application-controller seen in the apps: False when any app has one.
func rbacDiagnostic(state crdState, apps []observedApp) clusterreport.Diagnostic {
	d := clusterreport.Diagnostic{Type: clusterreport.ConditionApplicationControllerRBAC}
	if state != crdPresent {
		d.Status, d.Reason = string(metav1.ConditionUnknown), clusterreport.ReasonApplicationCRDMissing
		d.Message = "No Application to tell from: the cluster does not serve " + applicationAPI + "."
		return d
	}
	var listed []string
	count := 0
	for _, app := range apps {
		message, ok := forbiddenError(app.report)
		if !ok {
			continue
		}
		count++
		if len(listed) < rbacListed {
			listed = append(listed, app.report.Key()+": "+clusterreport.TruncateMessage(message, rbacMessageBytes))
		}
	}
	if count == 0 {
		d.Status, d.Reason = string(metav1.ConditionTrue), clusterreport.ReasonNoForbidden
		d.Message = fmt.Sprintf("No RBAC error in the %d Applications.", len(apps))
		return d
	}
	d.Status, d.Reason = string(metav1.ConditionFalse), clusterreport.ReasonForbidden
	more := ""
	if count > len(listed) {
		more = fmt.Sprintf(" And %d more.", count-len(listed))
	}
	d.Message = fmt.Sprintf("%d of %d Applications fail with RBAC errors: grant the Argo CD application-controller access to their destination namespaces. %s.%s",
		count, len(apps), strings.Join(listed, "; "), more)
	return d
}

// forbiddenError returns the first RBAC error of an app: in an error condition, else in
// the message of its last operation.
func forbiddenError(app clusterreport.App) (string, bool) {
	for _, c := range app.Conditions {
		if clusterreport.IsErrorCondition(c.Type) && strings.Contains(c.Message, forbiddenMarker) {
			return c.Message, true
		}
	}
	if strings.Contains(app.Operation.Message, forbiddenMarker) {
		return app.Operation.Message, true
	}
	return "", false
}
