package sim

import (
	"context"
	"encoding/json"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	addonv1beta1 "open-cluster-management.io/api/addon/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestAddonConversion checks that the simulated hub converts the addon APIs as a real hub
// does: the registrations the addon framework writes in v1beta1 read back as written, and
// as their v1alpha1 spelling in the storage version.
func TestAddonConversion(t *testing.T) {
	if testing.Short() {
		t.Skip("envtest: skipped in -short mode")
	}
	ctx := context.Background()
	hub, err := StartHub(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hub.Stop() })
	cluster := ClusterName(0)
	if err := hub.CreateCluster(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKey{Namespace: cluster, Name: AddonName}
	registrations := []addonv1beta1.RegistrationConfig{{
		Type: addonv1beta1.KubeClient,
		KubeClient: &addonv1beta1.KubeClientConfig{Subject: addonv1beta1.KubeClientSubject{BaseSubject: addonv1beta1.BaseSubject{
			User:   "system:open-cluster-management:cluster:" + cluster + ":addon:" + AddonName + ":agent:agent",
			Groups: []string{"system:open-cluster-management:cluster:" + cluster + ":addon:" + AddonName},
		}}},
	}}
	// The addon framework's registration controller writes them with a JSON merge patch.
	body, err := json.Marshal(map[string]any{"status": map[string]any{"registrations": registrations}})
	if err != nil {
		t.Fatal(err)
	}
	patch := client.RawPatch(types.MergePatchType, body)
	addon := &addonv1beta1.ManagedClusterAddOn{}
	addon.Namespace, addon.Name = key.Namespace, key.Name
	if err := hub.Client.Status().Patch(ctx, addon, patch); err != nil {
		t.Fatal(err)
	}
	if err := hub.Client.Get(ctx, key, addon); err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(addon.Status.Registrations, registrations) {
		t.Errorf("v1beta1 registrations read back as %+v, want %+v", addon.Status.Registrations, registrations)
	}
	stored := &addonv1alpha1.ManagedClusterAddOn{}
	scheme := runtime.NewScheme()
	if err := addonv1alpha1.Install(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(hub.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, key, stored); err != nil {
		t.Fatal(err)
	}
	//nolint:staticcheck // SA1019: the v1alpha1 field is the one the conversion must fill
	if len(stored.Status.Registrations) != 1 || stored.Status.Registrations[0].SignerName != certificatesv1.KubeAPIServerClientSignerName {
		t.Errorf("v1alpha1 registrations are %+v, want one of signer %s", stored.Status.Registrations, certificatesv1.KubeAPIServerClientSignerName)
	}
}
