#!/usr/bin/env bash
# Builds one pinned tool set from its wrapper module in hack/tools/<set> into bin/.
#
#   hack/tools/build.sh <set>      e.g. k8s, etcd, ocm, argocd, kwok, helm, clusteradm, controller-gen, golangci-lint
#
# Each set is its own Go module, so its pins never reach the product's go.mod. The build is
# skipped when bin/.<set>.pin holds the hash of the set's go.mod, go.sum and this script, and
# every binary of the set is present: a second run costs nothing, a changed pin rebuilds.
set -euo pipefail

set_name=${1:?usage: build.sh <set>}
root=$(cd "$(dirname "$0")/../.." && pwd)
dir=$root/hack/tools/$set_name
bin=${BIN_DIR:-$root/bin}
[ -f "$dir/go.mod" ] || { echo "build.sh: no tool set '$set_name' under hack/tools" >&2; exit 2; }

# k8s.io/component-base version stamps, so that `kubectl version` and discovery report v1.35.4.
k8s_version=v1.35.4
k8s_ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$k8s_version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=35 -X k8s.io/component-base/version.gitTreeState=clean -X k8s.io/component-base/version.buildDate=2026-01-01T00:00:00Z -X k8s.io/client-go/pkg/version.gitVersion=$k8s_version"

# <binary>=<package> pairs and extra flags for each set.
case $set_name in
  k8s)
    targets=(kube-apiserver=k8s.io/kubernetes/cmd/kube-apiserver kubectl=k8s.io/kubernetes/cmd/kubectl
             kube-controller-manager=k8s.io/kubernetes/cmd/kube-controller-manager
             kube-scheduler=k8s.io/kubernetes/cmd/kube-scheduler)
    ldflags=$k8s_ldflags ;;
  etcd)
    targets=(etcd=go.etcd.io/etcd/server/v3)
    ldflags="-s -w" ;;
  ocm)
    targets=(registration-operator=open-cluster-management.io/ocm/cmd/registration-operator
             registration=open-cluster-management.io/ocm/cmd/registration
             work=open-cluster-management.io/ocm/cmd/work
             placement=open-cluster-management.io/ocm/cmd/placement
             addon=open-cluster-management.io/ocm/cmd/addon)
    ldflags="-s -w" ;;
  argocd)
    targets=(argocd=github.com/argoproj/argo-cd/v3/cmd)
    ldflags="-s -w -X github.com/argoproj/argo-cd/v3/common.version=3.2.11" ;;
  kwok)
    targets=(kwok=sigs.k8s.io/kwok/cmd/kwok)
    ldflags="-s -w" ;;
  helm)
    targets=(helm=helm.sh/helm/v3/cmd/helm)
    ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=v3.19.5" ;;
  clusteradm)
    targets=(clusteradm=open-cluster-management.io/clusteradm/cmd/clusteradm)
    ldflags="-s -w"
    export GONOSUMDB=open-cluster-management.io/clusteradm ;;
  controller-gen)
    targets=(controller-gen=sigs.k8s.io/controller-tools/cmd/controller-gen)
    ldflags="-s -w" ;;
  golangci-lint)
    targets=(golangci-lint=github.com/golangci/golangci-lint/v2/cmd/golangci-lint)
    ldflags="-s -w -X main.version=2.15.0" ;;
  *) echo "build.sh: no recipe for tool set '$set_name'" >&2; exit 2 ;;
esac

pin=$(cat "$dir/go.mod" "$dir/go.sum" "$0" | sha256sum | cut -c1-16)
stamp=$bin/.$set_name.pin
missing=0
for t in "${targets[@]}"; do [ -x "$bin/${t%%=*}" ] || missing=1; done
if [ $missing = 0 ] && [ "$(cat "$stamp" 2>/dev/null)" = "$pin" ]; then
  exit 0
fi

mkdir -p "$bin"
rm -f "$stamp"
cd "$dir"
for t in "${targets[@]}"; do
  name=${t%%=*} pkg=${t#*=}
  start=$(date +%s)
  echo ">> building $name ($pkg)"
  # go run keeps the linked binary in Go's build cache (go build does not), and -exec hands
  # its path to install: a checkout whose bin/ is empty relinks nothing that an earlier
  # build linked, on this machine, at the same pin.
  CGO_ENABLED=0 go run -exec "install -m 0755 -T" -trimpath -ldflags "$ldflags" "$pkg" "$bin/$name"
  echo ">> built $name in $(( $(date +%s) - start ))s"
done
echo "$pin" > "$stamp"
