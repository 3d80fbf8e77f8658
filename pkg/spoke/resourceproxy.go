package spoke

// This file is the agent's side of the resource proxy (pkg/resourceproxy): it holds the
// tunnel open to the hub, checks each request the hub sends against the trees of the apps
// pulled from the hub, runs it on the managed cluster as Argo CD's application-controller,
// and streams the answer back.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"

	statusv1alpha1 "github.com/ocm-gitops/argocd-pull-addon/pkg/apis/argocdpull/v1alpha1"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/argocdcache"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/resourceproxy"
)

const (
	// proxyBackoffMax bounds the wait between two tries to open the tunnel.
	proxyBackoffMax = 30 * time.Second
	// proxyConcurrency bounds the requests the agent runs at once.
	proxyConcurrency = 16
	// resourceKindsTTL is how long the agent keeps what a group version serves.
	resourceKindsTTL = 5 * time.Minute
)

// resourceProxy is the agent's side of the resource proxy.
type resourceProxy struct {
	a *agent
	// hub reaches the hub apiserver (no timeout: the tunnel stays open); hubURL is its
	// URL.
	hub    *http.Client
	hubURL string
	// spoke reaches the managed cluster as Argo CD's application-controller.
	spoke    *http.Client
	spokeURL string
	// spokeMeta reads the metadata of the managed cluster's resources through spoke.
	spokeMeta metadata.Interface
	// kinds caches, per group version, the kind of each resource.
	kindsMu sync.Mutex
	kinds   map[schema.GroupVersion]resourceKinds
	slots   chan struct{}
}

// resourceKinds is what a group version serves, read at at.
type resourceKinds struct {
	kinds map[string]string
	at    time.Time
}

// newResourceProxy returns the agent's side of the resource proxy, whose requests run on
// the managed cluster as the service account impersonate (namespace/name).
func newResourceProxy(a *agent, hubConfig, spokeConfig *rest.Config, impersonate string) (*resourceProxy, error) {
	hubConfig = rest.CopyConfig(hubConfig)
	hubConfig.Timeout = 0
	hubConfig.RateLimiter = flowcontrol.NewFakeAlwaysRateLimiter()
	hub, err := rest.HTTPClientFor(hubConfig)
	if err != nil {
		return nil, fmt.Errorf("resource proxy: the hub client: %w", err)
	}
	spokeConfig = rest.CopyConfig(spokeConfig)
	spokeConfig.Timeout = 0
	spokeConfig.Impersonate = rest.ImpersonationConfig{UserName: impersonate}
	spoke, err := rest.HTTPClientFor(spokeConfig)
	if err != nil {
		return nil, fmt.Errorf("resource proxy: the managed cluster client: %w", err)
	}
	// A redirect would run a request on a path the agent did not check: the answer goes
	// back as it is.
	spoke.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	spokeMeta, err := metadata.NewForConfigAndClient(spokeConfig, spoke)
	if err != nil {
		return nil, fmt.Errorf("resource proxy: the managed cluster's metadata client: %w", err)
	}
	return &resourceProxy{a: a, hub: hub, hubURL: strings.TrimSuffix(hubConfig.Host, "/"), spoke: spoke,
		spokeURL: strings.TrimSuffix(spokeConfig.Host, "/"), spokeMeta: spokeMeta, kinds: map[schema.GroupVersion]resourceKinds{},
		slots: make(chan struct{}, proxyConcurrency)}, nil
}

