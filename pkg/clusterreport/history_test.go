package clusterreport

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	statusv1alpha1 "github.com/ocm-gitops/argocd-pull-addon/pkg/apis/argocdpull/v1alpha1"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
)

func gitHistory(n int) []argoapp.RevisionHistory {
	var out []argoapp.RevisionHistory
	for i := range n {
		out = append(out, argoapp.RevisionHistory{
			ID: int64(i), Revision: fmt.Sprintf("%040d", i), DeployedAt: "2026-11-28T06:00:00Z", DeployStartedAt: "2026-11-28T05:59:58Z",
			Source:      &argoapp.HistorySource{RepoURL: "https://github.com/argoproj/argocd-example-apps", Path: "guestbook", TargetRevision: "HEAD"},
			InitiatedBy: argoapp.OperationInitiator{Automated: true},
		})
	}
	return out
}

// TestHistoryOf: an entry carries the last MaxHistoryEntries entries of the history,
// oldest first, each as Argo CD wrote it; ten entries of a plain git source take a few
// KiB; the history goes through the slice and back to the hub unchanged.
func TestHistoryOf(t *testing.T) {
	history := gitHistory(MaxHistoryEntries + 3)
	history[len(history)-1].Source.Details = `{"helm":{"valueFiles":["values.yaml"]}}`
	history[len(history)-1].InitiatedBy = argoapp.OperationInitiator{Username: "alice"}
	e := Entry(App{Namespace: "argocd", Name: "web", History: history, ObservedAt: sliceTestTime}, Tree{})
	if len(e.History) != MaxHistoryEntries || e.History[0].ID != 3 || e.History[MaxHistoryEntries-1].ID != 12 {
		t.Fatalf("the entry carries ids %v, want the last %d, oldest first", ids(e.History), MaxHistoryEntries)
	}
	raw, _ := json.Marshal(e.History)
	if len(raw) > 2500 {
		t.Errorf("ten entries of a git source take %d bytes, want about 2 KiB", len(raw))
	}
	for _, h := range e.History[1 : len(e.History)-1] {
		if !h.SameSourcesAsPrevious || h.Source != nil {
			t.Errorf("entry %d repeats the source of the entry before it", h.ID)
		}
	}
	if last := e.History[len(e.History)-1]; last.SameSourcesAsPrevious || last.Source == nil {
		t.Error("the newest entry, of another source, does not carry it")
	}
	back := HistoryFromEntry(e.History)
	want := history[3:]
	if len(back) != len(want) {
		t.Fatalf("the hub reads %d entries, want %d", len(back), len(want))
	}
	for i := range want {
		if !reflect.DeepEqual(back[i], want[i]) {
			t.Errorf("entry %d reads back as %+v, want %+v", i, back[i], want[i])
		}
	}
	if HistoryOf(nil) != nil || Entry(App{Namespace: "a", Name: "b"}, Tree{}).History != nil {
		t.Error("an app without history carries one")
	}
}

