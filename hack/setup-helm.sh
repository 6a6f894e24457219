#!/usr/bin/env bash
# Builds the Helm client from its Go module (hack/helm, a module of its own so the main module's
# dependencies are untouched) and installs it in a cache folder outside the repository, so every
# clone reuses it. Prints the binary's path, which is what DETOUR_HELM must point at. Skips the
# build when the binary is already there.
#
#   DETOUR_HELM=$(hack/setup-helm.sh) go test ./charts/detour/
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# The version hack/helm/go.mod requires; the cache folder is named for it, so a bump rebuilds.
helm_version=$(awk '$1 == "require" && $2 == "helm.sh/helm/v4" { print $3 }' "$here/helm/go.mod")
[[ -n "$helm_version" ]] || { echo "setup-helm: hack/helm/go.mod requires no helm.sh/helm/v4" >&2; exit 1; }
cache_root=${DETOUR_HELM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/detour/helm}
dest="$cache_root/$helm_version"

if [[ -x "$dest/helm" ]]; then
  echo "$dest/helm"
  exit 0
fi

mkdir -p "$dest"
tmp="$dest/.helm.tmp.$$"
echo "setup-helm: building helm $helm_version from hack/helm (a few minutes the first time on 2 cores)" >&2
(cd "$here/helm" && CGO_ENABLED=0 go build -trimpath \
  -ldflags="-s -w -X helm.sh/helm/v4/internal/version.version=$helm_version" -o "$tmp" .)
mv -f "$tmp" "$dest/helm" # atomic, so a concurrent or interrupted run never sees half a binary
echo "$dest/helm"
