#!/usr/bin/env bash
# Builds the envtest control plane (kube-apiserver and etcd) from Go modules and installs it in a
# cache folder outside the repository, so every clone reuses it. Prints that folder, which is what
# KUBEBUILDER_ASSETS must point at. Skips the build when both binaries are already present.
#
#   KUBEBUILDER_ASSETS=$(hack/setup-envtest.sh) go test ./controllers/...
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
kube_version=v1.37.2
etcd_version=v3.6.16
cache_root=${DETOUR_ENVTEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/detour/envtest}
dest="$cache_root/kube-$kube_version-etcd-$etcd_version"

if [[ -x "$dest/kube-apiserver" && -x "$dest/etcd" ]]; then
  echo "$dest"
  exit 0
fi

mkdir -p "$dest"
build() { # build <module dir> <binary name>
  local tmp="$dest/.$2.tmp.$$"
  echo "setup-envtest: building $2 from $1 (the first kube-apiserver build takes about 12 minutes on 2 cores)" >&2
  (cd "$here/envtest/$1" && CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$tmp" .)
  mv -f "$tmp" "$dest/$2" # atomic, so a concurrent or interrupted run never sees half a binary
}
[[ -x "$dest/etcd" ]] || build etcd etcd
[[ -x "$dest/kube-apiserver" ]] || build kube-apiserver kube-apiserver
echo "$dest"
