# shellcheck shell=bash
# go-asset.sh — the conventions scripts/envtest-assets.sh set for a Go-built test asset, shared by
# the scripts that build one binary each (upstream-controlloop.sh, helm.sh, promtool.sh). Sourced,
# not run. A script using it sets:
#
#   GA_NAME      short name: log prefix and cache subdirectory (e.g. helm)
#   GA_OVERRIDE  name of the variable that points at a ready binary instead (e.g. HELM); the
#                variable `${GA_OVERRIDE}_NO_BUILD` is the never-build switch
#   GA_BIN       file name of the binary in the cache dir
#   GA_DIR       set to 1 when the asset is a directory of generated files instead of a binary
#                (then GA_BIN names that directory, and the override names a directory)
#   GA_KEY       what the cached binary is a function of (a version, or a hash of sources)
#
# and defines
#
#   ga_build OUT   build the binary to the path OUT (cwd: a fresh temp dir under the cache root)
#   ga_check BIN   run the built binary once to show it works (stdout is already stderr)
#
# then calls ga_main. Behaviour:
#   1. $GA_OVERRIDE set: an executable path, or a command name on PATH; printed as an absolute path.
#   2. cache hit: ${XDG_CACHE_HOME:-$HOME/.cache}/whereabouts-controller/$GA_NAME/$GA_KEY/$GA_BIN
#      with its stamp file: printed.
#   3. ${GA_OVERRIDE}_NO_BUILD=1: exit 3, nothing on stdout.
#   4. otherwise build under a flock (a concurrent caller waits, then reuses the result), with the
#      local toolchain only (GOTOOLCHAIN=local), from the Go module proxy, never in the repo.
# Exactly one line goes to stdout (the binary's absolute path); everything else to stderr.

exec 3>&1 1>&2

ga_log() { printf '%s: %s\n' "$GA_NAME" "$*" >&2; }
ga_die() { printf '%s: ERROR: %s\n' "$GA_NAME" "$*" >&2; exit 1; }
ga_emit() { printf '%s\n' "$1" >&3; exit 0; }

