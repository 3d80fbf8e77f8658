package appsetreport

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"

	appsv1alpha1 "github.com/ocm-gitops/argocd-pull-addon/pkg/apis/apps/v1alpha1"
)

// TestNotOwnWrite: the watch event of the report this controller has just written is
// dropped; one of another version (another writer's change, or a write of its own that
// a later one replaced), of another report, and a deletion pass; a forgotten report's
// events pass.
func TestNotOwnWrite(t *testing.T) {
	r := &reconciler{opts: Options{Settings: Settings{WriteInterval: -1}}, pace: map[types.NamespacedName]writePace{}, written: map[types.NamespacedName]string{}}
	key := types.NamespacedName{Namespace: "argocd", Name: "guestbook"}
	report := func(name, rv string) *appsv1alpha1.MulticlusterApplicationSetReport {
		return &appsv1alpha1.MulticlusterApplicationSetReport{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: name, ResourceVersion: rv}}
	}
	p := r.notOwnWrite()
	update := func(name, rv string) bool {
		return p.Update(event.UpdateEvent{ObjectOld: report(name, "1"), ObjectNew: report(name, rv)})
	}

	if !update(key.Name, "7") || !p.Create(event.CreateEvent{Object: report(key.Name, "7")}) {
		t.Fatal("the event of a report never written by this controller is dropped")
	}
	r.wrote(key, 0, "7", false)
	if update(key.Name, "7") {
		t.Error("the update that shows this controller's own write passes")
	}
	if p.Create(event.CreateEvent{Object: report(key.Name, "7")}) {
		t.Error("the creation that is this controller's own write passes")
	}
	if !update(key.Name, "8") {
		t.Error("another writer's change to the report is dropped")
	}
	if !update("other", "7") {
		t.Error("the change of another report, at the same version, is dropped")
	}
	if !p.Delete(event.DeleteEvent{Object: report(key.Name, "7")}) {
		t.Error("the deletion of the report is dropped")
	}
	r.wrote(key, 0, "9", false)
	if !update(key.Name, "7") {
		t.Error("an older write of this controller, replayed, is dropped")
	}
	r.wrote(key, 0, "", true)
	if !update(key.Name, "9") {
		t.Error("the event of a forgotten report is dropped")
	}
}
