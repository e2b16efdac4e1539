# Sourced by up.sh, down.sh and env.sh: where a running cluster keeps its state.
# MODELGATE_KUBECONFIG   kubeconfig written by up.sh (default test/cluster/.state/kubeconfig)
# MODELGATE_CLUSTER_DIR  kwokctl's work folder: pid files, logs, PKI, etcd data
#                        (default .cache/test-cluster/kwok in the repository, git-ignored)
source "$(dirname "${BASH_SOURCE[0]}")/versions.sh"
REPO_DIR="$(cd "$CLUSTER_DIR/../.." && pwd)"
CLUSTER_NAME=modelgate
CLUSTER_KUBECONFIG="${MODELGATE_KUBECONFIG:-$CLUSTER_DIR/.state/kubeconfig}"
export KWOK_WORKDIR="${MODELGATE_CLUSTER_DIR:-$REPO_DIR/.cache/test-cluster/kwok}"

# True when the kubeconfig's API server answers /readyz with "ok".
cluster_ready() {
  [[ -f "$CLUSTER_KUBECONFIG" && -x "$BIN_DIR/kubectl" ]] &&
    [[ "$("$BIN_DIR/kubectl" --kubeconfig "$CLUSTER_KUBECONFIG" --request-timeout=5s \
      get --raw /readyz 2>/dev/null)" == ok ]]
}
