package addon

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"open-cluster-management.io/addon-framework/pkg/addonmanager"
	"open-cluster-management.io/addon-framework/pkg/agent"
	"open-cluster-management.io/addon-framework/pkg/utils"
	addonv1beta1 "open-cluster-management.io/api/addon/v1beta1"
	workv1 "open-cluster-management.io/api/work/v1"
)

// The reason for StartFramework's informers: addon-framework's filters read a tombstone as
// an object, and panic. When this test fails, the framework reads tombstones itself and
// withoutTombstones can go.
func TestFrameworkFilterPanicsOnATombstone(t *testing.T) {
	tombstone := cache.DeletedFinalStateUnknown{Key: "c1/other", Obj: &addonv1beta1.ManagedClusterAddOn{}}
	defer func() {
		if recover() == nil {
			t.Error("addon-framework's FilterByAddonName read a tombstone without panicking: StartFramework's informers are no longer needed")
		}
	}()
	utils.FilterByAddonName(map[string]agent.AgentAddon{})(tombstone)
}

// An informer whose watch ends with 410 Gone relists, as after a restart of the
// apiserver; the ManagedClusterAddOn deleted meanwhile reaches the framework's filter and
// handler as the object it was, not as the tombstone that panics the filter.
func TestWithoutTombstonesHandsTheLastKnownObject(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		mu    sync.Mutex
		items = []addonv1beta1.ManagedClusterAddOn{{ObjectMeta: metav1.ObjectMeta{Namespace: "c1", Name: "other", ResourceVersion: "1"}}}
		rv    = "1"
	)
	watches := make(chan *watch.FakeWatcher, 16)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
			mu.Lock()
			defer mu.Unlock()
			return &addonv1beta1.ManagedClusterAddOnList{ListMeta: metav1.ListMeta{ResourceVersion: rv}, Items: slices.Clone(items)}, nil
		},
		WatchFuncWithContext: func(_ context.Context, options metav1.ListOptions) (watch.Interface, error) {
			if options.SendInitialEvents != nil {
				return nil, errors.New("no watch-list here: list, then watch")
			}
			w := watch.NewFakeWithChanSize(1, false)
			watches <- w
			return w, nil
		},
	}
	informer := cache.NewSharedIndexInformer(lw, &addonv1beta1.ManagedClusterAddOn{}, 0, cache.Indexers{})
	deleted := make(chan any, 1)
	if _, err := (withoutTombstones{informer}).AddEventHandler(cache.FilteringResourceEventHandler{
		FilterFunc: utils.FilterByAddonName(map[string]agent.AgentAddon{"other": nil}),
		Handler:    cache.ResourceEventHandlerFuncs{DeleteFunc: func(obj any) { deleted <- obj }},
	}); err != nil {
		t.Fatal(err)
	}
	go informer.Run(ctx.Done())

	var first *watch.FakeWatcher
	select {
	case first = <-watches:
	case <-time.After(30 * time.Second):
		t.Fatal("the informer did not watch")
	}
	mu.Lock()
	items, rv = nil, "3"
	mu.Unlock()
	first.Error(&apierrors.NewResourceExpired("too old resource version: 1 (3)").ErrStatus)

	select {
	case obj := <-deleted:
		mca, ok := obj.(*addonv1beta1.ManagedClusterAddOn)
		if !ok || mca.Namespace != "c1" || mca.Name != "other" {
			t.Fatalf("the handler got %T %v, want the deleted ManagedClusterAddOn c1/other", obj, obj)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the deletion learnt by the relist did not reach the handler")
	}
}

