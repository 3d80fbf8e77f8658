package argoapp

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
)

// The operation protocol between the hub and a managed cluster (docs/propagation.md,
// "Operations"): the manager gives each hub operation an id and delivers it in the
// payload's AnnotationOperationRequest; the cluster's agent sets it as the spoke
// Application's .operation once per id (AnnotationOperationDelivered), after any
// operation that runs there; Argo CD carries the id into status.operationState, which
// comes back to the hub (FeedbackOperationStateID).

// NewOperationID returns a fresh operation id: 16 random hex digits.
func NewOperationID() string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("read random bytes: %v", err)) // crypto/rand does not fail on Linux
	}
	return hex.EncodeToString(b[:])
}

// WithOperationID returns a copy of operation, an Application's .operation, whose info
// carries id under OperationInfoID, in place of any such entry it had.
func WithOperationID(operation map[string]any, id string) map[string]any {
	out, _ := runtime.DeepCopyJSONValue(operation).(map[string]any)
	info, _ := out["info"].([]any)
	info = slices.DeleteFunc(slices.Clone(info), isOperationIDInfo)
	out["info"] = append(info, map[string]any{"name": OperationInfoID, "value": id})
	return out
}

// WithoutOperationID returns a copy of operation without the OperationInfoID entry of
// its info (and without info when nothing else is left): the operation as the hub asked
// for it.
func WithoutOperationID(operation map[string]any) map[string]any {
	out, _ := runtime.DeepCopyJSONValue(operation).(map[string]any)
	info, _ := out["info"].([]any)
	if info = slices.DeleteFunc(slices.Clone(info), isOperationIDInfo); len(info) == 0 {
		delete(out, "info")
	} else {
		out["info"] = info
	}
	return out
}

// OperationIDOf returns the id of operation (OperationInfoID in its info), or "".
func OperationIDOf(operation map[string]any) string {
	info, _ := operation["info"].([]any)
	for _, item := range info {
		if isOperationIDInfo(item) {
			value, _ := item.(map[string]any)["value"].(string)
			return value
		}
	}
	return ""
}

func isOperationIDInfo(item any) bool {
	entry, ok := item.(map[string]any)
	return ok && entry["name"] == OperationInfoID
}

// DecodeOperationRequest decodes the value of AnnotationOperationRequest: an operation
// with an id. It fails on anything else, so that an agent never sets an operation it
// cannot trace back to a hub request.
func DecodeOperationRequest(value string) (operation map[string]any, id string, err error) {
	if err := json.Unmarshal([]byte(value), &operation); err != nil {
		return nil, "", fmt.Errorf("annotation %s is not a JSON object: %w", AnnotationOperationRequest, err)
	}
	if operation == nil {
		return nil, "", fmt.Errorf("annotation %s is null", AnnotationOperationRequest)
	}
	if id = OperationIDOf(operation); id == "" {
		return nil, "", fmt.Errorf("annotation %s has no info entry %s", AnnotationOperationRequest, OperationInfoID)
	}
	return operation, id, nil
}

// AnnotationPointer returns the JSON pointer (RFC 6901) of an object's annotation key,
// for a JSON patch.
func AnnotationPointer(key string) string {
	return "/metadata/annotations/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(key)
}
