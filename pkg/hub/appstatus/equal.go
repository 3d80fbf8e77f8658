package appstatus

import "k8s.io/apimachinery/pkg/api/equality"

// equalJSON compares two JSON-like values semantically.
func equalJSON(a, b any) bool {
	return equality.Semantic.DeepEqual(a, b)
}
