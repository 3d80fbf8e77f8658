#!/usr/bin/env bash
# Fail when manifests/ differs from what hack/generate-manifests.sh renders from the chart.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$root/hack/generate-manifests.sh" "$tmp"
status=0
for f in install.yaml uninstall.yaml clustermanagementaddon.yaml; do
  if ! diff -u "$root/manifests/$f" "$tmp/$f" >"$tmp/$f.diff"; then
    echo "manifests/$f is stale: run hack/generate-manifests.sh (make manifests)" >&2
    head -40 "$tmp/$f.diff" >&2
    status=1
  fi
done
exit $status
