// Package propagation turns pulled hub Argo CD Applications into ManifestWorks for their
// managed clusters, and keeps exactly one work per pulled Application, or none.
//
// Which Applications propagate and what a refused one shows (a Warning Event and the
// OCMPropagationError condition), how deletion waits until the managed cluster is clean,
// how a manual sync and a refresh travel, and the pause switch are described, with their
// reasons, in docs/propagation.md; the work's shape is section 2 of docs/pull-model.md.
//
// controller.go wires the controllers (options, watches); mapping.go, predicates.go and
// indexes.go say what each watch enqueues, what it lets through and what it reads;
// reconcile.go, application.go, works.go, conflict.go and ownership.go are the
// reconcile; render.go is the pure render; pause.go the pause switch; sweep.go the
// safety-net sweep.
package propagation
