// Package resourceproxy is the wire contract of the resource proxy, through which the
// hub's Argo CD reads and acts on the live resources of a pulled app on its managed
// cluster (docs/design.md, "The resource proxy").
//
// The manager serves an aggregated API, GroupVersion, behind the hub apiserver. Two
// subresources, both of kind "proxy" so that the hub apiserver treats them as long
// running (no request timeout: Pod logs follow) and authorizes them with RBAC before it
// forwards them:
//
//   - clusters/proxy, the client side: argocd-server's Argo CD cluster of a managed
//     cluster has ClientPath(cluster) as its server, so that every Kubernetes API request
//     of argocd-server for that cluster (GET, PATCH, DELETE, POST, the events list, Pod
//     logs) reaches the manager;
//   - agents/proxy, the agent's side: the cluster's agent holds a GET of AgentPath open
//     (its tunnel), on which the manager sends each client Request as one JSON line, and
//     answers each with a POST to AgentPath/<Request.ID>, whose body is a ResponseHead
//     line and then the response body, streamed.
//
// So the agent dials out to the hub apiserver only, as it does for its status; nothing
// on the hub holds a credential of the managed cluster's apiserver; and the agent runs
// each request on the managed cluster itself, after its own checks.
package resourceproxy

import (
	"net/http"
	"path"
	"strings"
)

const (
	// Group and Version of the aggregated API.
	Group   = "proxy.argocd-pull.open-cluster-management.io"
	Version = "v1alpha1"
	// ResourceClusters is the client side; ResourceAgents the agent's; Subresource both.
	ResourceClusters = "clusters"
	ResourceAgents   = "agents"
	Subresource      = "proxy"
	// SpokeServiceAccount is the service account, in the managed cluster's Argo CD
	// namespace, as which the agent runs each request: Argo CD's application-controller.
	SpokeServiceAccount = "argocd-application-controller"
	// APIServiceName is the name of the APIService that registers Group/Version.
	APIServiceName = Version + "." + Group
)

// GroupVersionPath is the path of the aggregated API's group version.
func GroupVersionPath() string { return "/apis/" + Group + "/" + Version }

// ClientPath is the path under which argocd-server reaches cluster's Kubernetes API: the
// server of its Argo CD cluster, after the hub apiserver's URL.
func ClientPath(cluster string) string {
	return path.Join(GroupVersionPath(), "namespaces", cluster, ResourceClusters, cluster, Subresource)
}

// AgentPath is the path of cluster's agent tunnel; AgentPath + "/" + id answers the
// request id.
func AgentPath(cluster string) string {
	return path.Join(GroupVersionPath(), "namespaces", cluster, ResourceAgents, cluster, Subresource)
}

// Request is one Kubernetes API request of a client, as the manager sends it to the agent.
// A line with an empty ID is a heartbeat, which keeps an idle tunnel open through
// proxies.
type Request struct {
	ID string `json:"id,omitempty"`
	// Method, Path (of the managed cluster's API, e.g. /api/v1/namespaces/x/pods/y/log)
	// and RawQuery of the request.
	Method   string `json:"method,omitempty"`
	Path     string `json:"path,omitempty"`
	RawQuery string `json:"rawQuery,omitempty"`
	// Header holds the request's ForwardedHeaders only.
	Header http.Header `json:"header,omitempty"`
	// Body of the request, at most MaxRequestBody bytes.
	Body []byte `json:"body,omitempty"`
	// User is who asked, as the hub apiserver authenticated them (for the agent's audit
	// line).
	User string `json:"user,omitempty"`
	// FromManager marks a request of the manager itself, never one it forwards: only such
	// a request may ask for what is not a Kubernetes API path (ManagedResourcesPath).
	FromManager bool `json:"fromManager,omitempty"`
}

// managedResourcesPrefix starts ManagedResourcesPath.
const managedResourcesPrefix = "/argocd-pull/managed-resources/"

// ManagedResourcesPath is the path of the manager's request for the managed resources of
// the Application namespace/name on the managed cluster, as its Argo CD caches them
// (the JSON of a list of argocdcache.ResourceDiff).
func ManagedResourcesPath(namespace, name string) string {
	return managedResourcesPrefix + namespace + "/" + name
}

// ParseManagedResourcesPath returns the namespace and name of a ManagedResourcesPath; ok
// is false for any other path.
func ParseManagedResourcesPath(p string) (namespace, name string, ok bool) {
	rest, found := strings.CutPrefix(p, managedResourcesPrefix)
	if !found {
		return "", "", false
	}
	namespace, name, ok = strings.Cut(rest, "/")
	return namespace, name, ok && namespace != "" && name != "" && !strings.Contains(name, "/")
}

// ResponseHead is the first line of the agent's answer: the status code and the
// ForwardedHeaders of the managed cluster's response. The body follows it.
type ResponseHead struct {
	StatusCode int         `json:"statusCode"`
	Header     http.Header `json:"header,omitempty"`
}

// ForwardedHeaders are the request and response headers that cross the proxy; others
// (credentials, impersonation) never do.
var ForwardedHeaders = []string{"Accept", "Content-Type"}

// MaxRequestBody bounds a request body (a patch, an object to create): as the Kubernetes
// apiserver's own limit of 3 MiB.
const MaxRequestBody = 3 << 20

// FilterHeader returns the ForwardedHeaders of h.
func FilterHeader(h http.Header) http.Header {
	out := http.Header{}
	for _, name := range ForwardedHeaders {
		if v := h.Values(name); len(v) > 0 {
			out[name] = append([]string(nil), v...)
		}
	}
	return out
}
