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

# The API server must report its release (clients such as helm check a chart's kubeVersion
# against it); a build without the version stamp reports v0.0.0-master and is built again.
versioned() { [[ -x "$dest/kube-apiserver" && $("$dest/kube-apiserver" --version 2>/dev/null) == "Kubernetes $kube_version" ]]; }
if [[ -x "$dest/etcd" ]] && versioned; then
  echo "$dest"
  exit 0
fi

mkdir -p "$dest"
build() { # build <module dir> <binary name>
  local tmp="$dest/.$2.tmp.$$"
  echo "setup-envtest: building $2 from $1 (the first kube-apiserver build takes about 12 minutes on 2 cores)" >&2
  local minor=${kube_version#v1.}; minor=${minor%%.*}
  (cd "$here/envtest/$1" && CGO_ENABLED=0 go build -trimpath -o "$tmp" \
    -ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$kube_version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor" .)
  mv -f "$tmp" "$dest/$2" # atomic, so a concurrent or interrupted run never sees half a binary
}
[[ -x "$dest/etcd" ]] || build etcd etcd
versioned || build kube-apiserver kube-apiserver
echo "$dest"
