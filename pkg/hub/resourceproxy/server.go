// Package resourceproxy serves the resource proxy's aggregated API on the hub
// (pkg/resourceproxy has its wire contract): it hands each request of argocd-server for a
// managed cluster to the agent tunnel of that cluster, and streams the agent's answer
// back.
//
// Only the hub apiserver reaches it: each request comes over TLS with the aggregation
// layer's front-proxy client certificate (checked against the request-header CA and
// allowed names of kube-system/extension-apiserver-authentication), after the hub
// apiserver authenticated the caller and authorized the request with RBAC (clusters/proxy
// for argocd-server, agents/proxy in its own cluster namespace for an agent). It keeps no
// state on the hub apiserver: a request costs no write there.
package resourceproxy

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/resourceproxy"
)

const (
	// heartbeatInterval is how often an idle tunnel carries a heartbeat line.
	heartbeatInterval = 20 * time.Second
	// answerTimeout bounds the wait for the agent to start answering a request.
	answerTimeout = 30 * time.Second
	// tunnelQueue is how many requests wait for one agent at most.
	tunnelQueue = 64
)

// Server is the resource proxy's HTTP handler, and the manager's own way to its agents
// (ManagedResources).
type Server struct {
	mu      sync.Mutex
	auth    *frontProxyAuth
	tunnels map[string]*tunnel
	pending map[string]*pendingRequest
}

// tunnel is one agent's open GET.
type tunnel struct {
	cluster  string
	requests chan resourceproxy.Request
}

// pendingRequest waits for the agent's answer to one request.
type pendingRequest struct {
	cluster string
	// answer receives the agent's answer; done is closed when the client's response is
	// complete, which ends the agent's POST.
	answer chan answer
	done   chan struct{}
}

// answer is the agent's answer: its head, and the body to stream.
type answer struct {
	head resourceproxy.ResponseHead
	body io.Reader
}

// NewServer returns a Server, which admits no request until it knows how to authenticate
// the front proxy (setAuth).
func NewServer() *Server {
	return &Server{tunnels: map[string]*tunnel{}, pending: map[string]*pendingRequest{}}
}

// setAuth makes the Server admit the requests that auth passes.
func (s *Server) setAuth(auth *frontProxyAuth) {
	s.mu.Lock()
	s.auth = auth
	s.mu.Unlock()
}

// route is a parsed request path of the aggregated API.
type route struct {
	resource, cluster string
	// rest is the path after the subresource: the managed cluster's API path for a client,
	// the request ID for an agent's answer.
	rest string
}

// parseRoute parses /apis/<group>/<version>/namespaces/<cluster>/<resource>/<cluster>/proxy[/rest];
// ok is false for any other path, and for a name that differs from the namespace.
func parseRoute(p string) (route, bool) {
	prefix := resourceproxy.GroupVersionPath() + "/namespaces/"
	if !strings.HasPrefix(p, prefix) {
		return route{}, false
	}
	parts := strings.SplitN(strings.TrimPrefix(p, prefix), "/", 5)
	if len(parts) < 4 || parts[0] == "" || parts[0] != parts[2] || parts[3] != resourceproxy.Subresource {
		return route{}, false
	}
	if parts[1] != resourceproxy.ResourceClusters && parts[1] != resourceproxy.ResourceAgents {
		return route{}, false
	}
	r := route{resource: parts[1], cluster: parts[0]}
	if len(parts) == 5 {
		r.rest = "/" + parts[4]
	}
	return r, true
}

// ServeHTTP serves the aggregated API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	auth := s.auth
	s.mu.Unlock()
	if auth == nil {
		writeStatus(w, http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable, "the resource proxy is starting")
		return
	}
	user, err := auth.authenticate(r)
	if err != nil {
		writeStatus(w, http.StatusUnauthorized, metav1.StatusReasonUnauthorized, err.Error())
		return
	}
	if r.URL.Path == resourceproxy.GroupVersionPath() {
		writeDiscovery(w)
		return
	}
	rt, ok := parseRoute(r.URL.Path)
	switch {
	case !ok:
		writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound, fmt.Sprintf("the resource proxy serves no %s", r.URL.Path))
	case rt.resource == resourceproxy.ResourceClusters:
		s.serveClient(w, r, rt, user)
	case r.Method == http.MethodGet && rt.rest == "":
		s.serveTunnel(w, r, rt.cluster, user)
	case r.Method == http.MethodPost && rt.rest != "":
		s.serveAnswer(w, r, rt.cluster, strings.TrimPrefix(rt.rest, "/"))
	default:
		writeStatus(w, http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed, fmt.Sprintf("%s %s: an agent GETs its tunnel and POSTs its answers", r.Method, r.URL.Path))
	}
}

