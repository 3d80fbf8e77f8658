// Package sim is a hub at fleet scale without the fleet: one real kube-apiserver and etcd
// (test/testenv) holding N simulated managed clusters, the real addon-manager as a
// process, and in-process stand-ins for what runs on each managed cluster. Like a real hub,
// it converts the addon APIs between v1alpha1 (stored) and v1beta1 with a webhook.
//
// A simulated cluster is what the hub sees of a cluster: its namespace, ManagedCluster,
// ManagedClusterAddOn (Available, as the klusterlet's lease check would set it) and a
// PlacementDecision that selects it. Two stand-ins play the managed clusters' side:
//   - The work agent plays OCM's work agent: it writes each ManifestWork's finalizer and
//     its status step by step (StandInOptions.Rollout): applied and available at its
//     generation, then the status feedback of its Argo CD Application in each state
//     Argo CD takes it through. FleetRollout is what the local fleet's real work agent
//     wrote while Argo CD rolled a guestbook app out, AtOnce a single write of the
//     synced and healthy state.
//   - The agents play the addon's agent on every cluster: each publishes the report of
//     its cluster's Applications, in the state their works' feedback shows, to the
//     ManagedClusterAddOn status, and every app with its resources
//     (StandInOptions.ResourcesPerApp) and resource tree to the cluster's
//     ApplicationStatusSlices, with the project's own encoder (pkg/clusterreport) and
//     field manager, server-side, holding a rollout's passing states back, as pkg/spoke
//     does.
//
// Each writes through its own request counter (StandIns.WorkAgent, StandIns.Agents), so
// that the bench tells their writes from the manager's.
//
// No kube-controller-manager runs: the ResourceQuota that the manager keeps in each
// cluster namespace on the agents' status slices gets no status, so the apiserver counts
// nothing against it (docs/operations.md).
//
// The benchmarks (test/bench) and the fault suite (test/fault) run on it. The e2e suite
// on the local fleet (test/e2e) is where the real work agent, Argo CD and agent run.
package sim
