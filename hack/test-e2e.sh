#!/usr/bin/env bash
# The end-to-end suite: installs and builds what the node needs (cached), builds the images,
# starts the single-node cluster, runs test/e2e inside the node's network namespace and tears the
# node down, also when a test fails or the run is interrupted.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

[[ $(id -u) == 0 ]] || { echo "make test-e2e: needs root (network namespaces, mounts, cgroups for the node)" >&2; exit 1; }
command -v kubectl >/dev/null || { echo "make test-e2e: kubectl is required" >&2; exit 1; }
KUBEBUILDER_ASSETS=$(hack/setup-envtest.sh)
DETOUR_E2E_ASSETS=$(hack/setup-e2e.sh)
DETOUR_ROCKETMQ=$(hack/setup-rocketmq.sh)
DETOUR_HELM=$(hack/setup-helm.sh)
DETOUR_PROMETHEUS=$(hack/setup-prometheus.sh)
export KUBEBUILDER_ASSETS DETOUR_E2E_ASSETS DETOUR_ROCKETMQ DETOUR_HELM DETOUR_PROMETHEUS
export DETOUR_E2E_STATE=${DETOUR_E2E_STATE:-${TMPDIR:-/tmp}/detour-e2e}

# DETOUR_E2E_KEEP=1 leaves the node running for a look (hack/e2e-cluster.sh down stops it).
[[ ${DETOUR_E2E_KEEP:-} == 1 ]] || trap 'hack/e2e-cluster.sh down' EXIT
hack/e2e-cluster.sh down
mkdir -p "$DETOUR_E2E_STATE"
rm -rf "$DETOUR_E2E_STATE/images"
hack/e2e-images.sh "$DETOUR_E2E_STATE/images" >/dev/null
go test -c -tags e2e -o bin/e2e.test ./test/e2e
start=$SECONDS
kubeconfig=$(hack/e2e-cluster.sh up)
echo "test-e2e: node Ready in $((SECONDS - start)) s" >&2
# The test binary runs inside the node's network namespace, where the API server, the Services'
# cluster IPs and the pods are reachable.
DETOUR_E2E_KUBECONFIG=$kubeconfig \
DETOUR_E2E_ROCKETMQ_IMAGE="detour.e2e/rocketmq:$(cat "$DETOUR_ROCKETMQ/5/server/version")" \
  hack/e2e-cluster.sh exec bash -c 'cd test/e2e && exec ../../bin/e2e.test -test.v -test.count=1 -test.timeout="${E2E_TIMEOUT:-40m}" "$@"' e2e "$@"
