# argocd-pull-addon: an OCM addon that gives Argo CD a pull model.
#
# `make demo` and `make test` are the two commands a fresh clone needs. Both build the
# pinned tools they use (hack/tools) into bin/ first; a second run reuses them.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

BIN_DIR    := $(CURDIR)/bin
FLEET_DIR  ?= .fleet
CLUSTERS   ?= cluster1,cluster2
TOOL_SETS  := etcd k8s ocm argocd kwok helm clusteradm controller-gen golangci-lint
# The tools the fleet runs; helm and clusteradm are for the install-path e2e tests.
FLEET_TOOLS := etcd k8s ocm argocd kwok
# The tools of test-integration: envtest's apiserver and etcd, and helm for the chart.
INTEGRATION_TOOLS := etcd k8s helm
# The packages whose tests need an apiserver (envtest or test/sim), helm or a build of the
# image: they skip in -short mode, which test-unit runs in. The longest first (go test runs
# them in this order, two at a time on two cores; one at a time in make test, beside e2e),
# so that the others run beside them.
INTEGRATION_PKGS := ./test/fault/... ./pkg/spoke/... ./test/image/... ./test/abuse/... ./pkg/hub/... \
                    ./test/chart/... ./test/testenv/... ./test/sim/...
GO_TEST_FLAGS ?=
# Flags of test-integration's go test only (make test sets -p=1: it runs beside the e2e suite).
INTEGRATION_FLAGS ?=
# Packages of INTEGRATION_PKGS that test-integration leaves out. make test leaves out
# SOLO_PKGS, the suites it runs in its third lane as targets of their own (test-fault,
# test-chart, test-image), so that the lanes take about as long.
INTEGRATION_SKIP ?=
SOLO_PKGS := ./test/fault/... ./test/chart/... ./test/image/...
# Packages that test-unit leaves out. make test leaves out INTEGRATION_PKGS: its other
# targets run their tests in full, the unit tests among them.
UNIT_SKIP ?=
# GOGC of the suites that run control planes (test-e2e, test-fault, test-integration):
# their kube-apiservers, etcds and controllers, and the test processes, collect garbage
# when the heap has grown by 400% instead of 100%. The machine has memory to spare and too
# little CPU: the 2,000-cluster report suite took 23% less CPU this way (169 to 131 s,
# its apiserver's peak RSS 1.3 to 2.8 GB). The manager and the agent keep the GOGC their
# install sets (the chart, the agent's manifests), so what the suites assert of their
# memory holds as deployed.
TEST_GOGC ?= 400
FUZZTIME ?= 5s
FUZZ_LONG ?= 3m
# The scale of make bench: full (1,000 clusters, 10,000 apps; writes docs/benchmarks.md),
# medium (250 clusters), small (50 clusters, the smoke test of make test) or fleet (the
# local fleet's rollout of 20 apps on 2 clusters: the stand-ins beside the real writers).
SCALE ?= full
# The image (make image): built from scratch by hack/image, no Docker. Its tag defaults to
# the chart's appVersion, the chart's default tag; SOURCE_DATE_EPOCH (the commit time) dates
# every file, so that two builds of one commit have one digest.
IMAGE_REPO      ?= quay.io/ocm-gitops/argocd-pull-addon
IMAGE_TAG       ?= $(shell sed -n 's/^appVersion: *"*\([^"]*\)"*$$/\1/p' charts/argocd-pull-addon/Chart.yaml)
IMAGE_PLATFORMS ?= linux/amd64,linux/arm64
IMAGE_DIR       ?= $(BIN_DIR)/image
IMAGE_REVISION  ?= $(shell git rev-parse HEAD)$(shell [ -z "$$(git status --porcelain)" ] || echo -dirty)
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct)

export KUBEBUILDER_ASSETS := $(BIN_DIR)

##@ Main

.PHONY: demo
demo: fleet-tools tools-helm tools-clusteradm build ## Start a hub and 2 managed clusters and show the pull model working; Ctrl-C stops it
	$(BIN_DIR)/fleet demo --dir $(FLEET_DIR) --clusters $(CLUSTERS) --bin $(BIN_DIR)

