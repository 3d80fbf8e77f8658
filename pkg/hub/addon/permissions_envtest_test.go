package addon

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	addonv1beta1 "open-cluster-management.io/api/addon/v1beta1"
	addonclient "open-cluster-management.io/api/client/addon/clientset/versioned"
	workclient "open-cluster-management.io/api/client/work/clientset/versioned"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/resourceproxy"
	"github.com/ocm-gitops/argocd-pull-addon/test/testenv"
)

// TestAgentHubIdentityIsConfinedToItsOwnAddon impersonates the agent's real hub identity
// (the user and groups of its KubeClient registration) against a real apiserver, after the
// addon granted its permissions, and checks every door.
func TestAgentHubIdentityIsConfinedToItsOwnAddon(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	admin := kubernetes.NewForConfigOrDie(env.Config)
	adminAddons := addonclient.NewForConfigOrDie(env.Config)
	createNamespaces(ctx, t, env, "c1", "c2")
	mcas := map[string]*addonv1beta1.ManagedClusterAddOn{}
	for _, key := range []struct{ ns, name string }{{"c1", "argocd-pull"}, {"c2", "argocd-pull"}, {"c1", "other-addon"}} {
		mcas[key.ns+"/"+key.name] = createMCA(ctx, t, env, key.ns, key.name)
	}
	a := &AgentAddon{opts: Options{AddonName: "argocd-pull"}, hubKube: admin}
	for _, c := range []string{"c1", "c2"} {
		grantAgent(ctx, t, a, mcas[c+"/argocd-pull"])
	}

	// The c1 agent, exactly as its client certificate presents it.
	cfg := agentConfig(env, "c1", "argocd-pull")
	addons := addonclient.NewForConfigOrDie(cfg)
	kube := kubernetes.NewForConfigOrDie(cfg)
	works := workclient.NewForConfigOrDie(cfg)
	dyn := dynamic.NewForConfigOrDie(cfg)
	// The agent of another addon on the same cluster, with its own registration.
	otherDyn := dynamic.NewForConfigOrDie(agentConfig(env, "c1", "other-addon"))
	slices := schema.GroupVersionResource{Group: "argocd-pull.open-cluster-management.io", Version: "v1alpha1", Resource: "applicationstatusslices"}
	sliceOf := func(ns, name string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "argocd-pull.open-cluster-management.io/v1alpha1", "kind": "ApplicationStatusSlice",
			"metadata":      map[string]any{"name": name, "namespace": ns, "labels": map[string]any{"argocd-pull.open-cluster-management.io/addon": "argocd-pull"}},
			"formatVersion": int64(1),
			"apps": []any{map[string]any{"namespace": "argocd", "name": "app", "observedAt": "2026-01-01T00:00:00Z",
				"sync": map[string]any{"status": "Synced"}}},
		}}
	}
	applySlice := func(d dynamic.Interface, ns, name string) error {
		_, err := d.Resource(slices).Namespace(ns).Apply(ctx, name, sliceOf(ns, name), metav1.ApplyOptions{FieldManager: "argocd-pull-agent", Force: true})
		return err
	}
	if _, err := dynamic.NewForConfigOrDie(env.Config).Resource(slices).Namespace("c2").Create(ctx, sliceOf("c2", "argocd-pull-0"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	status, _ := json.Marshal(map[string]any{
		"apiVersion": "addon.open-cluster-management.io/v1beta1", "kind": "ManagedClusterAddOn",
		"metadata": map[string]any{"name": "argocd-pull"},
		"status": map[string]any{"conditions": []any{map[string]any{
			"type": "ReportProbe", "status": "True", "reason": "Probe", "message": "written by the agent",
			"lastTransitionTime": "2026-01-01T00:00:00Z"}}},
	})
	patchStatus := func(ns, name string) error {
		_, err := addons.AddonV1beta1().ManagedClusterAddOns(ns).Patch(ctx, name, types.ApplyPatchType, status,
			metav1.PatchOptions{FieldManager: "argocd-pull-agent", Force: ptr.To(true)}, "status")
		return err
	}
	event := func(ns string) error {
		_, err := kube.CoreV1().Events(ns).Create(ctx, &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{GenerateName: "probe-", Namespace: ns},
			InvolvedObject: corev1.ObjectReference{Kind: "ManagedClusterAddOn", Namespace: ns, Name: "argocd-pull"},
			Reason:         "Probe", Message: "probe", Type: corev1.EventTypeNormal,
		}, metav1.CreateOptions{})
		return err
	}

	allowed := map[string]func() error{
		"get its own ManagedClusterAddOn": func() error {
			_, err := addons.AddonV1beta1().ManagedClusterAddOns("c1").Get(ctx, "argocd-pull", metav1.GetOptions{})
			return err
		},
		"list its own ManagedClusterAddOn by name": func() error {
			_, err := addons.AddonV1beta1().ManagedClusterAddOns("c1").List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=argocd-pull"})
			return err
		},
		"patch its own status":             func() error { return patchStatus("c1", "argocd-pull") },
		"record an Event in its namespace": func() error { return event("c1") },
		"apply a status slice in its namespace": func() error {
			if err := applySlice(dyn, "c1", "argocd-pull-0"); err != nil {
				return err
			}
			return applySlice(dyn, "c1", "argocd-pull-1") // apply again: an update
		},
		"list and watch its status slices": func() error {
			if _, err := dyn.Resource(slices).Namespace("c1").List(ctx, metav1.ListOptions{LabelSelector: "argocd-pull.open-cluster-management.io/addon=argocd-pull"}); err != nil {
				return err
			}
			w, err := dyn.Resource(slices).Namespace("c1").Watch(ctx, metav1.ListOptions{})
			if err == nil {
				w.Stop()
			}
			return err
		},
		"delete its status slice": func() error {
			if err := applySlice(dyn, "c1", "argocd-pull-9"); err != nil {
				return err
			}
			return dyn.Resource(slices).Namespace("c1").Delete(ctx, "argocd-pull-9", metav1.DeleteOptions{})
		},
	}
	for what, call := range allowed {
		if err := call(); err != nil {
			t.Errorf("the agent may %s, but: %v", what, err)
		}
	}
	// The resource proxy's paths: the hub apiserver authorizes them before it forwards
	// them to the APIService, which this apiserver does not have: allowed is NotFound,
	// refused Forbidden.
	proxyCall := func(method, path string) error {
		return kube.CoreV1().RESTClient().Verb(method).AbsPath(path).Do(ctx).Error()
	}
	for what, call := range map[string]func() error{
		"open its cluster's resource proxy tunnel": func() error { return proxyCall(http.MethodGet, resourceproxy.AgentPath("c1")) },
		"answer a request on its cluster's tunnel": func() error { return proxyCall(http.MethodPost, resourceproxy.AgentPath("c1")+"/id") },
	} {
		if err := call(); !apierrors.IsNotFound(err) {
			t.Errorf("the agent may %s: got %v, want NotFound (authorized; no APIService here)", what, err)
		}
	}
	refused := map[string]func() error{
		"patch another cluster's status":       func() error { return patchStatus("c2", "argocd-pull") },
		"patch another addon's status":         func() error { return patchStatus("c1", "other-addon") },
		"record an Event in another namespace": func() error { return event("c2") },
		"get another cluster's addon": func() error {
			_, err := addons.AddonV1beta1().ManagedClusterAddOns("c2").Get(ctx, "argocd-pull", metav1.GetOptions{})
			return err
		},
		"list every addon in its namespace": func() error {
			_, err := addons.AddonV1beta1().ManagedClusterAddOns("c1").List(ctx, metav1.ListOptions{})
			return err
		},
		"update its own spec": func() error {
			mca := mcas["c1/argocd-pull"].DeepCopy()
			mca.Labels = map[string]string{"forged": "true"}
			_, err := addons.AddonV1beta1().ManagedClusterAddOns("c1").Update(ctx, mca, metav1.UpdateOptions{})
			return err
		},
		"delete its own addon": func() error {
			return addons.AddonV1beta1().ManagedClusterAddOns("c1").Delete(ctx, "argocd-pull", metav1.DeleteOptions{})
		},
		"read secrets in its namespace": func() error {
			_, err := kube.CoreV1().Secrets("c1").List(ctx, metav1.ListOptions{})
			return err
		},
		"read ManifestWorks in its namespace": func() error {
			_, err := works.WorkV1().ManifestWorks("c1").List(ctx, metav1.ListOptions{})
			return err
		},
		"create a status slice in another cluster's namespace": func() error { return applySlice(dyn, "c2", "argocd-pull-1") },
		"overwrite another cluster's status slice":             func() error { return applySlice(dyn, "c2", "argocd-pull-0") },
		"read another cluster's status slices": func() error {
			_, err := dyn.Resource(slices).Namespace("c2").List(ctx, metav1.ListOptions{})
			return err
		},
		"delete another cluster's status slice": func() error {
			return dyn.Resource(slices).Namespace("c2").Delete(ctx, "argocd-pull-0", metav1.DeleteOptions{})
		},
		"write status slices as another addon's agent": func() error { return applySlice(otherDyn, "c1", "argocd-pull-2") },
		"read status slices as another addon's agent": func() error {
			_, err := otherDyn.Resource(slices).Namespace("c1").List(ctx, metav1.ListOptions{})
			return err
		},
		"write a ConfigMap in its namespace": func() error {
			_, err := kube.CoreV1().ConfigMaps("c1").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "probe"}}, metav1.CreateOptions{})
			return err
		},
		"write a MulticlusterApplicationSetReport in its namespace": func() error {
			_, err := dyn.Resource(schema.GroupVersionResource{Group: "apps.open-cluster-management.io", Version: "v1alpha1", Resource: "multiclusterapplicationsetreports"}).
				Namespace("c1").Create(ctx, &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "apps.open-cluster-management.io/v1alpha1", "kind": "MulticlusterApplicationSetReport",
				"metadata": map[string]any{"name": "probe", "namespace": "c1"}}}, metav1.CreateOptions{})
			return err
		},
		"list namespaces": func() error {
			_, err := kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
			return err
		},
		"open another cluster's resource proxy tunnel": func() error { return proxyCall(http.MethodGet, resourceproxy.AgentPath("c2")) },
		"answer a request of another cluster":          func() error { return proxyCall(http.MethodPost, resourceproxy.AgentPath("c2")+"/id") },
		"reach its own cluster as a client of the resource proxy": func() error {
			return proxyCall(http.MethodGet, resourceproxy.ClientPath("c1")+"/api/v1/namespaces/default/secrets")
		},
		"open a tunnel as another addon's agent": func() error {
			return kubernetes.NewForConfigOrDie(agentConfig(env, "c1", "other-addon")).CoreV1().RESTClient().Get().AbsPath(resourceproxy.AgentPath("c1")).Do(ctx).Error()
		},
	}
	for what, call := range refused {
		if err := call(); !apierrors.IsForbidden(err) {
			t.Errorf("the agent must not %s: got %v, want Forbidden", what, err)
		}
	}

	got, err := adminAddons.AddonV1beta1().ManagedClusterAddOns("c1").Get(ctx, "argocd-pull", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Status.Conditions) != 1 || got.Status.Conditions[0].Type != "ReportProbe" {
		t.Errorf("the allowed status patch did not land: %v", got.Status.Conditions)
	}
}
