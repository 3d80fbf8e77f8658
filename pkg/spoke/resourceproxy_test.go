package spoke

import (
	"testing"

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
