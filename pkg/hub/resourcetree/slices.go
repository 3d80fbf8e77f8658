package resourcetree

import (
	"context"
	"sync"

	"golang.org/x/sync/singleflight"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	statusv1alpha1 "github.com/ocm-gitops/argocd-pull-addon/pkg/apis/argocdpull/v1alpha1"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/clusterreport"
)

// fullSlices reads slices whole from the apiserver: the manager's cache keeps them
// without the tree's nodes, the diffs and the resources' images (hubcache.Options), which this
// controller writes. It keeps the last few slices read, by resourceVersion, and shares
// one read among concurrent misses of a slice, so that the apps of one slice that
// changed cost one read.
type fullSlices struct {
	reader client.Reader
	max    int
	reads  singleflight.Group

	mu   sync.Mutex
	read map[types.NamespacedName]fullSlice
}

type fullSlice struct {
	resourceVersion string
	apps            map[string]statusv1alpha1.AppStatus // by clusterreport.EntryKey
}

// keptSlices is how many slices fullSlices keeps: a burst of one slice's apps, a few
// slices at a time.
const keptSlices = 16

func newFullSlices(reader client.Reader) *fullSlices {
	return &fullSlices{reader: reader, max: keptSlices, read: map[types.NamespacedName]fullSlice{}}
}

// entry returns the entry of the spoke app appKey ("<namespace>/<name>") in the slice
// key, whose version in the manager's cache is resourceVersion; false when the slice no
// longer holds it.
func (f *fullSlices) entry(ctx context.Context, key types.NamespacedName, resourceVersion, appKey string) (statusv1alpha1.AppStatus, bool, error) {
	f.mu.Lock()
	s, ok := f.read[key]
	f.mu.Unlock()
	if !ok || s.resourceVersion != resourceVersion {
		// Reconciles of apps of one slice that miss together share one read.
		v, err, _ := f.reads.Do(key.String()+"@"+resourceVersion, func() (any, error) {
			return f.get(ctx, key)
		})
		if err != nil {
			return statusv1alpha1.AppStatus{}, false, client.IgnoreNotFound(err)
		}
		s = v.(fullSlice)
	}
	e, ok := s.apps[appKey]
	return e, ok, nil
}

// get reads a slice from the apiserver and keeps it.
func (f *fullSlices) get(ctx context.Context, key types.NamespacedName) (fullSlice, error) {
	slice := &statusv1alpha1.ApplicationStatusSlice{}
	if err := f.reader.Get(ctx, key, slice); err != nil {
		return fullSlice{}, err
	}
	s := fullSlice{resourceVersion: slice.ResourceVersion, apps: make(map[string]statusv1alpha1.AppStatus, len(slice.Apps))}
	for _, e := range slice.Apps {
		s.apps[clusterreport.EntryKey(e)] = e
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.read) >= f.max {
		for k := range f.read {
			delete(f.read, k) // any one: a burst rereads at most one slice
			break
		}
	}
	f.read[key] = s
	return s, nil
}
