package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/alicebob/miniredis/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	addonv1beta1 "open-cluster-management.io/api/addon/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	statusv1alpha1 "github.com/ocm-gitops/argocd-pull-addon/pkg/apis/argocdpull/v1alpha1"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/argocdcache"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/clusterreport"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/addon"
	"github.com/ocm-gitops/argocd-pull-addon/test/loopback"
	"github.com/ocm-gitops/argocd-pull-addon/test/sim"
	"github.com/ocm-gitops/argocd-pull-addon/test/testenv"
)

// agentCluster is the hub's name of the cluster whose real agent P5 runs.
const agentCluster = "agent-bench"

// measureAgent is P5: the real agent against its own apiserver with AgentApps local
// Applications, reporting to the hub. It measures the time until its summary counts every
// app and until its slices hold every app complete, the latency of a change, the
// agent's peak RSS and the size of its addon's status and slices.
func measureAgent(ctx context.Context, r *Results, hub *sim.Hub, agentBin, dir string, step func(string, ...any)) error {
	step("P5: starting a managed cluster apiserver with %d Applications", r.Scale.AgentApps)
	spoke, err := testenv.New()
	if err != nil {
		return err
	}
	defer func() { _ = spoke.Stop() }()
	if err := hub.CreateCluster(ctx, agentCluster); err != nil {
		return err
	}
	for _, ns := range []string{argoapp.DefaultAppNamespace, clusterreport.DefaultInstallNamespace} {
		if err := spoke.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return err
		}
	}
	// Argo CD's application-controller cache, with each app's resource tree, as the
	// agent reads it in a real install.
	redis, err := miniredis.Run()
	if err != nil {
		return err
	}
	defer redis.Close()
	for i := range r.Scale.AgentApps {
		if err := spoke.Client.Create(ctx, spokeApplication(i, r.Scale.AgentResources)); err != nil {
			return fmt.Errorf("create local Application %d: %w", i, err)
		}
		tree, err := argoCDTree(i, r.Scale.AgentResources)
		if err != nil {
			return err
		}
		if err := redis.Set(fmt.Sprintf("app|resources-tree|app-%04d|%s.gz", i, argocdcache.CacheVersion), tree); err != nil {
			return err
		}
	}
	hubKubeconfig, err := hub.Kubeconfig("bench-agent", "system:masters")
	if err != nil {
		return err
	}
	spokeKubeconfigData, err := spoke.Kubeconfig("bench-agent", "system:masters")
	if err != nil {
		return err
	}
	spokeKubeconfig := filepath.Join(dir, "spoke.kubeconfig")
	if err := os.WriteFile(spokeKubeconfig, spokeKubeconfigData, 0o600); err != nil {
		return err
	}

	sliceWatcher, err := watchChanges(ctx, hub.Config, statusv1alpha1.GroupVersion.WithResource(statusv1alpha1.Resource), agentCluster)
	if err != nil {
		return err
	}
	ports, err := loopback.FreePorts(1)
	if err != nil {
		return err
	}
	pprofAddr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	start := time.Now()
	// The environment the agent's Deployment gives it (pkg/hub/addon): its memory limit
	// as GOMEMLIMIT, and its GOGC.
	agentEnv := []string{"GOMEMLIMIT=" + strconv.FormatInt(addon.AgentMemoryLimit.Value(), 10), "GOGC=" + addon.AgentGOGC}
	agent, err := sim.StartProcess(dir, "agent", agentBin, []string{
		"--hub-kubeconfig=" + hubKubeconfig, "--kubeconfig=" + spokeKubeconfig, "--cluster-name=" + agentCluster,
		"--pprof-bind-address=" + pprofAddr, "--argocd-redis=" + redis.Addr(),
	}, agentEnv)
	if err != nil {
		return err
	}
	defer agent.Stop(10 * time.Second)
	addon := &addonv1beta1.ManagedClusterAddOn{}
	addonKey := types.NamespacedName{Namespace: agentCluster, Name: sim.AddonName}
	err = waitFor(ctx, 2*time.Minute, func() (bool, error) {
		if exited, err := agent.Exited(); exited {
			return false, fmt.Errorf("the agent exited: %w", err)
		}
		if err := hub.Client.Get(ctx, addonKey, addon); err != nil {
			return false, err
		}
		// The agent reports its apps in the slices: its report on the ManagedClusterAddOn
		// only counts them, in the summary.
		report, err := clusterreport.Decode(addon.Status.Conditions)
		if err == nil && len(report.Apps) > 0 {
			err = fmt.Errorf("the agent wrote %d conditions per app beside its slices", len(report.Apps))
		}
		summary := meta.FindStatusCondition(addon.Status.Conditions, clusterreport.ConditionSummary)
		return summary != nil && strings.HasPrefix(summary.Message, fmt.Sprintf("%d applications:", r.Scale.AgentApps)), err
	})
	if err != nil {
		return fmt.Errorf("P5: the agent's summary never counted %d Applications: %w", r.Scale.AgentApps, err)
	}
	r.AgentFirstReport = time.Since(start)
	step("P5: the first complete report after %s", since(start))
	sliceList := &statusv1alpha1.ApplicationStatusSliceList{}
	err = waitFor(ctx, 2*time.Minute, func() (bool, error) {
		if err := hub.Client.List(ctx, sliceList, client.InNamespace(agentCluster)); err != nil {
			return false, err
		}
		apps, err := clusterreport.DecodeSlices(sliceList.Items)
		if err != nil || len(apps) != r.Scale.AgentApps {
			return false, err
		}
		for _, e := range apps {
			if len(e.Resources) != r.Scale.AgentResources || len(e.Nodes) != 2 {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("P5: the status slices never held %d complete Applications: %w", r.Scale.AgentApps, err)
	}
	r.AgentFirstSlices = time.Since(start)
	step("P5: every app complete in the status slices after %s", since(start))

	for i := range r.Scale.AgentChanges {
		app := spokeApplication(i*7%r.Scale.AgentApps, r.Scale.AgentResources)
		patch := map[string]any{"status": map[string]any{"conditions": []any{map[string]any{
			"type": "SyncError", "message": changeMessage(i, time.Now()), "lastTransitionTime": time.Now().UTC().Format(time.RFC3339),
		}}}}
		body, err := json.Marshal(patch)
		if err != nil {
			return err
		}
		if err := spoke.Client.Patch(ctx, app, client.RawPatch(types.MergePatchType, body)); err != nil {
			return fmt.Errorf("change local Application %s: %w", app.GetName(), err)
		}
		if err := waitFor(ctx, 30*time.Second, func() (bool, error) { return sliceWatcher.Seen(i), nil }); err != nil {
			r.AgentChangesLost = append(r.AgentChangesLost, fmt.Sprintf("change %d of %s never reached the hub", i, app.GetName()))
		}
	}
	r.AgentSliceLatencies = sliceWatcher.Latencies()
	if err := hub.Client.List(ctx, sliceList, client.InNamespace(agentCluster)); err != nil {
		return err
	}
	r.AgentSlices = len(sliceList.Items)
	for _, s := range sliceList.Items {
		s.ManagedFields = nil
		raw, err := json.Marshal(s)
		if err != nil {
			return err
		}
		r.AgentSliceBytes += len(raw)
	}
	if r.AgentPeakRSS, err = agent.PeakRSS(); err != nil {
		return err
	}
	if err := saveHeapProfile(ctx, pprofAddr, filepath.Join(dir, "agent-heap.pb.gz")); err != nil {
		return err
	}
	if err := hub.Client.Get(ctx, addonKey, addon); err != nil {
		return err
	}
	status, err := json.Marshal(addon.Status)
	if err != nil {
		return err
	}
	r.AgentStatusBytes = len(status)
	for _, c := range addon.Status.Conditions {
		if c.Type == clusterreport.ConditionSummary {
			r.AgentSummary = c.Message
		}
	}
	step("P5: slice latency p50 %s, peak RSS %s, status %d bytes", percentile(r.AgentSliceLatencies, 50), mib(r.AgentPeakRSS), r.AgentStatusBytes)
	return nil
}

// spokeResources are the managed resources of a local Application of P5: a Deployment,
// a Service, and ConfigMaps up to n.
func spokeResources(n int) []struct{ group, kind, name string } {
	out := []struct{ group, kind, name string }{{"apps", "Deployment", "web"}, {"", "Service", "web"}}
	for i := 0; len(out) < n; i++ {
		out = append(out, struct{ group, kind, name string }{"", "ConfigMap", fmt.Sprintf("web-config-%02d", i)})
	}
	return out[:n]
}

// argoCDTree is the resource tree of the i-th local Application as Argo CD 3's
// application-controller caches it (gzip-compressed JSON): every managed resource with
// its health, and the Deployment's ReplicaSet and Pod.
func argoCDTree(i, resources int) (string, error) {
	ns := fmt.Sprintf("app-%04d", i)
	health := map[string]any{"status": "Healthy"}
	var nodes []any
	for _, r := range spokeResources(resources) {
		node := map[string]any{"group": r.group, "version": "v1", "kind": r.kind, "namespace": ns, "name": r.name,
			"uid": fmt.Sprintf("%s-%s", ns, r.name), "resourceVersion": "1"}
		if r.kind != "ConfigMap" {
			node["health"] = health
		}
		nodes = append(nodes, node)
	}
	image := "registry.example/fleet/web:1.2.3"
	nodes = append(nodes,
		map[string]any{"group": "apps", "version": "v1", "kind": "ReplicaSet", "namespace": ns, "name": "web-5d9c7b",
			"parentRefs": []any{map[string]any{"group": "apps", "kind": "Deployment", "namespace": ns, "name": "web"}},
			"info":       []any{map[string]any{"name": "Revision", "value": "Rev:1"}}, "health": health, "images": []any{image}},
		map[string]any{"version": "v1", "kind": "Pod", "namespace": ns, "name": "web-5d9c7b-x2x4q",
			"parentRefs": []any{map[string]any{"group": "apps", "kind": "ReplicaSet", "namespace": ns, "name": "web-5d9c7b"}},
			"info":       []any{map[string]any{"name": "Status Reason", "value": "Running"}}, "health": health, "images": []any{image}},
	)
	raw, err := json.Marshal(map[string]any{"nodes": nodes})
	if err != nil {
		return "", err
	}
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	if _, err := w.Write(raw); err != nil {
		return "", err
	}
	if err := w.Close(); err != nil {
		return "", err
	}
	return buf.String(), nil
}

// spokeApplication is the i-th local Application of P5, as the work agent applied it
// from the hub and Argo CD 3 synced it: without resource health in status.resources
// (controller.resource.health.persist defaults to false), which the tree holds.
func spokeApplication(i, resourceCount int) *unstructured.Unstructured {
	name := fmt.Sprintf("app-%04d", i)
	app := argoapp.NewApplication()
	app.SetNamespace(argoapp.DefaultAppNamespace)
	app.SetName(name)
	app.SetAnnotations(map[string]string{
		argoapp.AnnotationHubApplicationNamespace: sim.AppNamespace,
		argoapp.AnnotationHubApplicationName:      name,
	})
	var resources []any
	for _, r := range spokeResources(resourceCount) {
		resources = append(resources, map[string]any{
			"group": r.group, "version": "v1", "kind": r.kind, "namespace": name, "name": r.name, "status": "Synced",
		})
	}
	app.Object["spec"] = map[string]any{
		"project":     argoapp.DefaultProject,
		"source":      map[string]any{"repoURL": "https://git.example.com/fleet.git", "targetRevision": "main", "path": "apps/" + name},
		"destination": map[string]any{"server": argoapp.InClusterServer, "namespace": name},
	}
	app.Object["status"] = map[string]any{
		"sync":         map[string]any{"status": "Synced", "revision": sim.SyncRevision},
		"health":       map[string]any{"status": "Healthy"},
		"resources":    resources,
		"reconciledAt": time.Now().UTC().Format(time.RFC3339),
	}
	return app
}
