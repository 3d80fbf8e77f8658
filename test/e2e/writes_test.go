package e2e

// What the suites over time measure: the hub apiserver's own count of writes by resource,
// and the history of objects as a watch delivers it, every version.

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/ocm-gitops/argocd-pull-addon/test/sim"
)

// The hub resources whose writes the pull model causes.
const (
	resourceApplications = "applications"
	resourceWorks        = "manifestworks"
	resourceReports      = "multiclusterapplicationsetreports"
)

// pullResources are the resources a settled pull model must not write.
var pullResources = []string{resourceApplications, resourceWorks, resourceReports}

// hubWrites is the hub apiserver's count of write requests (POST, PUT, PATCH, APPLY,
// DELETE) since it started, from its apiserver_request_total, read at a time.
type hubWrites struct {
	requests sim.Requests
	at       time.Time
}

// readHubWrites reads the hub apiserver's /metrics with the fleet's admin credentials.
func readHubWrites(ctx context.Context) hubWrites {
	at := time.Now()
	requests, err := sim.ReadRequestCounts(ctx, theFleet.Hub.Kube)
	Expect(err).NotTo(HaveOccurred())
	return hubWrites{requests: requests, at: at}
}

// waitForQuietHub waits until the hub apiserver served no write to resources for a whole
// window, and returns the reading that ends it: what came before (another spec's objects
// still being deleted, say) is not counted against what comes after. It fails if the hub
// was not quiet for a window within timeout, with the writes of the last window.
func waitForQuietHub(ctx context.Context, window, timeout time.Duration, resources ...string) hubWrites {
	deadline := time.Now().Add(timeout)
	last := readHubWrites(ctx)
	for {
		sleep(ctx, window)
		next := readHubWrites(ctx)
		d := next.since(last)
		writes := 0
		for _, r := range resources {
			writes += d.of(r)
		}
		if writes == 0 {
			return next
		}
		Expect(time.Now().Before(deadline)).To(BeTrue(),
			"the hub did not go %v without a write to %v within %v; in the last window: %s", window, resources, timeout, d)
		last = next
	}
}

// writeDelta is the writes between two reads, by "<VERB> <resource>[/<subresource>]".
type writeDelta struct{ writes sim.Requests }

// since returns the writes made between before and w.
func (w hubWrites) since(before hubWrites) writeDelta {
	return writeDelta{w.requests.WritesSince(before.requests)}
}

// of sums the writes to resource, every verb and subresource (status included).
func (d writeDelta) of(resource string) int {
	n := 0.0
	for key, v := range d.writes {
		_, res, _ := strings.Cut(key, " ")
		res, _, _ = strings.Cut(res, "/")
		if res == resource {
			n += v
		}
	}
	return int(n)
}

// byResource sums the writes by resource.
func (d writeDelta) byResource() map[string]int {
	out := map[string]int{}
	for key := range d.writes {
		_, res, _ := strings.Cut(key, " ")
		res, _, _ = strings.Cut(res, "/")
		out[res] = d.of(res)
	}
	return out
}

// String lists the writes by resource, largest first, then each verb and subresource.
func (d writeDelta) String() string {
	by := d.byResource()
	resources := slices.Collect(maps.Keys(by))
	slices.SortFunc(resources, func(a, b string) int {
		if by[a] != by[b] {
			return by[b] - by[a]
		}
		return strings.Compare(a, b)
	})
	var parts []string
	for _, r := range resources {
		parts = append(parts, fmt.Sprintf("%s=%d", r, by[r]))
	}
	return strings.Join(parts, " ") + " [" + d.writes.String() + "]"
}

// perMinute scales the writes to resource over window to a rate per minute.
func (d writeDelta) perMinute(resource string, window time.Duration) float64 {
	return float64(d.of(resource)) / window.Minutes()
}

// version is one version of an object as a watch delivered it.
type version struct {
	// Type is the watch event; empty for the versions listed when the recording began.
	Type   watch.EventType
	At     time.Time
	Object *unstructured.Unstructured
}

// history records every version of the objects of one resource, from a list and then a
// watch from that list's resourceVersion: the object history that a final Get hides.
type history struct {
	mu       sync.Mutex
	versions []version
	err      error
	stop     context.CancelFunc
	done     chan struct{}
}

