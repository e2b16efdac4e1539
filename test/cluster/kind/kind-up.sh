#!/usr/bin/env bash
# For developers who have Docker (or Podman) and kind: a real one-node cluster
# instead of the kwok one. It writes the same kubeconfig path as ../up.sh, so
# `source test/cluster/env.sh` and the tests use it the same way.
# Not used by CI: the CI machines have no container engine.
#
#   test/cluster/kind/kind-up.sh                      create (or reuse) the cluster
#   KIND_NODE_IMAGE=kindest/node:v1.36.x ...          pin the node image
#   kind delete cluster --name modelgate && rm test/cluster/.state/kubeconfig
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../state.sh"

log() { echo "[kind up] $*" >&2; }
command -v kind >/dev/null || { log "kind is not installed: https://kind.sigs.k8s.io/docs/user/quick-start/"; exit 1; }

name="${KIND_CLUSTER_NAME:-$CLUSTER_NAME}"
mkdir -p "$(dirname "$CLUSTER_KUBECONFIG")"
if kind get clusters 2>/dev/null | grep -qx "$name"; then
  log "cluster $name exists: writing its kubeconfig"
  kind get kubeconfig --name "$name" >"$CLUSTER_KUBECONFIG"
else
  args=(--name "$name" --kubeconfig "$CLUSTER_KUBECONFIG" --wait 2m)
  [[ -n "${KIND_NODE_IMAGE:-}" ]] && args+=(--image "$KIND_NODE_IMAGE")
  kind create cluster "${args[@]}" >&2
fi
kubectl --kubeconfig "$CLUSTER_KUBECONFIG" get nodes >&2
echo "$CLUSTER_KUBECONFIG"
