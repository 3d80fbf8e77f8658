package sim

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	"k8s.io/client-go/kubernetes"
)

// writeVerbs are the verbs of apiserver_request_total that write.
var writeVerbs = map[string]bool{"POST": true, "PUT": true, "PATCH": true, "APPLY": true, "DELETE": true, "DELETECOLLECTION": true}

// Requests are the apiserver's own request counts (apiserver_request_total), summed by
// "<VERB> <resource>[/<subresource>]".
type Requests map[string]float64

// RequestCounts reads apiserver_request_total from the hub apiserver's /metrics.
func (h *Hub) RequestCounts(ctx context.Context) (Requests, error) {
	return ReadRequestCounts(ctx, h.Kube)
}

// ReadRequestCounts reads apiserver_request_total from the /metrics of the apiserver
// that kube talks to, as a client allowed to read it (an administrator).
func ReadRequestCounts(ctx context.Context, kube kubernetes.Interface) (Requests, error) {
	body, err := readMetrics(ctx, kube)
	if err != nil {
		return nil, err
	}
	return ParseRequestCounts(body)
}

// readMetrics reads the /metrics of the apiserver that kube talks to.
func readMetrics(ctx context.Context, kube kubernetes.Interface) ([]byte, error) {
	body, err := kube.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the apiserver's metrics: %w", err)
	}
	return body, nil
}

// ParseRequestCounts sums the samples of apiserver_request_total in a Prometheus text
// exposition by verb and resource.
func ParseRequestCounts(exposition []byte) (Requests, error) {
	return parseCounts(exposition, "apiserver_request_total", func(labels map[string]string) string {
		key := labels["verb"] + " " + labels["resource"]
		if sub := labels["subresource"]; sub != "" {
			key += "/" + sub
		}
		return key
	})
}

// Metrics reads the hub apiserver's /metrics, as a Prometheus text exposition.
func (h *Hub) Metrics(ctx context.Context) ([]byte, error) { return readMetrics(ctx, h.Kube) }

// ParseConsistencyChecks counts, in an apiserver's Prometheus text exposition, the
// watch-cache consistency checks it has run, by resource
// (apiserver_storage_consistency_checks_total, DetectCacheInconsistency, on by default
// since Kubernetes 1.34): each lists a resource from etcd and decodes every object of it,
// once per 5 to 7.5 minutes per resource.
func ParseConsistencyChecks(exposition []byte) (map[string]float64, error) {
	return parseCounts(exposition, "apiserver_storage_consistency_checks_total", func(labels map[string]string) string {
		return labels["resource"]
	})
}

// parseCounts sums the samples of a counter in a Prometheus text exposition by the key
// of their labels.
func parseCounts(exposition []byte, counter string, key func(labels map[string]string) string) (map[string]float64, error) {
	metric := counter + "{"
	counts := map[string]float64{}
	scanner := bufio.NewScanner(bytes.NewReader(exposition))
	scanner.Buffer(make([]byte, 1<<20), 1<<20)
	for scanner.Scan() {
		line := scanner.Text()
		if !strings.HasPrefix(line, metric) {
			continue
		}
		end := strings.LastIndex(line, "}")
		if end < 0 {
			return nil, fmt.Errorf("malformed sample %q", line)
		}
		value, err := strconv.ParseFloat(strings.TrimSpace(line[end+1:]), 64)
		if err != nil {
			return nil, fmt.Errorf("malformed sample %q: %w", line, err)
		}
		counts[key(parseLabels(line[len(metric):end]))] += value
	}
	return counts, scanner.Err()
}

// parseLabels parses `a="x",b="y"`; the values of this metric hold no quotes or commas.
func parseLabels(s string) map[string]string {
	labels := map[string]string{}
	for _, pair := range strings.Split(s, ",") {
		name, value, ok := strings.Cut(pair, "=")
		if ok {
			labels[name] = strings.Trim(value, `"`)
		}
	}
	return labels
}

// Since returns the requests, reads included, counted since before, by key, without
// zeros and without the requests that name no resource (discovery, /metrics).
func (r Requests) Since(before Requests) Requests {
	out := Requests{}
	for key, n := range r {
		_, resource, _ := strings.Cut(key, " ")
		if d := n - before[key]; resource != "" && d > 0 {
			out[key] = d
		}
	}
	return out
}

// Minus returns the counts of r less those of other, by key, without zeros.
func (r Requests) Minus(other Requests) Requests {
	return positiveDifference(r, other)
}

// positiveDifference returns the values of a less those of b, by key, where a's is the
// greater.
func positiveDifference[M ~map[string]float64](a, b M) M {
	out := M{}
	for key, n := range a {
		if d := n - b[key]; d > 0 {
			out[key] = d
		}
	}
	return out
}

// IsWrite reports whether a key's verb writes.
func IsWrite(key string) bool {
	verb, _, _ := strings.Cut(key, " ")
	return writeVerbs[verb]
}

// RequestCounter counts the requests of the clients whose transport it wraps, by the
// keys of apiserver_request_total (see Requests), as the apiserver tells them apart:
// a GET of a collection is a LIST and with watch=true a WATCH, a patch of content type
// application/apply-patch+yaml an APPLY. Requests that name no resource are not
// counted. It is safe for concurrent use.
type RequestCounter struct {
	mu     sync.Mutex
	counts Requests
}

