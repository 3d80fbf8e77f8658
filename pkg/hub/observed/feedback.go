package observed

// This file reads a ManifestWork: its status feedback, and whether an update changed
// what the hub reads of it.

import (
	"k8s.io/apimachinery/pkg/api/equality"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
)

// Feedback holds the status feedback values of a work's Application manifest.
type Feedback struct {
	HealthStatus            string
	SyncStatus              string
	SyncRevision            string
	OperationStatePhase     string
	OperationStateStartedAt string
	// OperationStateID is the id of the hub operation that the operation state is of
	// (argoapp.OperationInfoID); empty for an operation that no hub delivered.
	OperationStateID string
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
			case argoapp.FeedbackOperationStateID:
				f.OperationStateID = s
			}
		}
	}
	return f
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

// WorkObservationChangedPredicate passes the creations and deletions of ManifestWorks,
// and the updates for which WorkObservationChanged holds.
var WorkObservationChangedPredicate = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool { return WorkObservationChanged(e.ObjectOld, e.ObjectNew) },
}
