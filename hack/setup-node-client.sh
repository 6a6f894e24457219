#!/usr/bin/env bash
# Installs RocketMQ's Node.js gRPC client (rocketmq-client-nodejs, pinned with every dependency in
# hack/rocketmq/node/package-lock.json) with npm ci, next to the project's small Node driver
# (hack/rocketmq/node), in a cache folder outside the repository, so every clone reuses it. Prints
# that folder, which is what DETOUR_NODE_CLIENT must point at. Skips the work when the folder for
# this lock file and this driver is complete.
#
#   DETOUR_NODE_CLIENT=$(hack/setup-node-client.sh) go test ./test/compat/...
#
# Layout of the folder: node_modules, grpc_read.js (the driver), version (the client's version).
# DETOUR_NODE picks the interpreter (node by default); DETOUR_NODE_CLIENT_CACHE the cache folder.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src="$here/rocketmq/node"
node=${DETOUR_NODE:-node}

for tool in "$node" npm; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "setup-node-client: '$tool' not found; the Node.js client's tests need Node.js 18 or newer with npm (Debian: apt-get install nodejs npm)" >&2
    exit 1
  fi
done
if ! "$node" -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 18 ? 0 : 1)' 2>/dev/null; then
  echo "setup-node-client: Node.js $("$node" --version 2>&1) is too old; the client needs 18 or newer" >&2
  exit 1
fi

key=$( (cat "$src/package.json" "$src/package-lock.json"; find "$src" -maxdepth 1 -type f -name '*.js' | LC_ALL=C sort | xargs cat;
  "$node" --version) | sha256sum | cut -c1-16)
cache_root=${DETOUR_NODE_CLIENT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/detour/node-client}
dest="$cache_root/$key"

if [[ -f "$dest/complete" ]]; then
  echo "$dest"
  exit 0
fi

mkdir -p "$cache_root"
work="$cache_root/.build.$key.$$"
trap 'rm -rf "$work"' EXIT
rm -rf "$work" && mkdir -p "$work/out"

echo "setup-node-client: installing rocketmq-client-nodejs and its dependencies as locked" >&2
cp "$src/package.json" "$src/package-lock.json" "$src"/*.js "$work/out/"
# npm ci installs exactly the lock file, and fails rather than resolve anything else.
(cd "$work/out" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error >&2)
"$node" -e 'console.log(require(process.argv[1]).version)' "$work/out/node_modules/rocketmq-client-nodejs/package.json" >"$work/out/version"

touch "$work/out/complete"
rm -rf "$dest"
# Whole, so a concurrent or interrupted run never sees half an installation.
mv "$work/out" "$dest"
echo "$dest"
