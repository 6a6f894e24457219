#!/usr/bin/env bash
# Prints the path of protoc, the Protocol Buffers compiler `make generate` runs on proto/,
# installing Debian's protobuf-compiler package first when it is missing (a fresh CI machine has
# none), with libprotobuf-dev for the well-known types (google/protobuf/duration.proto and
# timestamp.proto, under /usr/include). The Go plugins are not installed here: the Makefile runs
# them from their modules pinned in go.mod.
set -euo pipefail

log() { echo "setup-protoc: $*" >&2; }
fail() { log "$*"; exit 1; }

packages=()
command -v protoc >/dev/null || packages+=(protobuf-compiler)
[[ -f /usr/include/google/protobuf/duration.proto ]] || packages+=(libprotobuf-dev)
if ((${#packages[@]})); then
  command -v apt-get >/dev/null || fail "missing Debian packages ${packages[*]} and no apt-get to install them"
  sudo=()
  [[ $(id -u) == 0 ]] || sudo=(sudo)
  log "installing ${packages[*]}"
  "${sudo[@]}" apt-get update -q >&2
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -q --no-install-recommends "${packages[@]}" >&2
fi
command -v protoc
