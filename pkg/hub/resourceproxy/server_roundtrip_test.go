package resourceproxy

import (
	"bufio"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/resourceproxy"
)

// TestRequestsReachTheirClustersAgentAndStream runs the server behind TLS, an agent of
// cluster c1 that holds its tunnel open, and argocd-server's requests: one for c1 gets
// the agent's answer, streamed as the agent writes it (a followed log); one for a cluster
// without a tunnel gets 503 at once; an agent cannot answer another cluster's request.
func TestRequestsReachTheirClustersAgentAndStream(t *testing.T) {
	frontProxyCA := newTestCA(t, "front-proxy-ca")
	server, ts := serveTLS(t, map[string]string{
		"requestheader-client-ca-file": string(frontProxyCA.pem), "requestheader-username-headers": `["X-Remote-User"]`,
	})
	transport := ts.Client().Transport.(*http.Transport).Clone()
	transport.TLSClientConfig.Certificates = []tls.Certificate{frontProxyCA.client(t, "front-proxy-client")}
	client := &http.Client{Transport: transport}
	call := func(method, path, user string, body io.Reader) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(method, ts.URL+path, body)
		req.Header.Set("X-Remote-User", user)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}

	// The agent of c1: its tunnel, and its answers.
	tunnel := call(http.MethodGet, resourceproxy.AgentPath("c1"), "agent-c1", nil) //nolint:bodyclose // closed by the defer below
	defer tunnel.Body.Close()
	requests := make(chan resourceproxy.Request, 4)
	go func() {
		scanner := bufio.NewScanner(tunnel.Body)
		for scanner.Scan() {
			var r resourceproxy.Request
			if json.Unmarshal(scanner.Bytes(), &r) == nil && r.ID != "" {
				requests <- r
			}
		}
	}()
	deadline := time.Now().Add(5 * time.Second)
	for {
		server.mu.Lock()
		open := server.tunnels["c1"] != nil
		server.mu.Unlock()
		if open {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the tunnel did not open")
		}
		time.Sleep(10 * time.Millisecond)
	}

	t.Run("a cluster without a tunnel", func(t *testing.T) {
		start := time.Now()
		resp := call(http.MethodGet, resourceproxy.ClientPath("c2")+"/api", "argocd-server", nil)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "is not connected to the hub") {
			t.Errorf("got %d %s, want 503 not connected", resp.StatusCode, body)
		}
		if time.Since(start) > time.Second {
			t.Errorf("took %v", time.Since(start))
		}
	})

	t.Run("a followed log, streamed", func(t *testing.T) {
		got := make(chan *http.Response, 1)
		go func() {
			got <- call(http.MethodGet, resourceproxy.ClientPath("c1")+"/api/v1/namespaces/ns/pods/p/log?follow=true", "argocd-server", nil) //nolint:bodyclose // closed by the reader of got
		}()
		r := <-requests
		if r.Method != http.MethodGet || r.Path != "/api/v1/namespaces/ns/pods/p/log" || r.RawQuery != "follow=true" || r.User != "argocd-server" || r.FromManager {
			t.Fatalf("the agent got %+v", r)
		}
		t.Run("another cluster's agent cannot answer it", func(t *testing.T) {
			resp := call(http.MethodPost, resourceproxy.AgentPath("c2")+"/"+r.ID, "agent-c2", strings.NewReader(`{"statusCode":200}`+"\n"+"forged"))
			resp.Body.Close()
			if resp.StatusCode != http.StatusNotFound {
				t.Errorf("got %d, want 404", resp.StatusCode)
			}
		})
		pr, pw := io.Pipe()
		answered := make(chan *http.Response, 1)
		go func() { answered <- call(http.MethodPost, resourceproxy.AgentPath("c1")+"/"+r.ID, "agent-c1", pr) }() //nolint:bodyclose // closed by the reader of answered
		_, _ = pw.Write([]byte(`{"statusCode":200,"header":{"Content-Type":["text/plain"],"Authorization":["leak"]}}` + "\n" + "line 1\n"))
		resp := <-got
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Authorization") != "" {
			t.Fatalf("got %d %v", resp.StatusCode, resp.Header)
		}
		lines := bufio.NewReader(resp.Body)
		if line, _ := lines.ReadString('\n'); line != "line 1\n" {
			t.Fatalf("the first line arrived as %q before the answer ended", line)
		}
		_, _ = pw.Write([]byte("line 2\n"))
		if line, _ := lines.ReadString('\n'); line != "line 2\n" {
			t.Fatalf("the second line arrived as %q", line)
		}
		_ = pw.Close()
		if rest, _ := io.ReadAll(lines); len(rest) != 0 {
			t.Errorf("after the end: %q", rest)
		}
		resp.Body.Close()
		a := <-answered
		a.Body.Close()
		if a.StatusCode != http.StatusNoContent {
			t.Errorf("the agent's answer got %d", a.StatusCode)
		}
	})
}
