package resourceproxy

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

const (
	// authConfigNamespace and authConfigName name the ConfigMap in which the hub apiserver
	// publishes how extension apiservers authenticate it.
	authConfigNamespace = "kube-system"
	authConfigName      = "extension-apiserver-authentication"
	// authConfigRefresh is how often the manager reads it again (a rotated CA).
	authConfigRefresh = 5 * time.Minute
)

// frontProxyAuth authenticates the hub apiserver's front proxy, as an extension apiserver
// does: the client certificate must chain to the request-header CA and, when the hub
// names them, carry one of the allowed common names; the user is then the one the hub
// apiserver put in the request-header.
type frontProxyAuth struct {
	mu     sync.RWMutex
	config requestHeaderConfig
}

// requestHeaderConfig is what the ConfigMap says.
type requestHeaderConfig struct {
	roots          *x509.CertPool
	allowedNames   []string
	usernameHeader []string
	groupHeaders   []string
}

// newFrontProxyAuth returns a frontProxyAuth with the hub's current configuration.
func newFrontProxyAuth(ctx context.Context, kube kubernetes.Interface) (*frontProxyAuth, error) {
	a := &frontProxyAuth{}
	if err := a.load(ctx, kube); err != nil {
		return nil, err
	}
	return a, nil
}

// load reads the configuration from the ConfigMap.
func (a *frontProxyAuth) load(ctx context.Context, kube kubernetes.Interface) error {
	cm, err := kube.CoreV1().ConfigMaps(authConfigNamespace).Get(ctx, authConfigName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("read %s/%s: %w", authConfigNamespace, authConfigName, err)
	}
	config, err := parseRequestHeaderConfig(cm.Data)
	if err != nil {
		return fmt.Errorf("%s/%s: %w", authConfigNamespace, authConfigName, err)
	}
	a.mu.Lock()
	a.config = config
	a.mu.Unlock()
	return nil
}

// refresh reads the configuration again every authConfigRefresh until ctx ends.
func (a *frontProxyAuth) refresh(ctx context.Context, kube kubernetes.Interface, onError func(error)) {
	_ = wait.PollUntilContextCancel(ctx, authConfigRefresh, false, func(ctx context.Context) (bool, error) {
		if err := a.load(ctx, kube); err != nil {
			onError(err)
		}
		return false, nil
	})
}

// parseRequestHeaderConfig parses the request-header keys of the ConfigMap's data.
func parseRequestHeaderConfig(data map[string]string) (requestHeaderConfig, error) {
	ca := data["requestheader-client-ca-file"]
	if ca == "" {
		return requestHeaderConfig{}, errors.New("no requestheader-client-ca-file: the hub apiserver runs without an aggregation layer (--requestheader-client-ca-file)")
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM([]byte(ca)) {
		return requestHeaderConfig{}, errors.New("requestheader-client-ca-file holds no PEM certificate")
	}
	config := requestHeaderConfig{roots: roots}
	for key, into := range map[string]*[]string{
		"requestheader-allowed-names":    &config.allowedNames,
		"requestheader-username-headers": &config.usernameHeader,
		"requestheader-group-headers":    &config.groupHeaders,
	} {
		if raw := data[key]; raw != "" {
			if err := json.Unmarshal([]byte(raw), into); err != nil {
				return requestHeaderConfig{}, fmt.Errorf("%s: %w", key, err)
			}
		}
	}
	if len(config.usernameHeader) == 0 {
		return requestHeaderConfig{}, errors.New("no requestheader-username-headers")
	}
	return config, nil
}

// authenticate checks that r comes from the front proxy, and returns the user the hub
// apiserver authenticated, with their groups, for the audit line.
func (a *frontProxyAuth) authenticate(r *http.Request) (string, error) {
	a.mu.RLock()
	config := a.config
	a.mu.RUnlock()
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return "", errors.New("no client certificate: only the hub apiserver's front proxy may call the resource proxy")
	}
	leaf := r.TLS.PeerCertificates[0]
	intermediates := x509.NewCertPool()
	for _, c := range r.TLS.PeerCertificates[1:] {
		intermediates.AddCert(c)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: config.roots, Intermediates: intermediates,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		return "", fmt.Errorf("the client certificate is not the front proxy's: %w", err)
	}
	if len(config.allowedNames) > 0 && !slices.Contains(config.allowedNames, leaf.Subject.CommonName) {
		return "", fmt.Errorf("the client certificate's common name %q is not among the front proxy's allowed names", leaf.Subject.CommonName)
	}
	var user string
	for _, h := range config.usernameHeader {
		if user = r.Header.Get(h); user != "" {
			break
		}
	}
	if user == "" {
		return "", errors.New("the front proxy named no user")
	}
	var groups []string
	for _, h := range config.groupHeaders {
		groups = append(groups, r.Header.Values(h)...)
	}
	if len(groups) > 0 {
		user += " (groups " + strings.Join(groups, ",") + ")"
	}
	return user, nil
}
