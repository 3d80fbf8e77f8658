package resourceproxy

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/resourceproxy"
)

// apiServiceGVR is the APIService resource, which the manager reads and patches (its
// caBundle) by name only.
var apiServiceGVR = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}

// Runnable serves the resource proxy until its context ends. It is a controller-runtime
// Runnable that runs on the elected replica only: agents and argocd-server then reach the
// replica that has the tunnels.
type Runnable struct {
	cfg    *rest.Config
	opts   Settings
	server *Server
}

// NewRunnable returns the resource proxy's Runnable.
func NewRunnable(cfg *rest.Config, opts Settings) *Runnable {
	return &Runnable{cfg: cfg, opts: opts, server: NewServer()}
}

// Server is the Runnable's Server, through which the manager asks the agents itself.
func (s *Runnable) Server() *Server { return s.server }

// NeedLeaderElection says the proxy runs on the elected replica only.
func (*Runnable) NeedLeaderElection() bool { return true }

// podNamespaceFile holds the namespace of the Pod the manager runs in.
const podNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// retryAfter is how long the manager waits before it tries again to serve the resource
// proxy, after it could not (a hub without an aggregation layer, an APIService missing).
const retryAfter = 30 * time.Second

// Start serves until ctx ends. What keeps it from serving is logged and tried again:
// the rest of the manager runs on.
func (s *Runnable) Start(ctx context.Context) error {
	logger := log.FromContext(ctx).WithName("resource-proxy")
	for {
		err := s.serve(ctx)
		if ctx.Err() != nil {
			return nil
		}
		logger.Error(err, "not serving the resource proxy; trying again", "after", retryAfter)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(retryAfter):
		}
	}
}

// serve serves until ctx ends, or fails.
func (s *Runnable) serve(ctx context.Context) error {
	logger := log.FromContext(ctx).WithName("resource-proxy")
	kube, err := kubernetes.NewForConfig(s.cfg)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(s.cfg)
	if err != nil {
		return err
	}
	auth, err := newFrontProxyAuth(ctx, kube)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go auth.refresh(ctx, kube, func(err error) { logger.Error(err, "reading the front proxy's configuration again") })
	s.server.setAuth(auth)
	cert, caPEM, err := newServingCertificate(s.opts)
	if err != nil {
		return err
	}
	server := &http.Server{
		Addr:              s.opts.Addr,
		Handler:           s.server,
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		TLSConfig: &tls.Config{
			MinVersion:   tls.VersionTLS12,
			Certificates: []tls.Certificate{cert},
			// Verified in the handler, against the CA the hub publishes now.
			ClientAuth: tls.RequestClientCert,
		},
	}
	listener, err := net.Listen("tcp", s.opts.Addr)
	if err != nil {
		return err
	}
	errs := make(chan error, 1)
	go func() { errs <- server.ServeTLS(listener, "", "") }()
	// The hub apiserver trusts this replica's certificate once the APIService says so.
	if err := ensureAPIServiceCABundle(ctx, dyn, caPEM); err != nil {
		_ = server.Close()
		return err
	}
	logger.Info("serving the resource proxy", "addr", s.opts.Addr, "apiService", resourceproxy.APIServiceName)
	select {
	case err := <-errs:
		return err
	case <-ctx.Done():
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = server.Shutdown(shutdown)
		return nil
	}
}

// newServingCertificate makes a self-signed serving certificate for the Service's DNS
// names, and returns it with the PEM that the APIService must trust. Each elected replica
// makes its own, and puts it in the APIService: no Secret holds a key.
func newServingCertificate(opts Settings) (tls.Certificate, []byte, error) {
	if opts.Namespace == "" {
		ns, err := os.ReadFile(podNamespaceFile)
		if err != nil {
			return tls.Certificate{}, nil, fmt.Errorf("the manager's namespace is not set (--resource-proxy-namespace), and not that of a Pod: %w", err)
		}
		opts.Namespace = strings.TrimSpace(string(ns))
	}
	host := opts.Service + "." + opts.Namespace + ".svc"
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey(host, nil, []string{opts.Service, opts.Service + "." + opts.Namespace, "localhost"})
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("make a serving certificate: %w", err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	return cert, certPEM, err
}

// ensureAPIServiceCABundle sets the APIService's caBundle to caPEM, unless it holds it.
func ensureAPIServiceCABundle(ctx context.Context, dyn dynamic.Interface, caPEM []byte) error {
	apiServices := dyn.Resource(apiServiceGVR)
	current, err := apiServices.Get(ctx, resourceproxy.APIServiceName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get APIService %s (the chart makes it): %w", resourceproxy.APIServiceName, err)
	}
	want := base64.StdEncoding.EncodeToString(caPEM)
	if bundle, _, _ := unstructured.NestedString(current.Object, "spec", "caBundle"); bundle == want {
		return nil
	}
	patch := []byte(fmt.Sprintf(`{"spec":{"caBundle":%q}}`, want))
	if _, err := apiServices.Patch(ctx, resourceproxy.APIServiceName, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("set the caBundle of APIService %s: %w", resourceproxy.APIServiceName, err)
	}
	return nil
}
