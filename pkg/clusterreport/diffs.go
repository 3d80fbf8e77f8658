package clusterreport

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	statusv1alpha1 "github.com/ocm-gitops/argocd-pull-addon/pkg/apis/argocdpull/v1alpha1"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/argocdcache"
)

// This file is what the status channel carries of Argo CD's diff: for each OutOfSync
// resource of an app, the states that `argocd app diff` and the UI's diff compare, read
// from the managed cluster's Argo CD cache (its managed resources), Secrets redacted as
// Argo CD redacts them, within a budget per app (docs/design.md, section 4.2).

// Bounds of an app's diffs.
const (
	// MaxDiffBytesPerApp bounds the states of an app's Diffs together, in bytes of their
	// JSON. An app alone in a slice may take MaxSliceBytes (1 MiB): a quarter of it for
	// the diffs leaves the rest to its resources and tree, and a few typical manifests
	// (a Deployment's three states take 10 to 20 KiB) fit many times over. An app with
	// larger diffs carries those that fit and counts the rest in DiffsOmitted.
	MaxDiffBytesPerApp = 256 * 1024
	// MaxDiffsPerApp bounds the number of an app's Diffs: a diff's three smallest states
	// take about 150 bytes, so MaxDiffBytesPerApp holds fewer than two thousand; a
	// thousand differing resources is more than anyone reads in a diff.
	MaxDiffsPerApp = 1000
)

// States are Argo CD's cached managed resources of an app, as the agent read them: the
// states of each resource (its ResourceDiff), Unavailable saying why there are none.
type States struct {
	Diffs       []statusv1alpha1.ResourceDiff
	Unavailable string
}

// redactionMask is the character of the value Argo CD puts in place of each value of a
// Secret's data (gitops-engine diff.HideSecretData): "++++++++", four more "+" for each
// other value of the same key.
const redactionMask = '+'

// lastAppliedAnnotation is kubectl's copy of the applied manifest, which Argo CD keeps
// on a Secret's live state with its data redacted; the status channel leaves it out.
const lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// RedactedDiff returns d, a managed resource as Argo CD caches it, with each of its states
// as RedactedState passes it ("null" for none), or an error when one may not be carried:
// what the resource proxy carries of an app's managed resources, checked by the agent and
// again by the manager.
func RedactedDiff(d argocdcache.ResourceDiff) (argocdcache.ResourceDiff, error) {
	for _, state := range []*string{&d.TargetState, &d.LiveState, &d.NormalizedLiveState, &d.PredictedLiveState} {
		redacted, ok := RedactedState(d.Group, d.Kind, *state)
		if !ok {
			return argocdcache.ResourceDiff{}, fmt.Errorf("a state of %s is not a manifest, or a Secret's state not redacted as Argo CD redacts it", d.FullName())
		}
		if redacted == "" {
			redacted = "null"
		}
		*state = redacted
	}
	return d, nil
}

// RedactedState returns state, the JSON of a manifest of the resource group/kind, as the
// status channel carries it, and whether it may carry it at all. "" and "null" (no
// object) are "". A state must be a JSON object. A Secret's (group "" and kind Secret, by
// its key or its own apiVersion and kind) is carried only when every value of its data
// and stringData is Argo CD's mask (only "+"), as Argo CD's application-controller
// caches it: a Secret's data never leaves the managed cluster, nor reaches the hub's
// cache, even if something upstream failed to redact it. A Secret's state is what its
// decoding holds, encoded again, without the last-applied-configuration annotation.
func RedactedState(group, kind, state string) (string, bool) {
	if state == "" || state == "null" {
		return "", true
	}
	trimmed := bytes.TrimSpace([]byte(state))
	if len(trimmed) == 0 || trimmed[0] != '{' || !json.Valid(trimmed) {
		return "", false
	}
	var typ struct {
		APIVersion any `json:"apiVersion"`
		Kind       any `json:"kind"`
	}
	if err := json.Unmarshal(trimmed, &typ); err != nil {
		return "", false
	}
	if !(group == "" && kind == "Secret") && !(typ.APIVersion == "v1" && typ.Kind == "Secret") {
		return state, true
	}
	var obj map[string]any
	if err := json.Unmarshal(trimmed, &obj); err != nil {
		return "", false
	}
	for _, field := range []string{"data", "stringData"} {
		switch values := obj[field].(type) {
		case nil:
		case map[string]any:
			for _, v := range values {
				if s, ok := v.(string); !ok || s == "" || strings.Trim(s, string(redactionMask)) != "" {
					return "", false
				}
			}
		default:
			return "", false
		}
	}
	if metadata, ok := obj["metadata"].(map[string]any); ok {
		if annotations, ok := metadata["annotations"].(map[string]any); ok {
			delete(annotations, lastAppliedAnnotation)
			if len(annotations) == 0 {
				delete(metadata, "annotations")
			}
		}
	}
	// Encoded again, always: the text of the state could hold what its decoding does not
	// show (a key twice, the first one's value plain), and Argo CD's own encoding of an
	// object is this one (sorted keys), so a state as Argo CD cached it stays the same.
	out, err := json.Marshal(obj)
	if err != nil {
		return "", false
	}
	return string(out), true
}