// run keeps the tunnel open until ctx ends.
func (p *resourceProxy) run(ctx context.Context) {
	log := p.a.log.WithName("resource-proxy")
	backoff := time.Second
	failing := false
	for ctx.Err() == nil {
		opened, err := p.serveTunnel(ctx)
		if ctx.Err() != nil {
			return
		}
		if opened {
			backoff, failing = time.Second, false
		}
		var wait time.Duration
		wait, backoff = reopenAfter(err, backoff)
		// Said once while the hub keeps refusing (a hub without the resource proxy).
		if !failing {
			log.Info("the resource proxy's tunnel is closed; opening it again", "error", err.Error(), "after", wait)
		} else {
			log.V(2).Info("the resource proxy's tunnel is still closed", "error", err.Error())
		}
		failing = !opened
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// reopenAfter returns how long run waits to open the tunnel again after it closed with
// err, and the backoff after that wait: backoff, doubled up to proxyBackoffMax for the
// next failure. A hub that serves no resource proxy is asked again after
// proxyNotServedRetry, from its first answer on, not every 30 s by every cluster.
func reopenAfter(err error, backoff time.Duration) (wait, next time.Duration) {
	next = min(2*backoff, proxyBackoffMax)
	if errors.Is(err, errProxyNotServed) {
		return proxyNotServedRetry, next
	}
	return backoff, next
}

// errProxyNotServed: the hub serves no resource proxy (its APIService is absent).
var errProxyNotServed = errors.New("the hub serves no resource proxy")

// proxyNotServedRetry is how long the agent waits to ask again a hub that serves no
// resource proxy.
const proxyNotServedRetry = 5 * time.Minute

// serveTunnel opens the tunnel and serves its requests until it closes; opened says it
// was open.
func (p *resourceProxy) serveTunnel(ctx context.Context) (opened bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.hubURL+resourceproxy.AgentPath(p.a.opts.ClusterName), nil)
	if err != nil {
		return false, err
	}
	resp, err := p.hub.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		err := fmt.Errorf("the hub answered %s: %s", resp.Status, strings.TrimSpace(string(body)))
		if resp.StatusCode == http.StatusNotFound {
			err = fmt.Errorf("%w: %w", errProxyNotServed, err)
		}
		return false, err
	}
	p.a.log.Info("the resource proxy's tunnel is open")
	scanner := bufio.NewScanner(resp.Body)
	scanner.Buffer(make([]byte, 64<<10), 2*resourceproxy.MaxRequestBody)
	for scanner.Scan() {
		var r resourceproxy.Request
		if err := json.Unmarshal(scanner.Bytes(), &r); err != nil {
			return true, fmt.Errorf("decode a request: %w", err)
		}
		if r.ID == "" {
			continue // a heartbeat
		}
		select {
		case p.slots <- struct{}{}:
		case <-ctx.Done():
			return true, ctx.Err()
		}
		go func() {
			defer func() { <-p.slots }()
			p.serve(ctx, r)
		}()
	}
	if err := scanner.Err(); err != nil {
		return true, err
	}
	return true, errors.New("the hub closed the tunnel")
}

// serve checks and runs one request, and answers it.
func (p *resourceProxy) serve(ctx context.Context, r resourceproxy.Request) {
	start := time.Now()
	log := p.a.log.WithName("resource-proxy").WithValues("user", r.User, "method", r.Method, "path", r.Path)
	head, body, err := p.execute(ctx, r)
	if err != nil {
		var refusal *proxyRefusal
		if !errors.As(err, &refusal) {
			refusal = &proxyRefusal{code: http.StatusBadGateway, reason: metav1.StatusReasonServiceUnavailable,
				message: fmt.Sprintf("managed cluster %s: %v", p.a.opts.ClusterName, err)}
		}
		head, body = refusal.response()
	}
	defer body.Close()
	log.Info("resource proxy request", "status", head.StatusCode, "refused", err != nil, "duration", time.Since(start).Round(time.Millisecond))
	if err := p.answer(ctx, r.ID, head, body); err != nil {
		log.V(1).Info("the answer did not reach the hub", "error", err.Error())
	}
}

