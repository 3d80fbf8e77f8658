package spoke

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestParseAPIPath(t *testing.T) {
	for _, tc := range []struct {
		path string
		want apiRequest
		ok   bool
	}{
		{"/api", apiRequest{discovery: true}, true},
		{"/apis", apiRequest{discovery: true}, true},
		{"/version", apiRequest{discovery: true}, true},
		{"/api/v1", apiRequest{gv: schema.GroupVersion{Version: "v1"}, discovery: true}, true},
		{"/apis/apps", apiRequest{discovery: true}, true},
		{"/apis/apps/v1", apiRequest{gv: schema.GroupVersion{Group: "apps", Version: "v1"}, discovery: true}, true},
		{"/apis/apps/v1/namespaces/ns/deployments/web", apiRequest{gv: schema.GroupVersion{Group: "apps", Version: "v1"},
			namespace: "ns", resource: "deployments", name: "web"}, true},
		{"/apis/apps/v1/namespaces/ns/deployments/web/status", apiRequest{gv: schema.GroupVersion{Group: "apps", Version: "v1"},
			namespace: "ns", resource: "deployments", name: "web", subresource: "status"}, true},
		{"/api/v1/namespaces/ns/pods/web-1/log", apiRequest{gv: schema.GroupVersion{Version: "v1"},
			namespace: "ns", resource: "pods", name: "web-1", subresource: "log"}, true},
		{"/api/v1/namespaces/ns/events", apiRequest{gv: schema.GroupVersion{Version: "v1"}, namespace: "ns", resource: "events"}, true},
		// A cluster-scoped resource, and the Namespace object itself.
		{"/apis/rbac.authorization.k8s.io/v1/clusterroles/view", apiRequest{gv: schema.GroupVersion{Group: "rbac.authorization.k8s.io", Version: "v1"},
			resource: "clusterroles", name: "view"}, true},
		{"/api/v1/namespaces/ns", apiRequest{gv: schema.GroupVersion{Version: "v1"}, resource: "namespaces", name: "ns"}, true},
		{"/healthz", apiRequest{}, false},
		{"/metrics", apiRequest{}, false},
		{"/", apiRequest{}, false},
		// Not clean: what the agent checks must be what the apiserver serves.
		{"/api/v1/namespaces/ns/pods/p/log/../../../secrets/s", apiRequest{}, false},
		{"/api/v1/namespaces/ns/configmaps/..", apiRequest{}, false},
		{"/api/v1/namespaces/ns/./pods/p", apiRequest{}, false},
		{"/api/v1/namespaces//pods/p", apiRequest{}, false},
		{"/api/v1/namespaces/ns/pods/a%2Fb", apiRequest{}, false},
		{"/api/v1/namespaces/ns/pods/p/", apiRequest{}, false},
		{"api/v1/namespaces/ns/pods/p", apiRequest{}, false},
	} {
		got, ok := parseAPIPath(tc.path)
		if ok != tc.ok || got != tc.want {
			t.Errorf("parseAPIPath(%q) = %+v, %v; want %+v, %v", tc.path, got, ok, tc.want, tc.ok)
		}
	}
}

// TestTunnelEnds: a tunnel the hub closes cleanly ends with an error (the loop logs it and
// opens it again), and a hub that serves no resource proxy says so (the loop then waits
// the longer time that reopenAfter gives it).
func TestTunnelEnds(t *testing.T) {
	for _, tc := range []struct {
		name       string
		status     int
		wantOpened bool
		notServed  bool
	}{
		{"closed by the hub", http.StatusOK, true, false},
		{"no resource proxy on the hub", http.StatusNotFound, false, true},
		{"the manager unavailable", http.StatusServiceUnavailable, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(tc.status) }))
			defer ts.Close()
			p := &resourceProxy{a: &agent{log: logr.Discard(), opts: Options{ClusterName: "c1"}}, hub: ts.Client(), hubURL: ts.URL}
			opened, err := p.serveTunnel(context.Background())
			if opened != tc.wantOpened || err == nil || errors.Is(err, errProxyNotServed) != tc.notServed {
				t.Errorf("serveTunnel = %v, %v; want opened %v, an error, not served %v", opened, err, tc.wantOpened, tc.notServed)
			}
		})
	}
}

// TestReopenAfter: the tunnel opens again after a backoff that doubles up to
// proxyBackoffMax, and a hub that serves no resource proxy is asked again only after
// proxyNotServedRetry, from its first answer on.
func TestReopenAfter(t *testing.T) {
	notServed := fmt.Errorf("%w: the hub answered 404 Not Found", errProxyNotServed)
	closed := errors.New("the hub closed the tunnel")
	for _, tc := range []struct {
		name               string
		err                error
		backoff            time.Duration
		wantWait, wantNext time.Duration
	}{
		{"closed, first time", closed, time.Second, time.Second, 2 * time.Second},
		{"closed again", closed, 16 * time.Second, 16 * time.Second, proxyBackoffMax},
		{"closed at the most", closed, proxyBackoffMax, proxyBackoffMax, proxyBackoffMax},
		{"no resource proxy, first answer", notServed, time.Second, proxyNotServedRetry, 2 * time.Second},
		{"no resource proxy again", notServed, 2 * time.Second, proxyNotServedRetry, 4 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wait, next := reopenAfter(tc.err, tc.backoff)
			if wait != tc.wantWait || next != tc.wantNext {
				t.Errorf("reopenAfter(%v, %v) = %v, %v; want %v, %v", tc.err, tc.backoff, wait, next, tc.wantWait, tc.wantNext)
			}
		})
	}
}