ga_version_ge() { # A >= B
  [[ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n1)" == "$2" ]]
}

# Fails unless the local Go is at least the `go` directive of the go.mod at $2 (what: $1).
ga_require_go_of() {
  local want
  want="$(sed -n 's/^go[[:space:]]\{1,\}\([0-9][0-9.]*\).*/\1/p' "$2" | head -n1)"
  [[ -n "$want" ]] || return 0
  ga_version_ge "$GA_GO" "$want" ||
    ga_die "$1 needs Go >= $want but the local toolchain is go$GA_GO (GOTOOLCHAIN=local: no toolchain is downloaded). Install a newer Go or set $GA_OVERRIDE."
}

# Path of MODULE@VERSION's go.mod in the module cache (downloads the module).
ga_gomod_of() {
  local json
  json="$(go mod download -json "$1")" || ga_die "go mod download $1 failed: $json"
  printf '%s\n' "$json" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p' | head -n1
}

# The module=>module@version replace lines of a go.mod (local-path replaces cannot be carried over).
ga_replaces_of() {
  awk '
    /^replace[[:space:]]*\(/ { inblk = 1; next }
    inblk && /^[[:space:]]*\)/ { inblk = 0; next }
    inblk { print; next }
    /^replace[[:space:]]/ { sub(/^replace[[:space:]]+/, ""); print }
  ' "$1" | grep -Ev '=>[[:space:]]+\.{1,2}/' | sed -E 's/^[[:space:]]+//' | grep -v '^$' || true
}

# Writes a throwaway module in the current directory that requires MODULE VERSION with the
# module's own replaces, so `go build <package>` resolves the graph the module's own build does.
ga_throwaway_module() { # MODULE VERSION
  local gomod
  gomod="$(ga_gomod_of "$1@$2")"
  [[ -n "$gomod" && -f "$gomod" ]] || ga_die "could not locate the go.mod of $1@$2"
  ga_require_go_of "$1 $2" "$gomod"
  {
    echo "module whereabouts-controller.local/assets/$GA_NAME"
    echo
    echo "go $(sed -n 's/^go[[:space:]]\{1,\}\([0-9][0-9.]*\).*/\1/p' "$gomod" | head -n1)"
    echo
    echo "require $1 $2"
    local r
    while IFS= read -r r; do
      [[ -n "$r" ]] && echo "replace $r"
    done < <(ga_replaces_of "$gomod")
  } >go.mod
}

ga_resolve_override() {
  local value="${!GA_OVERRIDE}" path
  if [[ "$value" == */* ]]; then
    path="$value"
  else
    path="$(type -P -- "$value")" || ga_die "$GA_OVERRIDE=$value: no such command on PATH"
  fi
  if [[ -n "${GA_DIR:-}" ]]; then
    [[ -d "$path" ]] || ga_die "$GA_OVERRIDE=$value is not a directory (unset it to let this script build one)"
  else
    [[ -f "$path" && -x "$path" ]] || ga_die "$GA_OVERRIDE=$value is not an executable file (unset it to let this script build one)"
  fi
  ga_emit "$(cd "$(dirname "$path")" && pwd -P)/$(basename "$path")"
}

ga_main() {
  if [[ -n "${!GA_OVERRIDE:-}" ]]; then
    ga_resolve_override
  fi

  local root="${XDG_CACHE_HOME:-${HOME:?HOME is not set; set XDG_CACHE_HOME or $GA_OVERRIDE}/.cache}/whereabouts-controller/$GA_NAME"
  mkdir -p "$root"
  root="$(cd "$root" && pwd -P)"
  local dest="$root/$GA_KEY"
  local stamp="$dest/.stamp"
  local bin="$dest/$GA_BIN"

  if [[ -f "$stamp" && -x "$bin" ]]; then
    ga_emit "$bin"
  fi
  local no_build="${GA_OVERRIDE}_NO_BUILD"
  if [[ -n "${!no_build:-}" ]]; then
    ga_log "$bin is not cached and $no_build is set: not building"
    exit 3
  fi
  command -v go >/dev/null 2>&1 || ga_die "go is not on PATH; install Go or set $GA_OVERRIDE to a $GA_BIN binary"

  if command -v flock >/dev/null 2>&1; then
    exec 9>"$root/.$GA_KEY.lock"
    if ! flock -n 9; then
      ga_log "another invocation is building $GA_KEY; waiting for its lock"
      flock 9
    fi
  else
    ga_log "warning: flock not found; concurrent invocations may both build"
  fi
  if [[ -f "$stamp" && -x "$bin" ]]; then
    ga_emit "$bin"
  fi

  export GOTOOLCHAIN=local GOWORK=off GO111MODULE=on CGO_ENABLED=0
  GA_GO="$(go env GOVERSION)"
  GA_GO="${GA_GO#go}"

  GA_TMP="$(mktemp -d "$root/.build.XXXXXX")"
  trap 'rm -rf "$GA_TMP"' EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM

  local t0 seconds
  t0=$(date +%s)
  ga_log "building $GA_KEY with go$GA_GO (work dir $GA_TMP)"
  (cd "$GA_TMP" && ga_build "$GA_TMP/$GA_BIN") || ga_die "building $GA_BIN ($GA_KEY) failed"
  seconds=$(($(date +%s) - t0))
  ga_log "built in ${seconds}s"
  ga_check "$GA_TMP/$GA_BIN" || ga_die "the built $GA_BIN does not run"

  mkdir -p "$dest"
  rm -f "$stamp"
  [[ -z "${GA_DIR:-}" ]] || rm -rf "$bin"   # a directory left by a build that never got its stamp
  mv -f "$GA_TMP/$GA_BIN" "$bin"   # same file system: an atomic rename
  chmod 0755 "$bin"
  printf 'key=%s\ngo=go%s\nbuilt=%s\nseconds=%s\n' "$GA_KEY" "$GA_GO" "$(date -u +'%Y-%m-%dT%H:%M:%SZ')" "$seconds" >"$stamp.tmp"
  mv -f "$stamp.tmp" "$stamp"
  ga_emit "$bin"
}

# The modules an upstream go.mod requires whose version in the current (built) module differs, one
# "path want -> got" per line: a build of upstream's code must resolve what upstream pinned.
ga_gomod_drift() { # UPSTREAM_GOMOD
  LC_ALL=C join <(
    awk '
      /^require[[:space:]]*\(/ { inblk = 1; next }
      inblk && /^[[:space:]]*\)/ { inblk = 0; next }
      inblk { print $1, $2; next }
      /^require[[:space:]]/ { print $2, $3 }
    ' "$1" | LC_ALL=C sort -u
  ) <(go list -m -f '{{.Path}} {{.Version}}' all | LC_ALL=C sort -u) |
    awk '$2 != $3 { print $1 " " $2 " -> " $3 }'
}