// answer POSTs head and then body to the hub, streamed.
func (p *resourceProxy) answer(ctx context.Context, id string, head resourceproxy.ResponseHead, body io.Reader) error {
	line, err := json.Marshal(head)
	if err != nil {
		return err
	}
	pr, pw := io.Pipe()
	go func() {
		_, err := pw.Write(append(line, '\n'))
		if err == nil {
			_, err = io.Copy(pw, body)
		}
		_ = pw.CloseWithError(err)
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.hubURL+resourceproxy.AgentPath(p.a.opts.ClusterName)+"/"+id, pr)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := p.hub.Do(req)
	if err != nil {
		_ = pr.CloseWithError(err)
		return err
	}
	defer resp.Body.Close()
	_ = pr.CloseWithError(io.ErrClosedPipe) // the hub is done: stop reading the managed cluster
	if resp.StatusCode >= 300 {
		return fmt.Errorf("the hub answered %s", resp.Status)
	}
	return nil
}

// execute checks r (authorize) and runs it on the managed cluster, returning the head and
// body of the managed cluster's answer.
func (p *resourceProxy) execute(ctx context.Context, r resourceproxy.Request) (resourceproxy.ResponseHead, io.ReadCloser, error) {
	if namespace, name, ok := resourceproxy.ParseManagedResourcesPath(r.Path); ok && r.FromManager && r.Method == http.MethodGet {
		return p.managedResources(ctx, namespace, name)
	}
	if err := p.authorize(ctx, &r); err != nil {
		return resourceproxy.ResponseHead{}, nil, err
	}
	target := p.spokeURL + r.Path
	if r.RawQuery != "" {
		target += "?" + r.RawQuery
	}
	req, err := http.NewRequestWithContext(ctx, r.Method, target, bytes.NewReader(r.Body))
	if err != nil {
		return resourceproxy.ResponseHead{}, nil, err
	}
	req.Header = resourceproxy.FilterHeader(r.Header)
	resp, err := p.spoke.Do(req)
	if err != nil {
		return resourceproxy.ResponseHead{}, nil, err
	}
	return resourceproxy.ResponseHead{StatusCode: resp.StatusCode, Header: resourceproxy.FilterHeader(resp.Header)}, resp.Body, nil
}

// managedResources answers the manager's request for the managed resources of the app
// namespace/name, which must come from the hub, as Argo CD caches them.
func (p *resourceProxy) managedResources(ctx context.Context, namespace, name string) (resourceproxy.ResponseHead, io.ReadCloser, error) {
	pulled := false
	for _, app := range p.a.observeApplications(crdState(p.a.crd.Load())) {
		if app.report.Namespace == namespace && app.report.Name == name {
			pulled = true
		}
	}
	if !pulled || p.a.trees.reader == nil {
		return resourceproxy.ResponseHead{}, nil, &proxyRefusal{code: http.StatusNotFound, reason: metav1.StatusReasonNotFound,
			message: fmt.Sprintf("no application %s/%s pulled from the hub whose managed resources the agent reads", namespace, name)}
	}
	diffs, err := p.a.trees.reader.ReadManagedResources(ctx, namespace, name)
	if err != nil {
		return resourceproxy.ResponseHead{}, nil, &proxyRefusal{code: http.StatusServiceUnavailable, reason: metav1.StatusReasonServiceUnavailable,
			message: fmt.Sprintf("the managed resources of %s/%s: %v", namespace, name, err)}
	}
	body, err := json.Marshal(diffs)
	if err != nil {
		return resourceproxy.ResponseHead{}, nil, err
	}
	return resourceproxy.ResponseHead{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}}},
		io.NopCloser(bytes.NewReader(body)), nil
}

// proxyRefusal is a request the agent does not run, answered with a Kubernetes Status.
type proxyRefusal struct {
	code    int
	reason  metav1.StatusReason
	message string
}

func (e *proxyRefusal) Error() string { return e.message }

// response returns the Status answer of the refusal.
func (e *proxyRefusal) response() (resourceproxy.ResponseHead, io.ReadCloser) {
	body, _ := json.Marshal(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status: metav1.StatusFailure, Code: int32(e.code), Reason: e.reason, Message: e.message})
	return resourceproxy.ResponseHead{StatusCode: e.code, Header: http.Header{"Content-Type": {"application/json"}}},
		io.NopCloser(bytes.NewReader(body))
}

