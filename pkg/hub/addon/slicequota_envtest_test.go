package addon

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/ocm-gitops/argocd-pull-addon/test/testenv"
)

// TestSliceQuotaRepair: a slice quota whose status has the slices' limit but no usage
// (what kube-controller-manager's resourcequota controller leaves when it synced the
// quota before it watched the slices' CRD, and what makes the apiserver refuse every
// slice) is re-created as the same quota, owner included, after the repair delay, and
// again later with the delay doubled while it stays so; a counted quota is left alone,
// and so is one without status (a hub without that controller).
//
// envtest runs no kube-controller-manager: the test writes the quota's status as that
// controller does. docs/security.md names the e2e spec that sees the bound on the fleet.
func TestSliceQuotaRepair(t *testing.T) {
	env := testenv.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	admin := kubernetes.NewForConfigOrDie(env.Config)
	const addonName, after = "argocd-pull", time.Second
	quotas := func(cluster string) []corev1.ResourceQuota {
		list, err := admin.CoreV1().ResourceQuotas(cluster).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return list.Items
	}
	rbac, err := newHubRBACCache(admin, hubRoleName(addonName), SliceQuotaName(addonName))
	if err != nil {
		t.Fatal(err)
	}
	repair, err := newSliceQuotaRepair(admin, rbac.quotaInformer, rbac.quotas, after)
	if err != nil {
		t.Fatal(err)
	}
	rbac.start(ctx)
	go repair.run(ctx)
	a := &AgentAddon{opts: Options{AddonName: addonName, Settings: Settings{MaxStatusSlicesPerCluster: 6}}, hubKube: admin}

	// setStatus writes the quota's status as the resourcequota controller does: the
	// limits, and the slices counted or not.
	setStatus := func(q *corev1.ResourceQuota, counted bool) {
		q.Status = corev1.ResourceQuotaStatus{Hard: q.Spec.Hard, Used: corev1.ResourceList{}}
		if counted {
			q.Status.Used[SliceQuotaResource] = resource.MustParse("0")
		}
		if _, err := admin.CoreV1().ResourceQuotas(q.Namespace).UpdateStatus(ctx, q, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	enable := func(cluster string) *corev1.ResourceQuota {
		createNamespaces(ctx, t, env, cluster)
		grantAgent(ctx, t, a, createMCA(ctx, t, env, cluster, addonName))
		return &quotas(cluster)[0]
	}
	// waitForNew waits for the quota of cluster to be another than uid, and returns it
	// with how long that took.
	waitForNew := func(cluster string, uid types.UID) (*corev1.ResourceQuota, time.Duration) {
		start := time.Now()
		for time.Since(start) < 30*after {
			if qs := quotas(cluster); len(qs) == 1 && qs[0].UID != uid {
				return &qs[0], time.Since(start)
			}
			time.Sleep(after / 20)
		}
		t.Fatalf("the slice quota of %s was not re-created", cluster)
		return nil, 0
	}

	refusing := enable("refusing")
	counted := enable("counted")
	unknown := enable("no-controller")
	setStatus(counted, true)
	setStatus(refusing, false)

	first, _ := waitForNew("refusing", refusing.UID)
	if !sameQuota(first, refusing) || first.Spec.Hard[SliceQuotaResource] != refusing.Spec.Hard[SliceQuotaResource] {
		t.Errorf("re-created as %+v, want the same quota as %+v", first.Spec, refusing.Spec)
	}
	// Still refusing: the next repair waits twice as long.
	setStatus(first, false)
	second, waited := waitForNew("refusing", first.UID)
	if waited < 2*after-after/4 {
		t.Errorf("re-created again %v after the first repair, want about %v: the delay doubles", waited, 2*after)
	}
	// Counted at last: left alone from then on.
	setStatus(second, true)
	time.Sleep(5 * after)
	for cluster, uid := range map[string]types.UID{"refusing": second.UID, "counted": counted.UID, "no-controller": unknown.UID} {
		if qs := quotas(cluster); len(qs) != 1 || qs[0].UID != uid {
			t.Errorf("the slice quota of %s was re-created, or is gone: %v", cluster, qs)
		}
	}
}
