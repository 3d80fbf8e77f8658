#!/usr/bin/env bash
# Fails when the generated deepcopy code or CRD manifests (hack/generate.sh) are stale:
# it generates them into a temporary folder and compares.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$root/hack/generate.sh" "$tmp"

status=0
diff -ru "$tmp/manifests/crds" "$root/manifests/crds" || status=1
while IFS= read -r generated; do
  rel=${generated#"$tmp"/}
  diff -u "$generated" "$root/$rel" || status=1
done < <(find "$tmp/pkg/apis" -name 'zz_generated.*.go')
# A generated file in the tree that generation no longer produces is stale too.
while IFS= read -r committed; do
  rel=${committed#"$root"/}
  [ -f "$tmp/$rel" ] || { echo "stale: $rel is no longer generated"; status=1; }
done < <(find "$root/pkg/apis" -name 'zz_generated.*.go')
if [ $status != 0 ]; then
  echo "generated files are stale: run hack/generate.sh (make generate)" >&2
fi
exit $status