# make test runs its suites in three lanes side by side (hack/lanes.sh): the e2e suite on
# the fleet; the other integration suites (one package at a time); the static checks, the
# unit tests of the packages no other lane tests, the fleet's own test, the fault suite,
# fuzz (one worker), the bench smoke test, the chart and the image. The e2e and
# integration suites wait for controllers much of their time, and the third lane fills the
# cores they leave idle; the lanes are filled so that they take about as long, and each
# target's CPU is printed beside its wall time. Every tool is built before, once.
# Each suite writes to .cache/test-logs/<target>.log, printed whole when it ends.
.PHONY: test
test: test-tools ## Run every check and test suite in three lanes side by side: e2e on the fleet; the integration suites (envtest, abuse); static checks and the linter, unit, the fleet's KWOK test, the fault suite, fuzz, the bench smoke test, the chart and the image
	@MAKE="$(MAKE)" hack/lanes.sh test-e2e -- 'test-integration INTEGRATION_FLAGS=-p=1 INTEGRATION_SKIP=$$(SOLO_PKGS)' -- verify 'test-unit UNIT_SKIP=$$(INTEGRATION_PKGS)' test-fleet test-fault 'test-fuzz FUZZ_FLAGS=-test.parallel=1' test-bench test-chart test-image

# test-tools are the tools and builds that the suites of make test use.
.PHONY: test-tools
test-tools: fleet-tools tools-helm tools-clusteradm tools-golangci-lint $(addprefix tools-,$(INTEGRATION_TOOLS)) build

##@ Tests

.PHONY: verify
verify: tools-helm tools-golangci-lint ## Static checks: gofmt, go vet, golangci-lint (.golangci.yml), go.mod tidy, generated code, CRDs and manifests up to date
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	  if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	go vet ./...
	$(BIN_DIR)/golangci-lint run ./...
	@go mod tidy -diff || { echo "go.mod is not tidy: run go mod tidy"; exit 1; }
	go -C hack/image vet .
	@go -C hack/image mod tidy -diff || { echo "hack/image/go.mod is not tidy: run go -C hack/image mod tidy"; exit 1; }
	hack/verify-generated.sh
	hack/verify-manifests.sh

.PHONY: test-unit
test-unit: ## Unit tests: fast, no apiserver and no tool from bin/ (go test -short of every package but test/e2e and UNIT_SKIP; the hub cache's also with -race)
	go test -short -timeout 10m $(GO_TEST_FLAGS) $$(comm -23 <(go list ./... | grep -v /test/e2e | sort) <($(if $(UNIT_SKIP),go list $(UNIT_SKIP),true) | sort))
	go test -short -race -timeout 10m $(GO_TEST_FLAGS) ./pkg/hub/hubcache/

test-e2e test-fleet test-fault test-integration: export GOGC = $(TEST_GOGC)

.PHONY: test-integration
test-integration: $(addprefix tools-,$(INTEGRATION_TOOLS)) ## Integration suites on a real kube-apiserver and etcd from bin/: each controller's envtest suite, the chart (helm), the abuse suite (test/abuse), the fault suite (test/fault) and the image (test/image)
	go test -timeout 20m $(GO_TEST_FLAGS) $(INTEGRATION_FLAGS) $(filter-out $(INTEGRATION_SKIP),$(INTEGRATION_PKGS))

.PHONY: test-fault
test-fault: $(addprefix tools-,$(INTEGRATION_TOOLS)) ## The fault suite alone (test/fault, also in test-integration): the real manager SIGKILLed and raced by another writer at 1,000 apps
	go test -timeout 20m $(GO_TEST_FLAGS) ./test/fault/...

.PHONY: test-chart
test-chart: tools-helm tools-etcd tools-k8s ## The chart suite alone (test/chart, also in test-integration): helm lint and template, the values schema, the manager's RBAC on a real apiserver
	go test -timeout 20m $(GO_TEST_FLAGS) ./test/chart/...

.PHONY: test-image
test-image: ## The image suite alone (test/image, also in test-integration): make image from scratch, its binaries run from it, a push with crane, and a second build to the same digest
	go test -timeout 20m $(GO_TEST_FLAGS) ./test/image/...

.PHONY: test-fuzz
test-fuzz: ## Run every fuzz target briefly (FUZZTIME each, default 5s)
	hack/fuzz.sh $(FUZZTIME)

.PHONY: test-bench
test-bench: tools-etcd tools-k8s ## The benchmark at SCALE=small as a smoke test: fails on wrong results (a lost work, a change never seen), never on timing
	go run ./test/bench -scale small -check

.PHONY: bench
bench: tools-etcd tools-k8s ## Measure propagation, freshness, memory, writes and the agent (test/bench) at SCALE (default full: writes docs/benchmarks.md)
	go run ./test/bench -scale $(SCALE) -check $(if $(filter full,$(SCALE)),-out docs/benchmarks.md)

