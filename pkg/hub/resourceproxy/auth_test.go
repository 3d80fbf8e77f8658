package resourceproxy

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/resourceproxy"
)

// testCA issues client certificates.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T, name string) testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name}, IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

func (ca testCA) client(t *testing.T, commonName string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: commonName},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, KeyUsage: x509.KeyUsageDigitalSignature,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// TestOnlyTheFrontProxyIsAdmitted serves the resource proxy over TLS and calls it as the
// hub apiserver's front proxy does, and as what is not it: a client certificate of the
// request-header CA with another name (an agent's own certificate, when the hub uses one
// CA for both), one of another CA, none, and the front proxy without a user.
func TestOnlyTheFrontProxyIsAdmitted(t *testing.T) {
	frontProxyCA, otherCA := newTestCA(t, "front-proxy-ca"), newTestCA(t, "other-ca")
	_, ts := serveTLS(t, map[string]string{
		"requestheader-client-ca-file":   string(frontProxyCA.pem),
		"requestheader-allowed-names":    `["front-proxy-client"]`,
		"requestheader-username-headers": `["X-Remote-User"]`,
		"requestheader-group-headers":    `["X-Remote-Group"]`,
	})

	for _, tc := range []struct {
		name string
		cert *tls.Certificate
		user string
		want int
	}{
		{"the front proxy, with the user it authenticated", ptr(frontProxyCA.client(t, "front-proxy-client")), "system:serviceaccount:argocd:x", http.StatusOK},
		{"another name of the request-header CA", ptr(frontProxyCA.client(t, "system:open-cluster-management:cluster:c1:addon:argocd-pull:agent:agent")), "system:admin", http.StatusUnauthorized},
		{"another CA's front-proxy-client", ptr(otherCA.client(t, "front-proxy-client")), "system:admin", http.StatusUnauthorized},
		{"no client certificate", nil, "system:admin", http.StatusUnauthorized},
		{"the front proxy, without a user", ptr(frontProxyCA.client(t, "front-proxy-client")), "", http.StatusUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			transport := ts.Client().Transport.(*http.Transport).Clone()
			if tc.cert != nil {
				transport.TLSClientConfig.Certificates = []tls.Certificate{*tc.cert}
			}
			req, _ := http.NewRequest(http.MethodGet, ts.URL+resourceproxy.GroupVersionPath(), nil)
			if tc.user != "" {
				req.Header.Set("X-Remote-User", tc.user)
			}
			resp, err := (&http.Client{Transport: transport}).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("status %d, want %d", resp.StatusCode, tc.want)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// serveTLS serves a Server over TLS, which authenticates its front proxy as the
// extension-apiserver-authentication data says; the test closes it.
func serveTLS(t *testing.T, data map[string]string) (*Server, *httptest.Server) {
	t.Helper()
	config, err := parseRequestHeaderConfig(data)
	if err != nil {
		t.Fatal(err)
	}
	server := NewServer()
	server.setAuth(&frontProxyAuth{config: config})
	ts := httptest.NewUnstartedServer(server)
	ts.TLS = &tls.Config{ClientAuth: tls.RequestClientCert, MinVersion: tls.VersionTLS12}
	ts.StartTLS()
	t.Cleanup(ts.Close)
	return server, ts
}
