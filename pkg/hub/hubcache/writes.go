package hubcache

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// MetadataAnswer, given to a Patch or an Apply of the client of NewClient, asks the
// apiserver to answer with the object's metadata only (a PartialObjectMetadata, as
// client-go's metadata client asks), not with the whole object. The object written then
// holds what was sent, with the metadata of the answer (writtenMetadata): its
// resourceVersion, generation, uid, creation and deletion timestamps. That is what the
// apiserver stored when the object already held what the write makes of it (a merge
// patch computed from it, client.MergeFrom; an apply of it), but for fields that other
// writers, defaults or a mutating webhook set; so a write whose result the object cannot
// tell (a JSON patch) does not ask for it. Another client ignores it and answers in full.
//
// The hub controllers write hub Applications, ManifestWorks that hold a whole
// Application, and reports of a thousand clusters, and read nothing of the answer but
// its metadata: with it the apiserver encodes, and the manager decodes, a few hundred
// bytes per write instead of the object.
var MetadataAnswer metadataAnswer

type metadataAnswer struct{}

func (metadataAnswer) ApplyToPatch(*client.PatchOptions) {}
func (metadataAnswer) ApplyToApply(*client.ApplyOptions) {}

// metadataAnswers is the client of NewClient: the cached client, whose patches and
// applies with MetadataAnswer go through client-go's metadata client.
type metadataAnswers struct {
	client.WithWatch
	metadata metadata.Interface
}

// Patch patches obj; with MetadataAnswer, it sets the metadata of the answer on obj.
func (c *metadataAnswers) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	if !slices.ContainsFunc(opts, isMetadataAnswer[client.PatchOption]) {
		return c.WithWatch.Patch(ctx, obj, patch, opts...)
	}
	data, err := patch.Data(obj)
	if err != nil {
		return fmt.Errorf("encode the patch of %s: %w", client.ObjectKeyFromObject(obj), err)
	}
	options := (&client.PatchOptions{}).ApplyOptions(opts)
	return c.patch(ctx, obj, patch.Type(), data, options.AsPatchOptions())
}

// Apply applies config; with MetadataAnswer and an unstructured apply configuration
// (client.ApplyConfigurationFromUnstructured), it sets the metadata of the answer on it.
func (c *metadataAnswers) Apply(ctx context.Context, config runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	obj, ok := config.(interface {
		client.Object
		runtime.Unstructured
	})
	if !ok || !slices.ContainsFunc(opts, isMetadataAnswer[client.ApplyOption]) {
		return c.WithWatch.Apply(ctx, config, opts...)
	}
	data, err := json.Marshal(obj.UnstructuredContent())
	if err != nil {
		return fmt.Errorf("encode the apply of %s: %w", client.ObjectKeyFromObject(obj), err)
	}
	options := (&client.ApplyOptions{}).ApplyOptions(opts)
	return c.patch(ctx, obj, types.ApplyPatchType, data, options.AsPatchOptions())
}

func isMetadataAnswer[T any](option T) bool {
	_, ok := any(option).(metadataAnswer)
	return ok
}

func (c *metadataAnswers) patch(ctx context.Context, obj client.Object, patchType types.PatchType, data []byte, options *metav1.PatchOptions) error {
	gvk, err := apiutil.GVKForObject(obj, c.Scheme())
	if err != nil {
		return err
	}
	mapping, err := c.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return err
	}
	answer, err := c.metadata.Resource(mapping.Resource).Namespace(obj.GetNamespace()).
		Patch(ctx, obj.GetName(), patchType, data, *options)
	if err != nil {
		return err
	}
	writtenMetadata(obj, answer)
	return nil
}

// writtenMetadata sets on obj, which holds what was written, the metadata that the
// apiserver set in writing it.
func writtenMetadata(obj client.Object, answer *metav1.PartialObjectMetadata) {
	obj.SetResourceVersion(answer.ResourceVersion)
	obj.SetGeneration(answer.Generation)
	obj.SetUID(answer.UID)
	obj.SetCreationTimestamp(answer.CreationTimestamp)
	obj.SetDeletionTimestamp(answer.DeletionTimestamp)
}
