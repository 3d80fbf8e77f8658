package main

import (
	"os/exec"
	"strings"
	"testing"
)

// heavyPackages are packages the agent must not link: client-go's registry of every
// Kubernetes API, which any typed clientset, the discovery client or a generated informer
// pulls in; controller-runtime's manager; and the strategic merge patch of client-go's
// event recorder, with the OpenAPI models and protobuf. Together they took 25 MiB of the
// agent's resident memory before it did anything (docs/design.md, section 3.7).
var heavyPackages = []string{
	"k8s.io/client-go/kubernetes/scheme",
	"k8s.io/client-go/informers",
	"k8s.io/client-go/discovery",
	"sigs.k8s.io/controller-runtime/pkg/manager",
	"k8s.io/client-go/tools/record",
	"k8s.io/apimachinery/pkg/util/strategicpatch",
	"google.golang.org/protobuf/proto",
}

func TestAgentLinksNoClientsetRegistry(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := map[string]bool{}
	for _, p := range strings.Fields(string(out)) {
		deps[p] = true
	}
	for _, p := range heavyPackages {
		if deps[p] {
			t.Errorf("the agent links %s; use the dynamic or REST client (pkg/spoke/clients.go)", p)
		}
	}
}