// serveTunnel holds an agent's tunnel open, and writes each request for its cluster on it
// as a JSON line. A new tunnel of the cluster replaces the old one (the agent restarted
// or reconnected).
func (s *Server) serveTunnel(w http.ResponseWriter, r *http.Request, cluster string, user string) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		writeStatus(w, http.StatusInternalServerError, metav1.StatusReasonInternalError, "the connection cannot stream")
		return
	}
	t := &tunnel{cluster: cluster, requests: make(chan resourceproxy.Request, tunnelQueue)}
	s.mu.Lock()
	s.tunnels[cluster] = t
	s.mu.Unlock()
	logger := log.FromContext(r.Context()).WithValues("cluster", cluster, "agent", user)
	logger.Info("agent tunnel open")
	defer func() {
		s.mu.Lock()
		if s.tunnels[cluster] == t {
			delete(s.tunnels, cluster)
		}
		s.mu.Unlock()
		logger.Info("agent tunnel closed")
	}()

	w.Header().Set("Content-Type", "application/jsonl")
	w.WriteHeader(http.StatusOK)
	flusher.Flush()
	enc := json.NewEncoder(w)
	heartbeat := time.NewTicker(heartbeatInterval)
	defer heartbeat.Stop()
	for {
		var req resourceproxy.Request
		select {
		case <-r.Context().Done():
			return
		case <-heartbeat.C:
		case req = <-t.requests:
		}
		if err := enc.Encode(req); err != nil {
			return
		}
		flusher.Flush()
	}
}

// serveClient hands a request of argocd-server to the cluster's agent, and streams the
// answer back.
func (s *Server) serveClient(w http.ResponseWriter, r *http.Request, rt route, user string) {
	start := time.Now()
	logger := log.FromContext(r.Context()).WithValues("cluster", rt.cluster, "user", user, "method", r.Method, "path", rt.rest)
	status := http.StatusOK
	defer func() {
		logger.Info("resource proxy request", "status", status, "duration", time.Since(start).Round(time.Millisecond))
	}()

	body, err := io.ReadAll(io.LimitReader(r.Body, resourceproxy.MaxRequestBody+1))
	if err != nil || len(body) > resourceproxy.MaxRequestBody {
		status = http.StatusRequestEntityTooLarge
		writeStatus(w, status, metav1.StatusReasonRequestEntityTooLarge, fmt.Sprintf("the request body is over %d bytes, or unreadable", resourceproxy.MaxRequestBody))
		return
	}
	req := resourceproxy.Request{Method: r.Method, Path: rt.rest, RawQuery: r.URL.RawQuery,
		Header: resourceproxy.FilterHeader(r.Header), Body: body, User: user}
	if req.Path == "" {
		req.Path = "/"
	}
	a, done, err := s.roundTrip(r.Context(), rt.cluster, req)
	if err != nil {
		var failure *roundTripError
		if errors.As(err, &failure) {
			status = failure.code
			writeStatus(w, failure.code, failure.reason, failure.message)
		}
		return
	}
	defer done()
	status = a.head.StatusCode
	for name, values := range a.head.Header {
		w.Header()[name] = values
	}
	w.WriteHeader(a.head.StatusCode)
	if err := copyFlushing(w, a.body); err != nil {
		logger.V(1).Info("the answer ended early", "error", err.Error())
	}
}

// roundTripError is why a request got no answer from its agent.
type roundTripError struct {
	code    int
	reason  metav1.StatusReason
	message string
}

func (e *roundTripError) Error() string { return e.message }

// roundTrip hands req to cluster's agent and returns the agent's answer; done must be
// called once its body is read (or abandoned), which ends the agent's answer.
func (s *Server) roundTrip(ctx context.Context, cluster string, req resourceproxy.Request) (answer, func(), error) {
	s.mu.Lock()
	t := s.tunnels[cluster]
	s.mu.Unlock()
	if t == nil {
		return answer{}, nil, &roundTripError{http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable,
			fmt.Sprintf("managed cluster %s is not connected to the hub: its argocd-pull agent has no tunnel open (the cluster is unreachable, or the addon is not running there)", cluster)}
	}
	req.ID = newID()
	p := &pendingRequest{cluster: cluster, answer: make(chan answer, 1), done: make(chan struct{})}
	s.mu.Lock()
	s.pending[req.ID] = p
	s.mu.Unlock()
	done := func() {
		s.mu.Lock()
		delete(s.pending, req.ID)
		s.mu.Unlock()
		close(p.done)
	}
	select {
	case t.requests <- req:
	default:
		done()
		return answer{}, nil, &roundTripError{http.StatusTooManyRequests, metav1.StatusReasonTooManyRequests,
			fmt.Sprintf("managed cluster %s has %d requests waiting for its agent", cluster, tunnelQueue)}
	}
	timer := time.NewTimer(answerTimeout)
	defer timer.Stop()
	select {
	case a := <-p.answer:
		return a, done, nil
	case <-timer.C:
		done()
		return answer{}, nil, &roundTripError{http.StatusGatewayTimeout, metav1.StatusReasonTimeout,
			fmt.Sprintf("managed cluster %s: its agent did not answer within %v", cluster, answerTimeout)}
	case <-ctx.Done():
		done()
		return answer{}, nil, ctx.Err()
	}
}

