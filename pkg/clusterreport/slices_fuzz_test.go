package clusterreport

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"

	statusv1alpha1 "github.com/ocm-gitops/argocd-pull-addon/pkg/apis/argocdpull/v1alpha1"
)

// FuzzPlanSlices checks the assignment of apps to slices on arbitrary sets of apps, and
// on arbitrary changes of a set already on the hub: every app is in exactly one slice,
// under its name and content; a slice of several apps holds at most SliceTargetBytes; an
// unchanged state plans the same slices; names are unique; and an app that neither
// changed nor had to move stays in its slice.
func FuzzPlanSlices(f *testing.F) {
	f.Add([]byte{10, 20, 30}, []byte{1, 0, 2})
	f.Add([]byte{200, 200, 200, 200, 1, 1}, []byte{0, 0, 0, 255})
	f.Fuzz(func(t *testing.T, sizes, changes []byte) {
		if len(sizes) > 200 {
			sizes = sizes[:200]
		}
		build := func(sizes []byte, grow map[int]int) []statusv1alpha1.AppStatus {
			var out []statusv1alpha1.AppStatus
			for i, s := range sizes {
				if s == 0 {
					continue // a deleted app
				}
				out = append(out, FitEntry(Entry(appWithResources(fmt.Sprintf("app-%03d", i), int(s)*4+grow[i]), Tree{})))
			}
			return out
		}
		apps := build(sizes, nil)
		plan := PlanSlices("argocd-pull", nil, apps)
		check := func(plan []Slice, apps []statusv1alpha1.AppStatus) {
			want := map[string]statusv1alpha1.AppStatus{}
			for _, e := range apps {
				want[EntryKey(e)] = e
			}
			names := map[string]bool{}
			seen := map[string]bool{}
			for _, s := range plan {
				if names[s.Name] {
					t.Fatalf("two slices named %s", s.Name)
				}
				names[s.Name] = true
				if len(s.Apps) == 0 {
					t.Fatalf("slice %s is empty", s.Name)
				}
				bytes := 0
				for _, e := range s.Apps {
					key := EntryKey(e)
					if seen[key] {
						t.Fatalf("%s in two slices", key)
					}
					seen[key] = true
					if !equality.Semantic.DeepEqual(e, want[key]) {
						t.Fatalf("%s changed on its way into slice %s", key, s.Name)
					}
					bytes += EntrySize(e)
				}
				if len(s.Apps) > 1 && bytes > SliceTargetBytes {
					t.Fatalf("slice %s holds %d apps in %d bytes", s.Name, len(s.Apps), bytes)
				}
			}
			if len(seen) != len(want) {
				t.Fatalf("%d apps in the slices, want %d", len(seen), len(want))
			}
		}
		check(plan, apps)
		if again := PlanSlices("argocd-pull", plan, apps); !equality.Semantic.DeepEqual(again, plan) {
			t.Fatal("an unchanged state plans other slices")
		}

		// Changes: a byte per app; 0 keeps it, 255 deletes it, others grow it.
		grow := map[int]int{}
		next := append([]byte(nil), sizes...)
		for i, c := range changes {
			if i >= len(next) {
				next = append(next, c) // a new app
				continue
			}
			switch c {
			case 0:
			case 255:
				next[i] = 0
			default:
				grow[i] = int(c)
			}
		}
		changed := build(next, grow)
		after := PlanSlices("argocd-pull", plan, changed)
		check(after, changed)
		home := map[string]string{}
		for _, s := range plan {
			for _, e := range s.Apps {
				home[EntryKey(e)] = s.Name
			}
		}
		moved := 0
		for _, s := range after {
			for _, e := range s.Apps {
				if h, ok := home[EntryKey(e)]; ok && h != s.Name {
					moved++
				}
			}
		}
		// Only growth moves apps: never more than the apps that grew.
		if moved > len(grow) {
			t.Fatalf("%d apps moved, but only %d grew", moved, len(grow))
		}
	})
}
