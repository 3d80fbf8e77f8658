// Package propagation turns pulled hub Argo CD Applications into ManifestWorks for their
// managed clusters, and keeps exactly one work per pulled Application, or none.
//
// An Application is pulled when its pull label parses as true; its cluster annotation
// names the target ManagedCluster. It propagates when the ManagedCluster exists, the
// cluster has the addon's ManagedClusterAddOn, and, with the tenant gate on, a
// PlacementDecision in the Application's namespace selects the cluster. Otherwise it
// gets a Warning Event and the OCMPropagationError condition, whose message starts with
// the reason, and its works are deleted. Input that cannot render (a malformed pull
// label, a bad annotation, a payload too large) is reported the same way, but the last
// good work is kept: a typo must not prune a cluster.
//
// Deletion. The controller holds each propagated Application with the finalizer
// argoapp.FinalizerManifestWorkCleanup. When the Application is deleted, its works are
// deleted, and the finalizer is removed once they are gone: the work agent deletes a
// work only after it has deleted the Application on the managed cluster, and that
// Application, when it carries resources-finalizer.argocd.argoproj.io, is deleted only
// after the spoke Argo CD has pruned its resources. So the hub Application disappears
// when the managed cluster is clean, as it would in the push model. At that point the
// Argo CD finalizers of a skipped (pulled) Application are removed as well: the hub
// Argo CD skips it and would never remove them. Removing the label, moving the
// Application to another cluster, disabling the addon on the cluster or deleting the
// cluster deletes the work the same way, with the same consequence on the managed
// cluster: the workloads are pruned if, and only if, the Application carries the
// resources finalizer.
//
// Manual sync and refresh. The hub Application's .operation and refresh annotation are
// copied to the work. Once the work agent has applied the work that carries them (its
// Applied condition observed the work's generation), they are removed from the hub
// Application, which lets the next request through.
//
// Pause. The annotation AnnotationPausePropagation="true" on the ClusterManagementAddOn
// stops every create, update and delete of works, and holds deleted Applications until
// it is lifted. Each ManagedClusterAddOn of the addon carries the PropagationPaused
// condition.
package propagation
