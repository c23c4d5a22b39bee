#!/usr/bin/env bash
# actionlint.sh — rhysd/actionlint (the GitHub Actions workflow linter) as a cached test asset,
# built from the Go module proxy.
#
# Prints exactly one line on stdout: the absolute path of an `actionlint` binary. Everything else
# goes to stderr.
#
#   ACTIONLINT=/path/to/actionlint (or a command name on PATH)   use that, build nothing
#   ACTIONLINT_NO_BUILD=1                                        never build: exit 3 when not cached
#   ACTIONLINT_VERSION                                           github.com/rhysd/actionlint version
#
# Cache: ${XDG_CACHE_HOME:-$HOME/.cache}/whereabouts-controller/actionlint/<version>/actionlint.
# Built with the local Go (GOTOOLCHAIN=local) in a throwaway module outside the repo that requires
# the module at that version, with the version ldflag of actionlint's own release build
# (.goreleaser.yaml); built inside another module, its build info would say "(devel)".
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"
ACTIONLINT_VERSION="${ACTIONLINT_VERSION:-v1.7.12}"
ACTIONLINT_VERSION="v${ACTIONLINT_VERSION#v}"

GA_NAME=actionlint
GA_OVERRIDE=ACTIONLINT
GA_BIN=actionlint
# shellcheck source=lib/go-asset.sh
source "$here/lib/go-asset.sh"

[[ "$ACTIONLINT_VERSION" =~ ^v1\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]] ||
  ga_die "bad ACTIONLINT_VERSION: $ACTIONLINT_VERSION (a github.com/rhysd/actionlint version, e.g. v1.7.12)"
GA_KEY="$ACTIONLINT_VERSION"

ga_build() {
  ga_throwaway_module github.com/rhysd/actionlint "$ACTIONLINT_VERSION"
  export GOFLAGS="-mod=mod -buildvcs=false"
  local ldflags="-s -w -X github.com/rhysd/actionlint.version=$ACTIONLINT_VERSION"
  ldflags+=" -X 'github.com/rhysd/actionlint.installedFrom=built from the Go module proxy by scripts/actionlint.sh'"
  go build -trimpath -ldflags "$ldflags" -o "$1" github.com/rhysd/actionlint/cmd/actionlint
}

ga_check() {
  local v
  v="$("$1" -version)" || return 1
  [[ "$(head -n1 <<<"$v")" == "$ACTIONLINT_VERSION" ]] || { ga_log "built actionlint says: $v (expected $ACTIONLINT_VERSION)"; return 1; }
  ga_log "actionlint -version: ${v//$'\n'/; }"
}

ga_main