// recordHistory starts recording the objects of client that opts selects. It stops at the
// end of the spec (or earlier with Stop).
func recordHistory(ctx context.Context, client dynamic.ResourceInterface, opts metav1.ListOptions) *history {
	list, err := client.List(ctx, opts)
	Expect(err).NotTo(HaveOccurred())
	h := &history{done: make(chan struct{})}
	now := time.Now()
	for i := range list.Items {
		h.versions = append(h.versions, version{At: now, Object: &list.Items[i]})
	}
	watchCtx, cancel := context.WithCancel(context.Background())
	h.stop = cancel
	w, err := watchtools.NewRetryWatcherWithContext(watchCtx, list.GetResourceVersion(), &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector, o.FieldSelector = opts.LabelSelector, opts.FieldSelector
			return client.Watch(ctx, o)
		},
	})
	Expect(err).NotTo(HaveOccurred())
	go func() {
		defer close(h.done)
		defer w.Stop()
		for {
			select {
			case <-watchCtx.Done():
				return
			case ev, ok := <-w.ResultChan():
				if !ok {
					return
				}
				h.mu.Lock()
				switch ev.Type {
				case watch.Added, watch.Modified, watch.Deleted:
					if u, ok := ev.Object.(*unstructured.Unstructured); ok {
						h.versions = append(h.versions, version{Type: ev.Type, At: time.Now(), Object: u})
					}
				case watch.Error:
					if h.err == nil {
						h.err = fmt.Errorf("the watch failed, the history is incomplete: %v", ev.Object)
					}
				}
				h.mu.Unlock()
			}
		}
	}()
	return h
}

// Stop stops recording; the history keeps what it recorded.
func (h *history) Stop() {
	h.stop()
	<-h.done
}

// Versions returns what was recorded so far of the objects keep selects (all when nil),
// oldest first. It fails the spec if the watch broke.
func (h *history) Versions(keep func(*unstructured.Unstructured) bool) []version {
	h.mu.Lock()
	defer h.mu.Unlock()
	Expect(h.err).NotTo(HaveOccurred())
	var out []version
	for _, v := range h.versions {
		if keep == nil || keep(v.Object) {
			out = append(out, v)
		}
	}
	return out
}

// WritesByObject counts the recorded writes (watch events: each one a new resourceVersion)
// of each object, by "<namespace>/<name> <uid>", of the objects keep selects. The versions
// listed when the recording began are not writes.
func (h *history) WritesByObject(keep func(*unstructured.Unstructured) bool) map[string]int {
	out := map[string]int{}
	for _, v := range h.Versions(keep) {
		key := objectKey(v.Object)
		if v.Type == "" {
			out[key] += 0
			continue
		}
		out[key]++
	}
	return out
}

// WritesByObjectPerWindow counts the recorded writes of each object that keep selects, as
// WritesByObject, in the windows that starts open: element i counts the writes from
// starts[i] to starts[i+1] (the last window runs to now), element 0 also those before it.
func (h *history) WritesByObjectPerWindow(keep func(*unstructured.Unstructured) bool, starts []time.Time) map[string][]int {
	out := map[string][]int{}
	for _, v := range h.Versions(keep) {
		key := objectKey(v.Object)
		if out[key] == nil {
			out[key] = make([]int, len(starts))
		}
		if v.Type == "" {
			continue
		}
		i := 0
		for i+1 < len(starts) && !v.At.Before(starts[i+1]) {
			i++
		}
		out[key][i]++
	}
	return out
}

// objectKey names an object and its incarnation.
func objectKey(u *unstructured.Unstructured) string {
	return types.NamespacedName{Namespace: u.GetNamespace(), Name: u.GetName()}.String() + " " + string(u.GetUID())
}

// describeVersions is a short account of versions for a failure message.
func describeVersions(versions []version, detail func(*unstructured.Unstructured) string) string {
	var b strings.Builder
	for _, v := range versions {
		t := string(v.Type)
		if t == "" {
			t = "LISTED"
		}
		fmt.Fprintf(&b, "\n  %s %s %s rv=%s", v.At.Format("15:04:05.000"), t, objectKey(v.Object), v.Object.GetResourceVersion())
		if v.Object.GetDeletionTimestamp() != nil {
			b.WriteString(" deleting")
		}
		if detail != nil {
			b.WriteString(" " + detail(v.Object))
		}
	}
	return b.String()
}
