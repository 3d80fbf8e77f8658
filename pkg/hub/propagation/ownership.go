package propagation

// This file holds which ManifestWorks are this manager's. Red Hat ACM's own pull
// controller selects the same hub Applications, puts the same pull label and
// back-pointer annotations on its works and names them the same way; another install of
// this addon under another addon name does too. The manager updates and deletes only its
// own works, and leaves an Application that another controller serves alone unless the
// operator chose to take it over.

import (
	"context"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
)

// worksOf returns the pulled ManifestWorks that point back to the Application key,
// split into the manager's own and the others'. A work is the manager's when its
// argoapp.LabelAddon names this addon. A work without that label, from a version of
// the manager that did not set it, is the manager's when the manager's field manager
// applied it (read from the apiserver: the cache holds no managed fields); the next
// apply labels it. With Settings.TakeOverForeignWorks, every work is the manager's.
func (r *reconciler) worksOf(ctx context.Context, key types.NamespacedName) (ours, foreign []workv1.ManifestWork, err error) {
	works := &workv1.ManifestWorkList{}
	if err := r.client.List(ctx, works, client.MatchingFields{indexWorkByApplication: key.String()}); err != nil {
		return nil, nil, fmt.Errorf("list the ManifestWorks of application %s: %w", key, err)
	}
	for i := range works.Items {
		work := &works.Items[i]
		mine := r.opts.TakeOverForeignWorks
		if !mine {
			if mine, err = r.madeByUs(ctx, work); err != nil {
				return nil, nil, err
			}
		}
		if mine {
			ours = append(ours, *work)
		} else {
			foreign = append(foreign, *work)
		}
	}
	return ours, foreign, nil
}

// madeByUs reports whether work is this manager's; see worksOf.
func (r *reconciler) madeByUs(ctx context.Context, work *workv1.ManifestWork) (bool, error) {
	if addon, labelled := work.Labels[argoapp.LabelAddon]; labelled {
		return addon == r.opts.AddonName, nil
	}
	live := &workv1.ManifestWork{}
	if err := r.apiReader.Get(ctx, client.ObjectKeyFromObject(work), live); apierrors.IsNotFound(err) {
		return false, nil
	} else if err != nil {
		return false, fmt.Errorf("get manifestwork %s/%s: %w", work.Namespace, work.Name, err)
	}
	if addon, labelled := live.Labels[argoapp.LabelAddon]; labelled {
		return addon == r.opts.AddonName, nil
	}
	return slices.ContainsFunc(live.ManagedFields, func(m metav1.ManagedFieldsEntry) bool { return m.Manager == FieldManager }), nil
}

// servedByAnother is the outcome of an Application that another controller serves.
func (r *reconciler) servedByAnother(foreign []workv1.ManifestWork) outcome {
	names := make([]string, 0, len(foreign))
	for _, w := range foreign {
		names = append(names, w.Namespace+"/"+w.Name)
	}
	return refuse(argoapp.ReasonServedByAnotherController, fmt.Sprintf(
		"ManifestWork %s of this application was made by another controller (Red Hat ACM's pull controller, or another install of this addon: its label %s is not %q); "+
			"this addon leaves the application to it. To move the application to this addon, turn the other controller off for it, then delete its works or run the manager with --take-over-foreign-works",
		strings.Join(names, ", "), argoapp.LabelAddon, r.opts.AddonName))
}
