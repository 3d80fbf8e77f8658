// Package hubcache is the one cache of the hub manager, which every hub controller reads
// through: the types it knows (NewScheme), the objects it keeps (Options) and the client
// that reads through it (NewClient). pkg/hub builds each of them once and hands them to
// every controller's Setup; no controller builds its own.
package hubcache

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"unsafe"

	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/metadata"
	toolscache "k8s.io/client-go/tools/cache"
	addonv1beta1 "open-cluster-management.io/api/addon/v1beta1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	workv1 "open-cluster-management.io/api/work/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/ocm-gitops/argocd-pull-addon/pkg/apis/apps/v1alpha1"
	statusv1alpha1 "github.com/ocm-gitops/argocd-pull-addon/pkg/apis/argocdpull/v1alpha1"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/argoapp"
	"github.com/ocm-gitops/argocd-pull-addon/pkg/clusterreport"
)

// Scope is what the hub's cache keeps of the kinds it would otherwise keep whole.
type Scope struct {
	// AddonName is the name of the ClusterManagementAddOn and of every ManagedClusterAddOn
	// of the addon: the only ones cached.
	AddonName string
	// ArgoCDNamespace is the hub Argo CD's namespace: the only one whose AppProjects are
	// cached.
	ArgoCDNamespace string
	// WatchNamespaces are the only namespaces whose Applications and ApplicationSets are
	// cached; empty means all namespaces.
	WatchNamespaces []string
	// ReportFieldManager is the field manager of the report controller's applies: the
	// cache tells another writer of a report's statuses from it. Empty, it names none.
	ReportFieldManager string
}

// NewScheme returns the scheme of every type the hub controllers read or write:
// client-go's, OCM's cluster (v1, v1beta1), work (v1) and addon (v1beta1) types, the
// CRD type (the ApplicationSet report controller reads the served schema of its CRD), the
// MulticlusterApplicationSetReport and the agents' ApplicationStatusSlice. Applications, ApplicationSets and AppProjects are
// handled as unstructured objects and need no registration.
func NewScheme() (*runtime.Scheme, error) {
	scheme := runtime.NewScheme()
	for _, install := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme, clusterv1.Install, clusterv1beta1.Install, workv1.Install, addonv1beta1.Install,
		apiextensionsv1.AddToScheme, appsv1alpha1.AddToScheme, statusv1alpha1.AddToScheme,
	} {
		if err := install(scheme); err != nil {
			return nil, err
		}
	}
	return scheme, nil
}

