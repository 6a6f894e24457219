#!/usr/bin/env bash
# Prints the path of the Prometheus server the end-to-end suite runs beside the node: it scrapes
# the deployed managers, evaluates the shipped alerting rules and answers the dashboards' queries
# (test/e2e/prometheus_test.go). Installs Debian's prometheus package, which carries it (and
# promtool), when it is missing (needs root and apt-get).
#
#   DETOUR_PROMETHEUS=$(hack/setup-prometheus.sh) make test-e2e
set -euo pipefail

if command -v prometheus >/dev/null; then
  command -v prometheus
  exit 0
fi
command -v apt-get >/dev/null || { echo "setup-prometheus: prometheus is missing and there is no apt-get to install it (Debian: prometheus)" >&2; exit 1; }
[[ $(id -u) == 0 ]] || { echo "setup-prometheus: prometheus is missing; install Debian's prometheus package (needs root)" >&2; exit 1; }
echo "setup-prometheus: installing Debian's prometheus package" >&2
# The package's service is not wanted: only its server binary, run by the suite itself.
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -q --no-install-recommends prometheus >&2 || { apt-get update -q >&2 && apt-get install -y -q --no-install-recommends prometheus >&2; }
command -v prometheus
