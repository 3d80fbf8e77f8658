package spoke

// This file runs the hub's operations and refreshes on the spoke Applications: the
// agent's half of the operation protocol (docs/propagation.md, "Operations"). The hub Application's
// .operation arrives with an id in the payload's annotation
// argoapp.AnnotationOperationRequest; the agent sets it as the spoke Application's
// .operation once per id, and only when no other operation runs there, so that a
// re-delivery never runs it twice and a sync asked during another one runs after it. A
// hub user's terminate-op arrives as argoapp.AnnotationOperationTerminate: the agent
// sets the running operation's phase to Terminating, as argocd-server does for a pushed
// app, or cancels the operation when it has not started.

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
)

// MessageOperationCancelled is the message of the operation state that the agent writes
// for an operation terminated on the hub before it started on the managed cluster.
const MessageOperationCancelled = "Operation terminated on the hub before it started on the managed cluster"

// operationView is what the agent reads of a spoke Application for the protocol.
type operationView struct {
	// requestID is the id of the requested operation; "" when there is none, or when the
	// request does not decode (requestErr says why).
	requestID  string
	request    map[string]any
	requestErr error
	// terminate is the id of the operation to terminate; delivered the id of the last
	// one the agent delivered or cancelled.
	terminate, delivered string
	// hasOperation: .operation is set; operationID is its id ("" when no hub's).
	hasOperation bool
	operationID  string
	// phase is status.operationState.phase; stateID the id of the operation it is of.
	phase, stateID string
	// refreshID is the id of the hub's refresh request; refreshPending whether Argo CD's
	// refresh annotation is still there; refreshed the id of the last one Argo CD
	// completed, as the agent recorded it.
	refreshID, refreshed string
	refreshPending       bool
}

// viewOperation reads the protocol's state of a spoke Application.
func viewOperation(obj *unstructured.Unstructured) operationView {
	annotations := obj.GetAnnotations()
	v := operationView{
		terminate: annotations[argoapp.AnnotationOperationTerminate],
		delivered: annotations[argoapp.AnnotationOperationDelivered],
		refreshID: annotations[argoapp.AnnotationRefreshID],
		refreshed: annotations[argoapp.AnnotationRefreshed],
	}
	_, v.refreshPending = annotations[argoapp.AnnotationRefresh]
	if value, ok := annotations[argoapp.AnnotationOperationRequest]; ok {
		v.request, v.requestID, v.requestErr = argoapp.DecodeOperationRequest(value)
	}
	if operation, ok := obj.Object["operation"].(map[string]any); ok {
		v.hasOperation, v.operationID = true, argoapp.OperationIDOf(operation)
	}
	v.phase, _, _ = unstructured.NestedString(obj.Object, "status", "operationState", "phase")
	if operation, found, _ := unstructured.NestedMap(obj.Object, "status", "operationState", "operation"); found {
		v.stateID = argoapp.OperationIDOf(operation)
	}
	return v
}

// operationStep is what the agent does next for a spoke Application.
type operationStep int

const (
	stepNone operationStep = iota
	// stepDeliver sets .operation to the request, and marks its id delivered.
	stepDeliver
	// stepCancel ends a requested operation that a hub user terminated before it
	// started: .operation removed if the agent had set it, the id marked delivered, and
	// an operation state of that id in phase Failed, which the hub reads as its end.
	stepCancel
	// stepTerminate sets the running operation's phase to Terminating: the spoke Argo CD
	// then terminates it, as it does a pushed app's.
	stepTerminate
	// stepRefreshed records the hub's refresh done (argoapp.AnnotationRefreshed): Argo CD
	// removed its refresh annotation, which the work applied with the refresh's id, in
	// the write of the refreshed status. The agent's report carries the id back.
	stepRefreshed
)

// nextOperationStep returns what the protocol asks for, given v: the operation's step
// first, then the refresh's.
func nextOperationStep(v operationView) operationStep {
	if step := nextRequestStep(v); step != stepNone {
		return step
	}
	if v.refreshID != "" && !v.refreshPending && v.refreshed != v.refreshID {
		return stepRefreshed
	}
	return stepNone
}

// nextRequestStep returns what the operation request asks for, given v.
func nextRequestStep(v operationView) operationStep {
	id := v.requestID
	switch {
	case id == "":
		return stepNone
	case v.stateID == id:
		// Argo CD started it.
		if v.terminate == id && v.phase == argoapp.OperationRunning {
			return stepTerminate
		}
		return stepNone
	case v.delivered == id:
		// Delivered, not started yet.
		if v.terminate == id && v.hasOperation && v.operationID == id {
			return stepCancel
		}
		return stepNone
	case v.hasOperation || v.phase == argoapp.OperationRunning || v.phase == argoapp.OperationTerminating:
		// Another operation runs: this one waits for it, as it would queue on the hub.
		return stepNone
	case v.terminate == id:
		return stepCancel
	}
	return stepDeliver
}

