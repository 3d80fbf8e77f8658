package hubcache_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	workv1 "open-cluster-management.io/api/work/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/apppatch"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/hubcache"
	"github.com/ocm-gitops/argocd-pull-addon/test/testenv"
)

var shared testenv.Shared

func TestMain(m *testing.M) { os.Exit(testenv.RunTests(m, &shared)) }

// answers records the body of the apiserver's answer to each PATCH, by path.
type answers struct {
	next http.RoundTripper
	mu   sync.Mutex
	got  map[string][][]byte
}

func (a *answers) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := a.next.RoundTrip(req)
	if err != nil || req.Method != http.MethodPatch {
		return resp, err
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	a.mu.Lock()
	defer a.mu.Unlock()
	a.got[req.URL.Path] = append(a.got[req.URL.Path], body)
	return resp, nil
}

// last returns the kind of the last answer to a PATCH of path, and its size.
func (a *answers) last(t *testing.T, path string) (kind string, size int) {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	got := a.got[path]
	if len(got) == 0 {
		t.Fatalf("no PATCH of %s; patched: %v", path, a.got)
	}
	body := got[len(got)-1]
	// The metadata client asks for protobuf first, which the apiserver serves a
	// PartialObjectMetadata in (even of a custom resource): a runtime.Unknown after a
	// magic number.
	if data, ok := bytes.CutPrefix(body, []byte("k8s\x00")); ok {
		var unknown runtime.Unknown
		if err := unknown.Unmarshal(data); err != nil {
			t.Fatalf("the answer to the PATCH of %s is not protobuf: %v", path, err)
		}
		return unknown.Kind, len(body)
	}
	var answer struct {
		Kind string `json:"kind"`
	}
	if err := json.Unmarshal(body, &answer); err != nil {
		t.Fatalf("the answer to the PATCH of %s is neither protobuf nor JSON: %v", path, err)
	}
	return answer.Kind, len(body)
}

func (a *answers) count(path string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.got[path])
}

// TestWritesAnsweredWithMetadata: on a real apiserver, the client of NewClient, given
// MetadataAnswer, has its merge patches of Applications (apppatch) and its applies of
// ManifestWorks answered with a PartialObjectMetadata, smaller than the object; the
// object written holds what was written, with the resourceVersion stored; a conflict is
// still a conflict, which apppatch retries; and without MetadataAnswer the answer is the
// whole object, as before.
func TestWritesAnsweredWithMetadata(t *testing.T) {
	env := shared.Get(t)
	g := testenv.NewGomega(t)
	ctx := context.Background()
	recorded := &answers{got: map[string][][]byte{}}
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(func(next http.RoundTripper) http.RoundTripper { recorded.next = next; return recorded })
	scheme, err := hubcache.NewScheme()
	g.Expect(err).NotTo(gomega.HaveOccurred())
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	c, err := hubcache.NewClient(mgr)
	g.Expect(err).NotTo(gomega.HaveOccurred())

	ns := "answers-" + testenv.RandomID()
	hub := testenv.NewHub(t, env, ns)
	hub.CreateNamespace(ns)
	app := hub.Application("guestbook", "cluster1")
	app.Object["status"] = map[string]any{"sync": map[string]any{"status": "OutOfSync"}}
	hub.Create(app)
	appPath := "/apis/argoproj.io/v1alpha1/namespaces/" + ns + "/applications/guestbook"

	t.Run("a merge patch of an Application", func(t *testing.T) {
		g := testenv.NewGomega(t)
		wrote, err := apppatch.MergePatch(ctx, c, env.Client, app, setSync("Synced"))
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(wrote).To(gomega.BeTrue())
		kind, size := recorded.last(t, appPath)
		g.Expect(kind).To(gomega.Equal("PartialObjectMetadata"))
		stored := hub.GetApp("guestbook")
		whole, err := json.Marshal(stored.Object)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(size).To(gomega.BeNumerically("<", len(whole)))
		// The object holds what was written, with the version stored.
		g.Expect(app.GetResourceVersion()).To(gomega.Equal(stored.GetResourceVersion()))
		g.Expect(syncOf(app)).To(gomega.Equal("Synced"))
		g.Expect(syncOf(stored)).To(gomega.Equal("Synced"))
	})

	t.Run("a conflict is retried from the apiserver's copy", func(t *testing.T) {
		g := testenv.NewGomega(t)
		stale := app.DeepCopy()
		hub.UpdateApp("guestbook", func(a *unstructured.Unstructured) {
			a.SetLabels(map[string]string{argoapp.LabelPullToOCMManagedCluster: "true", "team": "a"})
		})
		before := recorded.count(appPath)
		err := c.Patch(ctx, stale.DeepCopy(), client.MergeFromWithOptions(app, client.MergeFromWithOptimisticLock{}), hubcache.MetadataAnswer)
		g.Expect(apierrors.IsConflict(err)).To(gomega.BeTrue(), "a stale patch: %v", err)
		wrote, err := apppatch.MergePatch(ctx, c, env.Client, stale, setSync("OutOfSync"))
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(wrote).To(gomega.BeTrue())
		g.Expect(recorded.count(appPath)-before).To(gomega.Equal(3), "the stale patch, MergePatch's conflict, and its retry")
		stored := hub.GetApp("guestbook")
		g.Expect(stored.GetLabels()).To(gomega.HaveKeyWithValue("team", "a"))
		g.Expect(syncOf(stored)).To(gomega.Equal("OutOfSync"))
		g.Expect(stale.GetResourceVersion()).To(gomega.Equal(stored.GetResourceVersion()))
		g.Expect(stale.GetLabels()).To(gomega.HaveKeyWithValue("team", "a"), "the retry's object is the apiserver's copy")
	})

	t.Run("without MetadataAnswer, the whole object", func(t *testing.T) {
		g := testenv.NewGomega(t)
		fresh := hub.GetApp("guestbook")
		before := fresh.DeepCopy()
		g.Expect(unstructured.SetNestedField(fresh.Object, "Unknown", "status", "sync", "status")).To(gomega.Succeed())
		g.Expect(c.Patch(ctx, fresh, client.MergeFrom(before))).To(gomega.Succeed())
		kind, _ := recorded.last(t, appPath)
		g.Expect(kind).To(gomega.Equal(argoapp.KindApplication))
	})

	t.Run("an apply of a ManifestWork", func(t *testing.T) {
		g := testenv.NewGomega(t)
		hub.CreateNamespace("cluster1")
		work := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": workv1.GroupVersion.String(), "kind": "ManifestWork",
			"metadata": map[string]any{"name": "answers-" + ns, "namespace": "cluster1"},
			"spec": map[string]any{"workload": map[string]any{"manifests": []any{map[string]any{
				"apiVersion": "v1", "kind": "ConfigMap",
				"metadata": map[string]any{"name": "payload", "namespace": "default"},
				"data":     map[string]any{"content": strings.Repeat("x", 4096)},
			}}}},
		}}
		g.Expect(c.Apply(ctx, client.ApplyConfigurationFromUnstructured(work), client.FieldOwner("answers-test"),
			client.ForceOwnership, hubcache.MetadataAnswer)).To(gomega.Succeed())
		kind, size := recorded.last(t, "/apis/work.open-cluster-management.io/v1/namespaces/cluster1/manifestworks/answers-"+ns)
		g.Expect(kind).To(gomega.Equal("PartialObjectMetadata"))
		g.Expect(size).To(gomega.BeNumerically("<", 4096))
		stored := &workv1.ManifestWork{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(work), stored)).To(gomega.Succeed())
		g.Expect(work.GetResourceVersion()).To(gomega.Equal(stored.ResourceVersion))
		g.Expect(string(work.GetUID())).To(gomega.Equal(string(stored.UID)))
		g.Expect(stored.Spec.Workload.Manifests).To(gomega.HaveLen(1))
		g.Expect(stored.ManagedFields).To(gomega.ContainElement(gomega.HaveField("Manager", "answers-test")))
	})
}

