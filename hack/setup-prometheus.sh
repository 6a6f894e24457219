#!/usr/bin/env bash
# Prints the path of the Prometheus server the end-to-end suite runs beside the node: it scrapes
# the deployed managers, evaluates the shipped alerting rules and answers the dashboards' queries
# (test/e2e/prometheus_test.go). Debian's prometheus package carries it with promtool;
# hack/setup-promtool.sh installs the package when either is missing.
#
#   DETOUR_PROMETHEUS=$(hack/setup-prometheus.sh) make test-e2e
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

hack/setup-promtool.sh >/dev/null
command -v prometheus || { echo "setup-prometheus: the Prometheus server is missing; install Debian's prometheus package (needs root and apt-get)" >&2; exit 1; }
