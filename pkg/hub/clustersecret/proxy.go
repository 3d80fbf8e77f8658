package clustersecret

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/resourceproxy"
)

// tokenRetry is how soon a cluster Secret written without the client token asks for it
// again.
const tokenRetry = 10 * time.Second

// proxyTokenTTL is how long a read of the client token serves: a rotated token reaches
// the Secrets within it, and 1,000 reconciles at a start cost one read.
const proxyTokenTTL = time.Minute

// proxyToken reads the token of the resource proxy's client token Secret, by name.
type proxyToken struct {
	secrets typedcorev1.SecretInterface
	name    string

	mu     sync.Mutex
	token  string
	readAt time.Time
}

// get returns the token, read at most proxyTokenTTL ago.
func (t *proxyToken) get(ctx context.Context) (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.token != "" && time.Since(t.readAt) < proxyTokenTTL {
		return t.token, nil
	}
	secret, err := t.secrets.Get(ctx, t.name, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("read the resource proxy's client token Secret %s: %w", t.name, err)
	}
	token := string(secret.Data[corev1.ServiceAccountTokenKey])
	if token == "" {
		return "", fmt.Errorf("the resource proxy's client token Secret %s holds no token yet", t.name)
	}
	t.token, t.readAt = token, time.Now()
	return token, nil
}

// clusterConfig is the part of an Argo CD cluster Secret's config that this addon sets
// (Argo CD's ClusterConfig).
type clusterConfig struct {
	BearerToken     string          `json:"bearerToken"`
	TLSClientConfig tlsClientConfig `json:"tlsClientConfig"`
}

type tlsClientConfig struct {
	CAData []byte `json:"caData,omitempty"`
}

// withProxyAccess makes a cluster Secret reach cluster through the resource proxy: its
// server is the cluster's path of the aggregated API on the hub apiserver, and its config
// the client token and the hub's CA.
func withProxyAccess(secret *corev1ac.SecretApplyConfiguration, cluster string, access ProxyAccess, token string) error {
	config, err := json.Marshal(clusterConfig{BearerToken: token, TLSClientConfig: tlsClientConfig{CAData: access.CAData}})
	if err != nil {
		return err
	}
	secret.WithData(map[string][]byte{
		"server": []byte(strings.TrimSuffix(access.HubServer, "/") + resourceproxy.ClientPath(cluster)),
		"config": config,
	})
	return nil
}