// forbidden refuses a request that is not on a resource of an app pulled from the hub.
func (p *resourceProxy) forbidden(r *resourceproxy.Request, why string) error {
	return &proxyRefusal{code: http.StatusForbidden, reason: metav1.StatusReasonForbidden,
		message: fmt.Sprintf("argocd-pull agent of managed cluster %s refuses %s %s: %s", p.a.opts.ClusterName, r.Method, r.Path, why)}
}

// apiRequest is a parsed Kubernetes API path.
type apiRequest struct {
	gv                                     schema.GroupVersion
	namespace, resource, name, subresource string
	discovery                              bool
}

// parseAPIPath parses a Kubernetes API path; ok is false for a path that is not one, and
// for one that is not clean (an empty, "." or ".." segment, an escape): what the agent
// checks is what the managed cluster's apiserver serves.
func parseAPIPath(p string) (apiRequest, bool) {
	if !strings.HasPrefix(p, "/") || strings.ContainsAny(p, "%?#\\") {
		return apiRequest{}, false
	}
	parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
	for _, part := range parts {
		if part == "" || part == "." || part == ".." {
			return apiRequest{}, false
		}
	}
	var r apiRequest
	switch {
	case len(parts) == 1 && (parts[0] == "api" || parts[0] == "apis" || parts[0] == "version"):
		return apiRequest{discovery: true}, true
	case parts[0] == "api" && len(parts) >= 2:
		r.gv, parts = schema.GroupVersion{Version: parts[1]}, parts[2:]
	case parts[0] == "apis" && len(parts) == 2:
		return apiRequest{discovery: true}, true
	case parts[0] == "apis" && len(parts) >= 3:
		r.gv, parts = schema.GroupVersion{Group: parts[1], Version: parts[2]}, parts[3:]
	default:
		return apiRequest{}, false
	}
	if len(parts) == 0 {
		r.discovery = true
		return r, true
	}
	if parts[0] == "namespaces" && len(parts) >= 3 {
		r.namespace, parts = parts[1], parts[2:]
	}
	r.resource = parts[0]
	if len(parts) > 1 {
		r.name = parts[1]
	}
	if len(parts) > 2 {
		r.subresource = strings.Join(parts[2:], "/")
	}
	return r, true
}

// authorize admits a request that argocd-server makes on a resource of an app pulled
// from the hub: discovery; get, patch and delete of a resource in the tree of such an app
// (and a patch of its status); the log of a Pod in such a tree; the events of a resource
// in such a tree; the creation of a resource that such a resource owns (a resource
// action's, as a CronJob's create-job). Anything else is refused.
func (p *resourceProxy) authorize(ctx context.Context, r *resourceproxy.Request) error {
	api, ok := parseAPIPath(r.Path)
	if !ok {
		return p.forbidden(r, "not a Kubernetes API path")
	}
	if api.discovery {
		if r.Method != http.MethodGet {
			return p.forbidden(r, "discovery is read-only")
		}
		return nil
	}
	switch {
	case api.name == "" && r.Method == http.MethodGet && api.gv.Group == "" && api.resource == "events":
		return p.authorizeEvents(ctx, r, api)
	case api.name == "" && r.Method == http.MethodPost:
		return p.authorizeCreate(ctx, r, api)
	case api.name == "":
		return p.forbidden(r, "lists and collections are not served, but a resource's events")
	}
	switch {
	case api.subresource == "" && (r.Method == http.MethodGet || r.Method == http.MethodPatch || r.Method == http.MethodDelete):
	case api.subresource == "status" && r.Method == http.MethodPatch:
	case api.subresource == "log" && r.Method == http.MethodGet && api.gv.Group == "" && api.resource == "pods":
	default:
		return p.forbidden(r, "only get, patch and delete of a resource, a patch of its status and a Pod's log are served")
	}
	kind, err := p.kindOf(ctx, api.gv, api.resource)
	if err != nil {
		return err
	}
	if !p.inPulledTree(ctx, func(n statusv1alpha1.ResourceNode) bool {
		return n.Group == api.gv.Group && n.Kind == kind && n.Namespace == api.namespace && n.Name == api.name
	}) {
		return p.forbidden(r, fmt.Sprintf("%s %s is not a resource of an application pulled from the hub", kind, strings.TrimPrefix(api.namespace+"/"+api.name, "/")))
	}
	return nil
}