// TestStripAgentWork: the framework's cache keeps of an addon's work what its
// controllers read (the spec, the work's conditions, each manifest's identity and status
// feedback), without managed fields and the conditions of each manifest; of a deploy
// work, only the manifests with feedback, which its health check reads; of any other
// (the pre-delete hook's), every manifest, which FindManifestValue walks. The manifests
// that two clusters' works hold alike are one copy.
func TestStripAgentWork(t *testing.T) {
	feedback := workv1.StatusFeedbackResult{Values: []workv1.FeedbackValue{{Name: "ReadyReplicas", Value: workv1.FieldValue{Type: workv1.Integer, Integer: ptr.To[int64](1)}}}}
	meta := workv1.ManifestResourceMeta{Group: "apps", Version: "v1", Kind: "Deployment", Resource: "deployments", Namespace: "agent", Name: "agent"}
	role := workv1.ManifestResourceMeta{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "Role", Resource: "roles", Namespace: "agent", Name: "agent"}
	applied := []metav1.Condition{{Type: workv1.ManifestApplied, Status: metav1.ConditionTrue}}
	work := func(name string) *workv1.ManifestWork {
		return &workv1.ManifestWork{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{addonv1beta1.AddonLabelKey: "argocd-pull"},
				ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "work-agent"}}},
			Spec: workv1.ManifestWorkSpec{Workload: workv1.ManifestsTemplate{Manifests: []workv1.Manifest{
				{RawExtension: runtime.RawExtension{Raw: []byte(`{"kind":"Deployment"}`)}},
				{RawExtension: runtime.RawExtension{Raw: []byte(`{"kind":"Role"}`)}},
			}}},
			Status: workv1.ManifestWorkStatus{
				Conditions: []metav1.Condition{{Type: workv1.WorkAvailable, Status: metav1.ConditionTrue}},
				ResourceStatus: workv1.ManifestResourceStatus{Manifests: []workv1.ManifestCondition{
					{ResourceMeta: role, Conditions: applied},
					{ResourceMeta: meta, StatusFeedbacks: feedback, Conditions: applied},
				}},
			},
		}
	}
	for _, tc := range []struct {
		name string
		keep []workv1.ManifestCondition
	}{
		{"addon-argocd-pull-deploy-0", []workv1.ManifestCondition{{ResourceMeta: meta, StatusFeedbacks: feedback}}},
		{"addon-argocd-pull-pre-delete", []workv1.ManifestCondition{{ResourceMeta: role}, {ResourceMeta: meta, StatusFeedbacks: feedback}}},
	} {
		want := work(tc.name)
		want.ManagedFields = nil
		want.Status.ResourceStatus.Manifests = tc.keep
		got, err := stripAgentWork(work(tc.name))
		if err != nil {
			t.Fatal(err)
		}
		if !equality.Semantic.DeepEqual(got, want) {
			t.Errorf("%s stripped:\n%+v\nwant\n%+v", tc.name, got, want)
		}
	}

	first, _ := stripAgentWork(work("addon-argocd-pull-deploy-0"))
	second, _ := stripAgentWork(work("addon-argocd-pull-deploy-0"))
	a, b := first.(*workv1.ManifestWork).Spec.Workload.Manifests[1].Raw, second.(*workv1.ManifestWork).Spec.Workload.Manifests[1].Raw
	if &a[0] != &b[0] {
		t.Error("two works' equal manifests are two copies")
	}
}

// triggers records the addons that the framework is asked to sync.
type triggers struct {
	addonmanager.AddonManager
	keys []string
}

func (t *triggers) Trigger(cluster, addon string) { t.keys = append(t.keys, cluster+"/"+addon) }

// TestResyncAddonsSyncsEachAddon: each ManagedClusterAddOn of the shared informer is
// handed to the framework's controllers, as its own informer's resync did.
func TestResyncAddonsSyncsEachAddon(t *testing.T) {
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	for _, cluster := range []string{"c1", "c2"} {
		if err := store.Add(&addonv1beta1.ManagedClusterAddOn{ObjectMeta: metav1.ObjectMeta{Namespace: cluster, Name: "argocd-pull"}}); err != nil {
			t.Fatal(err)
		}
	}
	var got triggers
	resyncAddons(&got, store)
	slices.Sort(got.keys)
	if want := []string{"c1/argocd-pull", "c2/argocd-pull"}; !slices.Equal(got.keys, want) {
		t.Errorf("synced %v, want %v", got.keys, want)
	}
}
