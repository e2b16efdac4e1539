#!/usr/bin/env bash
# Stops the test cluster started by up.sh and removes its state
# (kwokctl's work folder and the kubeconfig). The cached binaries stay.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/state.sh"

log() { echo "[cluster down] $*" >&2; }
cluster="$KWOK_WORKDIR/clusters/$CLUSTER_NAME"

# Our processes still alive: a pid from kwokctl's pid files (read before
# kwokctl deletes them) whose command line still runs from this work folder,
# so neither a reused pid nor an exited zombie.
pids=()
alive() {
  local p
  for p in "${pids[@]}"; do
    grep -qF "$KWOK_WORKDIR" "/proc/$p/cmdline" 2>/dev/null && echo "$p"
  done
  return 0
}

if [[ -d "$cluster" ]]; then
  log "stopping $CLUSTER_NAME"
  for f in "$cluster"/pids/*.pid; do
    if [[ -f "$f" ]]; then pids+=("$(<"$f")"); fi
  done
  "$BIN_DIR/kwokctl" --name "$CLUSTER_NAME" delete cluster --kubeconfig "$CLUSTER_KUBECONFIG" >&2 ||
    log "kwokctl delete cluster failed; stopping the processes by pid"
  for _ in $(seq 50); do [[ -z "$(alive)" ]] && break; sleep 0.2; done
  left=$(alive)
  if [[ -n "$left" ]]; then
    log "still running after 10 s, killing: $left"
    kill -KILL $left 2>/dev/null || true
  fi
else
  log "no cluster in $KWOK_WORKDIR"
fi
rm -rf "$KWOK_WORKDIR" "$CLUSTER_KUBECONFIG"
log "removed $KWOK_WORKDIR and $CLUSTER_KUBECONFIG"