// diffs returns the Diffs of an entry of resources (sorted, as Entry sorts them) from
// the cached states: one for each OutOfSync resource whose states are in states, pass
// RedactedState, and fit in MaxDiffsPerApp and MaxDiffBytesPerApp, in the resources'
// order; the number of OutOfSync resources left out, and why.
func diffs(resources []statusv1alpha1.ResourceStatus, states States) ([]statusv1alpha1.ResourceDiff, int32, string) {
	outOfSync := 0
	for _, r := range resources {
		if r.Status == argoapp.SyncOutOfSync {
			outOfSync++
		}
	}
	if outOfSync == 0 {
		return nil, 0, ""
	}
	if states.Unavailable != "" {
		return nil, int32(outOfSync), TruncateMessage("Argo CD's diff of this application could not be read: "+states.Unavailable, MaxMessageBytes)
	}
	byKey := make(map[string]statusv1alpha1.ResourceDiff, len(states.Diffs))
	for _, d := range states.Diffs {
		byKey[nodeKey(d.Group, d.Kind, d.Namespace, d.Name)] = d
	}
	var out []statusv1alpha1.ResourceDiff
	var missing, unredacted, overBudget int32
	budget := MaxDiffBytesPerApp
	seen := map[string]bool{}
	for _, r := range resources {
		key := nodeKey(r.Group, r.Kind, r.Namespace, r.Name)
		if r.Status != argoapp.SyncOutOfSync || seen[key] {
			continue
		}
		seen[key] = true
		d, ok := byKey[key]
		if !ok {
			missing++
			continue
		}
		// Over the budget as cached, it is not even parsed: the agent reads up to 16 MiB
		// of states, and carries a sixty-fourth of it.
		if len(out) == MaxDiffsPerApp || diffBytes(d) > budget {
			overBudget++
			continue
		}
		diff, ok := carriedDiff(d)
		switch {
		case !ok:
			unredacted++
		case diff.LiveState == "" && diff.TargetState == "":
			missing++
		default:
			budget -= diffBytes(diff)
			out = append(out, diff)
		}
	}
	omitted := missing + unredacted + overBudget
	var why []string
	if overBudget > 0 {
		why = append(why, fmt.Sprintf("%d exceed what an app carries (%d diffs, %d KiB of states)", overBudget, MaxDiffsPerApp, MaxDiffBytesPerApp/1024))
	}
	if unredacted > 0 {
		why = append(why, fmt.Sprintf("%d have a state that is not a manifest, or a Secret's state that is not redacted as Argo CD redacts it", unredacted))
	}
	if missing > 0 {
		why = append(why, fmt.Sprintf("%d have no states in Argo CD's cache", missing))
	}
	if omitted == 0 {
		return out, 0, ""
	}
	return out, omitted, TruncateMessage(fmt.Sprintf("The diff leaves out %d of the %d OutOfSync resources: %s.", omitted, outOfSync, strings.Join(why, "; ")), MaxMessageBytes)
}

// carriedDiff returns d as the status channel carries it: names cut to their bound, each
// state through RedactedState; false when a state may not be carried.
func carriedDiff(d statusv1alpha1.ResourceDiff) (statusv1alpha1.ResourceDiff, bool) {
	out := statusv1alpha1.ResourceDiff{
		Group: TruncateMessage(d.Group, MaxNameBytes), Kind: TruncateMessage(d.Kind, MaxNameBytes),
		Namespace: TruncateMessage(d.Namespace, MaxNameBytes), Name: TruncateMessage(d.Name, MaxNameBytes),
	}
	var ok [3]bool
	out.LiveState, ok[0] = RedactedState(d.Group, d.Kind, d.LiveState)
	out.TargetState, ok[1] = RedactedState(d.Group, d.Kind, d.TargetState)
	out.PredictedLiveState, ok[2] = RedactedState(d.Group, d.Kind, d.PredictedLiveState)
	return out, ok[0] && ok[1] && ok[2]
}

// diffBytes is what a diff takes of MaxDiffBytesPerApp.
func diffBytes(d statusv1alpha1.ResourceDiff) int {
	return len(d.LiveState) + len(d.TargetState) + len(d.PredictedLiveState)
}

// CarriedDiffs returns the diffs of an entry that the hub may write into its Argo CD's
// cache, by group/kind/namespace/name: those of the entry's OutOfSync resources whose
// states pass RedactedState again (the agent checked them; the hub does not rely on it),
// and whose namespace and name are names Kubernetes gives an object (PathSegmentName):
// `argocd app diff` writes the states to files named after the resource, which a name
// such as "../x" would put outside its temporary directory on the user's machine.
func CarriedDiffs(e statusv1alpha1.AppStatus) map[string]statusv1alpha1.ResourceDiff {
	if len(e.Diffs) == 0 {
		return nil
	}
	outOfSync := map[string]bool{}
	for _, r := range e.Resources {
		if r.Status == argoapp.SyncOutOfSync {
			outOfSync[nodeKey(r.Group, r.Kind, r.Namespace, r.Name)] = true
		}
	}
	out := make(map[string]statusv1alpha1.ResourceDiff, len(e.Diffs))
	for _, d := range e.Diffs[:min(len(e.Diffs), MaxDiffsPerApp)] {
		key := nodeKey(d.Group, d.Kind, d.Namespace, d.Name)
		if !outOfSync[key] || !PathSegmentName(d.Name) || (d.Namespace != "" && !PathSegmentName(d.Namespace)) {
			continue
		}
		if checked, ok := carriedDiff(d); ok {
			out[key] = checked
		}
	}
	return out
}

// DiffKey is the key of a resource in CarriedDiffs.
func DiffKey(group, kind, namespace, name string) string {
	return nodeKey(group, kind, namespace, name)
}

// PathSegmentName reports whether name is one the apiserver accepts for any object
// (apimachinery's path segment rule: not empty, "." or "..", no "/" or "%"), so that it
// is safe as a file name.
func PathSegmentName(name string) bool {
	return name != "" && name != "." && name != ".." && !strings.ContainsAny(name, "/%")
}
