#!/usr/bin/env bash
# upstream-controlloop.sh — whereabouts' own pod controller as a benchmark contender.
#
# Prints exactly one line on stdout: the absolute path of the `controlloop` binary built from
# bench/upstream/controlloop (our small main around upstream's pkg/controlloop, at the version
# its go.mod pins). Everything else goes to stderr.
#
#   UPSTREAM_CONTROLLOOP=/path/to/controlloop   use that binary, build nothing
#   UPSTREAM_CONTROLLOOP_NO_BUILD=1             never build: exit 3 when it is not cached
#
# Cache: ${XDG_CACHE_HOME:-$HOME/.cache}/whereabouts-controller/upstream-controlloop/<hash>/, the
# hash over main.go and go.mod (go.sum only verifies what go.mod names). Built with the local Go
# (GOTOOLCHAIN=local) from the module proxy, in a copy of the module outside the repo, with
# -mod=readonly: the committed go.mod and go.sum are what gets built.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"
src="$here/../bench/upstream/controlloop"

GA_NAME=upstream-controlloop
GA_OVERRIDE=UPSTREAM_CONTROLLOOP
GA_BIN=controlloop
# shellcheck source=lib/go-asset.sh
source "$here/lib/go-asset.sh"

for f in main.go go.mod go.sum; do
  [[ -f "$src/$f" ]] || ga_die "missing $src/$f"
done
GA_KEY="$(cat "$src/main.go" "$src/go.mod" | sha256sum | cut -c1-16)"

ga_build() {
  cp "$src/main.go" "$src/go.mod" "$src/go.sum" .
  ga_require_go_of "bench/upstream/controlloop" go.mod
  GOFLAGS="-mod=readonly -buildvcs=false" go build -trimpath -ldflags "-s -w" -o "$1" .
}

ga_check() {
  local v
  v="$("$1" -version)" || return 1
  ga_log "links $v"
}

ga_main
