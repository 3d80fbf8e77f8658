package hubcache

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	statusv1alpha1 "github.com/ocm-gitops/argocd-pull-addon/pkg/apis/argocdpull/v1alpha1"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
)

// unpacked is what UnpackResources should return for resources: each with its health
// (none is an empty one), without images.
func unpacked(resources []statusv1alpha1.ResourceStatus) []argoapp.ResourceStatus {
	out := make([]argoapp.ResourceStatus, 0, len(resources))
	for _, r := range resources {
		resource := argoapp.ResourceStatus{Group: r.Group, Version: r.Version, Kind: r.Kind, Namespace: r.Namespace, Name: r.Name, Status: r.Status}
		if r.Health != nil {
			resource.Health = argoapp.HealthStatus{Status: r.Health.Status, Message: r.Health.Message}
		}
		out = append(out, resource)
	}
	return out
}

// TestPackResources: resources come back from their packed form as they went in, in
// their order, the repeated strings held once; a table past 127 strings (indexes of two
// bytes) and strings past 127 bytes (lengths of two bytes) included.
func TestPackResources(t *testing.T) {
	resources := []statusv1alpha1.ResourceStatus{
		{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "web", Name: "web", Status: "Synced", Health: &statusv1alpha1.Health{Status: "Healthy"}, Images: []string{"web:1"}},
		{Version: "v1", Kind: "Service", Namespace: "web", Name: "web", Status: "Synced", Health: &statusv1alpha1.Health{Status: "Healthy"}},
		{Version: "v1", Kind: "Pod", Namespace: "web", Name: "web-1", Status: "OutOfSync", Health: &statusv1alpha1.Health{Status: "Degraded", Message: "Back-off pulling image «web:2»"}},
		{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole", Name: "viewer", Status: "Synced"},
		{Kind: "ConfigMap", Name: strings.Repeat("long-", 40)},
	}
	for i := range 200 {
		resources = append(resources, statusv1alpha1.ResourceStatus{Version: "v1", Kind: "ConfigMap", Namespace: "web", Name: fmt.Sprintf("config-%03d", i), Status: "Synced"})
	}
	packed := PackResources(resources)
	got, ok := UnpackResources(packed)
	if !ok {
		t.Fatal("UnpackResources does not read what PackResources wrote")
	}
	if want := unpacked(resources); !reflect.DeepEqual(got, want) {
		t.Fatalf("unpacked %d resources, want %d:\n%+v\nwant\n%+v", len(got), len(want), got[:5], want[:5])
	}
	if n := strings.Count(packed, "Deployment"); n != 1 {
		t.Errorf("%q held %d times", "Deployment", n)
	}
	if got, ok := UnpackResources(PackResources(nil)); got != nil || !ok {
		t.Errorf("no resources: %v, %v", got, ok)
	}
	// Cut short, or with a byte too many: not read as whole.
	for _, bad := range []string{packed[:len(packed)-1], packed + "x", "\x05", "\x01\x01a\x01\x00\x00\x00\x00\x00\x00\x00\x09"} {
		if _, ok := UnpackResources(bad); ok {
			t.Errorf("UnpackResources(%q...) reads a string PackResources never wrote", bad[:min(len(bad), 20)])
		}
	}
}

// FuzzUnpackResources: any string unpacks without a panic, and resources built from any
// strings come back from their packed form as they went in.
func FuzzUnpackResources(f *testing.F) {
	f.Add(PackResources([]statusv1alpha1.ResourceStatus{{Group: "apps", Version: "v1", Kind: "Deployment", Name: "web", Health: &statusv1alpha1.Health{Status: "Healthy"}}}), "a,b,c,d,e,f,g,h")
	f.Fuzz(func(t *testing.T, packed, fields string) {
		UnpackResources(packed)
		var resources []statusv1alpha1.ResourceStatus
		parts := strings.Split(fields, ",")
		for len(parts) >= 8 {
			p := parts[:8]
			resources = append(resources, statusv1alpha1.ResourceStatus{
				Group: p[0], Version: p[1], Kind: p[2], Namespace: p[3], Name: p[4], Status: p[5],
				Health: &statusv1alpha1.Health{Status: p[6], Message: p[7]},
			})
			parts = parts[8:]
		}
		got, ok := UnpackResources(PackResources(resources))
		if want := unpacked(resources); !ok || (len(want) > 0 && !reflect.DeepEqual(got, want)) || (len(want) == 0 && got != nil) {
			t.Fatalf("unpacked %+v (%v), want %+v", got, ok, want)
		}
	})
}