.PHONY: bench-peer
bench-peer: tools-etcd tools-k8s ## Propagation only, side by side with the upstream argocd-pull-integration in basic mode (test/bench -peer) at SCALE (full writes docs/benchmarks-peer.md); PEER_BIN= a peer binary built elsewhere
	go run ./test/bench -peer -scale $(SCALE) $(if $(PEER_BIN),-peer-bin $(PEER_BIN)) $(if $(filter full,$(SCALE)),-out docs/benchmarks-peer.md)

.PHONY: fuzz
fuzz: ## Run every fuzz target for minutes (FUZZ_LONG each, default 3m)
	hack/fuzz.sh $(FUZZ_LONG)

.PHONY: test-e2e
test-e2e: fleet-tools tools-helm tools-clusteradm build ## The ginkgo e2e suite on a local fleet (hub + managed clusters as processes)
	go test $(GO_TEST_FLAGS) -v -timeout 40m ./test/e2e -args -ginkgo.v -bin-dir=$(BIN_DIR)

.PHONY: test-fleet
test-fleet: fleet-tools ## A managed cluster of the fleet runs Pods on KWOK (test/fleet)
	go test $(GO_TEST_FLAGS) -timeout 10m -run TestManagedClusterRunsPods ./test/fleet

##@ Fleet

.PHONY: fleet-up
fleet-up: fleet-tools tools-helm build ## Start the fleet in the background; kubeconfigs in .fleet/
	$(BIN_DIR)/fleet up --detach --dir $(FLEET_DIR) --clusters $(CLUSTERS) --bin $(BIN_DIR)

.PHONY: fleet-down
fleet-down: ## Stop the fleet that fleet-up started
	@if [ -x $(BIN_DIR)/fleet ]; then $(BIN_DIR)/fleet down --dir $(FLEET_DIR); else echo "no fleet binary: nothing runs"; fi

##@ Build

# GO_BUILD_CACHED <package> <binary> links the package through Go's build cache and copies
# the binary there (go run keeps what it links, go build relinks every time), as
# hack/tools/build.sh does: a build of unchanged sources links nothing.
GO_BUILD_CACHED := go run -exec "install -m 0755 -T"

.PHONY: build
build: ## Build the product binaries and the fleet command into bin/
	$(GO_BUILD_CACHED) ./cmd/manager $(BIN_DIR)/manager
	$(GO_BUILD_CACHED) ./cmd/agent $(BIN_DIR)/agent
	$(GO_BUILD_CACHED) ./test/fleet/cmd/fleet $(BIN_DIR)/fleet

.PHONY: image
image: ## Build the image without Docker (hack/image): an OCI layout, its tarball and digest in bin/image; IMAGE_REPO, IMAGE_TAG, IMAGE_PLATFORMS
	SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) go -C hack/image run . -src $(CURDIR) -out $(IMAGE_DIR) \
	  -repository $(IMAGE_REPO) -tag $(IMAGE_TAG) -revision $(IMAGE_REVISION) -platforms $(IMAGE_PLATFORMS)

.PHONY: image-push
image-push: image $(BIN_DIR)/crane ## Push the image to IMAGE_REPO:IMAGE_TAG with bin/crane (log in with bin/crane auth login, or docker's config)
	$(BIN_DIR)/crane push $(IMAGE_DIR)/argocd-pull-addon.oci $(IMAGE_REPO):$(IMAGE_TAG)

.PHONY: crane
crane: $(BIN_DIR)/crane ## Build crane (go-containerregistry, pinned in hack/image/go.mod) into bin/

$(BIN_DIR)/crane: hack/image/go.mod hack/image/go.sum
	CGO_ENABLED=0 go -C hack/image build -trimpath -o $@ github.com/google/go-containerregistry/cmd/crane

.PHONY: manifests
manifests: tools-helm ## Render manifests/ from charts/argocd-pull-addon (run after make generate)
	hack/generate-manifests.sh

.PHONY: generate
generate: ## Generate deepcopy and CRDs from pkg/apis (controller-gen, pinned in hack/tools)
	hack/generate.sh

.PHONY: tools
tools: $(addprefix tools-,$(TOOL_SETS)) ## Build every pinned tool into bin/ (skipped when up to date)

.PHONY: fleet-tools
fleet-tools: $(addprefix tools-,$(FLEET_TOOLS))

tools-%:
	@hack/tools/build.sh $*

.PHONY: clean
clean: fleet-down ## Remove bin/ and the run directories
	rm -rf $(BIN_DIR) $(FLEET_DIR) $(FLEET_DIR).log .cache

##@ Help

.PHONY: help
help: ## List the targets
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make <target>\n"} \
	  /^[a-zA-Z0-9_-]+:.*?##/ { printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2 } \
	  /^##@/ { printf "\n%s\n", substr($$0, 5) }' $(MAKEFILE_LIST)
