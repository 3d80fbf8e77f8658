// Package sim is a hub at fleet scale without the fleet: one real kube-apiserver and etcd
// (test/testenv) holding N simulated managed clusters, the real addon-manager as a
// process, and in-process stand-ins for what runs on each managed cluster. Like a real hub,
// it converts the addon APIs between v1alpha1 (stored) and v1beta1 with a webhook.
//
// A simulated cluster is what the hub sees of a cluster: its namespace, ManagedCluster,
// ManagedClusterAddOn (Available, as the klusterlet's lease check would set it) and a
// PlacementDecision that selects it. Two stand-ins play the managed clusters' side:
//   - WorkAgent plays OCM's work agent: it marks every ManifestWork applied at its
//     generation and writes the status feedback of its Argo CD Application, as the
//     real work agent does once Argo CD has synced it.
//   - Agents plays the addon's agent on every cluster: it publishes the report of each
//     cluster's Applications to the ManagedClusterAddOn status, and every app with its
//     resources (StandInOptions.ResourcesPerApp) and resource tree to the cluster's
//     ApplicationStatusSlices, with the project's own encoder (pkg/clusterreport) and
//     field manager, server-side, as pkg/spoke does.
//
// No kube-controller-manager runs: the ResourceQuota that the manager keeps in each
// cluster namespace on the agents' status slices gets no status, so the apiserver counts
// nothing against it (docs/operations.md).
//
// The benchmarks (test/bench) and the fault suite (test/fault) run on it. The e2e suite
// on the local fleet (test/e2e) is where the real work agent, Argo CD and agent run.
package sim
