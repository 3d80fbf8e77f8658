package sim

import (
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
)

func TestRequestKey(t *testing.T) {
	tests := []struct {
		method, url, contentType string
		want                     string
	}{
		{"GET", "/apis/work.open-cluster-management.io/v1/namespaces/c1/manifestworks/w", "", "GET manifestworks"},
		{"GET", "/apis/work.open-cluster-management.io/v1/manifestworks?limit=500", "", "LIST manifestworks"},
		{"GET", "/apis/work.open-cluster-management.io/v1/namespaces/c1/manifestworks?watch=true", "", "WATCH manifestworks"},
		{"PATCH", "/apis/work.open-cluster-management.io/v1/namespaces/c1/manifestworks/w?fieldManager=x", "application/apply-patch+yaml", "APPLY manifestworks"},
		{"PATCH", "/apis/argoproj.io/v1alpha1/namespaces/argocd/applications/a", "application/merge-patch+json", "PATCH applications"},
		{"PUT", "/apis/work.open-cluster-management.io/v1/namespaces/c1/manifestworks/w/status", "", "PUT manifestworks/status"},
		{"POST", "/apis/events.k8s.io/v1/namespaces/argocd/events", "", "POST events"},
		{"DELETE", "/api/v1/namespaces/argocd/secrets", "", "DELETECOLLECTION secrets"},
		{"GET", "/api/v1/namespaces/argocd", "", "GET namespaces"},
		{"GET", "/api/v1/namespaces", "", "LIST namespaces"},
		{"GET", "/apis/cluster.open-cluster-management.io/v1/managedclusters/c1", "", "GET managedclusters"},
		{"GET", "/metrics", "", ""},
		{"GET", "/apis/work.open-cluster-management.io/v1", "", ""},
	}
	for _, tc := range tests {
		req := httptest.NewRequest(tc.method, tc.url, http.NoBody)
		if tc.contentType != "" {
			req.Header.Set("Content-Type", tc.contentType)
		}
		got, ok := requestKey(req)
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("%s %s: %q, %t; want %q", tc.method, tc.url, got, ok, tc.want)
		}
	}
}

func TestHistogram(t *testing.T) {
	exposition := func(fast, slow float64) []byte {
		return fmt.Appendf(nil, `# TYPE apiserver_request_duration_seconds histogram
apiserver_request_duration_seconds_bucket{resource="reports",verb="APPLY",le="0.1"} %[1]g
apiserver_request_duration_seconds_bucket{resource="reports",verb="APPLY",le="0.4"} %[1]g
apiserver_request_duration_seconds_bucket{resource="reports",verb="APPLY",le="1"} %[2]g
apiserver_request_duration_seconds_bucket{resource="reports",verb="APPLY",le="+Inf"} %[2]g
apiserver_request_duration_seconds_bucket{resource="apps",verb="APPLY",le="0.1"} 1000
apiserver_request_duration_seconds_bucket{resource="apps",verb="APPLY",le="0.4"} 1000
apiserver_request_duration_seconds_bucket{resource="apps",verb="APPLY",le="1"} 1000
apiserver_request_duration_seconds_bucket{resource="apps",verb="APPLY",le="+Inf"} 1000
apiserver_request_duration_seconds_sum{resource="reports",verb="APPLY"} 12
apiserver_request_duration_seconds_count{resource="reports",verb="APPLY"} %[2]g
`, fast, fast+slow)
	}
	reports := func(labels map[string]string) bool { return labels["resource"] == "reports" }
	before, err := ParseHistogram(exposition(10, 0), "apiserver_request_duration_seconds", reports)
	if err != nil {
		t.Fatal(err)
	}
	after, err := ParseHistogram(exposition(108, 2), "apiserver_request_duration_seconds", reports)
	if err != nil {
		t.Fatal(err)
	}
	if want := []float64{0.1, 0.4, 1, math.Inf(1)}; !slices.Equal(after.Bounds, want) {
		t.Fatalf("bounds %v, want %v", after.Bounds, want)
	}
	// 98 fast and 2 slow observations since before; the other series is not summed.
	since := after.Since(before)
	if since.Total() != 100 {
		t.Errorf("%v observations since, want 100", since.Total())
	}
	for _, tc := range []struct{ q, want float64 }{{0.5, 0.1}, {0.98, 0.1}, {0.99, 1}, {1, 1}} {
		if got := since.AtMost(tc.q); got != tc.want {
			t.Errorf("quantile %v at most %v, want %v", tc.q, got, tc.want)
		}
	}
	if got := (Histogram{}).AtMost(0.99); got != 0 {
		t.Errorf("no observations: quantile at most %v, want 0", got)
	}
	if got := after.Since(Histogram{}).Total(); got != 110 {
		t.Errorf("since a histogram without series: %v observations, want all 110", got)
	}
}
