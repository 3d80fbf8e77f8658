package sim

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

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
	body, err := kube.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the apiserver's metrics: %w", err)
	}
	return parseRequestCounts(body)
}

// parseRequestCounts sums the samples of apiserver_request_total in a Prometheus text
// exposition by verb and resource.
func parseRequestCounts(exposition []byte) (Requests, error) {
	const metric = "apiserver_request_total{"
	counts := Requests{}
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
		labels := parseLabels(line[len(metric):end])
		value, err := strconv.ParseFloat(strings.TrimSpace(line[end+1:]), 64)
		if err != nil {
			return nil, fmt.Errorf("malformed sample %q: %w", line, err)
		}
		key := labels["verb"] + " " + labels["resource"]
		if sub := labels["subresource"]; sub != "" {
			key += "/" + sub
		}
		counts[key] += value
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

// WritesSince returns the writes counted since before, by key, without zeros.
func (r Requests) WritesSince(before Requests) Requests {
	out := Requests{}
	for key, n := range r {
		verb, _, _ := strings.Cut(key, " ")
		if d := n - before[key]; writeVerbs[verb] && d > 0 {
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