func syncOf(app *unstructured.Unstructured) string {
	status, _, _ := unstructured.NestedString(app.Object, "status", "sync", "status")
	return status
}

func setSync(status string) apppatch.Mutation {
	return func(app *unstructured.Unstructured) (bool, error) {
		if syncOf(app) == status {
			return false, nil
		}
		return true, unstructured.SetNestedField(app.Object, status, "status", "sync", "status")
	}
}

// TestIndexAcrossNamespaces: on a real apiserver, a List through the manager's cache with
// client.MatchingFields and no namespace finds the objects of every namespace that
// IndexAcrossNamespaces indexed under the value, and only those.
func TestIndexAcrossNamespaces(t *testing.T) {
	env := shared.Get(t)
	ctx := t.Context()
	g := testenv.NewGomega(t)
	scheme, err := hubcache.NewScheme()
	g.Expect(err).NotTo(gomega.HaveOccurred())
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	const field = "test.owner"
	g.Expect(hubcache.IndexAcrossNamespaces(ctx, mgr.GetCache(), &workv1.ManifestWork{}, field, func(o client.Object) []string {
		if owner := o.GetAnnotations()["owner"]; owner != "" {
			return []string{owner}
		}
		return nil
	})).To(gomega.Succeed())
	go func() { _ = mgr.Start(ctx) }()
	g.Expect(mgr.GetCache().WaitForCacheSync(ctx)).To(gomega.BeTrue())

	for _, w := range []struct{ namespace, name, owner string }{
		{"index-a", "one", "argocd/app"}, {"index-b", "two", "argocd/app"}, {"index-b", "three", "argocd/other"}, {"index-c", "four", ""},
	} {
		g.Expect(testenv.CreateNamespace(ctx, env.Client, w.namespace)).To(gomega.Succeed())
		work := &workv1.ManifestWork{}
		work.Namespace, work.Name = w.namespace, w.name
		if w.owner != "" {
			work.Annotations = map[string]string{"owner": w.owner}
		}
		g.Expect(env.Client.Create(ctx, work)).To(gomega.Succeed())
	}
	names := func(value string) func() []string {
		return func() []string {
			works := &workv1.ManifestWorkList{}
			g.Expect(mgr.GetCache().List(ctx, works, client.MatchingFields{field: value})).To(gomega.Succeed())
			var out []string
			for _, w := range works.Items {
				out = append(out, w.Namespace+"/"+w.Name)
			}
			return out
		}
	}
	g.Eventually(names("argocd/app")).Should(gomega.ConsistOf("index-a/one", "index-b/two"))
	g.Eventually(names("argocd/other")).Should(gomega.ConsistOf("index-b/three"))
	g.Expect(names("argocd/none")()).To(gomega.BeEmpty())
}
