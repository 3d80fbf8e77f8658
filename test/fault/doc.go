// Package fault is the fault suite: the real addon-manager binary on a simulated hub at
// fleet scale (test/sim), under the faults a production hub meets, with the outcome
// checked object by object.
//
//   - TestManagerKilledDuringPropagation: the manager is SIGKILLed ten times while a
//     thousand pulled Applications propagate, and a new process takes the leader Lease
//     over each time. Not one ManifestWork may be lost, duplicated, orphaned or stale,
//     not one finalizer or mirrored status missing.
//   - TestConflictStorm: another writer updates the same hub Applications as fast as it
//     can (labels, annotations, its own status field, with optimistic locking) while the
//     clusters' agents keep changing what they report. No status and no foreign field
//     may be lost, and the manager must go quiet once the storm is over.
//
// The tests run in `make test-integration`; they skip in -short mode (`make test-unit`). FAULT_DIR=<dir> keeps
// each test's manager log and kubeconfigs in <dir>/<test name>.
package fault
