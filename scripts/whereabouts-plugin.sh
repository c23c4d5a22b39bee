#!/usr/bin/env bash
# whereabouts-plugin.sh — the upstream whereabouts CNI plugin as a cached test asset, for the live
# tests and the soak.
#
# Prints exactly one line on stdout: the absolute path of the plugin executable. Everything else
# goes to stderr (the conventions of scripts/lib/go-asset.sh).
#
#   WHEREABOUTS_PLUGIN=/path/to/whereabouts   use that binary, build nothing
#   WHEREABOUTS_PLUGIN_NO_BUILD=1             never build: exit 3 when it is not cached
#   WHEREABOUTS_PLUGIN_VERSION                github.com/k8snetworkplumbingwg/whereabouts version
#                                             (default v0.9.2: the tests assert what it writes)
#
# Cache: ${XDG_CACHE_HOME:-$HOME/.cache}/whereabouts-controller/whereabouts-plugin/<version>/whereabouts.
# Package .../cmd is built in a throwaway module that requires upstream and repeats its
# module-to-module replaces (`go install pkg@version` refuses a go.mod with replaces), with the
# version ldflags of upstream's release build; the build fails unless every module upstream's
# go.mod requires resolved to that same version.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"
MODULE="github.com/k8snetworkplumbingwg/whereabouts"
WHEREABOUTS_PLUGIN_VERSION="${WHEREABOUTS_PLUGIN_VERSION:-v0.9.2}"
version="v${WHEREABOUTS_PLUGIN_VERSION#v}"

GA_NAME=whereabouts-plugin
GA_OVERRIDE=WHEREABOUTS_PLUGIN
GA_BIN=whereabouts
# shellcheck source=lib/go-asset.sh
source "$here/lib/go-asset.sh"

[[ "$version" =~ ^v0\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]] || ga_die "bad WHEREABOUTS_PLUGIN_VERSION: $WHEREABOUTS_PLUGIN_VERSION"
GA_KEY="$version"

ga_build() {
  ga_throwaway_module "$MODULE" "$version"
  export GOFLAGS="-mod=mod -buildvcs=false"
  local ldflags="-s -w -X $MODULE/pkg/version.Version=$version -X $MODULE/pkg/version.GitTreeState=clean -X $MODULE/pkg/version.ReleaseStatus=released"
  go build -trimpath -ldflags "$ldflags" -o "$1" "$MODULE/cmd" || return 1
  local off
  off="$(ga_gomod_drift "$(ga_gomod_of "$MODULE@$version")")"
  [[ -z "$off" ]] || { ga_log "the build resolved other versions than $MODULE $version requires: $off"; return 1; }
}

ga_check() {
  CNI_COMMAND=VERSION "$1" </dev/null | grep -q '"supportedVersions"' || return 1
  ga_log "$("$1" </dev/null 2>&1 | head -n1 || true)"
}

ga_main
