package testenv

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// WriteLog counts the writes that controllers make through a client that Wrap returns:
// the creates, updates, patches, applies and deletes of whole objects (not of a
// subresource, such as status), by "<verb> <Kind> <namespace>/<name>", each as it is
// sent, and, apart, those that succeeded, as they return. A write is counted before its
// request goes: a watch may show it before its response reaches the writer, and a test
// that saw it must find it counted. The zero value is ready; it is safe for concurrent
// use.
type WriteLog struct {
	mu        sync.Mutex
	attempts  map[string]int
	succeeded map[string]int
}

// Wrap returns c, its writes counted in the log.
func (w *WriteLog) Wrap(c client.WithWatch) client.WithWatch {
	kindOf := func(obj runtime.Object) string {
		gvk, err := apiutil.GVKForObject(obj, c.Scheme())
		if err != nil {
			return fmt.Sprintf("%T", obj)
		}
		return gvk.Kind
	}
	// count counts the write do of obj. A create of a generated name is counted when it
	// returns: its name is known only then.
	count := func(verb string, obj client.Object, do func() error) error {
		key := func() string { return verb + " " + kindOf(obj) + " " + obj.GetNamespace() + "/" + obj.GetName() }
		if obj.GetName() == "" {
			err := do()
			w.sent(key())
			w.returned(key(), err)
			return err
		}
		sent := key()
		w.sent(sent)
		err := do()
		w.returned(sent, err)
		return err
	}
	return interceptor.NewClient(c, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			return count("create", obj, func() error { return c.Create(ctx, obj, opts...) })
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			return count("update", obj, func() error { return c.Update(ctx, obj, opts...) })
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			return count("patch", obj, func() error { return c.Patch(ctx, obj, patch, opts...) })
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			return count("delete", obj, func() error { return c.Delete(ctx, obj, opts...) })
		},
		Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			key := "apply"
			if u, ok := obj.(interface {
				GetKind() string
				GetNamespace() string
				GetName() string
			}); ok {
				key += " " + u.GetKind() + " " + u.GetNamespace() + "/" + u.GetName()
			}
			w.sent(key)
			err := c.Apply(ctx, obj, opts...)
			w.returned(key, err)
			return err
		},
	})
}

// sent counts a write of key as it is sent.
func (w *WriteLog) sent(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.attempts == nil {
		w.attempts, w.succeeded = map[string]int{}, map[string]int{}
	}
	w.attempts[key]++
}

// returned counts the write of key that sent counted as a success, when err is nil.
func (w *WriteLog) returned(key string, err error) {
	if err != nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.succeeded[key]++
}

// Count returns how many writes of verb ("create", "update", "patch", "delete",
// "apply") to the object kind namespace/name were made.
func (w *WriteLog) Count(verb, kind, namespace, name string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.attempts[verb+" "+kind+" "+namespace+"/"+name]
}

// Matching returns how many writes were made whose "<verb> <Kind> " starts with one of
// prefixes, such as "apply ManifestWork " or "patch "; every write without prefixes.
func (w *WriteLog) Matching(prefixes ...string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return sum(w.attempts, prefixes)
}

// Succeeded is Matching, of the writes that succeeded only.
func (w *WriteLog) Succeeded(prefixes ...string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return sum(w.succeeded, prefixes)
}

func sum(counts map[string]int, prefixes []string) int {
	n := 0
	for key, count := range counts {
		if len(prefixes) == 0 || hasAnyPrefix(key, prefixes) {
			n += count
		}
	}
	return n
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}
