#!/usr/bin/env bash
# Checks a running test cluster end to end: nodes, kwok fake nodes, a
# Deployment that becomes Available on them, helm's version. Leaves the
# cluster as it found it except for the fake nodes (namespace removed).
#
#   test/cluster/up.sh && test/cluster/smoke.sh
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"

log() { echo "[cluster smoke] $*" >&2; }
ns=modelgate-smoke

log "kubectl $(kubectl version -o json | grep -m1 -o '"gitVersion": "[^"]*"' | cut -d'"' -f4) against $KUBECONFIG"
kubectl get --raw /readyz >/dev/null

log "fake nodes: kwokctl scale node --replicas 2"
kwokctl --name "$CLUSTER_NAME" scale node --replicas 2 >&2
kubectl wait --for=condition=Ready node --all --timeout=30s >&2
kubectl get nodes -o wide >&2

log "a 2-replica Deployment on the kwok nodes"
kubectl delete namespace "$ns" --ignore-not-found --wait >&2
kubectl create namespace "$ns" >&2
start=$(date +%s%N)
kubectl apply -n "$ns" -f - >&2 <<'YAML'
apiVersion: apps/v1
kind: Deployment
metadata:
  name: smoke
spec:
  replicas: 2
  selector:
    matchLabels: { app: smoke }
  template:
    metadata:
      labels: { app: smoke }
    spec:
      nodeSelector: { type: kwok }
      containers:
        - name: main
          image: registry.k8s.io/pause:3.10
YAML
kubectl wait -n "$ns" --for=condition=Available deployment/smoke --timeout=60s >&2
log "Available in $((($(date +%s%N) - start) / 1000000)) ms"
kubectl get -n "$ns" pods -o wide >&2
kubectl delete namespace "$ns" --wait=false >&2

log "helm $(helm version --template '{{.Version}}')"
[[ "$(helm version --template '{{.Version}}')" == "$HELM_VERSION" ]]
log "ok"
