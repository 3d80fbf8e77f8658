package argoapp

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// TestDecodeSyncResult: the result of a sync, as Argo CD's application-controller writes
// it, with a resource whose prune was skipped and a hook.
func TestDecodeSyncResult(t *testing.T) {
	got, err := DecodeStatus(application(t, appHeader+`
status:
  operationState:
    phase: Succeeded
    startedAt: "2026-01-01T00:00:00Z"
    finishedAt: "2026-01-01T00:00:04Z"
    syncResult:
      revision: abc123
      resources:
      - {group: "", version: v1, kind: ConfigMap, namespace: shop, name: keep, status: Synced, message: configmap/keep unchanged, syncPhase: Sync}
      - {group: "", version: v1, kind: ConfigMap, namespace: shop, name: extra, status: PruneSkipped, message: ignored (requires pruning), syncPhase: Sync}
      - {group: batch, version: v1, kind: Job, namespace: shop, name: migrate, status: Synced, hookType: PreSync, hookPhase: Succeeded, syncPhase: PreSync}
`))
	if err != nil {
		t.Fatal(err)
	}
	want := OperationState{Phase: "Succeeded", StartedAt: "2026-01-01T00:00:00Z", FinishedAt: "2026-01-01T00:00:04Z",
		SyncResult: &SyncResult{Revision: "abc123", Resources: []ResourceResult{
			{Version: "v1", Kind: "ConfigMap", Namespace: "shop", Name: "keep", Status: "Synced", Message: "configmap/keep unchanged", SyncPhase: "Sync"},
			{Version: "v1", Kind: "ConfigMap", Namespace: "shop", Name: "extra", Status: "PruneSkipped", Message: "ignored (requires pruning)", SyncPhase: "Sync"},
			{Group: "batch", Version: "v1", Kind: "Job", Namespace: "shop", Name: "migrate", Status: "Synced", HookType: "PreSync", HookPhase: "Succeeded", SyncPhase: "PreSync"},
		}}}
	if !reflect.DeepEqual(got.OperationState, want) {
		t.Errorf("operationState = %+v, want %+v", got.OperationState, want)
	}

	_, err = DecodeStatus(application(t, appHeader+"status: {operationState: {syncResult: {resources: [{name: [x]}]}}}"))
	if !errors.Is(err, ErrMalformedField) || !strings.Contains(err.Error(), ".status.operationState.syncResult.resources[0].name is ") {
		t.Errorf("a malformed resource result: %v", err)
	}
}

// TestDecodeComparedBeforeFinish: a finished operation whose status Argo CD compared
// before the finish, and after.
func TestDecodeComparedBeforeFinish(t *testing.T) {
	for reconciledAt, want := range map[string]bool{"2026-01-01T00:00:03Z": true, "2026-01-01T00:00:04Z": false, "2026-01-01T00:00:05Z": false, "": false} {
		got, err := DecodeStatus(application(t, appHeader+`
status:
  reconciledAt: "`+reconciledAt+`"
  operationState: {phase: Succeeded, startedAt: "2026-01-01T00:00:00Z", finishedAt: "2026-01-01T00:00:04Z"}
`))
		if err != nil {
			t.Fatal(err)
		}
		if got.OperationState.ComparedBeforeFinish != want {
			t.Errorf("reconciledAt %q: ComparedBeforeFinish %v, want %v", reconciledAt, got.OperationState.ComparedBeforeFinish, want)
		}
	}
}
