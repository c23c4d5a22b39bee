#!/usr/bin/env bash
# whereabouts-plugin.sh — make the upstream whereabouts CNI plugin available to the live tests.
#
# Prints exactly one line on stdout: the absolute path of the plugin executable. Everything else
# goes to stderr.
#
#   1. If WHEREABOUTS_PLUGIN is set, it must be an executable file; its absolute path is printed.
#   2. Otherwise a per-version cache dir outside the repo, beside the envtest assets, is used:
#        ${WHEREABOUTS_PLUGIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/whereabouts-controller/whereabouts-plugin}/<version>/whereabouts
#   3. If that is not there yet, the plugin (package github.com/k8snetworkplumbingwg/whereabouts/cmd)
#      is built with the local Go toolchain, from the Go module proxy, in a temporary module under
#      the cache dir (never in the repo). Upstream's go.mod carries replace directives, which
#      `go install pkg@version` refuses: the temporary module requires upstream and repeats its
#      module-to-module replaces. A flock serialises concurrent builds.
#
# Overridable pin:
#   WHEREABOUTS_PLUGIN_VERSION  github.com/k8snetworkplumbingwg/whereabouts version (the tests
#                               assert what v0.9.2 writes)
#
# WHEREABOUTS_PLUGIN_NO_BUILD=1: never build; exit 3 (nothing on stdout) when the cache has no
# plugin. For callers that would rather skip than wait (e.g. a unit-test run).
set -euo pipefail

WHEREABOUTS_PLUGIN_VERSION="${WHEREABOUTS_PLUGIN_VERSION:-v0.9.2}"
MODULE="github.com/k8snetworkplumbingwg/whereabouts"

# Keep the real stdout on fd 3 for the single result line; everything else -> stderr.
exec 3>&1 1>&2

log() { printf 'whereabouts-plugin: %s\n' "$*" >&2; }
die() { printf 'whereabouts-plugin: ERROR: %s\n' "$*" >&2; exit 1; }
emit() { printf '%s\n' "$1" >&3; exit 0; }

# ---------------------------------------------------------------------------
# 1. WHEREABOUTS_PLUGIN wins (a prebuilt binary).
# ---------------------------------------------------------------------------
if [[ -n "${WHEREABOUTS_PLUGIN:-}" ]]; then
  [[ -f "$WHEREABOUTS_PLUGIN" && -x "$WHEREABOUTS_PLUGIN" ]] ||
    die "WHEREABOUTS_PLUGIN=$WHEREABOUTS_PLUGIN is set but is not an executable file (unset it to let this script build the plugin)"
  emit "$(cd "$(dirname "$WHEREABOUTS_PLUGIN")" && pwd -P)/$(basename "$WHEREABOUTS_PLUGIN")"
fi

# ---------------------------------------------------------------------------
# 2. Cache lookup.
# ---------------------------------------------------------------------------
version="v${WHEREABOUTS_PLUGIN_VERSION#v}"
[[ "$version" =~ ^v0\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]] || die "bad WHEREABOUTS_PLUGIN_VERSION: $WHEREABOUTS_PLUGIN_VERSION"

if [[ -n "${WHEREABOUTS_PLUGIN_CACHE:-}" ]]; then
  cache_root="$WHEREABOUTS_PLUGIN_CACHE"
else
  cache_root="${XDG_CACHE_HOME:-${HOME:?HOME is not set; set WHEREABOUTS_PLUGIN_CACHE}/.cache}/whereabouts-controller/whereabouts-plugin"
fi
mkdir -p "$cache_root"
cache_root="$(cd "$cache_root" && pwd -P)"
dest="$cache_root/$version"
bin="$dest/whereabouts"
stamp="$dest/.whereabouts-plugin.stamp"

# The stamp is written last: an executable without it is a build that was interrupted.
is_complete() {
  [[ -f "$stamp" && -x "$bin" ]]
}

if is_complete; then
  emit "$bin"
fi

if [[ -n "${WHEREABOUTS_PLUGIN_NO_BUILD:-}" ]]; then
  log "$bin is not built and WHEREABOUTS_PLUGIN_NO_BUILD is set: not building"
  exit 3
fi

# ---------------------------------------------------------------------------
# 3. Build, under a lock.
# ---------------------------------------------------------------------------
command -v go >/dev/null 2>&1 || die "go is not on PATH; install Go or point WHEREABOUTS_PLUGIN at a prebuilt whereabouts binary"

lockfile="$cache_root/.${version}.lock"
if command -v flock >/dev/null 2>&1; then
  exec 9>"$lockfile"
  if ! flock -n 9; then
    log "another invocation is building into $dest; waiting for its lock ($lockfile)"
    flock 9
  fi
else
  log "warning: flock not found; concurrent invocations may both build"
fi

# Somebody else may have finished while we waited.
if is_complete; then
  emit "$bin"
fi

export GOTOOLCHAIN=local   # never download a toolchain
export GOWORK=off
export GO111MODULE=on
export CGO_ENABLED=0
export GOFLAGS="-mod=mod -buildvcs=false"

go_have="$(go env GOVERSION)"   # e.g. go1.26.8
go_have="${go_have#go}"