// Wrap wraps a transport (rest.Config.Wrap).
func (c *RequestCounter) Wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		if key, ok := requestKey(req); ok {
			c.mu.Lock()
			if c.counts == nil {
				c.counts = Requests{}
			}
			c.counts[key]++
			c.mu.Unlock()
		}
		return rt.RoundTrip(req)
	})
}

// Counts returns a copy of the counts so far.
func (c *RequestCounter) Counts() Requests {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.counts)
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// requestKey returns the key of apiserver_request_total that counts req.
func requestKey(req *http.Request) (string, bool) {
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	var rest []string
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		rest = parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		rest = parts[3:]
	default:
		return "", false
	}
	if len(rest) >= 3 && rest[0] == "namespaces" {
		rest = rest[2:]
	}
	resource, name, subresource := rest[0], "", ""
	if len(rest) > 1 {
		name = rest[1]
	}
	if len(rest) > 2 {
		subresource = rest[2]
	}
	verb := req.Method
	switch {
	case verb == http.MethodGet && name == "" && (req.URL.Query().Get("watch") == "true" || req.URL.Query().Get("watch") == "1"):
		verb = "WATCH"
	case verb == http.MethodGet && name == "":
		verb = "LIST"
	case verb == http.MethodPatch && strings.HasPrefix(req.Header.Get("Content-Type"), "application/apply-patch"):
		verb = "APPLY"
	case verb == http.MethodDelete && name == "":
		verb = "DELETECOLLECTION"
	}
	key := verb + " " + resource
	if subresource != "" {
		key += "/" + subresource
	}
	return key, true
}

// WritesSince returns the write requests that r counts and before did not.
func (r Requests) WritesSince(before Requests) Requests {
	return Requests(Increases(r, before)).Without(func(key string) bool {
		verb, _, _ := strings.Cut(key, " ")
		return !writeVerbs[verb]
	})
}

// Increases returns, of each count in after that grew since before, by how much.
func Increases(after, before map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for key, n := range after {
		if d := n - before[key]; d > 0 {
			out[key] = d
		}
	}
	return out
}

// Total sums the counts.
func (r Requests) Total() float64 {
	var sum float64
	for _, n := range r {
		sum += n
	}
	return sum
}

// Without returns the counts without the keys for which drop is true.
func (r Requests) Without(drop func(key string) bool) Requests {
	out := Requests{}
	for key, n := range r {
		if !drop(key) {
			out[key] = n
		}
	}
	return out
}

// String lists the counts, largest first.
func (r Requests) String() string {
	keys := slices.Collect(maps.Keys(r))
	slices.SortFunc(keys, func(a, b string) int {
		if r[a] != r[b] {
			if r[a] > r[b] {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%g", k, r[k]))
	}
	return strings.Join(parts, ", ")
}

// Histogram is one Prometheus histogram, or the sum of several series of it: how many
// observations fell at or under each bucket's upper bound.
type Histogram struct {
	// Bounds are the buckets' upper bounds, ascending, +Inf last.
	Bounds []float64
	// Counts are the cumulative counts of the buckets.
	Counts []float64
}

// ParseHistogram sums the buckets of the series of histogram name (without _bucket)
// whose labels match, in a Prometheus text exposition.
func ParseHistogram(exposition []byte, name string, match func(labels map[string]string) bool) (Histogram, error) {
	buckets, err := parseCounts(exposition, name+"_bucket", func(labels map[string]string) string {
		if !match(labels) {
			return ""
		}
		return labels["le"]
	})
	if err != nil {
		return Histogram{}, err
	}
	delete(buckets, "")
	counts := map[float64]float64{}
	for le, count := range buckets {
		bound, err := strconv.ParseFloat(le, 64)
		if err != nil {
			return Histogram{}, fmt.Errorf("%s: malformed bucket bound %q", name, le)
		}
		counts[bound] += count
	}
	h := Histogram{Bounds: slices.Sorted(maps.Keys(counts))}
	for _, bound := range h.Bounds {
		h.Counts = append(h.Counts, counts[bound])
	}
	return h, nil
}

// Since returns the observations of h that before did not hold. A before without the
// same buckets (no series yet) held none.
func (h Histogram) Since(before Histogram) Histogram {
	out := Histogram{Bounds: h.Bounds, Counts: slices.Clone(h.Counts)}
	if slices.Equal(h.Bounds, before.Bounds) {
		for i := range out.Counts {
			out.Counts[i] -= before.Counts[i]
		}
	}
	return out
}

// Total is the number of observations.
func (h Histogram) Total() float64 {
	if len(h.Counts) == 0 {
		return 0
	}
	return h.Counts[len(h.Counts)-1]
}

// AtMost returns the upper bound of the bucket that holds quantile q (0 < q ≤ 1) of the
// observations: q of them took at most that long. It is +Inf past the last finite
// bound, and 0 without observations.
func (h Histogram) AtMost(q float64) float64 {
	rank := q * h.Total()
	for i, count := range h.Counts {
		if count > 0 && count >= rank {
			return h.Bounds[i]
		}
	}
	return 0
}
