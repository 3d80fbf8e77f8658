// Package apppatch is how the hub controllers write hub Applications. Several of them
// write the same Application (propagation its finalizer and condition, the status
// mirror its status), the Application CRD has no status subresource, and a merge patch
// replaces lists whole (finalizers, status.conditions). So each write is a merge patch
// with the resourceVersion read, and a conflict is retried at once from the apiserver's
// copy, not from the cache, which may not have caught up with the last write yet.
package apppatch

import (
	"context"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/hub/hubcache"
)

// Mutation changes an Application in place and reports whether it changed anything.
type Mutation func(app *unstructured.Unstructured) (bool, error)

// MergePatch applies mutate to app and, when it reports a change, patches the change
// with optimistic locking. On a conflict it reads the Application again with live and
// applies mutate to that. app holds the result (with hubcache.MetadataAnswer: what it
// wrote, with the metadata the apiserver answered). It reports whether it wrote.
func MergePatch(ctx context.Context, c client.Client, live client.Reader, app *unstructured.Unstructured,
	mutate Mutation, opts ...client.PatchOption) (bool, error) {
	key := client.ObjectKeyFromObject(app)
	reread, wrote := false, false
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if reread {
			fresh := argoapp.NewApplication()
			if err := live.Get(ctx, key, fresh); err != nil {
				return err
			}
			app.Object = fresh.Object
		}
		reread = true
		before := app.DeepCopy()
		changed, err := mutate(app)
		if err != nil || !changed {
			return err
		}
		// The object holds what the patch makes of it: the apiserver's answer need only
		// carry its metadata.
		opts := append(slices.Clip(opts), hubcache.MetadataAnswer)
		if err := c.Patch(ctx, app, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}), opts...); err != nil {
			return err
		}
		wrote = true
		return nil
	})
	return wrote, err
}

// All returns a Mutation that applies each of mutations (nil ones are skipped) in turn,
// so that they make one patch, and reports whether any of them changed app.
func All(mutations ...Mutation) Mutation {
	return func(app *unstructured.Unstructured) (bool, error) {
		changed := false
		for _, mutate := range mutations {
			if mutate == nil {
				continue
			}
			c, err := mutate(app)
			if err != nil {
				return false, err
			}
			changed = changed || c
		}
		return changed, nil
	}
}
