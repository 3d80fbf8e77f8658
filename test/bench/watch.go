package main

import (
	"context"
	"slices"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	workv1 "open-cluster-management.io/api/work/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
)

// changeWatcher watches one resource of a namespace for the measured changes, and
// records when it first sees each, against the time the change carries.
type changeWatcher struct {
	mu   sync.Mutex
	seen map[int]time.Duration
}

// watchChanges starts a watch of resource in namespace from now on; it stops with ctx.
func watchChanges(ctx context.Context, cfg *rest.Config, resource schema.GroupVersionResource, namespace string) (*changeWatcher, error) {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	objects := dyn.Resource(resource).Namespace(namespace)
	list, err := objects.List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return nil, err
	}
	w := &changeWatcher{seen: map[int]time.Duration{}}
	go w.run(ctx, objects, list.GetResourceVersion())
	return w, nil
}

func (w *changeWatcher) run(ctx context.Context, objects dynamic.ResourceInterface, resourceVersion string) {
	for ctx.Err() == nil {
		events, err := objects.Watch(ctx, metav1.ListOptions{ResourceVersion: resourceVersion, AllowWatchBookmarks: true})
		if err != nil {
			ctrl.Log.Error(err, "watch for the measured changes; retrying")
			time.Sleep(time.Second)
			continue
		}
		for e := range events.ResultChan() {
			obj, ok := e.Object.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			resourceVersion = obj.GetResourceVersion()
			if e.Type == watch.Added || e.Type == watch.Modified {
				w.observe(obj, time.Now())
			}
		}
		events.Stop()
	}
}

func (w *changeWatcher) observe(obj *unstructured.Unstructured, now time.Time) {
	data, err := obj.MarshalJSON()
	if err != nil {
		return
	}
	changes := parseChanges(string(data))
	w.mu.Lock()
	defer w.mu.Unlock()
	for id, at := range changes {
		if _, done := w.seen[id]; !done {
			w.seen[id] = now.Sub(at)
		}
	}
}

// Seen reports whether the change has been seen.
func (w *changeWatcher) Seen(id int) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, ok := w.seen[id]
	return ok
}

// Latency returns the latency of the change id, and whether it was seen.
func (w *changeWatcher) Latency(id int) (time.Duration, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	d, ok := w.seen[id]
	return d, ok
}

// Latencies returns the latency of every change seen, sorted.
func (w *changeWatcher) Latencies() []time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []time.Duration
	for _, d := range w.seen {
		out = append(out, d)
	}
	slices.Sort(out)
	return out
}

// percentile returns the p-th percentile (nearest rank) of sorted durations.
func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := (p*len(sorted) + 99) / 100
	return sorted[max(rank, 1)-1].Round(time.Millisecond)
}

// workLatencies records, for each pulled Application, the time its create returned and
// the time the bench's informer first saw a ManifestWork of it: the create -> work
// latency of P1, from the bench's side (the work's watch event included).
type workLatencies struct {
	mu      sync.Mutex
	created map[client.ObjectKey]time.Time
	seen    map[client.ObjectKey]time.Time
}

// watchWorkLatencies starts recording the first sight of each pulled work in informers,
// the stand-ins' cache.
func watchWorkLatencies(ctx context.Context, informers crcache.Informers) (*workLatencies, error) {
	w := &workLatencies{created: map[client.ObjectKey]time.Time{}, seen: map[client.ObjectKey]time.Time{}}
	informer, err := informers.GetInformer(ctx, &workv1.ManifestWork{})
	if err != nil {
		return nil, err
	}
	_, err = informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
		now := time.Now()
		work, ok := obj.(*workv1.ManifestWork)
		if !ok {
			return
		}
		key, ok := argoapp.ApplicationOfWork(work)
		if !ok {
			return
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		if _, done := w.seen[key]; !done {
			w.seen[key] = now
		}
	}})
	return w, err
}

// Created records the time the create of an Application returned.
func (w *workLatencies) Created(key client.ObjectKey, at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.created[key] = at
}

// Latencies returns, sorted, the latency of every Application whose work was seen; a
// work seen before its create returned counts as 0.
func (w *workLatencies) Latencies() []time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []time.Duration
	for key, created := range w.created {
		if seen, ok := w.seen[key]; ok {
			out = append(out, max(seen.Sub(created), 0))
		}
	}
	slices.Sort(out)
	return out
}
