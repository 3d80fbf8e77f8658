// Package hubevents gives the hub's controllers their Event recorders. Each cuts an
// Event's note to what the events API accepts, so that no Event is refused for its
// length, whatever message (an agent's error, a quoted condition) it carries.
package hubevents

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/clusterreport"
)

// MaxNoteBytes bounds the note of an Event: the events API refuses one over 1 KiB.
const MaxNoteBytes = 1000

// Recorder returns the manager's recorder of Events from the controller name, cutting
// each note to MaxNoteBytes (clusterreport.TruncateMessage).
func Recorder(mgr manager.Manager, name string) events.EventRecorder {
	return boundedNotes{mgr.GetEventRecorder(name)}
}

type boundedNotes struct {
	events.EventRecorder
}

func (b boundedNotes) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	b.EventRecorder.Eventf(regarding, related, eventtype, reason, action, "%s",
		clusterreport.TruncateMessage(fmt.Sprintf(note, args...), MaxNoteBytes))
}
