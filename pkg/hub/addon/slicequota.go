package addon

// This file bounds how many ApplicationStatusSlices one cluster's agent may hold on the
// hub: a ResourceQuota in each cluster namespace, which the apiserver enforces.

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	addonv1beta1 "open-cluster-management.io/api/addon/v1beta1"

	statusv1alpha1 "github.com/ocm-gitops/argocd-pull-addon/pkg/apis/argocdpull/v1alpha1"
)

// RecommendedMaxStatusSlicesPerCluster is the bound of ApplicationStatusSlices per
// cluster that docs/operations.md recommends where the slice quota is on
// (--max-status-slices-per-cluster; off by default: a quota created before
// kube-controller-manager's resourcequota controller knows the slices' resource keeps
// its status unknown, and refuses every new slice, until that controller's next full
// resync, five minutes by default). The agent is sized for 500 apps (docs/design.md, section 8a.2), and
// fills a slice to 96 KiB (clusterreport.SliceFillBytes): 500 apps of 20 resources with
// their trees took 15 slices (docs/operations.md, Scale), about 33 apps a slice. Three
// times that, 50, holds 500 apps of about 60 resources, or an app alone over 96 KiB in a
// slice of its own among them, and bounds what one agent can store on the hub to 50
// objects of at most etcd's object limit (docs/operations.md, "What one cluster can
// store on the hub").
const RecommendedMaxStatusSlicesPerCluster = 50

// SliceQuotaResource is the object count that the slice quota bounds:
// count/<resource>.<group>, which the apiserver's ResourceQuota admission counts on each
// create.
var SliceQuotaResource = corev1.ResourceName("count/" + statusv1alpha1.Resource + "." + statusv1alpha1.GroupVersion.Group)

// SliceQuotaName is the name of the ResourceQuota, in each cluster namespace, that bounds
// the agent's ApplicationStatusSlices.
func SliceQuotaName(addonName string) string {
	return addonName + "-status-slices"
}

// sliceQuota returns the ResourceQuota of cluster's namespace that lets at most max
// ApplicationStatusSlices exist there, owned by the cluster's ManagedClusterAddOn, so that
// disabling the addon on the cluster removes it (garbage collection), as it removes the
// agent's hub Role.
//
// The quota counts every slice of the namespace, whoever writes it: only this addon's
// agent may create them there (HubRole). The apiserver enforces it from the quota's
// status, which kube-controller-manager's resourcequota controller computes: on a hub
// without that controller the quota has no status, and bounds nothing.
func sliceQuota(addonName, cluster string, max int, addon *addonv1beta1.ManagedClusterAddOn) *corev1.ResourceQuota {
	q := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: SliceQuotaName(addonName), Namespace: cluster},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{
			SliceQuotaResource: *resource.NewQuantity(int64(max), resource.DecimalSI),
		}},
	}
	setAddonOwner(&q.ObjectMeta, addon)
	return q
}

// sameQuota reports whether the quota on the hub bounds the slices as desired does, with
// the same owner: applying desired would change nothing.
func sameQuota(onHub, desired *corev1.ResourceQuota) bool {
	have, ok := onHub.Spec.Hard[SliceQuotaResource]
	want := desired.Spec.Hard[SliceQuotaResource]
	return ok && have.Cmp(want) == 0 && equality.Semantic.DeepEqual(onHub.OwnerReferences, desired.OwnerReferences)
}

// applySliceQuota creates the quota, or updates its hard limits and owner, as
// utils.ApplyRole does a Role: its other fields (labels, annotations, another limit
// someone added) are kept.
func (a *AgentAddon) applySliceQuota(ctx context.Context, desired *corev1.ResourceQuota) error {
	quotas := a.hubKube.CoreV1().ResourceQuotas(desired.Namespace)
	existing, err := quotas.Get(ctx, desired.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		if _, err := quotas.Create(ctx, desired, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create the status slice quota of %s: %w", desired.Namespace, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("get the status slice quota of %s: %w", desired.Namespace, err)
	}
	if sameQuota(existing, desired) {
		return nil
	}
	updated := existing.DeepCopy()
	if updated.Spec.Hard == nil {
		updated.Spec.Hard = corev1.ResourceList{}
	}
	for name, q := range desired.Spec.Hard {
		updated.Spec.Hard[name] = q
	}
	updated.OwnerReferences = desired.OwnerReferences
	if _, err := quotas.Update(ctx, updated, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("update the status slice quota of %s: %w", desired.Namespace, err)
	}
	return nil
}
