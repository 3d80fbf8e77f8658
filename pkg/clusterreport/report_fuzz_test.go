package clusterreport

import (
	"strings"
	"testing"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/util/validation"
)

// FuzzTruncateMessage checks the cut that every bounded string of the report goes
// through: the result fits, keeps a short string as it is, is otherwise the longest
// prefix cut at a character boundary followed by Ellipsis, stays valid UTF-8, and cutting
// it again changes nothing.
func FuzzTruncateMessage(f *testing.F) {
	for _, seed := range []struct {
		s        string
		maxBytes int
	}{
		{"", 0},
		{"short", 10},
		{"exactly10!", 10},
		{"a longer message", 10},
		{"ééééé", 8},
		{"abcdef", 2},
		{"abcdef", -1},
		{strings.Repeat("日本語", 100), MaxMessageBytes},
		{"🙂🙂🙂", 5},
		{"\xff\xfe invalid", 4},
		{strings.Repeat("x", 253), MaxNameBytes},
		{strings.Repeat("x", 254), MaxNameBytes},
	} {
		f.Add(seed.s, seed.maxBytes)
	}
	f.Fuzz(func(t *testing.T, s string, maxBytes int) {
		maxBytes %= len(s) + 8 // around len(s), where the cases are
		got := TruncateMessage(s, maxBytes)
		if len(got) > max(maxBytes, 0) {
			t.Fatalf("TruncateMessage(%q, %d) = %q: %d bytes", s, maxBytes, got, len(got))
		}
		if again := TruncateMessage(got, maxBytes); again != got {
			t.Fatalf("not idempotent: %q, then %q", got, again)
		}
		if utf8.ValidString(s) && !utf8.ValidString(got) {
			t.Fatalf("TruncateMessage(%q, %d) = %q is not valid UTF-8", s, maxBytes, got)
		}
		switch {
		case len(s) <= maxBytes:
			if got != s {
				t.Fatalf("TruncateMessage(%q, %d) = %q, want it unchanged", s, maxBytes, got)
			}
		case maxBytes < len(Ellipsis):
			if got != Ellipsis[:max(maxBytes, 0)] {
				t.Fatalf("TruncateMessage(%q, %d) = %q, want dots only", s, maxBytes, got)
			}
		default:
			kept, ok := strings.CutSuffix(got, Ellipsis)
			if !ok || !strings.HasPrefix(s, kept) {
				t.Fatalf("TruncateMessage(%q, %d) = %q is not a prefix and %q", s, maxBytes, got, Ellipsis)
			}
			if len(kept) < len(s) && len(kept) > 0 && !utf8.RuneStart(s[len(kept)]) {
				t.Fatalf("TruncateMessage(%q, %d) = %q cuts inside a character", s, maxBytes, got)
			}
			// The longest such prefix: no character boundary is left between the cut and
			// the room.
			for i := len(kept) + 1; i <= maxBytes-len(Ellipsis); i++ {
				if utf8.RuneStart(s[i]) {
					t.Fatalf("TruncateMessage(%q, %d) = %q, but %q fits", s, maxBytes, got, s[:i]+Ellipsis)
				}
			}
		}
	})
}

// FuzzAppConditionType checks the condition type of an app on pairs of apps: each type
// is one the API accepts and this package recognises, keeps "<namespace>.<name>" when it
// fits, is stable, and two apps never share one (a namespace has no dots, so the key
// separates namespace and name).
func FuzzAppConditionType(f *testing.F) {
	name253 := strings.Repeat("a", 120) + "." + strings.Repeat("b", 132)
	for _, seed := range [][4]string{
		{"argocd", "guestbook", "argocd", "guestbook-2"},
		{"argocd", "guestbook.v2", "argocd", "guestbook"},
		{strings.Repeat("n", 63), name253, strings.Repeat("n", 63), name253[:252] + "c"},
		{strings.Repeat("n", 63), strings.Repeat("b", 240) + "-one", strings.Repeat("n", 63), strings.Repeat("b", 240) + "-two"},
		{"ns", "-bad-", "ns", "_bad_"},
		{"NS", "UPPER_ok", "ns", "upper_ok"},
		{"", "", "", "x"},
		{"argocd", "日本語", "argocd", "日本"},
		{"a", "b/c", "a", "b_c"},
		{"a", "b", "a", "b."},
	} {
		f.Add(seed[0], seed[1], seed[2], seed[3])
	}
	f.Fuzz(func(t *testing.T, namespace1, name1, namespace2, name2 string) {
		type1 := AppConditionType(namespace1, name1)
		checkAppConditionType(t, namespace1, name1, type1)
		type2 := AppConditionType(namespace2, name2)
		checkAppConditionType(t, namespace2, name2, type2)
		if type1 != AppConditionType(namespace1, name1) {
			t.Fatalf("AppConditionType(%q, %q) is not stable", namespace1, name1)
		}
		if strings.Contains(namespace1, ".") || strings.Contains(namespace2, ".") {
			return // not a namespace: the key does not separate namespace and name
		}
		if (namespace1 != namespace2 || name1 != name2) && type1 == type2 {
			t.Fatalf("%q/%q and %q/%q share the condition type %q", namespace1, name1, namespace2, name2, type1)
		}
	})
}

// checkAppConditionType checks the condition type of one app.
func checkAppConditionType(t *testing.T, namespace, name, got string) {
	t.Helper()
	if len(got) > MaxConditionTypeLength || !apiTypePattern.MatchString(got) {
		t.Fatalf("AppConditionType(%q, %q) = %q (%d bytes) is not a valid condition type", namespace, name, got, len(got))
	}
	if !IsAppCondition(got) || !IsAgentCondition(got) || IsDiagnostic(got) || got == ConditionSummary {
		t.Fatalf("AppConditionType(%q, %q) = %q is not recognised as an app condition", namespace, name, got)
	}
	key := namespace + "." + name
	fits := len(AppConditionPrefix)+len(key) <= MaxConditionTypeLength
	if fits && len(validation.IsDNS1123Label(namespace)) == 0 && len(validation.IsDNS1123Subdomain(name)) == 0 {
		if got != AppConditionPrefix+key {
			t.Fatalf("AppConditionType(%q, %q) = %q, want the unshortened %q", namespace, name, got, AppConditionPrefix+key)
		}
	}
}
