package testenv_test

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/ocm-gitops/argocd-pull-addon/test/testenv"
)

// TestWriteLogCountsAWriteAsItIsSent checks that a write is counted before its request
// returns (a test that saw its effect must find it counted), its success only once it
// returned, and a create of a generated name under the name the apiserver gave.
func TestWriteLogCountsAWriteAsItIsSent(t *testing.T) {
	ctx := context.Background()
	log := &testenv.WriteLog{}
	refuse := errors.New("refused")
	var countedWhileSent, succeededWhileSent int
	server := interceptor.NewClient(fake.NewClientBuilder().Build(), interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			countedWhileSent, succeededWhileSent = log.Count("patch", "ConfigMap", obj.GetNamespace(), obj.GetName()), log.Succeeded("patch ")
			if obj.GetName() == "refused" {
				return refuse
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
	})
	c := log.Wrap(server)

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"}}
	if err := c.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	if err := c.Patch(ctx, cm, client.RawPatch("application/merge-patch+json", []byte(`{"data":{"a":"b"}}`))); err != nil {
		t.Fatal(err)
	}
	if countedWhileSent != 1 || succeededWhileSent != 0 {
		t.Errorf("while the patch was sent: counted %d, succeeded %d; want 1 and 0", countedWhileSent, succeededWhileSent)
	}
	if got := log.Succeeded("patch "); got != 1 {
		t.Errorf("succeeded patches: %d, want 1", got)
	}

	refused := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "refused"}}
	if err := c.Patch(ctx, refused, client.RawPatch("application/merge-patch+json", []byte(`{}`))); !errors.Is(err, refuse) {
		t.Fatalf("the refused patch returned %v", err)
	}
	if got, succeeded := log.Count("patch", "ConfigMap", "ns", "refused"), log.Succeeded("patch "); got != 1 || succeeded != 1 {
		t.Errorf("the refused patch: counted %d, succeeded patches %d; want 1 and 1", got, succeeded)
	}

	generated := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", GenerateName: "web-"}}
	if err := c.Create(ctx, generated); err != nil {
		t.Fatal(err)
	}
	if generated.Name == "" || log.Count("create", "ConfigMap", "ns", generated.Name) != 1 || log.Matching("create ConfigMap ns/") != 2 {
		t.Errorf("the create of %q: counted %d of %d creates", generated.Name, log.Count("create", "ConfigMap", "ns", generated.Name), log.Matching("create ConfigMap ns/"))
	}
}
