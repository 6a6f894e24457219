#!/usr/bin/env bash
# Builds golangci-lint with kube-api-linter's module plugin compiled in from their Go modules
# (hack/kube-api-linter, a module of its own so the main module's dependencies are untouched) and
# installs it in a cache folder outside the repository, so every clone reuses it. Prints the
# binary's path. Skips the build when the binary is already there.
#
#   "$(hack/setup-kube-api-linter.sh)" run --config .golangci-kal.yml ./api/...
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# The versions hack/kube-api-linter/go.mod requires; the cache folder is named for both, so a
# bump of either rebuilds.
required() { awk -v mod="$1" '($1 == "require" && $2 == mod) { print $3 } ($1 == mod) { print $2 }' "$here/kube-api-linter/go.mod" | head -n 1; }
gcl_version=$(required github.com/golangci/golangci-lint/v2)
kal_version=$(required sigs.k8s.io/kube-api-linter)
[[ -n "$gcl_version" && -n "$kal_version" ]] || { echo "setup-kube-api-linter: hack/kube-api-linter/go.mod lacks golangci-lint or kube-api-linter" >&2; exit 1; }
cache_root=${DETOUR_KUBE_API_LINTER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/detour/kube-api-linter}
dest="$cache_root/golangci-lint-$gcl_version-kal-$kal_version"

if [[ -x "$dest/golangci-lint" ]]; then
  echo "$dest/golangci-lint"
  exit 0
fi

mkdir -p "$dest"
tmp="$dest/.golangci-lint.tmp.$$"
echo "setup-kube-api-linter: building golangci-lint $gcl_version with kube-api-linter $kal_version from hack/kube-api-linter (about 3 minutes the first time on 2 cores)" >&2
(cd "$here/kube-api-linter" && CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o "$tmp" .)
mv -f "$tmp" "$dest/golangci-lint" # atomic, so a concurrent or interrupted run never sees half a binary
echo "$dest/golangci-lint"
