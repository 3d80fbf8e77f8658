// Package observed is what the hub knows of a pulled Application on its managed cluster,
// from the two channels of docs/design.md: the ManifestWork's status feedback (six
// scalars, fast) and the agent's report on the ManagedClusterAddOn (resources, errors,
// revisions of multi-source apps, messages). The ApplicationSet report controller
// (pkg/hub/appsetreport) and the status mirror (pkg/hub/appstatus) both read them
// through this package, so that both show the same thing:
//   - feedback.go reads a work's feedback;
//   - decoder.go decodes the agents' reports once per version, keeping the last good
//     entry of an app, and holds the finder of the agents' status slices
//     (pkg/hub/statusslices, docs/design.md, section 4), which Observe asks first;
//   - absence.go tells why a report has no entry for an app;
//   - staleness.go tells when a cluster's data is stale;
//   - state.go merges the two channels;
//   - changes.go and handler.go tell which apps a change of a report concerns, and
//     enqueue them.
package observed
