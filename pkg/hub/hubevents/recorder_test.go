package hubevents

import (
	"strings"
	"testing"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// notes records the notes of the Events it is given, formatted.
type notes []string

func (n *notes) Eventf(_, _ runtime.Object, _, _, _, note string, args ...any) {
	if len(args) != 1 || note != "%s" {
		*n = append(*n, "unformatted")
		return
	}
	*n = append(*n, args[0].(string))
}

func TestNotesFitTheEventsAPI(t *testing.T) {
	var got notes
	r := boundedNotes{&got}
	quoted := strings.Repeat("deployments.apps \"web\" is forbidden: 日本語 ", 60) // about 3 KiB
	r.Eventf(&corev1.Pod{}, nil, corev1.EventTypeWarning, "SlicesRefused", "MirrorStatus", "The agent says: %s", quoted)
	r.Eventf(&corev1.Pod{}, nil, corev1.EventTypeNormal, "Written", "Write", "wrote %d apps", 3)
	if len(got) != 2 {
		t.Fatalf("recorded %d Events; want 2", len(got))
	}
	if long := got[0]; len(long) > MaxNoteBytes || !strings.HasPrefix(long, "The agent says: deployments.apps") ||
		!strings.HasSuffix(long, "...") || !utf8.ValidString(long) {
		t.Errorf("a long note became %d bytes: %q", len(long), long)
	}
	if got[1] != "wrote 3 apps" {
		t.Errorf("a short note became %q", got[1])
	}
}
