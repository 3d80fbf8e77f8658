package sim

import (
	"net/http"
	"net/http/httptest"
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