// Options returns the options of the manager's cache, which keep it to what the hub
// controllers need:
//   - Applications and ApplicationSets of the watched namespaces only, and of each
//     Application a digest of status.resources and of status.history instead of the
//     lists (ResourcesDigest): the status mirror, their only reader, compares them and
//     writes them, and they are most of a pulled app's size; every field of an Application but its metadata
//     frozen as its JSON text, which NewClient's reads thaw (frozen.go); and the keys
//     and short values of the metadata held once (internKeys);
//   - AppProjects of the Argo CD namespace only;
//   - the ManagedClusterAddOns and the ClusterManagementAddOn named AddonName only;
//     the addon framework's controllers read the cache's informers of ManagedClusters
//     and ManagedClusterAddOns too (addon.StartFramework), so a transform of those kinds
//     must keep what they read;
//   - the ManifestWorks that carry the pull label only, which every work the addon
//     renders has, each manifest in its CompactManifest form (a digest, and of an
//     Application its operation) instead of its content, which is most of a work's size
//     (the whole Application), and without the work agent's conditions of each
//     manifest, which no controller reads (they read the work's conditions, and of each
//     manifest its identity and status feedback); the strings every work repeats held
//     once (internWork);
//   - the ApplicationStatusSlices of the addon's agents only (their addon label), without
//     what the hub does not show: the tree's nodes and the resources' images
//     (docs/design.md, section 4), so that the cache grows with the resources of the apps and
//     not with their trees;
//   - of each MulticlusterApplicationSetReport, its metadata only, which the apiserver
//     sends alone (a metadata watch): a report of a thousand clusters is up to its byte
//     budget (1 MiB), and the report controller, its only reader, compares what it would
//     write with the digest it wrote in an annotation; from the managed fields, dropped,
//     the name of another writer of the statuses (reportMetadata);
//   - no object's managedFields, which no controller reads: without them the cache of
//     10,000 Applications and their works is a fraction of the size.
//
// The controllers behave the same without them (they filter every event and read), but
// then cache every object of those kinds. With them, a read through the client of
// NewClient of an object outside these selections finds nothing.
func Options(scope Scope) cache.Options {
	var byNamespace cache.ByObject
	if len(scope.WatchNamespaces) > 0 {
		byNamespace.Namespaces = map[string]cache.Config{}
		for _, ns := range scope.WatchNamespaces {
			byNamespace.Namespaces[ns] = cache.Config{}
		}
	}
	byName := fields.OneTermEqualSelector("metadata.name", scope.AddonName)
	pulled, _ := labels.NewRequirement(argoapp.LabelPullToOCMManagedCluster, selection.Exists, nil)
	ownSlices := labels.SelectorFromSet(labels.Set{statusv1alpha1.LabelAddon: scope.AddonName})
	return cache.Options{
		ByObject: map[client.Object]cache.ByObject{
			argoapp.NewApplication():                         withTransform(byNamespace, TransformApplication),
			argoapp.NewApplicationSet():                      byNamespace,
			argoapp.NewAppProject():                          {Namespaces: map[string]cache.Config{scope.ArgoCDNamespace: {}}},
			&addonv1beta1.ManagedClusterAddOn{}:              {Field: byName},
			&addonv1beta1.ClusterManagementAddOn{}:           {Field: byName},
			&workv1.ManifestWork{}:                           {Label: labels.NewSelector().Add(*pulled), Transform: stripWork},
			&statusv1alpha1.ApplicationStatusSlice{}:         {Label: ownSlices, Transform: stripSlice},
			&appsv1alpha1.MulticlusterApplicationSetReport{}: {Transform: reportMetadata(scope.ReportFieldManager)},
		},
		DefaultTransform: cache.TransformStripManagedFields(),
	}
}

func withTransform(b cache.ByObject, transform toolscache.TransformFunc) cache.ByObject {
	b.Transform = transform
	return b
}

// digestPrefix starts every DigestOf: a ResourcesDigest, the digest of a
// CompactManifest, the statuses' digest of a report.
const digestPrefix = "sha256:"

// DigestOf is the digest of JSON-encoded content.
func DigestOf(encoded []byte) string {
	sum := sha256.Sum256(encoded)
	return digestPrefix + hex.EncodeToString(sum[:])
}

// ResourcesDigest is what the manager's cache holds at status.resources of a hub
// Application, in place of the list: a digest of its JSON encoding. The status mirror
// compares the list it would write with it (SameResources) and writes the list only when
// it differs; every other reader of the cache leaves status.resources alone, and a merge
// patch computed from a cached Application carries the field only when a writer set it.
func ResourcesDigest(resources []any) string {
	raw, err := json.Marshal(resources)
	if err != nil {
		return "" // never equal to a digest
	}
	return DigestOf(raw)
}

// SameResources reports whether status.resources (or status.history) of an
// Application, as the cache holds it (a ResourcesDigest) or as the apiserver returns it
// (a list), is resources.
func SameResources(current any, resources []any) bool {
	if digest, ok := current.(string); ok && strings.HasPrefix(digest, digestPrefix) {
		return digest == ResourcesDigest(resources)
	}
	return false
}

