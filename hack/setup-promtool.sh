#!/usr/bin/env bash
# Prints the path of promtool, Prometheus' rule checker, which the alerting rules' unit tests
# (config/prometheus/alerts_test.yaml) run. Installs Debian's prometheus package, which carries
# it, when it is missing (needs root and apt-get).
#
#   DETOUR_PROMTOOL=$(hack/setup-promtool.sh) go test -run Alert ./test/deploy/
set -euo pipefail

if command -v promtool >/dev/null; then
  command -v promtool
  exit 0
fi
command -v apt-get >/dev/null || { echo "setup-promtool: promtool is missing and there is no apt-get to install it (Debian: prometheus)" >&2; exit 1; }
[[ $(id -u) == 0 ]] || { echo "setup-promtool: promtool is missing; install Debian's prometheus package (needs root)" >&2; exit 1; }
echo "setup-promtool: installing Debian's prometheus package for promtool" >&2
# The package's service is not wanted: only its promtool binary is.
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -q --no-install-recommends prometheus >&2 || { apt-get update -q >&2 && apt-get install -y -q --no-install-recommends prometheus >&2; }
command -v promtool
