package clusterreport

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
)

// TestEntrySyncResult: the entry carries of a sync's result what the app's resources do
// not already say (failures, prunes, skipped prunes, hooks); an entry over the slice's
// bytes loses the plain results before the problems, and says how many.
func TestEntrySyncResult(t *testing.T) {
	app := App{Namespace: "argocd", Name: "shop", ObservedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
		Operation: argoapp.OperationState{Phase: "Succeeded", StartedAt: "2026-01-01T00:00:00Z", FinishedAt: "2026-01-01T00:00:04Z",
			SyncResult: &argoapp.SyncResult{Revision: "abc123", Resources: []argoapp.ResourceResult{
				{Version: "v1", Kind: "ConfigMap", Namespace: "shop", Name: "keep", Status: "Synced", Message: "configmap/keep unchanged"},
				{Version: "v1", Kind: "ConfigMap", Namespace: "shop", Name: "extra", Status: "PruneSkipped", Message: "ignored (requires pruning)"},
				{Group: "batch", Version: "v1", Kind: "Job", Namespace: "shop", Name: "migrate", Status: "Synced", HookType: "PreSync", HookPhase: "Succeeded"},
			}}}}
	e := FitEntry(Entry(app, Tree{}))
	var names []string
	for _, r := range e.Operation.SyncResult.Resources {
		names = append(names, r.Name+" "+r.Status)
	}
	if got, want := strings.Join(names, ", "), "extra PruneSkipped, migrate Synced"; got != want {
		t.Errorf("sync results %q, want %q", got, want)
	}
	if e.Operation.SyncResult.Revision != "abc123" || e.Operation.FinishedAt != "2026-01-01T00:00:04Z" {
		t.Errorf("operation %+v", e.Operation)
	}

	// Past the slice's bytes: the skipped prunes stay, the hooks' plain results go first.
	var many []argoapp.ResourceResult
	for i := range 4000 {
		many = append(many, argoapp.ResourceResult{Group: "batch", Version: "v1", Kind: "Job", Namespace: "shop",
			Name: fmt.Sprintf("hook-%04d", i), Status: "Synced", HookType: "PostSync", Message: strings.Repeat("m", 300)})
	}
	many = append(many, argoapp.ResourceResult{Version: "v1", Kind: "ConfigMap", Namespace: "shop", Name: "extra", Status: "PruneSkipped"})
	app.Operation.SyncResult = &argoapp.SyncResult{Resources: many}
	e = FitEntry(Entry(app, Tree{}))
	if size := EntrySize(e); size > MaxSliceBytes {
		t.Fatalf("the entry takes %d bytes, more than %d", size, MaxSliceBytes)
	}
	kept := e.Operation.SyncResult.Resources
	if len(kept) == 0 || kept[0].Name != "extra" {
		t.Errorf("the skipped prune is not kept first: %d kept", len(kept))
	}
	if e.Truncated == nil || int(e.Truncated.SyncResultsOmitted) != len(many)-len(kept) {
		t.Errorf("truncation %+v, want %d sync results omitted", e.Truncated, len(many)-len(kept))
	}
}
