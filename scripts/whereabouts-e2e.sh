#!/usr/bin/env bash
# whereabouts-e2e.sh — upstream whereabouts' own end-to-end suite (its `e2e` package) compiled into
# one test binary, as a cached test asset for test/live/upstream-e2e.test.ts.
#
# Prints exactly one line on stdout: the absolute path of the test binary. Everything else goes to
# stderr (the conventions of scripts/lib/go-asset.sh). The binary is a Go test binary: run it with
# `-test.v` (and `-ginkgo.focus`/`-ginkgo.skip`); it reads KUBECONFIG, NUMBER_OF_COMPUTE_NODES,
# FILL_PERCENT_CAPACITY and NUMBER_OF_THRASH_ITER.
#
#   WHEREABOUTS_E2E=/path/to/e2e.test   use that binary, build nothing
#   WHEREABOUTS_E2E_NO_BUILD=1          never build: exit 3 when it is not cached
#   WHEREABOUTS_E2E_VERSION             github.com/k8snetworkplumbingwg/whereabouts version
#                                       (default v0.9.2, the plugin's: the suite tests that plugin)
#
# Cache: ${XDG_CACHE_HOME:-$HOME/.cache}/whereabouts-controller/whereabouts-e2e/<version>/e2e.test.
# `go test -c` of the package in a throwaway module that requires upstream and repeats its
# module-to-module replaces (as scripts/whereabouts-plugin.sh does for the plugin); the build fails
# unless every module upstream's go.mod requires resolved to that same version.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"
MODULE="github.com/k8snetworkplumbingwg/whereabouts"
WHEREABOUTS_E2E_VERSION="${WHEREABOUTS_E2E_VERSION:-v0.9.2}"
version="v${WHEREABOUTS_E2E_VERSION#v}"

GA_NAME=whereabouts-e2e
GA_OVERRIDE=WHEREABOUTS_E2E
GA_BIN=e2e.test
# shellcheck source=lib/go-asset.sh
source "$here/lib/go-asset.sh"

[[ "$version" =~ ^v0\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]] || ga_die "bad WHEREABOUTS_E2E_VERSION: $WHEREABOUTS_E2E_VERSION"
GA_KEY="$version"

ga_build() {
  ga_throwaway_module "$MODULE" "$version"
  export GOFLAGS="-mod=mod -buildvcs=false"
  go test -c -trimpath -ldflags "-s -w" -o "$1" "$MODULE/e2e" || return 1
  local off
  off="$(ga_gomod_drift "$(ga_gomod_of "$MODULE@$version")")"
  [[ -z "$off" ]] || { ga_log "the build resolved other versions than $MODULE $version requires: $off"; return 1; }
}

# The suite's specs, listed without running them (ginkgo's dry run needs no cluster).
ga_check() {
  local ran
  ran="$("$1" -ginkgo.dryRun -ginkgo.noColor 2>&1 | grep -o 'Ran [0-9]* of [0-9]* Specs' | head -n1)" || return 1
  ga_log "dry run: $ran"
}

ga_main
