#!/usr/bin/env bash
# Generates the code and manifests derived from the API types in pkg/apis with the pinned
# controller-gen (hack/tools/controller-gen):
#   - zz_generated.deepcopy.go next to the types;
#   - the CRD manifests in manifests/crds/.
#
#   hack/generate.sh [output root]
#
# With an output root, the CRDs are written under <root>/manifests/crds and the deepcopy
# files under <root>/pkg/apis/... instead (hack/verify-generated.sh diffs them).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root}
bin=${BIN_DIR:-$root/bin}
"$root/hack/tools/build.sh" controller-gen >&2

cd "$root"
header=$(mktemp)
trap 'rm -f "$header"' EXIT
: > "$header" # no license header

if [ "$out" = "$root" ]; then
  "$bin/controller-gen" object:headerFile="$header" paths=./pkg/apis/...
else
  # controller-gen writes deepcopy next to the types: generate into a copy of pkg/apis.
  mkdir -p "$out/pkg"
  cp -R pkg/apis "$out/pkg/"
  find "$out/pkg/apis" -name 'zz_generated.*.go' -delete
  (cd "$out" && cp "$root/go.mod" "$root/go.sum" . && \
    "$bin/controller-gen" object:headerFile="$header" paths=./pkg/apis/...)
fi
"$bin/controller-gen" crd paths=./pkg/apis/... output:crd:artifacts:config="$out/manifests/crds"
