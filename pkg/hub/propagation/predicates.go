package propagation

// This file holds the predicates of the watches, each named for what it lets through.

import (
	"reflect"
	"slices"
	"strconv"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/hubcache"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/observed"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/predicates"
)

// Predicates: they drop the events that cannot change any outcome.

// inNamespaces keeps the objects of the watched namespaces.
func inNamespaces(opts Options) predicate.Predicate {
	return predicate.NewPredicateFuncs(func(obj client.Object) bool { return opts.watches(obj.GetNamespace()) })
}

// inNamespace keeps the objects of one namespace.
func inNamespace(namespace string) predicate.Predicate {
	return predicate.NewPredicateFuncs(func(obj client.Object) bool { return obj.GetNamespace() == namespace })
}

// named keeps the objects of one name.
func named(name string) predicate.Predicate {
	return predicate.NewPredicateFuncs(func(obj client.Object) bool { return obj.GetName() == name })
}

// renderInputsChanged drops the updates of an Application that change neither what is
// rendered nor how it is selected (applicationInputsChanged): a status-only update, above all. The Application CRD
// has no status subresource, so a status update bumps metadata.generation too, and the
// generation cannot tell.
var renderInputsChanged = predicates.OnUpdate(applicationInputsChanged)

// applicationInputsChanged reports whether anything that propagation reads differs
// between two versions of an Application: everything but the status and the
// server-maintained metadata. Two versions from the cache have their spec and operation
// frozen (hubcache.Thawed), and compare as their JSON texts, which are equal when the
// fields are; only the operation state is thawed, and only of an app with an operation.
func applicationInputsChanged(oldApp, newApp *unstructured.Unstructured) bool {
	return !equality.Semantic.DeepEqual(oldApp.GetLabels(), newApp.GetLabels()) ||
		!equality.Semantic.DeepEqual(oldApp.GetAnnotations(), newApp.GetAnnotations()) ||
		!slices.Equal(oldApp.GetFinalizers(), newApp.GetFinalizers()) ||
		!equality.Semantic.DeepEqual(oldApp.GetOwnerReferences(), newApp.GetOwnerReferences()) ||
		!equality.Semantic.DeepEqual(oldApp.GetDeletionTimestamp(), newApp.GetDeletionTimestamp()) ||
		oldApp.GetUID() != newApp.GetUID() ||
		!reflect.DeepEqual(oldApp.Object["spec"], newApp.Object["spec"]) ||
		!reflect.DeepEqual(oldApp.Object["operation"], newApp.Object["operation"]) ||
		operationResultMirrored(oldApp, newApp)
}

// operationResultMirrored reports whether the status mirror changed the operation state
// of an Application that holds an operation: the operation may now leave it (see
// hubShowsOperation).
func operationResultMirrored(oldApp, newApp *unstructured.Unstructured) bool {
	if newApp.Object["operation"] == nil {
		return false
	}
	if oldApp, newApp = hubcache.Thawed(oldApp), hubcache.Thawed(newApp); oldApp == nil || newApp == nil {
		return true
	}
	oldState, _, _ := unstructured.NestedMap(oldApp.Object, "status", "operationState")
	newState, _, _ := unstructured.NestedMap(newApp.Object, "status", "operationState")
	return oldState["phase"] != newState["phase"] || oldState["startedAt"] != newState["startedAt"]
}

// workChangedBeyondFeedback drops the updates of a ManifestWork that only refresh its status feedback:
// its spec, metadata or Applied condition must change, or, while it delivers an
// operation, the spoke's operation state.
var workChangedBeyondFeedback = predicates.OnUpdate(func(oldWork, newWork *workv1.ManifestWork) bool {
	return oldWork.Generation != newWork.Generation ||
		!equality.Semantic.DeepEqual(oldWork.Labels, newWork.Labels) ||
		!equality.Semantic.DeepEqual(oldWork.Annotations, newWork.Annotations) ||
		!equality.Semantic.DeepEqual(oldWork.DeletionTimestamp, newWork.DeletionTimestamp) ||
		!equality.Semantic.DeepEqual(appliedState(oldWork), appliedState(newWork)) ||
		operationStateChanged(oldWork, newWork)
})

// operationStateChanged reports whether the spoke's operation state changed in the
// feedback of a work that delivers an operation: the change may complete it.
func operationStateChanged(oldWork, newWork *workv1.ManifestWork) bool {
	if _, delivering := newWork.Annotations[argoapp.AnnotationOperationID]; !delivering {
		return false
	}
	o, n := observed.FeedbackOf(oldWork), observed.FeedbackOf(newWork)
	return o.OperationStatePhase != n.OperationStatePhase || o.OperationStateStartedAt != n.OperationStateStartedAt ||
		o.OperationStateID != n.OperationStateID
}

// appliedState is what propagation reads of a work's Applied condition.
func appliedState(work *workv1.ManifestWork) [2]string {
	applied := meta.FindStatusCondition(work.Status.Conditions, workv1.WorkApplied)
	if applied == nil {
		return [2]string{}
	}
	return [2]string{string(applied.Status), strconv.FormatInt(applied.ObservedGeneration, 10)}
}

// pauseChanged keeps the updates of the ClusterManagementAddOn that change the pause
// annotation.
var pauseChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		oldValue, oldSet := e.ObjectOld.GetAnnotations()[AnnotationPausePropagation]
		newValue, newSet := e.ObjectNew.GetAnnotations()[AnnotationPausePropagation]
		return oldSet != newSet || oldValue != newValue
	},
}

// specOrMetadataChanged keeps the updates that change an object's labels, annotations or
// spec: it drops the status-only updates of an object without a status subresource (an
// AppProject).
var specOrMetadataChanged = predicates.OnUpdate(func(oldObj, newObj *unstructured.Unstructured) bool {
	return !equality.Semantic.DeepEqual(oldObj.GetLabels(), newObj.GetLabels()) ||
		!equality.Semantic.DeepEqual(oldObj.GetAnnotations(), newObj.GetAnnotations()) ||
		!reflect.DeepEqual(oldObj.Object["spec"], newObj.Object["spec"])
})

// decisionsChanged keeps the updates of a PlacementDecision that change the clusters it
// selects.
var decisionsChanged = predicates.OnUpdate(func(oldDecision, newDecision *clusterv1beta1.PlacementDecision) bool {
	return !slices.Equal(selectedClusters(oldDecision), selectedClusters(newDecision))
})

// selectedClusters returns the sorted cluster names a PlacementDecision selects.
func selectedClusters(decision *clusterv1beta1.PlacementDecision) []string {
	clusters := make([]string, 0, len(decision.Status.Decisions))
	for _, d := range decision.Status.Decisions {
		clusters = append(clusters, d.ClusterName)
	}
	slices.Sort(clusters)
	return clusters
}