version_ge() { # version_ge A B  ->  A >= B
  [[ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n1)" == "$2" ]]
}

tmp="$(mktemp -d "$cache_root/.build.XXXXXX")"
cleanup() { rm -rf "$tmp"; }
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

start_ts=$(date +%s)
log "building the whereabouts CNI plugin $version with go $go_have (a cold build takes a minute or two on 2 cores)"
log "work dir: $tmp"

mod_dir="$tmp/module"
mkdir -p "$mod_dir" "$tmp/bin"
# `go mod download` needs a module to run in; an empty one pins nothing.
printf 'module whereabouts-plugin.local/build\n' >"$mod_dir/go.mod"

json="$(cd "$mod_dir" && go mod download -json "$MODULE@$version")" || die "go mod download $MODULE@$version failed: $json"
upstream_gomod="$(printf '%s\n' "$json" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p' | head -n1)"
[[ -n "$upstream_gomod" && -f "$upstream_gomod" ]] || die "could not locate go.mod of $MODULE@$version"

upstream_go="$(sed -n 's/^go[[:space:]]\{1,\}\([0-9][0-9.]*\).*/\1/p' "$upstream_gomod" | head -n1)"
[[ -n "$upstream_go" ]] || die "no go directive in $upstream_gomod"
version_ge "$go_have" "$upstream_go" ||
  die "$MODULE $version needs Go >= $upstream_go but the local toolchain is go$go_have (GOTOOLCHAIN=local). Upgrade Go or set WHEREABOUTS_PLUGIN."

# Every replace upstream's go.mod carries, one per line (block and single-line forms).
mapfile -t replaces < <(
  awk '
    /^replace[[:space:]]*\(/ { inblk = 1; next }
    inblk && /^[[:space:]]*\)/ { inblk = 0; next }
    inblk { print; next }
    /^replace[[:space:]]/ { sub(/^replace[[:space:]]+/, ""); print }
  ' "$upstream_gomod" | sed -E 's/^[[:space:]]+//; s/[[:space:]]*\/\/.*$//' | grep -v '^$' || true
)
# A replace by a directory of upstream's tree cannot be reproduced from the proxy.
for r in "${replaces[@]}"; do
  [[ "$r" =~ =\>[[:space:]]+\.{1,2}/ ]] && die "$MODULE $version replaces a module by a local directory ($r); build it from a checkout and set WHEREABOUTS_PLUGIN"
done
log "$MODULE $version: go $upstream_go, ${#replaces[@]} replace directive(s) repeated: ${replaces[*]:-none}"

{
  echo "module whereabouts-plugin.local/build"
  echo
  echo "go $upstream_go"
  echo
  echo "require $MODULE $version"
  if ((${#replaces[@]})); then
    echo
    echo "replace ("
    for r in "${replaces[@]}"; do
      echo "	$r"
    done
    echo ")"
  fi
} >"$mod_dir/go.mod"

# As upstream's own build script stamps a release, so `whereabouts` reports the version it is.
ldflags="-s -w"
ldflags+=" -X $MODULE/pkg/version.Version=$version"
ldflags+=" -X $MODULE/pkg/version.GitTreeState=clean"
ldflags+=" -X $MODULE/pkg/version.ReleaseStatus=released"

t0=$(date +%s)
log "go build $MODULE/cmd ..."
(cd "$mod_dir" && go build -trimpath -ldflags "$ldflags" -o "$tmp/bin/whereabouts" "$MODULE/cmd") ||
  die "building $MODULE/cmd $version failed (module: $mod_dir/go.mod)"
log "whereabouts built in $(($(date +%s) - t0))s"

# The binary must be built from the dependency versions upstream released with: every module
# upstream's go.mod requires resolves to that version in the temporary module.
mapfile -t drift < <(
  LC_ALL=C join <(
    awk '
      /^require[[:space:]]*\(/ { inblk = 1; next }
      inblk && /^[[:space:]]*\)/ { inblk = 0; next }
      inblk { print $1, $2; next }
      /^require[[:space:]]/ { print $2, $3 }
    ' "$upstream_gomod" | LC_ALL=C sort -u
  ) <(cd "$mod_dir" && go list -m -f '{{.Path}} {{.Version}}' all | LC_ALL=C sort -u) |
    awk '$2 != $3 { print $1 " " $2 " -> " $3 }'
)
((${#drift[@]} == 0)) || die "the temporary module resolved other versions than $MODULE $version requires: ${drift[*]}"

# --- sanity + install --------------------------------------------------------
CNI_COMMAND=VERSION "$tmp/bin/whereabouts" </dev/null | grep -q '"supportedVersions"' || die "built whereabouts does not answer CNI_COMMAND=VERSION"

mkdir -p "$dest"
rm -f "$stamp"
mv -f "$tmp/bin/whereabouts" "$bin"   # same file system: an atomic rename
chmod 0755 "$bin"
{
  echo "whereabouts=$version"
  echo "go=go$go_have"
  echo "built=$(date -u +'%Y-%m-%dT%H:%M:%SZ')"
  echo "seconds=$(($(date +%s) - start_ts))"
} >"$stamp.tmp"
mv -f "$stamp.tmp" "$stamp"

log "done in $(($(date +%s) - start_ts))s: $bin"
emit "$bin"
