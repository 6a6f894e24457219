#!/usr/bin/env bash
# Installs RocketMQ's Python gRPC client (rocketmq-python-client, pinned with every dependency in
# hack/rocketmq/python/requirements.txt) into a virtual environment, next to the project's small
# Python driver (hack/rocketmq/python), in a cache folder outside the repository, so every clone
# reuses it. Prints that folder, which is what DETOUR_PYTHON_CLIENT must point at. Skips the work
# when the folder for these requirements and this driver is complete.
#
#   DETOUR_PYTHON_CLIENT=$(hack/setup-python-client.sh) go test ./test/compat/...
#
# Layout of the folder: venv (the virtual environment; run its bin/python), grpc_produce.py (the
# driver), version (the client's version). DETOUR_PYTHON picks the interpreter (python3 by
# default); DETOUR_PYTHON_CLIENT_CACHE the cache folder.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src="$here/rocketmq/python"
python=${DETOUR_PYTHON:-python3} # the interpreter the environment is built from

if ! command -v "$python" >/dev/null 2>&1; then
  echo "setup-python-client: '$python' not found; the Python client's tests need Python 3.8 or newer (Debian: apt-get install python3 python3-venv)" >&2
  exit 1
fi
if ! "$python" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 8) else 1)' 2>/dev/null; then
  echo "setup-python-client: $("$python" --version 2>&1) is too old; the Python client needs 3.8 or newer" >&2
  exit 1
fi
# Debian splits venv's pip bootstrap (ensurepip) into python3-venv; without it `-m venv` fails late.
if ! "$python" -c 'import venv, ensurepip' 2>/dev/null; then
  echo "setup-python-client: $python has no working venv module (ensurepip is missing); Debian: apt-get install python3-venv" >&2
  exit 1
fi

key=$( (cat "$src/requirements.txt"; find "$src" -type f -name '*.py' | LC_ALL=C sort | xargs cat;
  "$python" -c 'import sys; print(sys.version_info[:2])') | sha256sum | cut -c1-16)
cache_root=${DETOUR_PYTHON_CLIENT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/detour/python-client}
dest="$cache_root/$key"

if [[ -f "$dest/complete" ]]; then
  echo "$dest"
  exit 0
fi

mkdir -p "$cache_root"
work="$cache_root/.build.$key.$$"
trap 'rm -rf "$work"' EXIT
rm -rf "$work" && mkdir -p "$work/out"

echo "setup-python-client: installing $(grep -m1 '^rocketmq-python-client==' "$src/requirements.txt") and its dependencies" >&2
"$python" -m venv "$work/out/venv" >&2
# --no-deps: requirements.txt is the whole, exact set; nothing else may be resolved on the way.
"$work/out/venv/bin/python" -m pip install -q --disable-pip-version-check --no-input --no-deps \
  -r "$src/requirements.txt" >&2
"$work/out/venv/bin/python" -m pip check >&2
cp "$src"/*.py "$work/out/"
"$work/out/venv/bin/python" -c 'import importlib.metadata as m; print(m.version("rocketmq-python-client"))' >"$work/out/version"

touch "$work/out/complete"
rm -rf "$dest"
# Whole, so a concurrent or interrupted run never sees half an environment. The venv's interpreter
# finds its packages from pyvenv.cfg beside it, so it keeps working after the move; only its
# installed scripts' shebangs name the build folder, and nothing here runs them.
mv "$work/out" "$dest"
echo "$dest"