// TestHistoryOfCarriesSourcesWholeOrNot: a source over its bounds, a revision over its
// bound, or more sources than MaxRevisions leave the entry without its sources (never a
// source cut short, which would roll back to something else), and the entry stays; the
// shown strings are cut; the newest entries that fit in MaxHistoryBytes are kept, an
// entry too large with its sources without them.
func TestHistoryOfCarriesSourcesWholeOrNot(t *testing.T) {
	long := strings.Repeat("x", 5000)
	cases := map[string]func(h *argoapp.RevisionHistory){
		"a repoURL over its bound":        func(h *argoapp.RevisionHistory) { h.Source.RepoURL = long[:MaxHistorySourceBytes+1] },
		"a path over its bound":           func(h *argoapp.RevisionHistory) { h.Source.Path = long[:MaxHistorySourceBytes+1] },
		"a chart over its bound":          func(h *argoapp.RevisionHistory) { h.Source.Chart = long[:MaxHistorySourceBytes+1] },
		"a targetRevision over its bound": func(h *argoapp.RevisionHistory) { h.Source.TargetRevision = long[:MaxNameBytes+1] },
		"a ref over its bound":            func(h *argoapp.RevisionHistory) { h.Source.Ref = long[:MaxNameBytes+1] },
		"a name over its bound":           func(h *argoapp.RevisionHistory) { h.Source.Name = long[:MaxNameBytes+1] },
		"details over their bound":        func(h *argoapp.RevisionHistory) { h.Source.Details = long[:MaxHistorySourceDetailsBytes+1] },
		"a revision over its bound":       func(h *argoapp.RevisionHistory) { h.Revision = long[:MaxNameBytes+1] },
		"one of its sources over its bound": func(h *argoapp.RevisionHistory) {
			h.Source, h.Revision = nil, ""
			h.Sources = []argoapp.HistorySource{{RepoURL: "https://a"}, {RepoURL: "https://b", Details: long}}
			h.Revisions = []string{"a", "b"}
		},
		"more sources than MaxRevisions": func(h *argoapp.RevisionHistory) {
			h.Source, h.Revision = nil, ""
			for range MaxRevisions + 1 {
				h.Sources = append(h.Sources, argoapp.HistorySource{RepoURL: "https://a"})
				h.Revisions = append(h.Revisions, "a")
			}
		},
	}
	for what, change := range cases {
		history := gitHistory(2)
		change(&history[1])
		got := HistoryOf(history)
		if len(got) != 2 || got[0].Source == nil {
			t.Fatalf("%s: %d entries, want both, the first with its source", what, len(got))
		}
		if e := got[1]; e.Source != nil || e.Sources != nil || e.ID != 1 {
			t.Errorf("%s: the entry carries source %+v and sources %v, want neither", what, e.Source, e.Sources)
		}
		if e := got[1]; len(e.Revision) > MaxNameBytes || len(e.Revisions) > MaxRevisions {
			t.Errorf("%s: revisions of %d bytes and %d items, over their bounds", what, len(e.Revision), len(e.Revisions))
		}
	}

	shown := gitHistory(1)
	shown[0].DeployedAt, shown[0].InitiatedBy.Username = long, long
	if got := HistoryOf(shown)[0]; len(got.DeployedAt) > maxStatusBytes || len(got.InitiatedBy.Username) > MaxNameBytes || got.Source == nil {
		t.Errorf("the shown strings are not cut, or the source went: %+v", got)
	}

	// Large helm values: the newest entries that fit, the oldest left out.
	large := gitHistory(MaxHistoryEntries)
	for i := range large {
		large[i].Source.Details = `{"helm":{"values":"` + long[:MaxHistorySourceDetailsBytes-30] + `"}}`
	}
	got := HistoryOf(large)
	raw, _ := json.Marshal(got)
	read := HistoryFromEntry(got)
	withSources := 0
	for _, h := range read {
		if h.Source != nil {
			withSources++
		}
	}
	if len(raw) > MaxHistoryBytes || withSources < 5 || withSources == len(large) || read[len(read)-1].ID != int64(MaxHistoryEntries-1) || read[len(read)-1].Source == nil {
		t.Errorf("a history of large sources keeps ids %v in %d bytes, %d with their sources; want the newest that fit in %d with them", ids(got), len(raw), withSources, MaxHistoryBytes)
	}
	// An entry too large with its sources for what is left is kept without them.
	wide := gitHistory(1)
	wide[0].Source = nil
	for range MaxRevisions {
		wide[0].Sources = append(wide[0].Sources, argoapp.HistorySource{RepoURL: "https://a", Details: `{"helm":{"values":"` + long[:MaxHistorySourceDetailsBytes-30] + `"}}`})
	}
	if got := HistoryOf(wide); len(got) != 1 || got[0].Sources != nil {
		t.Errorf("an entry of %d sources of 4 KiB each: %d entries, sources kept: %v; want it without its sources", MaxRevisions, len(got), got != nil && got[0].Sources != nil)
	}
}

// TestHistoryFromEntryIsBounded: an agent that repeats a large source in every entry
// (SameSourcesAsPrevious) gets no more than MaxHistoryBytes of history read on the hub,
// the newest entries; an entry that repeats the sources of none has none.
func TestHistoryFromEntryIsBounded(t *testing.T) {
	large := statusv1alpha1.HistorySource{RepoURL: "https://a", Details: strings.Repeat("d", MaxHistorySourceDetailsBytes)}
	first := statusv1alpha1.RevisionHistory{ID: 0, DeployedAt: "2026-11-28T06:00:00Z"}
	for range MaxRevisions {
		first.Sources = append(first.Sources, large)
	}
	history := []statusv1alpha1.RevisionHistory{first}
	for i := 1; i < MaxHistoryEntries; i++ {
		history = append(history, statusv1alpha1.RevisionHistory{ID: int64(i), DeployedAt: "2026-11-28T06:00:00Z", SameSourcesAsPrevious: true})
	}
	read := HistoryFromEntry(history)
	raw, _ := json.Marshal(read)
	if len(raw) > 2*MaxHistoryBytes {
		t.Errorf("the hub reads %d bytes of history, want at most about %d", len(raw), MaxHistoryBytes)
	}
	if len(history[1].Sources) != 0 {
		t.Error("HistoryFromEntry changed the entry it read")
	}
	if got := HistoryFromEntry([]statusv1alpha1.RevisionHistory{{ID: 0, DeployedAt: "x", SameSourcesAsPrevious: true}}); len(got) != 1 || got[0].Source != nil || got[0].Sources != nil {
		t.Errorf("a first entry that repeats nothing reads as %+v", got)
	}
}

