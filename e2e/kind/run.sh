#!/usr/bin/env bash
# End-to-end run on kind, for users' CI (needs docker, kind, kubectl, helm).
# Builds the image, installs the chart with the fake provider, submits pods
# that need new nodes, and checks that exactly the needed nodes appear, that
# the pods are bound to them, and that the pods carry TriggeredScaleUp events.
#
#   KIND_NODE_IMAGE   kindest/node image (default kindest/node:v1.35.0)
#   CLUSTER           kind cluster name (default dra-autoscaler-e2e)
#   KEEP_CLUSTER=1    leave the cluster running afterwards
set -euo pipefail
cd "$(dirname "$0")/../.."
here=e2e/kind
cluster="${CLUSTER:-dra-autoscaler-e2e}"
ns=dra-autoscaler

step() { printf '\n==> %s\n' "$*"; }
cleanup() {
  if [ "${KEEP_CLUSTER:-0}" != 1 ]; then kind delete cluster --name "$cluster" >/dev/null 2>&1 || true; fi
}
trap cleanup EXIT

step "cluster"
kind create cluster --name "$cluster" --config "$here/cluster.yaml" --image "${KIND_NODE_IMAGE:-kindest/node:v1.35.0}" --wait 120s

step "image"
docker build -t dra-autoscaler:e2e .
kind load docker-image dra-autoscaler:e2e --name "$cluster"

step "chart"
helm install dra-autoscaler charts/dra-autoscaler -n "$ns" --create-namespace -f "$here/values.yaml" --wait --timeout 3m
kubectl apply -f "$here/manifests/nodegroup.yaml"

step "workload"
kubectl apply -f "$here/manifests/workload.yaml"

step "two nodes of e2e-cpu appear"
for _ in $(seq 1 60); do
  n=$(kubectl get nodes -l dra-autoscaler.io/node-group=e2e-cpu --no-headers 2>/dev/null | wc -l)
  [ "$n" -ge 2 ] && break
  sleep 5
done
kubectl get nodes -l dra-autoscaler.io/node-group=e2e-cpu
[ "$(kubectl get nodes -l dra-autoscaler.io/node-group=e2e-cpu --no-headers | wc -l)" -eq 2 ]

step "pods bound to them"
kubectl wait --for=jsonpath='{.spec.nodeName}' pod -l app=e2e-load --timeout=120s >/dev/null || true
for pod in $(kubectl get pods -l app=e2e-load -o name); do
  node=$(kubectl get "$pod" -o jsonpath='{.spec.nodeName}')
  [ -n "$node" ] || { echo "$pod is not bound"; exit 1; }
  kubectl get node "$node" -o jsonpath='{.metadata.labels.dra-autoscaler\.io/node-group}' | grep -qx e2e-cpu
done

step "events and status"
kubectl get events -n default --field-selector reason=TriggeredScaleUp -o wide | grep -q e2e-load
kubectl get nodegroups
sleep 20
step "no second scale-up"
[ "$(kubectl get nodes -l dra-autoscaler.io/node-group=e2e-cpu --no-headers | wc -l)" -eq 2 ]
echo "1 passed, 0 failed"
