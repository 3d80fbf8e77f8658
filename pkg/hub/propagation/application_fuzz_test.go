package propagation

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzTruncate checks the cut of the Event notes about a hub Application: the note fits,
// a short one is kept as it is, a long one is a prefix cut at a character boundary and
// ending in "...", valid UTF-8 stays valid, and cutting again changes nothing.
func FuzzTruncate(f *testing.F) {
	f.Add("short", 10)
	f.Add("a longer message", 10)
	f.Add("ééééé", 8)
	f.Add(strings.Repeat("日本語", 400), maxEventNoteLength)
	f.Add("", 0)
	f.Fuzz(func(t *testing.T, s string, n int) {
		n %= len(s) + 8 // around len(s), where the cases are
		if n < 0 {
			n = -n
		}
		got := truncate(s, n)
		if len(got) > n {
			t.Fatalf("truncate(%q, %d) = %q: %d bytes", s, n, got, len(got))
		}
		if again := truncate(got, n); again != got {
			t.Fatalf("not idempotent: %q, then %q", got, again)
		}
		if utf8.ValidString(s) && !utf8.ValidString(got) {
			t.Fatalf("truncate(%q, %d) = %q is not valid UTF-8", s, n, got)
		}
		if len(s) <= n {
			if got != s {
				t.Fatalf("truncate(%q, %d) = %q, want it unchanged", s, n, got)
			}
			return
		}
		// The start of s is a boundary too, even when s starts with a continuation byte.
		kept, ok := strings.CutSuffix(got, "...")
		if n >= len("...") && (!ok || !strings.HasPrefix(s, kept) || len(kept) > 0 && len(kept) < len(s) && !utf8.RuneStart(s[len(kept)])) {
			t.Fatalf("truncate(%q, %d) = %q is not a prefix cut at a character boundary and \"...\"", s, n, got)
		}
	})
}