// authorizeEvents admits the events of one resource of a pulled app's tree, which
// argocd-server selects by name and UID: the UID of the hub's tree, a stand-in
// (argocdcache.Ref.StandInUID). The agent selects them by the resource's own UID on the
// managed cluster instead.
func (p *resourceProxy) authorizeEvents(ctx context.Context, r *resourceproxy.Request, api apiRequest) error {
	query, err := url.ParseQuery(r.RawQuery)
	if err != nil {
		return p.forbidden(r, "the query does not parse")
	}
	selector, err := fields.ParseSelector(query.Get("fieldSelector"))
	if err != nil {
		return p.forbidden(r, "the field selector does not parse")
	}
	name, hasName := selector.RequiresExactMatch("involvedObject.name")
	uid, hasUID := selector.RequiresExactMatch("involvedObject.uid")
	if !hasName || !hasUID || name == "" {
		return p.forbidden(r, "events are served for one resource only, by involvedObject.name and involvedObject.uid")
	}
	var node *statusv1alpha1.ResourceNode
	p.inPulledTree(ctx, func(n statusv1alpha1.ResourceNode) bool {
		ref := argocdcache.Ref{Group: n.Group, Kind: n.Kind, Namespace: n.Namespace, Name: n.Name}
		if n.Namespace == api.namespace && n.Name == name && ref.StandInUID() == uid {
			node = &n
		}
		return node != nil
	})
	if node == nil {
		return p.forbidden(r, fmt.Sprintf("%s/%s (UID %s) is not a resource of an application pulled from the hub", api.namespace, name, uid))
	}
	realUID, err := p.uidOf(ctx, *node)
	if err != nil {
		return err
	}
	query.Set("fieldSelector", fields.SelectorFromSet(fields.Set{
		"involvedObject.name": name, "involvedObject.namespace": api.namespace, "involvedObject.uid": realUID,
	}).String())
	r.RawQuery = query.Encode()
	return nil
}

// uidOf returns the UID of the resource of node on the managed cluster.
func (p *resourceProxy) uidOf(ctx context.Context, node statusv1alpha1.ResourceNode) (string, error) {
	gv := schema.GroupVersion{Group: node.Group, Version: node.Version}
	resource, err := p.resourceOf(ctx, gv, node.Kind)
	if err != nil {
		return "", err
	}
	obj, err := p.spokeMeta.Resource(gv.WithResource(resource)).Namespace(node.Namespace).Get(ctx, node.Name, metav1.GetOptions{})
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Code != 0 {
		// The managed cluster's answer (not found, forbidden) goes back as it gave it.
		return "", &proxyRefusal{code: int(status.Status().Code), reason: status.Status().Reason,
			message: fmt.Sprintf("managed cluster %s: %s %s/%s: %s", p.a.opts.ClusterName, node.Kind, node.Namespace, node.Name, status.Status().Message)}
	}
	if err != nil {
		return "", err
	}
	return string(obj.UID), nil
}

// authorizeCreate admits the creation of a resource that a resource of a pulled app's
// tree owns.
func (p *resourceProxy) authorizeCreate(ctx context.Context, r *resourceproxy.Request, api apiRequest) error {
	var obj metav1.PartialObjectMetadata
	if err := json.Unmarshal(r.Body, &obj); err != nil {
		return p.forbidden(r, "the object to create does not decode")
	}
	for _, owner := range obj.OwnerReferences {
		gv, err := schema.ParseGroupVersion(owner.APIVersion)
		if err != nil {
			continue
		}
		if p.inPulledTree(ctx, func(n statusv1alpha1.ResourceNode) bool {
			return n.Group == gv.Group && n.Kind == owner.Kind && n.Namespace == api.namespace && n.Name == owner.Name
		}) {
			return nil
		}
	}
	return p.forbidden(r, "a resource is created only when a resource of an application pulled from the hub owns it")
}