// TransformApplication is the cache's transform of a hub Application: it drops its
// managed fields, replaces its status.resources and its status.history (up to ten
// entries of a few hundred bytes each, which the status mirror alone reads and writes)
// with their ResourcesDigest, freezes
// every field but its metadata (frozen.go), interns the metadata's keys and short
// values (internKeys), and holds its labels, annotations and owner references once for
// all the Applications that have them alike (sharedMetadata). (The manager's
// DefaultTransform does not apply to a kind with its own Transform.) It is idempotent,
// as client-go asks of a transform: a frozen Application is left as it is.
func TransformApplication(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok || isFrozen(u) {
		return obj, nil
	}
	u.SetManagedFields(nil)
	if status, ok := u.Object["status"].(map[string]any); ok {
		if resources, ok := status["resources"].([]any); ok {
			status["resources"] = ResourcesDigest(resources)
		}
		if history, ok := status["history"].([]any); ok {
			status["history"] = ResourcesDigest(history)
		}
	}
	if err := freeze(u.Object); err != nil {
		return nil, fmt.Errorf("transform Application %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	internKeys(u.Object)
	// Only a frozen Application shares them: a transform of it again returns at once,
	// and never writes to what other Applications read meanwhile.
	if metadata, ok := u.Object["metadata"].(map[string]any); ok && isFrozen(u) {
		for _, key := range []string{"labels", "annotations", "ownerReferences"} {
			if value := metadata[key]; value != nil {
				metadata[key] = sharedMetadata.of(value)
			}
		}
	}
	return u, nil
}

// sharedMetadata holds once the labels, annotations and owner references that many
// Applications have alike: an ApplicationSet generates its apps with the same labels
// and owner, and the same annotations for each cluster.
var sharedMetadata = &sharedValues[any]{}

// internKeys makes every key of the maps in v, and every string value of at most
// internedValueLength bytes, the one copy that argoapp.Intern holds: each Application
// decodes its own copy of the same few hundred keys ("metadata", "annotations", the
// annotations' names...) and short values ("Synced", "Healthy", "argocd"), which made up
// a fifth of a cached Application. Assigning a map's entry again with an equal key
// stores the key given (Go updates string keys on assignment).
func internKeys(v any) {
	switch v := v.(type) {
	case map[string]any:
		for key, value := range v {
			internKeys(value)
			if s, ok := value.(string); ok && len(s) <= internedValueLength {
				value = argoapp.Intern(s)
			}
			v[argoapp.Intern(key)] = value
		}
	case []any:
		for i, value := range v {
			internKeys(value)
			if s, ok := value.(string); ok && len(s) <= internedValueLength {
				v[i] = argoapp.Intern(s)
			}
		}
	}
}

// internedValueLength is the length of the longest string value of an Application
// that the cache interns: statuses, kinds, namespaces, short names.
const internedValueLength = 16

// stripWork drops a work's managed fields and the conditions of each of its manifests,
// and replaces each manifest with its CompactManifest.
func stripWork(obj any) (any, error) {
	w, ok := obj.(*workv1.ManifestWork)
	if !ok {
		return obj, nil
	}
	w.ManagedFields = nil
	w.Spec.Workload.Manifests = CompactManifests(w.Spec.Workload.Manifests)
	w.Spec.ManifestConfigs = exact(w.Spec.ManifestConfigs)
	w.Status.Conditions = exact(w.Status.Conditions)
	w.Status.ResourceStatus.Manifests = exact(w.Status.ResourceStatus.Manifests)
	for i := range w.Status.ResourceStatus.Manifests {
		m := &w.Status.ResourceStatus.Manifests[i]
		m.Conditions = nil
		m.StatusFeedbacks.Values = exact(m.StatusFeedbacks.Values)
	}
	internWork(w)
	return w, nil
}

// exact returns s in an array of its length. A decoder appends each element of a JSON
// array in turn, so a decoded slice has up to twice the room it needs (5 feedback
// values take 8 places, 10 apps of a status slice 16), which a cached object keeps.
func exact[T any](s []T) []T {
	if cap(s) == len(s) {
		return s
	}
	return slices.Clone(s)
}

// internWork makes the strings that every pulled work repeats the one copy that
// argoapp.Intern holds: the keys of its labels and annotations, and short values; the
// identities of its manifests; the types, reasons and messages of its conditions (the
// work agent writes the same few; an interned string is freed with its last holder); the
// feedback names and short values. The feedback rules and update strategies of its
// manifests, the same in every work, and its labels, the same for every work of an
// ApplicationSet, are one copy too (sharedValues).
func internWork(w *workv1.ManifestWork) {
	intern := argoapp.Intern
	internShort := func(s string) string {
		if len(s) <= internedValueLength {
			return intern(s)
		}
		return s
	}
	for _, m := range []map[string]string{w.Labels, w.Annotations} {
		for key, value := range m {
			m[intern(key)] = internShort(value)
		}
	}
	if len(w.Labels) > 0 {
		w.Labels = sharedWorkLabels.of(w.Labels)
	}
	for i := range w.Finalizers {
		w.Finalizers[i] = intern(w.Finalizers[i])
	}
	for i := range w.Spec.ManifestConfigs {
		config := &w.Spec.ManifestConfigs[i]
		id := &config.ResourceIdentifier
		id.Group, id.Resource, id.Namespace = intern(id.Group), intern(id.Resource), internShort(id.Namespace)
		config.FeedbackScrapeType = workv1.FeedbackScrapeType(intern(string(config.FeedbackScrapeType)))
		if len(config.FeedbackRules) > 0 {
			config.FeedbackRules = sharedFeedbackRules.of(config.FeedbackRules)
		}
		if config.UpdateStrategy != nil {
			config.UpdateStrategy = sharedUpdateStrategies.of(config.UpdateStrategy)
		}
	}
	for i := range w.Status.Conditions {
		c := &w.Status.Conditions[i]
		c.Type, c.Reason, c.Message = intern(c.Type), intern(c.Reason), intern(c.Message)
		c.Status = metav1.ConditionStatus(intern(string(c.Status)))
	}
	for i := range w.Status.ResourceStatus.Manifests {
		m := &w.Status.ResourceStatus.Manifests[i]
		meta := &m.ResourceMeta
		meta.Group, meta.Version, meta.Kind, meta.Resource, meta.Namespace =
			intern(meta.Group), intern(meta.Version), intern(meta.Kind), intern(meta.Resource), internShort(meta.Namespace)
		for j := range m.StatusFeedbacks.Values {
			value := &m.StatusFeedbacks.Values[j]
			value.Name = intern(value.Name)
			value.Value.Type = workv1.ValueType(intern(string(value.Value.Type)))
			if value.Value.String != nil {
				short := internShort(*value.Value.String)
				value.Value.String = &short
			}
		}
	}
}

// The feedback rules and update strategy of the pulled works' manifest configurations,
// each held once: every work the manager renders has the same ones; and the labels of
// the pulled works, the same for every work of an ApplicationSet.
var (
	sharedFeedbackRules    = &sharedValues[[]workv1.FeedbackRule]{}
	sharedUpdateStrategies = &sharedValues[*workv1.UpdateStrategy]{}
	sharedWorkLabels       = &sharedValues[map[string]string]{}
	sharedManifests        = &sharedValues[[]byte]{}
	sharedPolicyRules      = &sharedValues[[]rbacv1.PolicyRule]{}
)

// SharedManifest returns the one copy of a work's manifest, as its raw bytes, that the
// cached works holding the same bytes share (up to maxSharedBytes): the addon
// framework's work of each cluster holds the agent's RBAC objects, the same bytes for
// every cluster. No reader of a cached work changes its manifests (the framework's
// applier compares a deep copy).
func SharedManifest(raw []byte) []byte { return sharedManifests.keyed(raw, raw) }

// SharedPolicyRules returns the one copy of a Role's rules that the cached Roles holding
// the same rules share: the hub Role of each cluster's agent has the same rules in each
// cluster namespace. No reader of a cached Role changes its rules.
func SharedPolicyRules(rules []rbacv1.PolicyRule) []rbacv1.PolicyRule {
	return sharedPolicyRules.of(rules)
}

// sharedValues holds one copy of each distinct value (by the digest of its JSON
// encoding) of a part that many cached objects repeat whole; the cache never changes a
// cached object, so they share it. A value of more than maxSharedBytes is not held: one
// that large (an annotation with a whole manifest in it) seldom repeats.
type sharedValues[T any] struct {
	mu     sync.Mutex
	values map[[sha256.Size]byte]T
}

// Bounds of each sharedValues. A value it holds stays when no object holds it any more,
// until the table is full and starts again empty (the objects keep the copies they
// hold): at most maxSharedValues values of maxSharedBytes each.
const (
	maxSharedValues = 4096
	maxSharedBytes  = 1024
)

// of returns the copy of v held for every object: the one held already, or v.
func (s *sharedValues[T]) of(v T) T {
	encoded, err := json.Marshal(v)
	if err != nil {
		return v
	}
	return s.keyed(encoded, v)
}

// keyed is of, for a v whose encoding is encoded.
func (s *sharedValues[T]) keyed(encoded []byte, v T) T {
	if len(encoded) > maxSharedBytes {
		return v
	}
	key := sha256.Sum256(encoded)
	s.mu.Lock()
	defer s.mu.Unlock()
	if held, ok := s.values[key]; ok {
		return held
	}
	if s.values == nil || len(s.values) == maxSharedValues {
		s.values = map[[sha256.Size]byte]T{}
	}
	s.values[key] = v
	return v
}

// ManifestDigestKey is the field of a CompactManifest that holds the digest of the
// manifest it stands for.
const ManifestDigestKey = "argocd-pull.digest"

// CompactManifest returns what the manager's cache holds of a work's manifest in place
// of its content: a JSON object with the digest of the manifest's canonical encoding
// (decoded, then encoded again: keys sorted, no spaces) at ManifestDigestKey, its kind,
// and of an Application the annotations of the operation and refresh protocol
// (payloadProtocolAnnotations), which the hub controllers read (PayloadAnnotations). Two manifests have the same compact form if and only if they
// decode to the same JSON value (up to a collision of SHA-256), so the propagation
// controller compares the compact forms of its render with those of the cached work,
// and a work that anyone else changed still differs. A compact form is its own compact
// form; a manifest that does not decode is kept as it is.
func CompactManifest(raw []byte) []byte {
	var object map[string]any
	if err := json.Unmarshal(raw, &object); err != nil {
		return raw
	}
	if _, compact := object[ManifestDigestKey].(string); compact {
		if _, ok := object["apiVersion"]; !ok {
			return raw
		}
	}
	canonical, err := json.Marshal(object)
	if err != nil {
		return raw
	}
	compact := map[string]any{ManifestDigestKey: DigestOf(canonical)}
	if kind, ok := object["kind"]; ok {
		compact["kind"] = kind
	}
	if object["kind"] == argoapp.KindApplication {
		metadata, _ := object["metadata"].(map[string]any)
		annotations, _ := metadata["annotations"].(map[string]any)
		kept := map[string]any{}
		for _, key := range payloadProtocolAnnotations {
			if value, ok := annotations[key]; ok {
				kept[key] = value
			}
		}
		if len(kept) > 0 {
			compact["metadata"] = map[string]any{"annotations": kept}
		}
	}
	out, err := json.Marshal(compact)
	if err != nil {
		return raw
	}
	return out
}

// payloadProtocolAnnotations are the annotations of a payload Application that the
// compact form keeps: the operation request, its termination, and the refresh id.
var payloadProtocolAnnotations = []string{
	argoapp.AnnotationOperationRequest, argoapp.AnnotationOperationTerminate, argoapp.AnnotationRefreshID,
}

// PayloadAnnotations returns the annotations of the Application that work carries (nil
// when it carries none, or work is nil), reading a manifest whole or in its
// CompactManifest form (which keeps only payloadProtocolAnnotations).
func PayloadAnnotations(work *workv1.ManifestWork) map[string]string {
	if work == nil {
		return nil
	}
	for _, manifest := range work.Spec.Workload.Manifests {
		var object struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Annotations map[string]string `json:"annotations"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(manifest.Raw, &object); err != nil || object.Kind != argoapp.KindApplication {
			continue
		}
		return object.Metadata.Annotations
	}
	return nil
}

// CompactManifests returns manifests, each in its CompactManifest form.
func CompactManifests(manifests []workv1.Manifest) []workv1.Manifest {
	if len(manifests) == 0 {
		return manifests
	}
	out := make([]workv1.Manifest, len(manifests))
	for i, m := range manifests {
		out[i] = workv1.Manifest{RawExtension: runtime.RawExtension{Raw: CompactManifest(m.Raw)}}
	}
	return out
}

// stripSlice keeps of a slice what the hub shows, compactly, and each entry's Digest: no
// tree nodes, diffs, resource images or managed fields (the manager's DefaultTransform does not
// apply to a kind with its own Transform), and the resources of each app in their packed
// form (PackResources) at PackedResources. The hub holds the resources of every app of
// every cluster, and as structs they were the largest part of its cache.
//
// It is idempotent, as client-go asks of a transform: an informer's initial list
// transforms its objects twice (the reflector's watch-list, then its queue). An entry
// with a Digest is one stripped already (the API never carries it): its Digest, of the
// entry as the agent wrote it, stays, and so do its packed resources. Computed again from
// the stripped entry, the Digest would not be the one that the resource tree writer reads
// the whole slice for, and every tree would be written again at each start.
//
// What the hub would refuse, it does not hold: of a slice over clusterreport.MaxSliceBytes
// or MaxAppsPerSlice as the agent wrote it, which clusterreport.DecodeSlices rejects
// whole, it keeps only what finds each app (rejectedEntry) and one app past
// MaxAppsPerSlice, so that the rejection, and the apps it concerns, still show. Nor does
// it hold more than MaxCachedSliceBytes of one slice (cachedBytes): the entries the agent
// writes take less in the cache than as JSON, but an entry of many empty items (a
// condition "{}" is 3 bytes of JSON and 32 in memory) takes more; such a slice is held as
// a rejected one, and DecodeSlices rejects it (its entries' sizes say it is over
// MaxSliceBytes). So the cache holds at most MaxCachedSliceBytes of a slice, whatever an
// agent writes; the schema refuses longer strings and lists.
func stripSlice(obj any) (any, error) {
	s, ok := obj.(*statusv1alpha1.ApplicationStatusSlice)
	if !ok {
		return obj, nil
	}
	s.ManagedFields = nil
	if len(s.Apps) > clusterreport.MaxAppsPerSlice+1 {
		s.Apps = s.Apps[:clusterreport.MaxAppsPerSlice+1]
	}
	s.Apps = exact(s.Apps)
	total := 0
	for i := range s.Apps {
		app := &s.Apps[i]
		if app.Digest == "" {
			size, digest := clusterreport.EntryDigest(*app)
			app.Digest, app.Size = string(digest[:]), size
			app.Nodes = nil
			app.Diffs, app.DiffsOmitted, app.DiffsMessage = nil, 0, ""
			app.Conditions = exact(app.Conditions)
			app.PackedResources = PackResources(app.Resources)
			app.Resources = nil
			internSliceApp(app)
		}
		total += app.Size
	}
	rejected := total > clusterreport.MaxSliceBytes || len(s.Apps) > clusterreport.MaxAppsPerSlice
	if !rejected {
		cached := 0
		for i := range s.Apps {
			cached += cachedBytes(&s.Apps[i])
		}
		if cached > MaxCachedSliceBytes {
			rejected = true
			// What DecodeSlices reads: the first entry's size says the slice is over.
			s.Apps[0].Size = clusterreport.MaxSliceBytes + 1
		}
	}
	if rejected {
		for i := range s.Apps {
			s.Apps[i] = rejectedEntry(s.Apps[i])
		}
	}
	return s, nil
}

// MaxCachedSliceBytes bounds what the cache holds of one slice. A slice of the agent's
// encoder takes at most about 1.1 MiB: MaxSliceBytes of entries, which the cache holds in
// less (nodes and images dropped, resources packed), but for each app's and each
// condition's struct (320 and 32 bytes) over its JSON (about 100 and 20 bytes at least).
const MaxCachedSliceBytes = 2 * clusterreport.MaxSliceBytes

// cachedBytes estimates what the cache holds of a stripped entry: its structs, and its
// strings as if none were shared (interned ones are).
func cachedBytes(e *statusv1alpha1.AppStatus) int {
	n := int(unsafe.Sizeof(*e)) + len(e.Namespace) + len(e.Name) + len(e.ApplicationSet) + len(e.ManifestWork) +
		len(e.Sync.Status) + len(e.Sync.Revision) + len(e.TreeSource) + len(e.TreeMessage) + len(e.Digest) + len(e.PackedResources)
	for _, r := range e.Sync.Revisions {
		n += int(unsafe.Sizeof(r)) + len(r)
	}
	if h := e.Health; h != nil {
		n += int(unsafe.Sizeof(*h)) + len(h.Status) + len(h.Message)
	}
	if op := e.Operation; op != nil {
		n += int(unsafe.Sizeof(*op)) + len(op.Phase) + len(op.StartedAt) + len(op.FinishedAt) + len(op.Message)
		if r := op.SyncResult; r != nil {
			n += int(unsafe.Sizeof(*r)) + len(r.Revision)
			for _, revision := range r.Revisions {
				n += int(unsafe.Sizeof(revision)) + len(revision)
			}
			for _, res := range r.Resources {
				n += int(unsafe.Sizeof(res)) + len(res.Name) + len(res.Message)
			}
		}
	}
	if hub := e.Hub; hub != nil {
		n += int(unsafe.Sizeof(*hub)) + len(hub.Namespace) + len(hub.Name)
	}
	if e.Truncated != nil {
		n += int(unsafe.Sizeof(*e.Truncated))
	}
	for _, c := range e.Conditions {
		n += int(unsafe.Sizeof(c)) + len(c.Type) + len(c.Message)
	}
	return n
}

// rejectedEntry keeps of an entry of a slice that the hub rejects what finds its app
// (its identity, ManifestWork and hub back-pointer, each at most the length of a name),
// its Digest and its Size: the hub shows none of it, and enqueues the app's hub
// Application when the slice changes.
func rejectedEntry(e statusv1alpha1.AppStatus) statusv1alpha1.AppStatus {
	name := func(s string) string { return clusterreport.TruncateMessage(s, clusterreport.MaxNameBytes) }
	out := statusv1alpha1.AppStatus{
		Namespace: name(e.Namespace), Name: name(e.Name), ManifestWork: name(e.ManifestWork),
		ObservedAt: e.ObservedAt, Digest: e.Digest, Size: e.Size,
	}
	if e.Hub != nil {
		out.Hub = &statusv1alpha1.ObjectRef{Namespace: name(e.Hub.Namespace), Name: name(e.Hub.Name)}
	}
	return out
}

// internSliceApp makes the strings that the apps of a cluster, and the same app on every
// cluster, repeat the one copy that argoapp.Intern holds (freed with its last holder):
// namespaces, the ApplicationSet, statuses and phases, the sync revisions (an
// ApplicationSet's apps sync the same commit), condition types; and the hub
// Application's name, when it is the app's, is the app's name string.
func internSliceApp(app *statusv1alpha1.AppStatus) {
	intern := argoapp.Intern
	app.Namespace, app.ApplicationSet = intern(app.Namespace), intern(app.ApplicationSet)
	if hub := app.Hub; hub != nil {
		hub.Namespace = intern(hub.Namespace)
		if hub.Name == app.Name {
			hub.Name = app.Name
		}
	}
	app.Sync.Status, app.Sync.Revision = intern(app.Sync.Status), intern(app.Sync.Revision)
	for i := range app.Sync.Revisions {
		app.Sync.Revisions[i] = intern(app.Sync.Revisions[i])
	}
	if h := app.Health; h != nil {
		h.Status = intern(h.Status)
	}
	if op := app.Operation; op != nil {
		op.Phase = intern(op.Phase)
		if r := op.SyncResult; r != nil {
			for i := range r.Resources {
				res := &r.Resources[i]
				res.Group, res.Version, res.Kind, res.Namespace = intern(res.Group), intern(res.Version), intern(res.Kind), intern(res.Namespace)
				res.Status, res.HookType, res.HookPhase, res.SyncPhase = intern(res.Status), intern(res.HookType), intern(res.HookPhase), intern(res.SyncPhase)
			}
		}
	}
	for i := range app.Conditions {
		app.Conditions[i].Type = intern(app.Conditions[i].Type)
	}
	app.TreeSource = statusv1alpha1.TreeSource(intern(string(app.TreeSource)))
}

// ReportOtherWriterAnnotation is the annotation at which the manager's cache holds,
// on a report, the field manager of another writer of its statuses since the report
// controller's last write (reportMetadata). The apiserver never holds it.
const ReportOtherWriterAnnotation = "argocd-pull.open-cluster-management.io/statuses-other-writer"

// reportMetadata returns the transform of the reports, which the cache holds as
// metadata only (a report of a thousand clusters is up to its budget, 1 MiB): it drops
// the managed fields, after it tells from them whether another field manager than
// reportManager (the report controller's) wrote the statuses since that one last
// applied them, and if so names it at ReportOtherWriterAnnotation. The report controller
// finds its statuses' digest in an annotation it writes. It is idempotent, as client-go
// asks of a transform: a report without managed fields is left as it is.
func reportMetadata(reportManager string) toolscache.TransformFunc {
	stripManagedFields := cache.TransformStripManagedFields()
	return func(obj any) (any, error) {
		r, ok := obj.(*metav1.PartialObjectMetadata)
		if !ok || r.ManagedFields == nil || reportManager == "" {
			return stripManagedFields(obj)
		}
		other := otherStatusesWriter(r.ManagedFields, reportManager)
		if _, stored := r.Annotations[ReportOtherWriterAnnotation]; stored || other != "" {
			// Only the transform sets it: one stored by hand would look like a writer.
			annotations := maps.Clone(r.Annotations)
			delete(annotations, ReportOtherWriterAnnotation)
			if other != "" {
				annotations[ReportOtherWriterAnnotation] = other
			}
			r.Annotations = annotations
		}
		r.ManagedFields = nil
		return r, nil
	}
}

// otherStatusesWriter returns the first field manager other than the applies of
// reportManager that owns a field of a report's statuses and wrote it no earlier than
// reportManager last applied them (the times are to the second), or "". A writer
// whose write reportManager's later apply has overridden keeps only the fields that
// apply does not set, if any, with its older time: it is not named, so that the report
// controller, which would write the same again, does not.
func otherStatusesWriter(entries []metav1.ManagedFieldsEntry, reportManager string) string {
	ours := func(e metav1.ManagedFieldsEntry) bool {
		return e.Manager == reportManager && e.Operation == metav1.ManagedFieldsOperationApply
	}
	var applied *metav1.Time
	for _, e := range entries {
		if ours(e) {
			applied = e.Time
		}
	}
	for _, e := range entries {
		if ours(e) || e.FieldsV1 == nil || !bytes.Contains(e.FieldsV1.Raw, []byte(`"f:statuses"`)) {
			continue
		}
		if applied == nil || e.Time == nil || !e.Time.Before(applied) {
			return e.Manager
		}
	}
	return ""
}

// NewClient returns a client that reads every object, Applications included, from the
// manager's cache, and writes to the apiserver. The manager's own client reads
// unstructured objects from the apiserver unless it is told otherwise. Every hub
// controller that reads Applications reads through one. The Applications it reads are
// thawed (thawingReads), and its patches and applies are answered with the object's
// metadata only (metadataAnswers).
func NewClient(mgr ctrl.Manager) (client.WithWatch, error) {
	c, err := client.NewWithWatch(mgr.GetConfig(), client.Options{
		Scheme: mgr.GetScheme(),
		Mapper: mgr.GetRESTMapper(),
		Cache:  &client.CacheOptions{Reader: mgr.GetCache(), Unstructured: true},
	})
	if err != nil {
		return nil, fmt.Errorf("create the cached client: %w", err)
	}
	m, err := metadata.NewForConfigAndClient(mgr.GetConfig(), mgr.GetHTTPClient())
	if err != nil {
		return nil, fmt.Errorf("create the metadata client: %w", err)
	}
	return &thawingReads{WithWatch: &metadataAnswers{WithWatch: c, metadata: m}}, nil
}
