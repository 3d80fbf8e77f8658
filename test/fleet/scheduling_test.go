package fleet

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/clusterreport"
)

// A managed cluster's control plane with its workload controllers, kube-scheduler and
// KWOK: Deployments get Pods, the Pods are bound to KWOK's Nodes and become Ready, or not
// for a failing image, and KWOK leaves the addon's Pods to the fleet's pod runner. It needs
// the binaries of `make fleet-tools` in $KUBEBUILDER_ASSETS (the Makefile sets it to bin/).
func TestManagedClusterRunsPods(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a control plane and KWOK: skipped in -short mode")
	}
	bin := os.Getenv("KUBEBUILDER_ASSETS")
	for _, tool := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"} {
		if _, err := os.Stat(filepath.Join(bin, tool)); bin == "" || err != nil {
			t.Skipf("no %s in $KUBEBUILDER_ASSETS (%q): run `make fleet-tools`", tool, bin)
		}
	}
	kwokDir, err := ModuleDir("../../hack/tools/kwok", "sigs.k8s.io/kwok")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	sup := &supervisor{dir: t.TempDir()}
	t.Cleanup(func() { sup.stopAll(10 * time.Second) })
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		logs, _ := filepath.Glob(filepath.Join(sup.dir, "logs", "*.log"))
		for _, l := range logs {
			data, _ := os.ReadFile(l)
			t.Logf("%s:\n%s", filepath.Base(l), data[max(0, len(data)-4000):])
		}
	})
	cp, err := startControlPlane(ctx, sup, bin, sup.dir, "workloads", true)
	if err != nil {
		t.Fatal(err)
	}
	if err := startWorkloads(ctx, sup, bin, cp, kwokDir); err != nil {
		t.Fatal(err)
	}

	deployment := func(name, image string, labels, annotations map[string]string) *appsv1.Deployment {
		podLabels := map[string]string{"app": name}
		for k, v := range labels {
			podLabels[k] = v
		}
		return &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To[int32](2),
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: podLabels, Annotations: annotations},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: image}}},
				},
			},
		}
	}
	for _, d := range []*appsv1.Deployment{
		deployment("web", "example.com/web:1", nil, nil),
		deployment("slow", "example.com/web:1", nil, map[string]string{ReadyAfterAnnotation: "6s"}),
		deployment("broken", "example.com/web:"+FailingImageMarker, nil, nil),
		deployment("addon", "example.com/agent:1", map[string]string{"app.kubernetes.io/part-of": clusterreport.DefaultAddonName}, nil),
	} {
		if _, err := cp.Kube.AppsV1().Deployments("default").Create(ctx, d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	pods := func(ctx context.Context, app string) ([]corev1.Pod, error) {
		list, err := cp.Kube.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
		if err != nil {
			return nil, err
		}
		return list.Items, nil
	}
	// state sums up a Deployment's Pods: "<phase>/<Ready>@<node>" each, and its available replicas.
	state := func(ctx context.Context, app string) string {
		list, err := pods(ctx, app)
		if err != nil {
			return err.Error()
		}
		var each []string
		for _, p := range list {
			node := "unbound"
			if strings.HasPrefix(p.Spec.NodeName, "kwok-node-") {
				node = "kwok"
			}
			each = append(each, fmt.Sprintf("%s/%s@%s", p.Status.Phase, podCondition(&p, corev1.PodReady), node))
		}
		d, err := cp.Kube.AppsV1().Deployments("default").Get(ctx, app, metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		return fmt.Sprintf("%v available=%d", each, d.Status.AvailableReplicas)
	}
	expect := func(app, want string) {
		t.Helper()
		var got string
		if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			if err := sup.failed(); err != nil {
				return false, err
			}
			got = state(ctx, app)
			return got == want, nil
		}); err != nil {
			t.Fatalf("%s: %s, want %s (%v)", app, got, want, err)
		}
	}

	expect("web", "[Running/True@kwok Running/True@kwok] available=2")
	expect("broken", "[Running/False@kwok Running/False@kwok] available=0")
	broken, _ := pods(ctx, "broken")
	for _, c := range broken[0].Status.Conditions {
		if c.Type == corev1.PodReady && c.Message != "containers with unready status: [main]" {
			t.Errorf("a failing Pod's Ready condition says %q, want the kubelet's message", c.Message)
		}
	}
	expect("slow", "[Running/True@kwok Running/True@kwok] available=2")
	slow, _ := pods(ctx, "slow")
	for _, p := range slow {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.LastTransitionTime.Sub(p.CreationTimestamp.Time) < 5*time.Second {
				t.Errorf("pod %s Ready %s after its creation, want at least its 6s delay", p.Name, c.LastTransitionTime.Sub(p.CreationTimestamp.Time))
			}
		}
	}
	// KWOK handled every other Pod by now; the addon's are bound and left to the pod runner.
	expect("addon", "[Pending/@kwok Pending/@kwok] available=0")

	// Deleting a Deployment removes its Pods: the garbage collector deletes them, KWOK
	// confirms the deletion as a kubelet would.
	if err := cp.Kube.AppsV1().Deployments("default").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := pods(ctx, "web")
		return err == nil && len(list) == 0, nil
	}); err != nil {
		t.Errorf("the Pods of a deleted Deployment are still there: %v", err)
	}
	if err := sup.failed(); err != nil {
		t.Error(err)
	}
}
