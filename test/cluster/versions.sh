# Sourced by the scripts here: the pinned versions and where their build is cached.
# Changing a version changes the cache folder, so the next run rebuilds.
K8S_VERSION=v1.36.3
K8S_STAGING_VERSION=v0.36.3
K8S_MAJOR=1
K8S_MINOR=36
ETCD_VERSION=v3.6.16
KWOK_VERSION=v0.8.0
HELM_VERSION=v3.22.0

CLUSTER_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
BUILD_ROOT="${XDG_CACHE_HOME:-$HOME/.cache}/modelgate/test-cluster/k8s-$K8S_VERSION-etcd-$ETCD_VERSION-kwok-$KWOK_VERSION-helm-$HELM_VERSION"
BIN_DIR="$BUILD_ROOT/bin"
