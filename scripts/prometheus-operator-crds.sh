#!/usr/bin/env bash
# prometheus-operator-crds.sh — the Prometheus Operator's ServiceMonitor and PrometheusRule CRDs
# as a cached test asset, generated from the operator's API types on the Go module proxy.
#
# Prints exactly one line on stdout: the absolute path of a directory holding
# monitoring.coreos.com_servicemonitors.yaml and monitoring.coreos.com_prometheusrules.yaml.
# Everything else goes to stderr.
#
#   PROMETHEUS_OPERATOR_CRDS=/path/to/dir         use that directory, generate nothing
#   PROMETHEUS_OPERATOR_CRDS_NO_BUILD=1           never generate: exit 3 when not cached
#   PROMETHEUS_OPERATOR_VERSION                   version of the operator's API module (default below)
#   CONTROLLER_TOOLS_VERSION                      sigs.k8s.io/controller-tools version (default below)
#
# The proxy does not serve the operator's main module (where its published CRD YAML lives), only
# its API module, github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring. Upstream
# generates its CRDs from those types and their kubebuilder markers with controller-gen; this
# script does the same (crd:crdVersions=v1), so the schemas are the operator's, field for field,
# though not byte for byte its files (upstream's build adds annotations of its own). Cache:
# ${XDG_CACHE_HOME:-$HOME/.cache}/whereabouts-controller/prometheus-operator-crds/<key>/crds.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"
PROMETHEUS_OPERATOR_VERSION="${PROMETHEUS_OPERATOR_VERSION:-v0.95.2}"
PROMETHEUS_OPERATOR_VERSION="v${PROMETHEUS_OPERATOR_VERSION#v}"
CONTROLLER_TOOLS_VERSION="${CONTROLLER_TOOLS_VERSION:-v0.23.0}"
CONTROLLER_TOOLS_VERSION="v${CONTROLLER_TOOLS_VERSION#v}"

GA_NAME=prometheus-operator-crds
GA_OVERRIDE=PROMETHEUS_OPERATOR_CRDS
GA_BIN=crds
GA_DIR=1
# shellcheck source=lib/go-asset.sh
source "$here/lib/go-asset.sh"

for v in "$PROMETHEUS_OPERATOR_VERSION" "$CONTROLLER_TOOLS_VERSION"; do
  [[ "$v" =~ ^v0\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]] || ga_die "bad version: $v (a v0.x.y module version)"
done
GA_KEY="$PROMETHEUS_OPERATOR_VERSION-controller-tools-$CONTROLLER_TOOLS_VERSION"

API=github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring
CRDS=(monitoring.coreos.com_servicemonitors.yaml monitoring.coreos.com_prometheusrules.yaml)

ga_build() {
  ga_require_go_of "$API $PROMETHEUS_OPERATOR_VERSION" "$(ga_gomod_of "$API@$PROMETHEUS_OPERATOR_VERSION")"
  ga_require_go_of "controller-tools $CONTROLLER_TOOLS_VERSION" "$(ga_gomod_of "sigs.k8s.io/controller-tools@$CONTROLLER_TOOLS_VERSION")"
  export GOFLAGS="-mod=mod -buildvcs=false"
  go mod init whereabouts-controller.local/assets/$GA_NAME >/dev/null 2>&1
  # A module that imports both, so `go mod tidy` resolves one graph for the generator and the types.
  printf '//go:build tools\n\npackage tools\n\nimport (\n\t_ "%s/v1"\n\t_ "sigs.k8s.io/controller-tools/cmd/controller-gen"\n)\n' "$API" >tools.go
  go get "$API@$PROMETHEUS_OPERATOR_VERSION" "sigs.k8s.io/controller-tools@$CONTROLLER_TOOLS_VERSION" || return 1
  go mod tidy || return 1
  go build -trimpath -o controller-gen sigs.k8s.io/controller-tools/cmd/controller-gen || return 1
  ./controller-gen crd:crdVersions=v1 paths="$API/v1" output:crd:dir=generated || return 1
  mkdir -p "$1"
  local f
  for f in "${CRDS[@]}"; do cp "generated/$f" "$1/$f" || return 1; done
}

ga_check() {
  local f name
  for f in "${CRDS[@]}"; do
    name="${f#monitoring.coreos.com_}"
    name="${name%.yaml}.monitoring.coreos.com"
    grep -q "^  name: $name\$" "$1/$f" || { ga_log "$f does not define $name"; return 1; }
    ga_log "$f: $(wc -c <"$1/$f") bytes"
  done
}

ga_main
