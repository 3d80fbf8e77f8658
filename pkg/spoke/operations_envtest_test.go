package spoke

import (
	"encoding/json"
	"testing"

	"github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
)

// getApp returns the spoke Application name of the test.
func (f *fixture) getApp(g gomega.Gomega, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(argoapp.ApplicationGVK)
	g.Expect(f.spoke.Get(f.ctx, types.NamespacedName{Namespace: f.appNS, Name: name}, u)).To(gomega.Succeed())
	return u
}

// requestOption asks, in the payload as the work agent applies it, for the hub operation
// id, and its termination when terminate.
func requestOption(id string, terminate bool) appOption {
	return func(u *unstructured.Unstructured) {
		value, _ := json.Marshal(argoapp.WithOperationID(map[string]any{
			"sync": map[string]any{"revision": "main"}, "initiatedBy": map[string]any{"username": "alice"},
		}, id))
		annotations := map[string]string{argoapp.AnnotationOperationRequest: string(value)}
		if terminate {
			annotations[argoapp.AnnotationOperationTerminate] = id
		}
		u.SetAnnotations(annotations)
	}
}

// running is the status of an app whose operation (without a hub id when id is "")
// runs.
func running(id string) map[string]any {
	operation := map[string]any{"sync": map[string]any{"revision": "main"}}
	if id != "" {
		operation = argoapp.WithOperationID(operation, id)
	}
	return map[string]any{"operationState": map[string]any{"operation": operation, "phase": argoapp.OperationRunning, "startedAt": "2026-01-01T00:00:00Z"}}
}

// argoCDStarts plays Argo CD's application-controller starting the app's .operation.
func (f *fixture) argoCDStarts(name string) {
	f.updateApp(name, func(u *unstructured.Unstructured) {
		operation, ok := u.Object["operation"].(map[string]any)
		f.g.Expect(ok).To(gomega.BeTrue(), "no operation to start")
		u.Object["status"] = map[string]any{"operationState": map[string]any{"operation": operation, "phase": argoapp.OperationRunning, "startedAt": "2026-01-01T00:10:00Z"}}
	})
}

// argoCDFinishes plays Argo CD's application-controller ending the running operation in
// phase, and clearing .operation.
func (f *fixture) argoCDFinishes(name, phase string) {
	f.updateApp(name, func(u *unstructured.Unstructured) {
		delete(u.Object, "operation")
		f.g.Expect(unstructured.SetNestedField(u.Object, phase, "status", "operationState", "phase")).To(gomega.Succeed())
		f.g.Expect(unstructured.SetNestedField(u.Object, "2026-01-01T00:11:00Z", "status", "operationState", "finishedAt")).To(gomega.Succeed())
	})
}

// operationID returns the id of the app's .operation, "" when it has none or one of no
// hub's, and whether it has one.
func (f *fixture) operationID(g gomega.Gomega, name string) (string, bool) {
	operation, ok := f.getApp(g, name).Object["operation"].(map[string]any)
	return argoapp.OperationIDOf(operation), ok
}

