# Source it: puts the cached kubectl, helm, kwokctl, etcd and kube-* first on
# PATH and points KUBECONFIG at the test cluster that up.sh starts.
#
#   source test/cluster/env.sh
source "$(dirname "${BASH_SOURCE[0]}")/state.sh"
export PATH="$BIN_DIR:$PATH"
export KUBECONFIG="$CLUSTER_KUBECONFIG"
