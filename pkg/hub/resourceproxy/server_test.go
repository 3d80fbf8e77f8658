package resourceproxy

import (
	"testing"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/resourceproxy"
)

func TestParseRoute(t *testing.T) {
	for _, tc := range []struct {
		path string
		want route
		ok   bool
	}{
		{resourceproxy.ClientPath("c1"), route{resource: "clusters", cluster: "c1"}, true},
		{resourceproxy.ClientPath("c1") + "/api/v1/namespaces/ns/pods/p/log", route{resource: "clusters", cluster: "c1", rest: "/api/v1/namespaces/ns/pods/p/log"}, true},
		{resourceproxy.AgentPath("c1"), route{resource: "agents", cluster: "c1"}, true},
		{resourceproxy.AgentPath("c1") + "/abc", route{resource: "agents", cluster: "c1", rest: "/abc"}, true},
		// The name must be the namespace's: RBAC in one cluster namespace reaches that
		// cluster only.
		{resourceproxy.GroupVersionPath() + "/namespaces/c1/agents/c2/proxy", route{}, false},
		{resourceproxy.GroupVersionPath() + "/namespaces/c1/clusters/c2/proxy/api", route{}, false},
		{resourceproxy.GroupVersionPath() + "/namespaces/c1/agents/c1/status", route{}, false},
		{resourceproxy.GroupVersionPath() + "/namespaces/c1/secrets/c1/proxy", route{}, false},
		{resourceproxy.GroupVersionPath() + "/namespaces//agents//proxy", route{}, false},
		{"/apis/other.group/v1/namespaces/c1/agents/c1/proxy", route{}, false},
	} {
		got, ok := parseRoute(tc.path)
		if ok != tc.ok || got != tc.want {
			t.Errorf("parseRoute(%q) = %+v, %v; want %+v, %v", tc.path, got, ok, tc.want, tc.ok)
		}
	}
}

func TestParseRequestHeaderConfig(t *testing.T) {
	if _, err := parseRequestHeaderConfig(map[string]string{"client-ca-file": "x"}); err == nil {
		t.Error("a hub without a request-header CA (no aggregation layer) is accepted")
	}
	if _, err := parseRequestHeaderConfig(map[string]string{"requestheader-client-ca-file": "not PEM"}); err == nil {
		t.Error("a CA that is not PEM is accepted")
	}
}
