package addon

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"open-cluster-management.io/addon-framework/pkg/agent"
	"open-cluster-management.io/addon-framework/pkg/utils"
	addonv1beta1 "open-cluster-management.io/api/addon/v1beta1"
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
