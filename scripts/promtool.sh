#!/usr/bin/env bash
# promtool.sh — Prometheus' promtool as a cached test asset, built from the Go module proxy.
#
# Prints exactly one line on stdout: the absolute path of a `promtool` binary. Everything else
# goes to stderr.
#
#   PROMTOOL=/path/to/promtool (or a command name on PATH)   use that, build nothing
#   PROMTOOL_NO_BUILD=1                                      never build: exit 3 when not cached
#   PROMTOOL_VERSION                                         github.com/prometheus/prometheus version
#
# The Prometheus module's versions are v0.<major*100+minor>.<patch> of the release: v0.316.0 is
# Prometheus 3.16.0 (its VERSION file says so), v0.305.x the 3.5 line, v0.54.1 was 2.54.1.
# Cache: ${XDG_CACHE_HOME:-$HOME/.cache}/whereabouts-controller/promtool/<version>/promtool. Built
# with the local Go (GOTOOLCHAIN=local) in a throwaway module outside the repo that requires the
# module at that version, with the version ldflags of Prometheus' .promu.yml (no revision: the
# module proxy serves none) and its `netgo` tag.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"
PROMTOOL_VERSION="${PROMTOOL_VERSION:-v0.316.0}"
PROMTOOL_VERSION="v${PROMTOOL_VERSION#v}"

GA_NAME=promtool
GA_OVERRIDE=PROMTOOL
GA_BIN=promtool
# shellcheck source=lib/go-asset.sh
source "$here/lib/go-asset.sh"

[[ "$PROMTOOL_VERSION" =~ ^v0\.([0-9]+)\.([0-9]+)(-[0-9A-Za-z.-]+)?$ ]] ||
  ga_die "bad PROMTOOL_VERSION: $PROMTOOL_VERSION (a github.com/prometheus/prometheus module version, e.g. v0.316.0)"
minor_field="${BASH_REMATCH[1]}"
if ((minor_field >= 300)); then
  release="$((minor_field / 100)).$((minor_field % 100)).${BASH_REMATCH[2]}${BASH_REMATCH[3]}"
else
  release="2.${minor_field}.${BASH_REMATCH[2]}${BASH_REMATCH[3]}"
fi
GA_KEY="$PROMTOOL_VERSION"

ga_build() {
  ga_throwaway_module github.com/prometheus/prometheus "$PROMTOOL_VERSION"
  export GOFLAGS="-mod=mod -buildvcs=false"
  local v="github.com/prometheus/common/version"
  local ldflags="-s -w -X $v.Version=$release -X $v.Revision=unknown -X $v.Branch=$PROMTOOL_VERSION"
  ldflags+=" -X $v.BuildUser=whereabouts-controller -X $v.BuildDate=$(date -u +%Y%m%d-%H:%M:%S)"
  go build -trimpath -tags netgo -ldflags "$ldflags" -o "$1" github.com/prometheus/prometheus/cmd/promtool
}

ga_check() {
  local v
  v="$("$1" --version 2>&1)" || return 1
  [[ "$v" == *"version $release "* ]] || { ga_log "built promtool says: $v (expected version $release)"; return 1; }
  ga_log "promtool --version: ${v//$'\n'/; }"
}

ga_main
