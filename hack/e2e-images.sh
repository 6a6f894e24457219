#!/usr/bin/env bash
# Builds the end-to-end suite's images from this repository as OCI archives in the folder given
# (hack/e2e-cluster.sh imports every archive there); no registry and no image builder:
#
#   detour.e2e/pause:1          the pod sandbox (hack/e2e/pause)
#   detour.e2e/manager:dev      what the Dockerfile's final stage holds: the static manager, the
#                               CA certificates, user 65532
#   detour.e2e/rocketmq:5.5.0   the Debian Java 17 root (hack/setup-e2e.sh) with real Apache
#                               RocketMQ's server and client jars (hack/setup-rocketmq.sh) under
#                               /opt/rocketmq, RocketMQ 5's gRPC SDK apart from them in
#                               /opt/rocketmq/grpc, the Java drivers of hack/rocketmq, and
#                               detourctl (the readiness probe: `detourctl ping`)
#
#   hack/e2e-images.sh OUT_DIR
set -euo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${1:?usage: hack/e2e-images.sh OUT_DIR}
: "${DETOUR_E2E_ASSETS:?set DETOUR_E2E_ASSETS to hack/setup-e2e.sh\'s folder}"
: "${DETOUR_ROCKETMQ:?set DETOUR_ROCKETMQ to hack/setup-rocketmq.sh\'s folder}"
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$top"

build() { # build OUT PACKAGE
  CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$1" "$2"
}
image() { go run ./hack/e2e/ociimage "$@"; }

mkdir -p "$work/pause" "$work/manager/etc/ssl/certs" "$work/rocketmq/opt/rocketmq" "$work/rocketmq/usr/local/bin"
build "$work/pause/pause" ./hack/e2e/pause
image -o "$out/pause.tar" -name detour.e2e/pause:1 -entrypoint '["/pause"]' -layer "$work/pause"

build "$work/manager/manager" ./cmd/manager
cp /etc/ssl/certs/ca-certificates.crt "$work/manager/etc/ssl/certs/"
image -o "$out/manager.tar" -name detour.e2e/manager:dev -user 65532:65532 -entrypoint '["/manager"]' -layer "$work/manager"

version=$(cat "$DETOUR_ROCKETMQ/5/server/version")
cp -rL "$DETOUR_ROCKETMQ/5/server" "$DETOUR_ROCKETMQ/5/client" "$DETOUR_ROCKETMQ/5/grpc" "$work/rocketmq/opt/rocketmq/"
build "$work/rocketmq/usr/local/bin/detourctl" ./cmd/detourctl
image -o "$out/rocketmq.tar" -name "detour.e2e/rocketmq:$version" -workdir /opt/rocketmq \
  -layer "$DETOUR_E2E_ASSETS/jvm-bookworm-openjdk17.tar" -layer "$work/rocketmq"
ls -1 "$out"
