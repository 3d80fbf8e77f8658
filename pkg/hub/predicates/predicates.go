// Package predicates holds what several hub controllers' watch predicates share: the
// step from controller-runtime's untyped update event to the two versions of the watched
// type (OnUpdate), and the predicate of a watch for which only whether an object exists
// matters (ExistenceChanged).
package predicates

import (
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// OnUpdate keeps the updates of a T for which changed, given the old and the new
// version, reports true; an update whose two objects are not both a T passes, as one it
// cannot judge. Creations, deletions and generic events pass.
func OnUpdate[T client.Object](changed func(oldObj, newObj T) bool) predicate.Funcs {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			oldObj, okOld := e.ObjectOld.(T)
			newObj, okNew := e.ObjectNew.(T)
			if !okOld || !okNew {
				return true
			}
			return changed(oldObj, newObj)
		},
	}
}

// ExistenceChanged keeps the creations and deletions of an object, and the update that
// starts its deletion.
var ExistenceChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		return (e.ObjectOld.GetDeletionTimestamp() == nil) != (e.ObjectNew.GetDeletionTimestamp() == nil)
	},
}
