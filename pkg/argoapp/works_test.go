package argoapp

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
)

const testUID = "3f2a9c1e-7b4d-4e8a-9c1f-0a1b2c3d4e5f"

func TestManifestWorkName(t *testing.T) {
	long := func(prefix string) string { return prefix + strings.Repeat("a", 253-len(prefix)) }
	tests := []struct {
		name    string
		appName string
		uid     types.UID
		want    string // exact name, when the test pins one
	}{
		{name: "short name", appName: "guestbook", uid: testUID, want: "guestbook-3f2a9"},
		{name: "dotted name", appName: "east-1.guestbook", uid: testUID, want: "east-1.guestbook-3f2a9"},
		{name: "short uid", appName: "guestbook", uid: "ab", want: "guestbook-ab"},
		{name: "longest unshortened", appName: strings.Repeat("b", MaxManifestWorkNameLength-6), uid: testUID,
			want: strings.Repeat("b", MaxManifestWorkNameLength-6) + "-3f2a9"},
		{name: "253 characters", appName: long(""), uid: testUID},
		{name: "253 characters, dot at the cut", appName: strings.Repeat("a", 172) + "." + strings.Repeat("b", 80), uid: testUID},
		{name: "253 characters, dashes at the cut", appName: strings.Repeat("a", 170) + "----" + strings.Repeat("b", 79), uid: testUID},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if errs := validation.IsDNS1123Subdomain(tt.appName); len(errs) > 0 {
				t.Fatalf("test app name is invalid: %v", errs)
			}
			got := ManifestWorkName(tt.appName, tt.uid)
			if tt.want != "" && got != tt.want {
				t.Errorf("ManifestWorkName() = %q, want %q", got, tt.want)
			}
			if errs := validation.IsDNS1123Subdomain(got); len(errs) > 0 {
				t.Errorf("%q is not a DNS-1123 subdomain: %v", got, errs)
			}
			if len(got) > MaxManifestWorkNameLength {
				t.Errorf("%d characters, over %d", len(got), MaxManifestWorkNameLength)
			}
			// The AppliedManifestWork on the spoke is "<64-char hub hash>-<work name>".
			if errs := validation.IsDNS1123Subdomain(strings.Repeat("f", 64) + "-" + got); len(errs) > 0 {
				t.Errorf("AppliedManifestWork name for %q would be invalid: %v", got, errs)
			}
			if !strings.HasSuffix(got, "-"+string(tt.uid)[:min(5, len(tt.uid))]) {
				t.Errorf("%q does not end with the UID prefix", got)
			}
			if got != ManifestWorkName(tt.appName, tt.uid) {
				t.Error("not deterministic")
			}
		})
	}

	t.Run("distinct for distinct UIDs", func(t *testing.T) {
		for _, name := range []string{"guestbook", long("")} {
			a := ManifestWorkName(name, "11111-aaaa")
			b := ManifestWorkName(name, "22222-aaaa")
			if a == b {
				t.Errorf("re-created app %q keeps the work name %q", name[:10], a)
			}
		}
	})
	t.Run("distinct for long names sharing a prefix", func(t *testing.T) {
		seen := map[string]string{}
		for _, name := range []string{long(""), long("x"), strings.Repeat("a", 252) + "b", strings.Repeat("a", 200)} {
			got := ManifestWorkName(name, testUID)
			if other, dup := seen[got]; dup {
				t.Errorf("%q and %q share the work name %q", other, name, got)
			}
			seen[got] = name
		}
	})
	t.Run("shortened name keeps a readable prefix", func(t *testing.T) {
		got := ManifestWorkName("shop-"+strings.Repeat("c", 248), testUID)
		if !strings.HasPrefix(got, "shop-ccc") {
			t.Errorf("%q lost the app name prefix", got)
		}
	})
}
