#!/usr/bin/env bash
# helm.sh — helm as a cached test asset, built from the Go module proxy.
#
# Prints exactly one line on stdout: the absolute path of a `helm` binary. Everything else goes
# to stderr.
#
#   HELM=/path/to/helm (or a command name on PATH)   use that, build nothing
#   HELM_NO_BUILD=1                                  never build: exit 3 when it is not cached
#   HELM_VERSION                                     helm.sh/helm/v3 version (default below)
#
# Cache: ${XDG_CACHE_HOME:-$HOME/.cache}/whereabouts-controller/helm/<version>/helm. Built with
# the local Go (GOTOOLCHAIN=local) in a throwaway module outside the repo that requires
# helm.sh/helm/v3 at that version, with the version ldflags of helm's own Makefile (no git
# commit: the module proxy serves none).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"
HELM_VERSION="${HELM_VERSION:-v3.22.0}"
HELM_VERSION="v${HELM_VERSION#v}"

GA_NAME=helm
GA_OVERRIDE=HELM
GA_BIN=helm
# shellcheck source=lib/go-asset.sh
source "$here/lib/go-asset.sh"

[[ "$HELM_VERSION" =~ ^v3\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]] || ga_die "bad HELM_VERSION: $HELM_VERSION (a helm v3 release, e.g. v3.22.0)"
GA_KEY="$HELM_VERSION"

ga_build() {
  ga_throwaway_module helm.sh/helm/v3 "$HELM_VERSION"
  export GOFLAGS="-mod=mod -buildvcs=false"
  # helm's Makefile stamps the Kubernetes version it lints against from its client-go: v0.Y.Z -> 1.Y.
  local client_go major minor
  client_go="$(go list -m -f '{{.Version}}' k8s.io/client-go)" || return 1
  client_go="${client_go#v}"
  major=$((${client_go%%.*} + 1))
  minor="${client_go#*.}"
  minor="${minor%%.*}"
  local ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION -X helm.sh/helm/v3/internal/version.metadata="
  for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
    ldflags+=" -X $pkg.k8sVersionMajor=$major -X $pkg.k8sVersionMinor=$minor"
  done
  go build -trimpath -ldflags "$ldflags" -o "$1" helm.sh/helm/v3/cmd/helm
}

ga_check() {
  local v
  v="$("$1" version --short)" || return 1
  [[ "$v" == "$HELM_VERSION"* ]] || { ga_log "built helm says $v, expected $HELM_VERSION"; return 1; }
  ga_log "helm version: $("$1" version)"
}

ga_main
