package argoapp

import (
	"crypto/sha1" //nolint:gosec // a label value compatible with existing pull systems, not a security use
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/gobwas/glob"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// ErrMalformedPullLabel is wrapped by IsPullRequested when the pull label is present but
// does not parse as a boolean. It is bad user input, not a transient failure: report it
// on the Application (for example as a MalformedLabel condition) instead of retrying.
var ErrMalformedPullLabel = errors.New("malformed pull label")

// IsPullRequested reports whether a hub Application asks to be pulled: the pull label
// parses as true with strconv.ParseBool ("true", "True", "1", ...) and the cluster
// annotation is non-empty. A pull label that does not parse (for example "yes") returns
// false and an error wrapping ErrMalformedPullLabel, so that it is not mistaken for
// "false".
//
// The skip-reconcile annotation is not part of the decision; see IsReconcileSkipped.
func IsPullRequested(labels, annotations map[string]string) (bool, error) {
	pull, err := PullLabelValue(labels)
	if err != nil {
		return false, err
	}
	return pull && annotations[AnnotationOCMManagedCluster] != "", nil
}

// PullLabelValue returns the value of the pull label parsed with strconv.ParseBool, and
// false when the label is absent. A value that does not parse returns an error wrapping
// ErrMalformedPullLabel. Unlike IsPullRequested, it ignores the cluster annotation: it
// tells "the user opted out" (false) from "the user opted in but named no cluster".
func PullLabelValue(labels map[string]string) (bool, error) {
	value, ok := labels[LabelPullToOCMManagedCluster]
	if !ok {
		return false, nil
	}
	pull, err := strconv.ParseBool(value)
	if err != nil {
		return false, fmt.Errorf("%w: %s=%q is not a boolean", ErrMalformedPullLabel, LabelPullToOCMManagedCluster, value)
	}
	return pull, nil
}

// IsPulledAndSkipped reports whether a hub Application is pulled (IsPullRequested) and
// skipped by the hub Argo CD (IsReconcileSkipped): one whose status, and whose entries in
// the hub Argo CD's cache, only this addon writes.
func IsPulledAndSkipped(labels, annotations map[string]string) bool {
	pulled, err := IsPullRequested(labels, annotations)
	return err == nil && pulled && IsReconcileSkipped(annotations)
}

// IsReconcileSkipped reports whether the skip-reconcile annotation parses as true, the
// way Argo CD reads it. A pulled hub Application without it is also pushed by the hub
// Argo CD.
func IsReconcileSkipped(annotations map[string]string) bool {
	skip, err := strconv.ParseBool(annotations[AnnotationSkipReconcile])
	return err == nil && skip
}

// OwningApplicationSet returns the name of the Argo CD ApplicationSet among the owner
// references, if there is one. Owner references are namespace-local, so the
// ApplicationSet lives in the namespace of the owned Application.
func OwningApplicationSet(refs []metav1.OwnerReference) (string, bool) {
	for _, ref := range refs {
		if ref.Kind != KindApplicationSet {
			continue
		}
		gv, err := schema.ParseGroupVersion(ref.APIVersion)
		if err == nil && gv.Group == Group && ref.Name != "" {
			return ref.Name, true
		}
	}
	return "", false
}

// StrategyRollingSync is the ApplicationSet strategy type of progressive syncs.
const StrategyRollingSync = "RollingSync"

// SyncsByRollingSync reports whether an ApplicationSet syncs its Applications step by
// step (progressive syncs), as the ApplicationSet controller tells it
// (progressiveSyncsRollingSyncStrategyEnabled): spec.strategy.type RollingSync with at
// least one step.
func SyncsByRollingSync(appSet *unstructured.Unstructured) bool {
	strategy, _, _ := unstructured.NestedString(appSet.Object, "spec", "strategy", "type")
	steps, _, _ := unstructured.NestedSlice(appSet.Object, "spec", "strategy", "rollingSync", "steps")
	return strategy == StrategyRollingSync && len(steps) > 0
}

// SyncsAutomatically reports whether Argo CD syncs app on its own when it is OutOfSync:
// spec.syncPolicy.automated is set, and its enabled is not false (Argo CD's
// SyncPolicy.IsAutomatedSyncEnabled).
func SyncsAutomatically(app *unstructured.Unstructured) bool {
	return automatedSyncPolicy(app.Object, "spec", "syncPolicy", "automated")
}

// TemplateSyncsAutomatically reports whether the Applications of appSet's template sync
// on their own when OutOfSync (SyncsAutomatically of spec.template).
func TemplateSyncsAutomatically(appSet *unstructured.Unstructured) bool {
	return automatedSyncPolicy(appSet.Object, "spec", "template", "spec", "syncPolicy", "automated")
}

// automatedSyncPolicy reports whether the syncPolicy.automated at path of obj is set, and
// its enabled is not false.
func automatedSyncPolicy(obj map[string]any, path ...string) bool {
	value, found, _ := unstructured.NestedFieldNoCopy(obj, path...)
	automated, isMap := value.(map[string]any)
	if !found || !isMap {
		return false
	}
	enabled, isBool := automated["enabled"].(bool)
	return !isBool || enabled
}

// ApplicationSetKey returns "<namespace>/<name>", the value of
// AnnotationHostingApplicationSet.
func ApplicationSetKey(namespace, name string) string {
	return namespace + "/" + name
}

// ApplicationSetHash returns the value of LabelApplicationSetHash for an ApplicationSet:
// the hex SHA-1 of ApplicationSetKey (40 characters, a valid label value). It is the hash
// existing pull systems put on their works, so selectors written for them keep working.
func ApplicationSetHash(namespace, name string) string {
	sum := sha1.Sum([]byte(ApplicationSetKey(namespace, name))) //nolint:gosec // see import
	return hex.EncodeToString(sum[:])
}

// ProjectPermitsNamespace reports whether an Application in namespace may use the
// AppProject project, as Argo CD decides it (AppProject.IsAppNamespacePermitted): an
// Application in the Argo CD namespace may use any project; one elsewhere only a project
// whose spec.sourceNamespaces matches its namespace, by name, glob, or a regular
// expression between slashes.
func ProjectPermitsNamespace(project *unstructured.Unstructured, namespace, argoCDNamespace string) bool {
	if namespace == "" || namespace == argoCDNamespace {
		return true
	}
	patterns, _, _ := unstructured.NestedStringSlice(project.Object, "spec", "sourceNamespaces")
	for _, pattern := range patterns {
		if len(pattern) > 1 && strings.HasPrefix(pattern, "/") && strings.HasSuffix(pattern, "/") {
			if re, err := regexp.Compile(pattern[1 : len(pattern)-1]); err == nil && re.MatchString(namespace) {
				return true
			}
		}
		if g, err := glob.Compile(pattern); err == nil && g.Match(namespace) {
			return true
		}
	}
	return false
}
