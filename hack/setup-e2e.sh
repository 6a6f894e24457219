#!/usr/bin/env bash
# Installs and caches everything the end-to-end suite's single-node cluster needs, outside the
# repository, so every clone reuses it; prints the cache folder (what DETOUR_E2E_ASSETS must point
# at). Skips whatever is already present.
#
#   - Debian packages: containerd, runc, the CNI plugins, iptables, conntrack, debootstrap;
#   - kubelet, kube-proxy, kube-scheduler and kube-controller-manager in one binary (`kube`), built
#     from the published k8s.io/kubernetes module (hack/e2e/kube; about 5 minutes on 2 cores when
#     the envtest kube-apiserver has been built before, as its packages are shared);
#   - a Debian root file system with a headless Java 17 runtime, the base layer of the RocketMQ
#     images (debootstrap; about 6 minutes the first time), kept as a tar.
#
# The API server and etcd are the envtest ones (hack/setup-envtest.sh). Needs root: the node runs
# in a network namespace and mounts overlay file systems.
#
#   DETOUR_E2E_ASSETS=$(hack/setup-e2e.sh) go test ./test/e2e/...
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
kube_version=v1.37.2
suite=bookworm
cache_root=${DETOUR_E2E_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/detour/e2e}
log() { echo "setup-e2e: $*" >&2; }
fail() { log "$*"; exit 1; }

[[ $(id -u) == 0 ]] || fail "the end-to-end cluster needs root (network namespaces, mounts, cgroups); run as root"
ip netns list >/dev/null 2>&1 || fail "'ip netns' does not work here; the node runs in a network namespace (Debian: apt-get install iproute2)"

# Debian packages, installed once. containerd and runc run the pods; the CNI plugins (bridge,
# host-local, portmap, loopback) give them addresses; kube-proxy needs iptables and conntrack;
# debootstrap builds the Java root.
packages=(containerd runc containernetworking-plugins iptables conntrack debootstrap)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  command -v apt-get >/dev/null || fail "missing Debian packages ${missing[*]} and no apt-get to install them"
  log "installing ${missing[*]}"
  apt-get update -q >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >&2
fi

mkdir -p "$cache_root"

# kube: one multi-call binary, so the shared packages link once.
kube_dir="$cache_root/kube-$kube_version"
if [[ ! -x "$kube_dir/kube" ]]; then
  mkdir -p "$kube_dir"
  log "building kubelet, kube-proxy, kube-scheduler and kube-controller-manager $kube_version from Go modules"
  tmp="$kube_dir/.kube.tmp.$$"
  minor=${kube_version#v1.}; minor=${minor%%.*}
  (cd "$here/e2e/kube" && CGO_ENABLED=0 go build -trimpath \
    -ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$kube_version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor" \
    -o "$tmp" .)
  mv -f "$tmp" "$kube_dir/kube"
fi

# The Java root: debootstrap from the Debian mirror this machine's apt already uses, with the JRE
# included. Kept as a tar of the root, which is an image layer as it stands.
jvm_tar="$cache_root/jvm-$suite-openjdk17.tar"
if [[ ! -f "$jvm_tar" ]]; then
  mirror=$(sed -n 's/^URIs:[[:space:]]*//p' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -1)
  [[ -n "$mirror" ]] || mirror=$(awk '$1 == "deb" {print $2; exit}' /etc/apt/sources.list 2>/dev/null)
  [[ -n "$mirror" ]] || fail "no Debian mirror found in apt's sources to debootstrap the Java root from"
  root="$cache_root/.jvm-root.$$"
  unmount_root() { # debootstrap mounts proc and sys inside the root; never leave them behind
    local m
    for m in dev/pts dev proc sys; do
      if mountpoint -q "$root/$m" 2>/dev/null; then umount -l "$root/$m"; fi
    done
  }
  cleanup() { unmount_root; rm -rf "$root"; }
  trap cleanup EXIT
  log "building the Java 17 root ($suite, debootstrap; about 6 minutes)"
  debootstrap --variant=minbase --include=openjdk-17-jre-headless,ca-certificates "$suite" "$root" "$mirror" >&2
  unmount_root
  # Nothing of the package manager's caches belongs in an image.
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/var/log/*
  compgen -G "$root/usr/lib/jvm/java-17-openjdk-*/bin/java" >/dev/null || fail "the Java root has no java"
  tar --numeric-owner -C "$root" -cf "$jvm_tar.tmp" .
  mv -f "$jvm_tar.tmp" "$jvm_tar"
  cleanup
  trap - EXIT
fi

echo "$cache_root"
