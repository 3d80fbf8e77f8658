//go:build tools

// Package tools pins controller-gen, which generates the deepcopy functions and the CRD
// manifest of the MulticlusterApplicationSetReport (hack/generate.sh).
package tools

import (
	_ "sigs.k8s.io/controller-tools/cmd/controller-gen"
)
