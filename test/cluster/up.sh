#!/usr/bin/env bash
# Starts the test cluster (kube-apiserver, kube-controller-manager,
# kube-scheduler, etcd and kwok as local processes on 127.0.0.1) unless one
# is already running, builds the binaries first if they are not cached, and
# prints the kubeconfig path on the last line.
#
#   test/cluster/up.sh && source test/cluster/env.sh && kubectl get nodes
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/state.sh"

log() { echo "[cluster up] $*" >&2; }

if cluster_ready; then
  log "already running (reused): $CLUSTER_KUBECONFIG"
  echo "$CLUSTER_KUBECONFIG"
  exit 0
fi

# One bring-up at a time (parallel test runners): the others wait and reuse it.
mkdir -p "$(dirname "$CLUSTER_KUBECONFIG")"
exec 8>"$(dirname "$CLUSTER_KUBECONFIG")/.up.lock"
flock 8
if cluster_ready; then
  log "started meanwhile (reused): $CLUSTER_KUBECONFIG"
  echo "$CLUSTER_KUBECONFIG"
  exit 0
fi

"$CLUSTER_DIR/build.sh" >/dev/null

# kwokctl with only stdin, stdout and stderr open: the cluster's processes
# outlive this script and must not inherit (and hold) its lock or any pipe
# its caller left open, which would keep a CI step or `$(...)` waiting.
kwokctl() (
  for fd in $(ls /proc/$BASHPID/fd); do
    if ((fd > 2)); then eval "exec $fd>&-"; fi
  done 2>/dev/null
  exec "$BIN_DIR/kwokctl" --name "$CLUSTER_NAME" "$@"
)

# A kubeconfig that does not answer is left over (a crash, a reboot): clear it.
if [[ -e "$CLUSTER_KUBECONFIG" || -d "$KWOK_WORKDIR/clusters/$CLUSTER_NAME" ]]; then
  log "clearing a stale cluster in $KWOK_WORKDIR"
  kwokctl delete cluster --kubeconfig "$CLUSTER_KUBECONFIG" >&2 || true
  rm -rf "$KWOK_WORKDIR" "$CLUSTER_KUBECONFIG"
fi

mkdir -p "$KWOK_WORKDIR"
log "starting (kwokctl --runtime binary, work folder $KWOK_WORKDIR)"
start=$SECONDS
kwokctl create cluster \
  --runtime binary \
  --config "$CLUSTER_DIR/kwokctl.yaml" \
  --kube-apiserver-binary "$BIN_DIR/kube-apiserver" \
  --kube-controller-manager-binary "$BIN_DIR/kube-controller-manager" \
  --kube-scheduler-binary "$BIN_DIR/kube-scheduler" \
  --kwok-controller-binary "$BIN_DIR/kwok" \
  --etcd-binary "$BIN_DIR/etcd" \
  --extra-args kube-apiserver=endpoint-reconciler-type=none \
  --kubeconfig "$CLUSTER_KUBECONFIG" \
  --wait 2m >&2
cluster_ready || { log "the API server does not answer /readyz"; exit 1; }
log "ready in $((SECONDS - start)) s; kubeconfig: $CLUSTER_KUBECONFIG"
echo "$CLUSTER_KUBECONFIG"
