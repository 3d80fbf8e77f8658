package propagation

// This file holds the rule that one Application on a managed cluster has one hub
// Application: two hub Applications of the same name in different namespaces, with the
// same app-namespace annotation, would otherwise yield two works that force-apply one
// spoke Application, each flipping it back on every resync of its work.

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
)

// spokeApplicationKey returns "<cluster>/<namespace>/<name>" of the Application that a
// pulled work applies on its managed cluster, read from the work's manifest
// configuration of that Application (so, without decoding the payload).
func spokeApplicationKey(work *workv1.ManifestWork) (string, bool) {
	for _, config := range work.Spec.ManifestConfigs {
		id := config.ResourceIdentifier
		if id.Group == argoapp.Group && id.Resource == argoapp.ResourceApplications {
			return spokeKey(work.Namespace, id.Namespace, id.Name), true
		}
	}
	return "", false
}

// spokeApplicationKeyOf returns the spokeApplicationKey that a hub Application's work
// would have, from its annotations, or false when it names no cluster.
func spokeApplicationKeyOf(app client.Object) (string, bool) {
	cluster := app.GetAnnotations()[argoapp.AnnotationOCMManagedCluster]
	u, ok := app.(*unstructured.Unstructured)
	if cluster == "" || !ok {
		return "", false
	}
	return spokeKey(cluster, appNamespaceOf(u), app.GetName()), true
}

func spokeKey(cluster, namespace, name string) string {
	return cluster + "/" + namespace + "/" + name
}

// spokeApplicationOwner returns the work of another hub Application that owns the spoke
// Application that desired, the work of app, would apply; nil when there is none, or
// when app owns it.
//
// The oldest work owns the spoke Application (by creation time, then by the key of its
// hub Application), so that two Applications that raced to create their works agree on
// which one keeps it.
func (r *reconciler) spokeApplicationOwner(ctx context.Context, app *unstructured.Unstructured, desired *workv1.ManifestWork) (*workv1.ManifestWork, error) {
	key, ok := spokeApplicationKey(desired)
	if !ok {
		return nil, nil
	}
	// The key names the work's namespace (its cluster), so the works of that namespace
	// hold every work that applies the same spoke Application: a cache index of the
	// works by their key would cost an entry for each work, for a lookup that the
	// namespace index of the cache already narrows to one cluster. They are only read.
	works := &workv1.ManifestWorkList{}
	if err := r.client.List(ctx, works, client.InNamespace(desired.Namespace), client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("list the ManifestWorks of spoke application %s: %w", key, err)
	}
	self := client.ObjectKeyFromObject(app)
	var owner, ours *workv1.ManifestWork
	for i := range works.Items {
		work := &works.Items[i]
		if k, ok := spokeApplicationKey(work); !ok || k != key || work.DeletionTimestamp != nil {
			continue
		}
		hubApp, ok := argoapp.ApplicationOfWork(work)
		if !ok {
			continue
		}
		if hubApp == self {
			if ours == nil || olderWork(work, ours) {
				ours = work
			}
			continue
		}
		if owner == nil || olderWork(work, owner) {
			owner = work
		}
	}
	if owner == nil || (ours != nil && olderWork(ours, owner)) {
		return nil, nil
	}
	return owner, nil
}

// olderWork orders works by creation time, then by the key of their hub Application.
func olderWork(a, b *workv1.ManifestWork) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	keyA, _ := argoapp.ApplicationOfWork(a)
	keyB, _ := argoapp.ApplicationOfWork(b)
	return keyA.String() < keyB.String()
}

// conflict is the outcome of an Application whose spoke Application the work owner, of
// another hub Application, already owns. It gets no work. A work it already has (both
// raced) is deleted once the owner's work is applied: the work agent then only drops
// this work's claim on the spoke Application, which the owner's work also holds. Before
// that, deleting it would delete the spoke Application, so it waits for the owner's
// work to change.
func conflict(works []workv1.ManifestWork, desired, owner *workv1.ManifestWork) outcome {
	ownerApp, _ := argoapp.ApplicationOfWork(owner)
	key, _ := spokeApplicationKey(desired)
	p := &problem{ReasonSpokeApplicationConflict, fmt.Sprintf(
		"hub Application %s already pulls the Application %s (cluster/namespace/name) with ManifestWork %s; "+
			"two hub Applications must not write one spoke Application: rename this one, or give it another %s annotation",
		ownerApp, key, types.NamespacedName{Namespace: owner.Namespace, Name: owner.Name}, argoapp.AnnotationOCMManagedClusterAppNamespace)}
	for i := range works {
		if k, _ := spokeApplicationKey(&works[i]); k == key && !appliedAtGeneration(owner) {
			return outcome{freeze: true, problem: p}
		}
	}
	return outcome{problem: p}
}
