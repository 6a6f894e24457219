#!/usr/bin/env bash
# Prints the path of promtool, Prometheus' rule checker, which the alerting rules' unit tests
# (config/prometheus/alerts_test.yaml) run. Installs Debian's prometheus package, which carries
# it and the Prometheus server the e2e suite runs (hack/setup-prometheus.sh), when either is
# missing (needs root and apt-get).
#
#   DETOUR_PROMTOOL=$(hack/setup-promtool.sh) go test -run Alert ./test/deploy/
set -euo pipefail

if command -v promtool >/dev/null && command -v prometheus >/dev/null; then
  command -v promtool
  exit 0
fi
if ! command -v apt-get >/dev/null || [[ $(id -u) != 0 ]]; then
  # Without a way to install, promtool alone still serves the rules' tests.
  command -v promtool && exit 0
  echo "setup-promtool: promtool is missing; install Debian's prometheus package (needs root and apt-get)" >&2
  exit 1
fi
echo "setup-promtool: installing Debian's prometheus package for promtool and the server" >&2
# The package's service is not wanted: only its binaries, run by the tests themselves.
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -q --no-install-recommends prometheus >&2 || { apt-get update -q >&2 && apt-get install -y -q --no-install-recommends prometheus >&2; }
command -v promtool
