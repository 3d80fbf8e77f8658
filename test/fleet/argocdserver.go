package fleet

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argocdcache"
)

// ArgoCDAdminPassword returns the admin password that the hub's argocd-server made, from
// the Secret argocd-initial-admin-secret, as a user reads it after a stock install.
func (f *Fleet) ArgoCDAdminPassword(ctx context.Context) (string, error) {
	secret, err := f.Hub.Kube.CoreV1().Secrets(ArgoCDNamespace).Get(ctx, "argocd-initial-admin-secret", metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	return string(secret.Data["password"]), nil
}

// argoCDHTTP bounds each call: on a cache miss, argocd-server asks for a refresh of the
// app and waits until its refresh annotation is gone, which takes as long as the pull
// model takes to deliver it.
var argoCDHTTP = &http.Client{Timeout: 20 * time.Second}

// ArgoCDClient calls the REST API of an argocd-server as its UI does: it logs in with
// POST /api/v1/session and sends the token as the argocd.token cookie.
type ArgoCDClient struct {
	URL   string
	token string
}

// LoginArgoCD logs in to the argocd-server at addr (host:port, plaintext) as user.
func LoginArgoCD(ctx context.Context, addr, user, password string) (*ArgoCDClient, error) {
	c := &ArgoCDClient{URL: "http://" + addr}
	var session struct {
		Token string `json:"token"`
	}
	body, _ := json.Marshal(map[string]string{"username": user, "password": password})
	if err := c.do(ctx, http.MethodPost, "/api/v1/session", body, &session); err != nil {
		return nil, fmt.Errorf("log in to argocd-server: %w", err)
	}
	c.token = session.Token
	return c, nil
}

// NewArgoCDClient returns a client of the argocd-server at url (http://host:port) that
// calls with token, a session's or a project role's.
func NewArgoCDClient(url, token string) *ArgoCDClient { return &ArgoCDClient{URL: url, token: token} }

// ResourceTree returns GET /api/v1/applications/{name}/resource-tree, what the UI draws.
func (c *ArgoCDClient) ResourceTree(ctx context.Context, app string) (argocdcache.Tree, error) {
	var tree argocdcache.Tree
	err := c.do(ctx, http.MethodGet, "/api/v1/applications/"+app+"/resource-tree", nil, &tree)
	return tree, err
}

// ManagedResources returns the items of GET /api/v1/applications/{name}/managed-resources.
func (c *ArgoCDClient) ManagedResources(ctx context.Context, app string) ([]argocdcache.ResourceDiff, error) {
	var res struct {
		Items []argocdcache.ResourceDiff `json:"items"`
	}
	err := c.do(ctx, http.MethodGet, "/api/v1/applications/"+app+"/managed-resources", nil, &res)
	return res.Items, err
}

// Token is the session token, for the argocd CLI's --auth-token.
func (c *ArgoCDClient) Token() string { return c.token }

// Call sends a request to the API and returns the status and the body, whatever the
// status.
func (c *ArgoCDClient) Call(ctx context.Context, method, path string, body []byte) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.URL+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if c.token != "" {
		req.AddCookie(&http.Cookie{Name: "argocd.token", Value: c.token})
	}
	resp, err := argoCDHTTP.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return resp.StatusCode, data, err
}

func (c *ArgoCDClient) do(ctx context.Context, method, path string, body []byte, into any) error {
	status, data, err := c.Call(ctx, method, path, body)
	if err != nil {
		return err
	}
	if status != http.StatusOK {
		return fmt.Errorf("%s %s: %d %s: %s", method, path, status, http.StatusText(status), data)
	}
	return json.Unmarshal(data, into)
}
