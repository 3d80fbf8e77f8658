package argoapp

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
)

// fuzzAppName turns a fuzz string into a valid Application name (a DNS-1123 subdomain of
// at most 253 characters) that keeps as much of it as it can: the string itself when it
// is one, and otherwise its lowercase letters, digits, '-' and '.', in labels that start
// and end with a letter or digit.
func fuzzAppName(s string) string {
	if len(validation.IsDNS1123Subdomain(s)) == 0 {
		return s
	}
	var labels []string
	for _, label := range strings.Split(strings.ToLower(s), ".") {
		label = strings.Map(func(r rune) rune {
			if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' {
				return r
			}
			return -1
		}, label)
		if label = strings.Trim(label, "-"); label != "" {
			labels = append(labels, label)
		}
	}
	name := strings.Join(labels, ".")
	if len(name) > validation.DNS1123SubdomainMaxLength {
		name = strings.TrimRight(name[:validation.DNS1123SubdomainMaxLength], "-.")
	}
	if name == "" {
		return "a"
	}
	return name
}

// fuzzUID turns a fuzz string into a UID as the apiserver writes them (a lowercase UUID):
// equal strings give equal UIDs, so that the fuzzer can give two apps the same UID.
func fuzzUID(s string) types.UID {
	sum := sha256.Sum256([]byte(s))
	h := hex.EncodeToString(sum[:16])
	return types.UID(h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:])
}

// FuzzManifestWorkName checks the names of the works of pairs of Applications: each is a
// DNS-1123 subdomain of at most MaxManifestWorkNameLength characters, so that the work
// agent's "<64 hex>-<name>" is one too; it is stable, ends with the UID part, is
// "<app name>-<uid part>" when that fits and otherwise starts with a prefix of the app
// name; and two Applications with another name or UID part never share a name.
func FuzzManifestWorkName(f *testing.F) {
	name253 := strings.Repeat("a", 253)
	for _, seed := range [][4]string{
		{"guestbook", "uid-1", "guestbook", "uid-2"},
		{"guestbook", "uid-1", "guestbook-2", "uid-1"},
		{"east-1.guestbook", "uid-1", "east-1", "uid-1"},
		{strings.Repeat("b", MaxManifestWorkNameLength-6), "uid", strings.Repeat("b", MaxManifestWorkNameLength-5), "uid"},
		{name253, "uid", name253[:252] + "b", "uid"},
		{strings.Repeat("a", 172) + "." + strings.Repeat("b", 80), "uid", strings.Repeat("a", 172) + "." + strings.Repeat("c", 80), "uid"},
		{strings.Repeat("a", 170) + "----" + strings.Repeat("b", 79), "uid", strings.Repeat("a", 170) + "-" + strings.Repeat("b", 82), "uid"},
		{"", "", "-", ""},
		{"Guest_Book.日本", "uid", "guestbook", "uid"},
	} {
		f.Add(seed[0], seed[1], seed[2], seed[3])
	}
	f.Fuzz(func(t *testing.T, name1, uidSeed1, name2, uidSeed2 string) {
		app1, uid1 := fuzzAppName(name1), fuzzUID(uidSeed1)
		app2, uid2 := fuzzAppName(name2), fuzzUID(uidSeed2)
		work1 := checkManifestWorkName(t, app1, uid1)
		work2 := checkManifestWorkName(t, app2, uid2)
		distinct := app1 != app2 || uid1[:uidPrefixLength] != uid2[:uidPrefixLength]
		if distinct && work1 == work2 {
			t.Fatalf("%q (uid %s) and %q (uid %s) share the work name %q", app1, uid1, app2, uid2, work1)
		}
	})
}

// checkManifestWorkName checks the work name of one Application and returns it.
func checkManifestWorkName(t *testing.T, appName string, uid types.UID) string {
	t.Helper()
	got := ManifestWorkName(appName, uid)
	if errs := validation.IsDNS1123Subdomain(got); len(errs) > 0 {
		t.Fatalf("ManifestWorkName(%q, %s) = %q is not a DNS-1123 subdomain: %v", appName, uid, got, errs)
	}
	if len(got) > MaxManifestWorkNameLength {
		t.Fatalf("ManifestWorkName(%q, %s) = %q: %d characters, over %d", appName, uid, got, len(got), MaxManifestWorkNameLength)
	}
	if errs := validation.IsDNS1123Subdomain(strings.Repeat("f", 64) + "-" + got); len(errs) > 0 {
		t.Fatalf("the AppliedManifestWork of %q would have an invalid name: %v", got, errs)
	}
	if got != ManifestWorkName(appName, uid) {
		t.Fatalf("ManifestWorkName(%q, %s) is not stable", appName, uid)
	}
	uidPart := string(uid)[:uidPrefixLength]
	readable, ok := strings.CutSuffix(got, "-"+uidPart)
	if !ok {
		t.Fatalf("ManifestWorkName(%q, %s) = %q does not end with the UID part", appName, uid, got)
	}
	if short := appName + "-" + uidPart; len(short) <= MaxManifestWorkNameLength {
		if got != short {
			t.Fatalf("ManifestWorkName(%q, %s) = %q, want the unshortened %q", appName, uid, got, short)
		}
		return got
	}
	// Shortened: "<prefix of the app name>-<8 hex>" before the UID part, or the hash alone.
	prefix := readable[:max(len(readable)-nameHashLength-1, 0)]
	if !strings.HasPrefix(appName, prefix) || len(readable) < nameHashLength {
		t.Fatalf("ManifestWorkName(%q, %s) = %q does not start with a prefix of the app name", appName, uid, got)
	}
	return got
}
