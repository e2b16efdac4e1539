#!/usr/bin/env bash
# Builds the test cluster's binaries from the Go module proxy, once, into a
# versioned folder under the user cache directory (see ../../../shared/TEST-CLUSTER.md
# and README.md here). The last line printed is the bin folder.
#
#   test/cluster/build.sh            build unless the cached binaries are there
#   FORCE=1 test/cluster/build.sh    rebuild
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/versions.sh"

log() { echo "[cluster build] $*" >&2; }

installed() {
  [[ -x "$BIN_DIR/kube-apiserver" ]] &&
    "$BIN_DIR/kube-apiserver" --version 2>/dev/null | grep -x "Kubernetes $K8S_VERSION" >/dev/null
}

if [[ -z "${FORCE:-}" ]] && installed; then
  log "cached: $BIN_DIR"
  echo "$BIN_DIR"
  exit 0
fi

command -v go >/dev/null || { log "go is required (Go 1.26 or newer)"; exit 1; }
mkdir -p "$BUILD_ROOT"

# One build at a time per cache folder; a second caller waits, then reuses.
exec 9>"$BUILD_ROOT/.lock"
flock 9
if [[ -z "${FORCE:-}" ]] && installed; then
  log "cached (built meanwhile): $BIN_DIR"
  echo "$BIN_DIR"
  exit 0
fi

start=$SECONDS
# The throwaway module lives in the cache folder, outside the repository.
mod="$BUILD_ROOT/module"
rm -rf "$mod" && mkdir -p "$mod"
cd "$mod"

# k8s.io/kubernetes replaces its staging modules with local paths, which only
# apply inside its own repository: replace each by its published v0.x version.
staging=(api apiextensions-apiserver apimachinery apiserver cli-runtime client-go
  cloud-provider cluster-bootstrap code-generator component-base component-helpers
  controller-manager cri-api cri-client cri-streaming csi-translation-lib
  dynamic-resource-allocation endpointslice externaljwt kms kube-aggregator
  kube-controller-manager kube-proxy kube-scheduler kubectl kubelet metrics
  mount-utils pod-security-admission sample-apiserver sample-controller streaming)
{
  echo "module modelgate.local/test-cluster-tools"
  echo
  echo "go 1.26"
  echo
  echo "replace ("
  for m in "${staging[@]}"; do echo "	k8s.io/$m => k8s.io/$m $K8S_STAGING_VERSION"; done
  for m in api/v3 client/pkg/v3 client/v3 pkg/v3 server/v3; do
    echo "	go.etcd.io/etcd/$m => go.etcd.io/etcd/$m $ETCD_VERSION"
  done
  echo ")"
} >go.mod

tools=(
  "k8s.io/kubernetes/cmd/kube-apiserver@$K8S_VERSION"
  "k8s.io/kubernetes/cmd/kube-controller-manager@$K8S_VERSION"
  "k8s.io/kubernetes/cmd/kube-scheduler@$K8S_VERSION"
  "k8s.io/kubernetes/cmd/kubectl@$K8S_VERSION"
  "go.etcd.io/etcd/server/v3@$ETCD_VERSION"
  "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
  "sigs.k8s.io/kwok/cmd/kwokctl@$KWOK_VERSION"
  "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
)
log "go mod download (go get -tool, ${#tools[@]} commands) in $mod"
GOFLAGS=-mod=mod go get -tool "${tools[@]}"
log "modules resolved after $((SECONDS - start)) s"

ver() { # -X flags for the k8s.io version packages
  local p=$1
  echo "-X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=$K8S_MAJOR -X $p.gitMinor=$K8S_MINOR -X $p.gitTreeState=clean"
}
ldflags="-s -w $(ver k8s.io/component-base/version) $(ver k8s.io/client-go/pkg/version)"
ldflags+=" -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
ldflags+=" -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=$K8S_MAJOR -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$K8S_MINOR"
ldflags+=" -X sigs.k8s.io/kwok/pkg/consts.KubeVersion=${K8S_VERSION#v}" # kwokctl's default Kubernetes version

tmp="$BUILD_ROOT/bin.tmp.$$"
rm -rf "$tmp" && mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT
pkgs=("${tools[@]%@*}")
log "go build ${#pkgs[@]} commands in one go build (about 6-7 min cold on 2 idle cores, ~1 min with warm Go caches)"
build_start=$SECONDS
go build -trimpath -ldflags "$ldflags" -o "$tmp/" "${pkgs[@]}"
mv "$tmp/server" "$tmp/etcd" # go names go.etcd.io/etcd/server/v3's binary "server"
log "go build done in $((SECONDS - build_start)) s"

log "verify"
"$tmp/kube-apiserver" --version | grep -x "Kubernetes $K8S_VERSION" >/dev/null
"$tmp/etcd" --version | grep "etcd Version: ${ETCD_VERSION#v}" >/dev/null
"$tmp/helm" version --template '{{.Version}}' | grep -x "$HELM_VERSION" >/dev/null
"$tmp/kubectl" version --client -o json | grep "\"gitVersion\": \"$K8S_VERSION\"" >/dev/null
"$tmp/kwokctl" --version >&2
ls -l "$tmp" >&2

rm -rf "$BIN_DIR"
mv "$tmp" "$BIN_DIR"
trap - EXIT
log "built in $((SECONDS - start)) s: $BIN_DIR"
echo "$BIN_DIR"
