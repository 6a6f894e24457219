#!/usr/bin/env bash
# Prints the path of the Prometheus server the end-to-end suite runs beside the node: it scrapes
# the deployed managers, evaluates the shipped alerting rules and answers the dashboards' queries
# (test/e2e/prometheus_test.go). Debian's prometheus package carries it, as it carries promtool;
# hack/setup-promtool.sh installs the package when it is missing.
#
#   DETOUR_PROMETHEUS=$(hack/setup-prometheus.sh) make test-e2e
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if ! command -v prometheus >/dev/null; then
  hack/setup-promtool.sh >/dev/null
fi
command -v prometheus >/dev/null || { echo "setup-prometheus: the prometheus package was installed but holds no prometheus server" >&2; exit 1; }
command -v prometheus