// operations runs the protocol: one worker, which reads each Application it is asked
// about afresh, and patches it only if its resourceVersion is still the one it read.
type operations struct {
	agent *agent
	queue workqueue.TypedRateLimitingInterface[types.NamespacedName]
}

func newOperations(a *agent) *operations {
	return &operations{
		agent: a,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[types.NamespacedName](100*time.Millisecond, 30*time.Second),
			workqueue.TypedRateLimitingQueueConfig[types.NamespacedName]{Name: "operations"}),
	}
}

// observe asks for a step on the Application l when its state asks for one.
func (o *operations) observe(l *localApplication) {
	if l.fromHub && l.operationStep != stepNone {
		o.queue.Add(types.NamespacedName{Namespace: l.Namespace, Name: l.Name})
	}
}

// run works the queue until ctx is done.
func (o *operations) run(ctx context.Context) {
	go func() {
		<-ctx.Done()
		o.queue.ShutDown()
	}()
	for {
		key, shutdown := o.queue.Get()
		if shutdown {
			return
		}
		if err := o.step(ctx, key); err != nil {
			o.agent.log.Error(err, "run the hub's operation on the application; retrying", "application", key)
			o.queue.AddRateLimited(key)
		} else {
			o.queue.Forget(key)
		}
		o.queue.Done(key)
	}
}

// step reads the Application key and takes the step its state asks for.
func (o *operations) step(ctx context.Context, key types.NamespacedName) error {
	apps := o.agent.spokeDynamic.Resource(argoapp.ApplicationGVR).Namespace(key.Namespace)
	obj, err := apps.Get(ctx, key.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get application %s: %w", key, err)
	}
	if !isFromHub(obj) {
		return nil
	}
	v := viewOperation(obj)
	step := nextOperationStep(v)
	if v.requestErr != nil {
		o.agent.log.Info("the application's operation request does not decode; not running it", "application", key, "error", v.requestErr.Error())
	}
	patch, err := operationPatch(obj, v, step, time.Now())
	if err != nil || patch == nil {
		return err
	}
	if _, err := apps.Patch(ctx, key.Name, types.JSONPatchType, patch, metav1.PatchOptions{FieldManager: FieldManager}); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsInvalid(err) || strings.Contains(err.Error(), "test operation") {
			// Changed since it was read (Argo CD started or ended an operation): read it
			// again.
			o.queue.Add(key)
			return nil
		}
		return fmt.Errorf("patch application %s: %w", key, err)
	}
	o.agent.log.Info("ran the hub's request on the application", "application", key, "operationID", v.requestID, "refreshID", v.refreshID, "step", step.String())
	// Another step may follow (a refresh's after an operation's).
	o.queue.Add(key)
	return nil
}

func (s operationStep) String() string {
	switch s {
	case stepDeliver:
		return "deliver"
	case stepCancel:
		return "cancel"
	case stepTerminate:
		return "terminate"
	case stepRefreshed:
		return "refreshed"
	}
	return "none"
}

// operationPatch returns the JSON patch of obj, read with view v, that takes step: it
// first tests obj's resourceVersion, so that it applies only to the state it was
// decided on. It returns nil for stepNone.
func operationPatch(obj *unstructured.Unstructured, v operationView, step operationStep, now time.Time) ([]byte, error) {
	ops := []map[string]any{{"op": "test", "path": "/metadata/resourceVersion", "value": obj.GetResourceVersion()}}
	delivered := map[string]any{"op": "add", "path": argoapp.AnnotationPointer(argoapp.AnnotationOperationDelivered), "value": v.requestID}
	switch step {
	case stepNone:
		return nil, nil
	case stepDeliver:
		ops = append(ops, map[string]any{"op": "add", "path": "/operation", "value": v.request}, delivered)
	case stepCancel:
		if v.hasOperation {
			ops = append(ops, map[string]any{"op": "remove", "path": "/operation"})
		}
		at := now.UTC().Format(time.RFC3339)
		state := map[string]any{
			"operation": v.request, "phase": argoapp.OperationFailed, "message": MessageOperationCancelled,
			"startedAt": at, "finishedAt": at,
		}
		if _, ok := obj.Object["status"].(map[string]any); ok {
			ops = append(ops, map[string]any{"op": "add", "path": "/status/operationState", "value": state})
		} else {
			ops = append(ops, map[string]any{"op": "add", "path": "/status", "value": map[string]any{"operationState": state}})
		}
		ops = append(ops, delivered)
	case stepTerminate:
		ops = append(ops, map[string]any{"op": "replace", "path": "/status/operationState/phase", "value": argoapp.OperationTerminating})
	case stepRefreshed:
		ops = append(ops, map[string]any{"op": "add", "path": argoapp.AnnotationPointer(argoapp.AnnotationRefreshed), "value": v.refreshID})
	}
	return json.Marshal(ops)
}
