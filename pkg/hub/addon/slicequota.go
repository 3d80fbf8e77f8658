package addon

// This file bounds how many ApplicationStatusSlices one cluster's agent may hold on the
// hub: a ResourceQuota in each cluster namespace, which the apiserver enforces.

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	addonv1beta1 "open-cluster-management.io/api/addon/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"

	statusv1alpha1 "github.com/ocm-gitops/argocd-pull-addon/pkg/apis/argocdpull/v1alpha1"
)

// RecommendedMaxStatusSlicesPerCluster is the manager's default bound of
// ApplicationStatusSlices per cluster (--max-status-slices-per-cluster). The agent is
// sized for 500 apps (docs/design.md), and fills a slice to 96 KiB (clusterreport.SliceFillBytes): 500 apps of 20 resources with
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

// refusesEverySlice reports whether the apiserver refuses every new slice under q: its
// status has the slices' hard limit but no usage for it. That is the state of a quota
// that kube-controller-manager's resourcequota controller synced before it watched the
// slices' resource (the CRD installed just before): the controller then retries it with
// its own growing backoff, or at its next full resync (five minutes by default). A quota
// without status (no such controller on the hub) bounds and refuses nothing.
func refusesEverySlice(q *corev1.ResourceQuota) bool {
	_, limited := q.Status.Hard[SliceQuotaResource]
	return limited && !isCounted(q)
}

// Repair delays: a quota is re-created when it has refused every slice this long since
// it was created, and then again with the delay doubled, up to the resourcequota
// controller's full resync, for as long as it refuses them.
const (
	sliceQuotaRepairAfter    = 15 * time.Second
	sliceQuotaRepairMaxDelay = 5 * time.Minute
)

// sliceQuotaRepair re-creates the slice quotas that refuse every slice
// (refusesEverySlice), as the same quota: a new quota is what the resourcequota
// controller computes at once, without its backoff. So the bound holds from the start,
// and an addon installed with its CRD does not lose its agents' first minutes of
// status.
type sliceQuotaRepair struct {
	kube   kubernetes.Interface
	quotas corelisters.ResourceQuotaLister
	queue  workqueue.TypedDelayingInterface[types.NamespacedName]
	// after is sliceQuotaRepairAfter, shorter in tests.
	after time.Duration

	mu sync.Mutex
	// repairs are the quotas re-created and not counted since: the delay to the next
	// repair, and when it is due.
	repairs map[types.NamespacedName]quotaRepair
}

type quotaRepair struct {
	delay time.Duration
	next  time.Time
}

func newSliceQuotaRepair(kube kubernetes.Interface, informer cache.SharedIndexInformer, quotas corelisters.ResourceQuotaLister, after time.Duration) (*sliceQuotaRepair, error) {
	r := &sliceQuotaRepair{kube: kube, quotas: quotas, after: after, repairs: map[types.NamespacedName]quotaRepair{},
		queue: workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[types.NamespacedName]{Name: "slice_quota_repair"})}
	observe := func(obj any) {
		q, ok := obj.(*corev1.ResourceQuota)
		if !ok {
			return
		}
		key := types.NamespacedName{Namespace: q.Namespace, Name: q.Name}
		switch {
		case refusesEverySlice(q):
			r.queue.Add(key)
		case isCounted(q):
			r.mu.Lock()
			delete(r.repairs, key)
			r.mu.Unlock()
		}
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    observe,
		UpdateFunc: func(_, obj any) { observe(obj) },
	}); err != nil {
		return nil, fmt.Errorf("watch the slice quotas: %w", err)
	}
	return r, nil
}

// isCounted reports whether q's status has the usage of the slices.
func isCounted(q *corev1.ResourceQuota) bool {
	_, counted := q.Status.Used[SliceQuotaResource]
	return counted
}

// run repairs the quotas until ctx ends.
func (r *sliceQuotaRepair) run(ctx context.Context) {
	go func() {
		<-ctx.Done()
		r.queue.ShutDown()
	}()
	for {
		key, quit := r.queue.Get()
		if quit {
			return
		}
		r.repair(ctx, key)
		r.queue.Done(key)
	}
}

// repair re-creates the quota key when it still refuses every slice and its repair is
// due, and otherwise looks at it again when it is.
func (r *sliceQuotaRepair) repair(ctx context.Context, key types.NamespacedName) {
	q, err := r.quotas.ResourceQuotas(key.Namespace).Get(key.Name)
	if err != nil || !refusesEverySlice(q) {
		return
	}
	r.mu.Lock()
	last := r.repairs[key]
	r.mu.Unlock()
	due := q.CreationTimestamp.Add(r.after)
	if last.next.After(due) {
		due = last.next
	}
	if wait := time.Until(due); wait > 0 {
		r.queue.AddAfter(key, wait)
		return
	}
	delay := min(max(2*last.delay, 2*r.after), sliceQuotaRepairMaxDelay)
	r.mu.Lock()
	r.repairs[key] = quotaRepair{delay: delay, next: time.Now().Add(delay)}
	r.mu.Unlock()
	r.queue.AddAfter(key, delay)

	log := ctrl.LoggerFrom(ctx).WithName("slice-quota").WithValues("namespace", key.Namespace, "quota", key.Name)
	uid := q.UID
	quotas := r.kube.CoreV1().ResourceQuotas(key.Namespace)
	err = quotas.Delete(ctx, key.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		log.Error(err, "delete the slice quota to have its usage computed")
		return
	}
	again := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{
		Name: q.Name, Namespace: q.Namespace, Labels: q.Labels, Annotations: q.Annotations, OwnerReferences: q.OwnerReferences,
	}, Spec: *q.Spec.DeepCopy()}
	if _, err := quotas.Create(ctx, again, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		log.Error(err, "re-create the slice quota")
		return
	}
	log.Info("re-created the slice quota, which refused every slice: kube-controller-manager had not computed its usage",
		"createdAt", q.CreationTimestamp.UTC().Format(time.RFC3339), "nextRepairIn", delay)
}