// ManagedResources returns the managed resources of the Application namespace/name on
// cluster, as the Argo CD there caches them, asked of its agent: the JSON of a list of
// argocdcache.ResourceDiff, at most limit bytes.
func (s *Server) ManagedResources(ctx context.Context, cluster, namespace, name string, limit int64) ([]byte, error) {
	a, done, err := s.roundTrip(ctx, cluster, resourceproxy.Request{Method: http.MethodGet,
		Path: resourceproxy.ManagedResourcesPath(namespace, name), FromManager: true})
	if err != nil {
		return nil, err
	}
	defer done()
	body, err := io.ReadAll(io.LimitReader(a.body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read the managed resources of %s/%s from cluster %s: %w", namespace, name, cluster, err)
	}
	if a.head.StatusCode != http.StatusOK {
		var status metav1.Status
		if json.Unmarshal(body, &status) == nil && status.Message != "" {
			return nil, fmt.Errorf("cluster %s: %s", cluster, status.Message)
		}
		return nil, fmt.Errorf("cluster %s answered %d for the managed resources of %s/%s", cluster, a.head.StatusCode, namespace, name)
	}
	if int64(len(body)) > limit {
		return nil, fmt.Errorf("the managed resources of %s/%s on cluster %s are over %d bytes", namespace, name, cluster, limit)
	}
	return body, nil
}

// serveAnswer takes an agent's answer to a request of its cluster, and streams it to the
// client until either ends.
func (s *Server) serveAnswer(w http.ResponseWriter, r *http.Request, cluster, id string) {
	s.mu.Lock()
	p := s.pending[id]
	s.mu.Unlock()
	// A request of another cluster is not this agent's to answer.
	if p == nil || p.cluster != cluster {
		writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound, fmt.Sprintf("no request %s waits for an answer from cluster %s", id, cluster))
		return
	}
	body := bufio.NewReader(r.Body)
	line, err := body.ReadBytes('\n')
	var head resourceproxy.ResponseHead
	if err == nil {
		err = json.Unmarshal(line, &head)
	}
	if err != nil || head.StatusCode < 100 || head.StatusCode > 599 {
		writeStatus(w, http.StatusBadRequest, metav1.StatusReasonBadRequest, "the answer does not start with a response head line")
		return
	}
	head.Header = resourceproxy.FilterHeader(head.Header)
	select {
	case p.answer <- answer{head: head, body: body}:
	default:
		writeStatus(w, http.StatusConflict, metav1.StatusReasonConflict, fmt.Sprintf("request %s has an answer already", id))
		return
	}
	// The client's handler reads the body until it ends, or until the client leaves.
	select {
	case <-p.done:
	case <-r.Context().Done():
	}
	w.WriteHeader(http.StatusNoContent)
}

// copyFlushing copies src to w, flushing after each read, so that a followed log reaches
// the client line by line.
func copyFlushing(w http.ResponseWriter, src io.Reader) error {
	flusher, _ := w.(http.Flusher)
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return werr
			}
			if flusher != nil {
				flusher.Flush()
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return err
		}
	}
}

// newID returns a random request ID.
func newID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// writeStatus writes a Kubernetes Status, which client-go turns into the error its
// callers (argocd-server) show.
func writeStatus(w http.ResponseWriter, code int, reason metav1.StatusReason, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure, Code: int32(code), Reason: reason, Message: message,
	})
}

// writeDiscovery writes the group version's resources, which the aggregator's
// availability check and kubectl read.
func writeDiscovery(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	verbs := metav1.Verbs{"get", "create", "update", "patch", "delete"}
	_ = json.NewEncoder(w).Encode(metav1.APIResourceList{
		TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
		GroupVersion: resourceproxy.Group + "/" + resourceproxy.Version,
		APIResources: []metav1.APIResource{
			{Name: resourceproxy.ResourceClusters + "/" + resourceproxy.Subresource, Namespaced: true, Kind: "ClusterProxy", Verbs: verbs},
			{Name: resourceproxy.ResourceAgents + "/" + resourceproxy.Subresource, Namespaced: true, Kind: "AgentProxy", Verbs: metav1.Verbs{"get", "create"}},
		},
	})
}