// TestAgentRunsHubOperations runs the agent's half of the operation protocol against a
// real apiserver, playing the work agent (the payload's annotations) and Argo CD's
// application-controller (.operation and status.operationState).
func TestAgentRunsHubOperations(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	g := f.g

	t.Run("delivered once, even when the work agent applies the request again", func(t *testing.T) {
		f.createApp("once", nil, requestOption("id-once", false))
		g.Eventually(func(g gomega.Gomega) string { id, _ := f.operationID(g, "once"); return id }).Should(gomega.Equal("id-once"))
		g.Expect(f.getApp(g, "once").GetAnnotations()).To(gomega.HaveKeyWithValue(argoapp.AnnotationOperationDelivered, "id-once"))
		f.argoCDStarts("once")
		f.argoCDFinishes("once", argoapp.OperationSucceeded)
		// The work agent applies the payload again (a manager restart re-rendered it, the
		// hub app changed): the finished operation does not run again.
		f.updateApp("once", func(u *unstructured.Unstructured) {
			annotations := u.GetAnnotations()
			annotations["example.com/changed"] = "yes"
			u.SetAnnotations(annotations)
		})
		g.Consistently(func(g gomega.Gomega) bool { _, has := f.operationID(g, "once"); return has }).Should(gomega.BeFalse(), "ran twice")
	})

	t.Run("queued behind the operation that runs", func(t *testing.T) {
		// The spoke's own auto-sync runs: Argo CD keeps it in .operation.
		f.createApp("queued", nil, requestOption("id-queued", false), func(u *unstructured.Unstructured) {
			u.Object["operation"] = map[string]any{"sync": map[string]any{"revision": "main"}, "initiatedBy": map[string]any{"automated": true}}
		})
		f.setStatus("queued", running(""))
		g.Consistently(func(g gomega.Gomega) string { id, _ := f.operationID(g, "queued"); return id }).Should(gomega.BeEmpty(), "delivered over the running operation")
		f.argoCDFinishes("queued", argoapp.OperationSucceeded)
		g.Eventually(func(g gomega.Gomega) string { id, _ := f.operationID(g, "queued"); return id }).Should(gomega.Equal("id-queued"))
	})

	t.Run("terminated while it runs", func(t *testing.T) {
		f.createApp("terminated", nil, requestOption("id-terminated", false))
		g.Eventually(func(g gomega.Gomega) string { id, _ := f.operationID(g, "terminated"); return id }).Should(gomega.Equal("id-terminated"))
		f.argoCDStarts("terminated")
		f.updateApp("terminated", requestOption("id-terminated", true))
		g.Eventually(func(g gomega.Gomega) string {
			phase, _, _ := unstructured.NestedString(f.getApp(g, "terminated").Object, "status", "operationState", "phase")
			return phase
		}).Should(gomega.Equal(argoapp.OperationTerminating))
	})

	t.Run("cancelled before it starts", func(t *testing.T) {
		f.createApp("cancelled", nil, requestOption("id-cancelled", true), func(u *unstructured.Unstructured) {
			u.Object["operation"] = map[string]any{"sync": map[string]any{"revision": "main"}}
		})
		f.setStatus("cancelled", running(""))
		f.argoCDFinishes("cancelled", argoapp.OperationSucceeded)
		// Never delivered; the operation state says it ended, under its id, for the hub.
		g.Eventually(func(g gomega.Gomega) []string {
			state, _, _ := unstructured.NestedMap(f.getApp(g, "cancelled").Object, "status", "operationState")
			operation, _ := state["operation"].(map[string]any)
			phase, _ := state["phase"].(string)
			message, _ := state["message"].(string)
			return []string{argoapp.OperationIDOf(operation), phase, message}
		}).Should(gomega.Equal([]string{"id-cancelled", argoapp.OperationFailed, MessageOperationCancelled}))
		_, has := f.operationID(g, "cancelled")
		g.Expect(has).To(gomega.BeFalse())
		g.Consistently(func(g gomega.Gomega) bool { _, has := f.operationID(g, "cancelled"); return has }).Should(gomega.BeFalse(), "a cancelled operation was delivered")
	})

	t.Run("a refresh recorded done once Argo CD removed its annotation, and reported", func(t *testing.T) {
		f.createApp("refreshed", nil, func(u *unstructured.Unstructured) {
			u.SetAnnotations(map[string]string{argoapp.AnnotationRefresh: "hard", argoapp.AnnotationRefreshID: "id-refresh"})
		})
		refreshed := func(g gomega.Gomega) string {
			return f.getApp(g, "refreshed").GetAnnotations()[argoapp.AnnotationRefreshed]
		}
		g.Consistently(refreshed).Should(gomega.BeEmpty(), "recorded before Argo CD refreshed")
		// Argo CD refreshes, and removes its annotation in the same write.
		f.updateApp("refreshed", func(u *unstructured.Unstructured) {
			annotations := u.GetAnnotations()
			delete(annotations, argoapp.AnnotationRefresh)
			u.SetAnnotations(annotations)
			u.Object["status"] = map[string]any{"sync": map[string]any{"status": "OutOfSync", "revision": "after-refresh"}}
		})
		g.Eventually(refreshed).Should(gomega.Equal("id-refresh"))
		g.Eventually(func(g gomega.Gomega) []string {
			e := f.entries(g)["refreshed"]
			return []string{e.Refreshed, e.Sync.Revision}
		}).Should(gomega.Equal([]string{"id-refresh", "after-refresh"}), "the report carries the refresh's id with the refreshed status")
	})
}