func ids(history []statusv1alpha1.RevisionHistory) []int64 {
	var out []int64
	for _, e := range history {
		out = append(out, e.ID)
	}
	return out
}

// FuzzHistoryOf: whatever the history, the entry's history holds at most
// MaxHistoryEntries entries in MaxHistoryBytes, the newest last, every string within its
// schema bound, and every source it carries is the source as Argo CD wrote it.
func FuzzHistoryOf(f *testing.F) {
	f.Add(3, 10, 40, 20, 0, uint8(1))
	f.Add(12, 1100, 300, 5000, 70, uint8(3))
	f.Add(10, 1000, 250, 4000, 64, uint8(0))
	f.Fuzz(func(t *testing.T, entries, repoBytes, revisionBytes, detailsBytes, sources int, seed uint8) {
		entries, repoBytes, revisionBytes, detailsBytes, sources = entries%20, repoBytes%1200, revisionBytes%300, detailsBytes%5000, sources%80
		if entries < 0 || repoBytes < 0 || revisionBytes < 0 || detailsBytes < 0 || sources < 0 {
			return
		}
		source := argoapp.HistorySource{RepoURL: strings.Repeat("r", repoBytes), Path: "p", Details: strings.Repeat("d", detailsBytes)}
		var history []argoapp.RevisionHistory
		for i := range entries {
			h := argoapp.RevisionHistory{ID: int64(i), DeployedAt: "2026-11-28T06:00:00Z", InitiatedBy: argoapp.OperationInitiator{Username: "u"}}
			if (i+int(seed))%2 == 0 {
				h.Revision, h.Source = strings.Repeat("a", revisionBytes), &source
			} else {
				for range sources {
					h.Sources = append(h.Sources, source)
					h.Revisions = append(h.Revisions, strings.Repeat("b", revisionBytes))
				}
			}
			history = append(history, h)
		}
		got := HistoryOf(history)
		raw, _ := json.Marshal(got)
		if len(got) > MaxHistoryEntries || len(raw) > MaxHistoryBytes {
			t.Fatalf("%d entries in %d bytes", len(got), len(raw))
		}
		if entries > 0 && (len(got) == 0 || got[len(got)-1].ID != int64(entries-1)) {
			t.Fatalf("the newest entry is not carried: ids %v", ids(got))
		}
		read := HistoryFromEntry(got)
		if len(read) != len(got) {
			t.Fatalf("the hub reads %d of the %d entries the agent wrote", len(read), len(got))
		}
		for i, h := range read {
			original := history[h.ID]
			if h.ID != got[i].ID || (h.Source != nil && (*h.Source != source || h.Revision != original.Revision)) ||
				(h.Sources != nil && (!reflect.DeepEqual(h.Sources, original.Sources) || !reflect.DeepEqual(h.Revisions, original.Revisions))) {
				t.Fatalf("entry %d reads back with sources other than Argo CD's", h.ID)
			}
		}
		whole := statusv1alpha1.HistorySource{RepoURL: source.RepoURL, Path: source.Path, Details: source.Details}
		for _, e := range got {
			if len(e.Revision) > MaxNameBytes || len(e.Revisions) > MaxRevisions || len(e.Sources) > MaxRevisions {
				t.Fatalf("entry %d over its bounds", e.ID)
			}
			for _, r := range e.Revisions {
				if len(r) > MaxNameBytes {
					t.Fatalf("entry %d: a revision of %d bytes", e.ID, len(r))
				}
			}
			if e.Source != nil && (*e.Source != whole || e.Revision != history[e.ID].Revision) {
				t.Fatalf("entry %d carries a source or revision other than Argo CD's", e.ID)
			}
			for _, s := range e.Sources {
				if s != whole || !reflect.DeepEqual(e.Revisions, history[e.ID].Revisions) {
					t.Fatalf("entry %d carries a source or revisions other than Argo CD's", e.ID)
				}
			}
		}
	})
}
