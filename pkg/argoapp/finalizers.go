package argoapp

import (
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// IsArgoCDFinalizer reports whether Argo CD handles the finalizer f, such as
// ResourcesFinalizer and its /background and /foreground forms: its domain is
// argocd.argoproj.io or a subdomain of it. The hub Argo CD skips pulled Applications, so
// the pull model handles these finalizers on the hub.
func IsArgoCDFinalizer(f string) bool {
	domain, _, _ := strings.Cut(f, "/")
	return domain == "argocd.argoproj.io" || strings.HasSuffix(domain, ".argocd.argoproj.io")
}

// HandlesArgoCDFinalizers reports whether the pull model, and not the hub Argo CD, must
// release the Argo CD finalizers of a hub Application once its works are gone: it is
// pulled (the manager's clean-up finalizer, or the pull label), the hub Argo CD skips it,
// and no other pull controller serves it (whose business they are then).
func HandlesArgoCDFinalizers(app *unstructured.Unstructured, servedElsewhere bool) bool {
	pulled, _ := PullLabelValue(app.GetLabels())
	ours := slices.Contains(app.GetFinalizers(), FinalizerManifestWorkCleanup)
	return (ours || pulled) && IsReconcileSkipped(app.GetAnnotations()) && !servedElsewhere
}

// ReleaseFinalizers removes from app the manager's clean-up finalizer and, with
// releaseArgoCD, Argo CD's finalizers; it returns those it removed.
func ReleaseFinalizers(app *unstructured.Unstructured, releaseArgoCD bool) []string {
	var removed []string
	kept := slices.DeleteFunc(slices.Clone(app.GetFinalizers()), func(f string) bool {
		if f == FinalizerManifestWorkCleanup || (releaseArgoCD && IsArgoCDFinalizer(f)) {
			removed = append(removed, f)
			return true
		}
		return false
	})
	if len(removed) > 0 {
		app.SetFinalizers(kept)
	}
	return removed
}
