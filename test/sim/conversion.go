package sim

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	addonv1beta1 "open-cluster-management.io/api/addon/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// convertedCRDs are the addon CRDs that a real hub converts with a webhook: their storage
// version is v1alpha1, and v1beta1 has fields v1alpha1 spells differently (a
// ManagedClusterAddOn's status.registrations, a ClusterManagementAddOn's
// spec.defaultConfigs). OCM's cluster-manager installs them with
// `conversion: {strategy: Webhook}` served by its cluster-manager-addon-webhook. Without
// it, the apiserver converts by changing apiVersion only, and prunes what v1alpha1 does not
// know: the addon framework's registrations read back as [{}], never as it wrote them, and
// its registration controller patches them again at every reconcile.
var convertedCRDs = []string{
	"managedclusteraddons." + addonv1beta1.GroupName,
	"clustermanagementaddons." + addonv1beta1.GroupName,
}

// conversionWebhook plays the cluster-manager-addon-webhook: it converts the addon APIs
// between v1alpha1 and v1beta1 with the conversions of the API module the repository
// builds with.
type conversionWebhook struct {
	scheme   *runtime.Scheme
	decoder  runtime.Decoder
	server   *http.Server
	url      string
	caBundle []byte
	// converted counts the objects converted, by kind.
	converted map[string]*atomic.Int64
}

// startConversionWebhook serves /convert over TLS on a free loopback port.
func startConversionWebhook() (*conversionWebhook, error) {
	scheme := runtime.NewScheme()
	if err := errors.Join(addonv1alpha1.Install(scheme), addonv1beta1.Install(scheme)); err != nil {
		return nil, err
	}
	cert, certPEM, err := selfSignedCert()
	if err != nil {
		return nil, err
	}
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	if err != nil {
		return nil, err
	}
	w := &conversionWebhook{
		scheme: scheme, decoder: serializer.NewCodecFactory(scheme).UniversalDeserializer(),
		url: "https://" + l.Addr().String() + "/convert", caBundle: certPEM,
		converted: map[string]*atomic.Int64{"ManagedClusterAddOn": {}, "ClusterManagementAddOn": {}},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/convert", w.serve)
	w.server = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = w.server.Serve(l) }()
	return w, nil
}

func (w *conversionWebhook) stop() { _ = w.server.Close() }

func (w *conversionWebhook) serve(rw http.ResponseWriter, req *http.Request) {
	review := &apiextensionsv1.ConversionReview{}
	if err := json.NewDecoder(req.Body).Decode(review); err != nil || review.Request == nil {
		http.Error(rw, fmt.Sprintf("not a ConversionReview: %v", err), http.StatusBadRequest)
		return
	}
	resp := &apiextensionsv1.ConversionResponse{UID: review.Request.UID, Result: metav1.Status{Status: metav1.StatusSuccess}}
	for _, raw := range review.Request.Objects {
		out, err := w.convert(raw.Raw, review.Request.DesiredAPIVersion)
		if err != nil {
			resp.ConvertedObjects = nil
			resp.Result = metav1.Status{Status: metav1.StatusFailure, Message: err.Error()}
			break
		}
		resp.ConvertedObjects = append(resp.ConvertedObjects, runtime.RawExtension{Raw: out})
	}
	review.Request, review.Response = nil, resp
	rw.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(rw).Encode(review)
}

func (w *conversionWebhook) convert(raw []byte, desiredAPIVersion string) ([]byte, error) {
	in, gvk, err := w.decoder.Decode(raw, nil, nil)
	if err != nil {
		return nil, err
	}
	gv, err := schema.ParseGroupVersion(desiredAPIVersion)
	if err != nil {
		return nil, err
	}
	out, err := w.scheme.New(gv.WithKind(gvk.Kind))
	if err != nil {
		return nil, err
	}
	if err := w.scheme.Convert(in, out, nil); err != nil {
		return nil, fmt.Errorf("convert %s to %s: %w", gvk, desiredAPIVersion, err)
	}
	out.GetObjectKind().SetGroupVersionKind(gv.WithKind(gvk.Kind))
	if n := w.converted[gvk.Kind]; n != nil {
		n.Add(1)
	}
	return json.Marshal(out)
}

// install points the addon CRDs' conversion at the webhook, and waits until the apiserver
// converts through it.
func (w *conversionWebhook) install(ctx context.Context, c client.Client) error {
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"conversion": apiextensionsv1.CustomResourceConversion{
		Strategy: apiextensionsv1.WebhookConverter,
		Webhook: &apiextensionsv1.WebhookConversion{
			ClientConfig:             &apiextensionsv1.WebhookClientConfig{URL: &w.url, CABundle: w.caBundle},
			ConversionReviewVersions: []string{"v1"},
		},
	}}})
	if err != nil {
		return err
	}
	for _, name := range convertedCRDs {
		crd := &unstructured.Unstructured{}
		crd.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
		crd.SetName(name)
		if err := c.Patch(ctx, crd, client.RawPatch(types.MergePatchType, patch)); err != nil {
			return fmt.Errorf("set the conversion webhook of %s: %w", name, err)
		}
	}
	// The apiserver takes up a CRD change asynchronously: probe with objects of both kinds,
	// converted to the storage version when written, until both went through the webhook.
	probes := []client.Object{
		&addonv1beta1.ClusterManagementAddOn{ObjectMeta: metav1.ObjectMeta{Name: "sim-conversion-probe"},
			Spec: addonv1beta1.ClusterManagementAddOnSpec{InstallStrategy: addonv1beta1.InstallStrategy{Type: addonv1beta1.AddonInstallStrategyManual}}},
		&addonv1beta1.ManagedClusterAddOn{ObjectMeta: metav1.ObjectMeta{Name: "sim-conversion-probe", Namespace: ManagerNamespace}},
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for w.converted["ManagedClusterAddOn"].Load() == 0 || w.converted["ClusterManagementAddOn"].Load() == 0 {
		for _, probe := range probes {
			if err := c.Create(ctx, probe); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("probe the addon conversion webhook: %w", err)
			}
			if err := c.Delete(ctx, probe); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("probe the addon conversion webhook: %w", err)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the apiserver does not call the addon conversion webhook: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}

// selfSignedCert returns a certificate for 127.0.0.1 that is its own CA, and its PEM.
func selfSignedCert() (tls.Certificate, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	template := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "sim-addon-conversion-webhook"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(7 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, template, template, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}