// kindOf returns the kind of resource in gv, as the managed cluster serves it.
func (p *resourceProxy) kindOf(ctx context.Context, gv schema.GroupVersion, resource string) (string, error) {
	kinds, err := p.served(ctx, gv, func(k resourceKinds) bool { return k.kinds[resource] != "" })
	if err != nil {
		return "", err
	}
	if kind := kinds.kinds[resource]; kind != "" {
		return kind, nil
	}
	return "", &proxyRefusal{code: http.StatusNotFound, reason: metav1.StatusReasonNotFound,
		message: fmt.Sprintf("managed cluster %s serves no resource %s in %s", p.a.opts.ClusterName, resource, gv)}
}

// resourceOf returns the resource of kind in gv, as the managed cluster serves it.
func (p *resourceProxy) resourceOf(ctx context.Context, gv schema.GroupVersion, kind string) (string, error) {
	find := func(k resourceKinds) string {
		for resource, kk := range k.kinds {
			if kk == kind {
				return resource
			}
		}
		return ""
	}
	kinds, err := p.served(ctx, gv, func(k resourceKinds) bool { return find(k) != "" })
	if err != nil {
		return "", err
	}
	if resource := find(kinds); resource != "" {
		return resource, nil
	}
	return "", &proxyRefusal{code: http.StatusNotFound, reason: metav1.StatusReasonNotFound,
		message: fmt.Sprintf("managed cluster %s serves no kind %s in %s", p.a.opts.ClusterName, kind, gv)}
}

// served returns what gv serves, from the cache while it is fresh and has what the
// caller looks for (has), else read again from the managed cluster.
func (p *resourceProxy) served(ctx context.Context, gv schema.GroupVersion, has func(resourceKinds) bool) (resourceKinds, error) {
	p.kindsMu.Lock()
	cached, ok := p.kinds[gv]
	p.kindsMu.Unlock()
	if ok && time.Since(cached.at) < resourceKindsTTL && has(cached) {
		return cached, nil
	}
	// Discovery as the agent itself: every authenticated user may read it.
	list, err := p.a.spokeDiscovery.ServerResourcesForGroupVersion(ctx, gv)
	if apierrors.IsNotFound(err) {
		return resourceKinds{}, &proxyRefusal{code: http.StatusNotFound, reason: metav1.StatusReasonNotFound,
			message: fmt.Sprintf("managed cluster %s serves no %s", p.a.opts.ClusterName, gv)}
	} else if err != nil {
		return resourceKinds{}, fmt.Errorf("the discovery of %s: %w", gv, err)
	}
	cached = resourceKinds{kinds: map[string]string{}, at: time.Now()}
	for _, res := range list.APIResources {
		if !strings.Contains(res.Name, "/") {
			cached.kinds[res.Name] = res.Kind
		}
	}
	p.kindsMu.Lock()
	p.kinds[gv] = cached
	p.kindsMu.Unlock()
	return cached, nil
}

// inPulledTree reports whether a node of the tree of an app pulled from the hub matches,
// reading each tree from Argo CD's cache now.
func (p *resourceProxy) inPulledTree(ctx context.Context, match func(statusv1alpha1.ResourceNode) bool) bool {
	if p.a.trees.reader == nil {
		return false
	}
	for _, app := range p.a.observeApplications(crdState(p.a.crd.Load())) {
		tree := p.a.trees.reader.Read(ctx, app.report.Namespace, app.report.Name)
		for _, n := range tree.Nodes {
			if match(n) {
				return true
			}
		}
	}
	return false
}
