#!/usr/bin/env bash
# envtest-assets.sh — make a real kube-apiserver and etcd available, envtest-style.
#
# Prints exactly one line on stdout: the absolute path of a directory that holds
# the executables `kube-apiserver`, `etcd` and `kubectl`. Everything else goes to stderr.
#
#   1. If KUBEBUILDER_ASSETS is set, it must hold kube-apiserver and etcd; it is printed
#      as is (a missing kubectl there is only warned about: callers that need it check).
#   2. Otherwise a per-version cache dir outside the repo is used:
#        ${WHEREABOUTS_ENVTEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/whereabouts-controller/envtest}/<k8s>-<etcd>/
#   3. If that is not complete yet, the missing binaries are built from source with the
#      local Go toolchain, from the Go module proxy, in a temporary directory under
#      the cache dir (never in the repo). A flock serialises concurrent builds. A cache
#      dir from before kubectl was added gets just kubectl built next to the others.
#
# Overridable pins:
#   ENVTEST_K8S_VERSION   k8s.io/kubernetes version to build kube-apiserver and kubectl from
#   ENVTEST_ETCD_VERSION  go.etcd.io/etcd/server/v3 version to build etcd from
#
# ENVTEST_ASSETS_NO_BUILD=1: never build; exit 3 (nothing on stdout) when the cache is not
# complete. For callers that would rather skip than wait minutes (e.g. a unit-test run).
set -euo pipefail

ENVTEST_K8S_VERSION="${ENVTEST_K8S_VERSION:-v1.37.2}"
ENVTEST_ETCD_VERSION="${ENVTEST_ETCD_VERSION:-v3.6.16}"

# Keep the real stdout on fd 3 for the single result line; everything else -> stderr.
exec 3>&1 1>&2

log() { printf 'envtest-assets: %s\n' "$*" >&2; }
die() { printf 'envtest-assets: ERROR: %s\n' "$*" >&2; exit 1; }
emit() { printf '%s\n' "$1" >&3; exit 0; }

# ---------------------------------------------------------------------------
# 1. KUBEBUILDER_ASSETS wins (setup-envtest users).
# ---------------------------------------------------------------------------
if [[ -n "${KUBEBUILDER_ASSETS:-}" ]]; then
  missing=()
  for bin in kube-apiserver etcd; do
    [[ -f "$KUBEBUILDER_ASSETS/$bin" && -x "$KUBEBUILDER_ASSETS/$bin" ]] || missing+=("$bin")
  done
  if ((${#missing[@]})); then
    die "KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS is set but lacks executable: ${missing[*]} (unset it to let this script build them)"
  fi
  [[ -f "$KUBEBUILDER_ASSETS/kubectl" && -x "$KUBEBUILDER_ASSETS/kubectl" ]] ||
    log "warning: KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS has no kubectl; tests that render deploy/ skip (fail under WHEREABOUTS_ENVTEST=require)"
  emit "$(cd "$KUBEBUILDER_ASSETS" && pwd -P)"
fi

# ---------------------------------------------------------------------------
# 2. Cache lookup.
# ---------------------------------------------------------------------------
k8s_ver="v${ENVTEST_K8S_VERSION#v}"
etcd_ver="v${ENVTEST_ETCD_VERSION#v}"
[[ "$k8s_ver" =~ ^v1\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]] || die "bad ENVTEST_K8S_VERSION: $ENVTEST_K8S_VERSION"
[[ "$etcd_ver" =~ ^v3\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]] || die "bad ENVTEST_ETCD_VERSION: $ENVTEST_ETCD_VERSION"
# Staging modules (k8s.io/api, k8s.io/apiserver, ...) are published as v0.Y.Z for kubernetes v1.Y.Z.
staging_ver="v0.${k8s_ver#v1.}"

if [[ -n "${WHEREABOUTS_ENVTEST_CACHE:-}" ]]; then
  cache_root="$WHEREABOUTS_ENVTEST_CACHE"
else
  cache_root="${XDG_CACHE_HOME:-${HOME:?HOME is not set; set WHEREABOUTS_ENVTEST_CACHE}/.cache}/whereabouts-controller/envtest"
fi
mkdir -p "$cache_root"
cache_root="$(cd "$cache_root" && pwd -P)"
dest="$cache_root/${k8s_ver}-${etcd_ver}"
stamp="$dest/.envtest-assets.stamp"

# The server pair (kube-apiserver + etcd, stamped) and kubectl are checked apart, so a cache dir
# that other test runs are using right now only ever gains a kubectl next to the binaries they use.
have_servers() {
  [[ -f "$stamp" && -x "$dest/kube-apiserver" && -x "$dest/etcd" ]]
}
is_complete() {
  have_servers && [[ -x "$dest/kubectl" ]]
}

if is_complete; then
  emit "$dest"
fi

if [[ -n "${ENVTEST_ASSETS_NO_BUILD:-}" ]]; then
  log "$dest is not complete and ENVTEST_ASSETS_NO_BUILD is set: not building"
  exit 3
fi

# ---------------------------------------------------------------------------
# 3. Build, under a lock.
# ---------------------------------------------------------------------------
command -v go >/dev/null 2>&1 || die "go is not on PATH; install Go or point KUBEBUILDER_ASSETS at a directory with kube-apiserver, etcd and kubectl"

lockfile="$cache_root/.${k8s_ver}-${etcd_ver}.lock"
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
  emit "$dest"
fi
# Only kubectl is missing (a cache dir from before kubectl was added): build just that.
build_servers=1
have_servers && build_servers=0

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
if ((build_servers)); then
  log "building kube-apiserver $k8s_ver, kubectl $k8s_ver and etcd $etcd_ver with go $go_have (a cold build takes ~5-10 min on 2 cores)"
else
  log "kube-apiserver and etcd are cached; building only kubectl $k8s_ver with go $go_have"
fi
log "work dir: $tmp"

# Path of a module's go.mod in the module cache (downloads the module).
gomod_of() {
  local json
  json="$(cd "$tmp" && go mod download -json "$1")" || die "go mod download $1 failed: $json"
  printf '%s\n' "$json" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p' | head -n1
}

go_directive_of() { # go_directive_of path/to/go.mod
  sed -n 's/^go[[:space:]]\{1,\}\([0-9][0-9.]*\).*/\1/p' "$1" | head -n1
}

require_go() { # require_go <what> <min-go>
  if ! version_ge "$go_have" "$2"; then
    die "$1 needs Go >= $2 but the local toolchain is go$go_have (GOTOOLCHAIN=local). Upgrade Go, pick older ENVTEST_*_VERSION pins, or set KUBEBUILDER_ASSETS."
  fi
}

# --- kube-apiserver and kubectl: one throwaway module, one module graph ------
k8s_gomod="$(gomod_of "k8s.io/kubernetes@$k8s_ver")"
[[ -n "$k8s_gomod" && -f "$k8s_gomod" ]] || die "could not locate go.mod of k8s.io/kubernetes@$k8s_ver"
k8s_go="$(go_directive_of "$k8s_gomod")"
require_go "k8s.io/kubernetes $k8s_ver" "$k8s_go"

# Staging replaces (k8s.io/foo => ./staging/src/k8s.io/foo) cannot be used from the
# proxy: replace each with the published k8s.io/foo v0.Y.Z instead.
mapfile -t staging < <(
  grep -E '^[[:space:]]*(replace[[:space:]]+)?k8s\.io/[^[:space:]]+[[:space:]]+=>[[:space:]]+\./staging/' "$k8s_gomod" |
    sed -E 's/^[[:space:]]*(replace[[:space:]]+)?(k8s\.io\/[^[:space:]]+).*/\2/' | sort -u
)
((${#staging[@]})) || die "found no staging replace directives in $k8s_gomod (unexpected kubernetes go.mod layout)"
# Any other module=>module@version replaces upstream relies on are copied verbatim.
mapfile -t other_replaces < <(
  awk '
    /^replace[[:space:]]*\(/ { inblk = 1; next }
    inblk && /^[[:space:]]*\)/ { inblk = 0; next }
    inblk { print; next }
    /^replace[[:space:]]/ { sub(/^replace[[:space:]]+/, ""); print }
  ' "$k8s_gomod" | grep -Ev '=>[[:space:]]+\.{1,2}/' | sed -E 's/^[[:space:]]+//' | grep -v '^$' || true
)
log "k8s.io/kubernetes $k8s_ver: ${#staging[@]} staging modules -> $staging_ver"

kas_dir="$tmp/kube-apiserver"
mkdir -p "$kas_dir" "$tmp/bin"
{
  echo "module envtest.local/kube-apiserver"
  echo
  echo "go $k8s_go"
  echo
  echo "require k8s.io/kubernetes $k8s_ver"
  echo
  echo "replace ("
  for m in "${staging[@]}"; do
    echo "	$m => $m $staging_ver"
  done
  for r in "${other_replaces[@]}"; do
    echo "	$r"
  done
  echo ")"
} >"$kas_dir/go.mod"

k8s_minor="${k8s_ver#v1.}"
k8s_minor="${k8s_minor%%.*}"
build_date="$(date -u +'%Y-%m-%dT%H:%M:%SZ')"
kas_ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  kas_ldflags+=" -X $pkg.gitVersion=$k8s_ver -X $pkg.gitMajor=1 -X $pkg.gitMinor=$k8s_minor"
  kas_ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$build_date"
done

if ((build_servers)); then
  t0=$(date +%s)
  log "go build k8s.io/kubernetes/cmd/kube-apiserver ..."
  (cd "$kas_dir" && go build -trimpath -ldflags "$kas_ldflags" -o "$tmp/bin/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver) ||
    die "building kube-apiserver $k8s_ver failed (module: $kas_dir/go.mod)"
  log "kube-apiserver built in $(($(date +%s) - t0))s"
fi

# kubectl (for `kubectl kustomize` / `apply` in tests) shares the module and the version ldflags.
t0=$(date +%s)
log "go build k8s.io/kubernetes/cmd/kubectl ..."
(cd "$kas_dir" && go build -trimpath -ldflags "$kas_ldflags" -o "$tmp/bin/kubectl" k8s.io/kubernetes/cmd/kubectl) ||
  die "building kubectl $k8s_ver failed (module: $kas_dir/go.mod)"
kubectl_seconds=$(($(date +%s) - t0))
log "kubectl built in ${kubectl_seconds}s"
"$tmp/bin/kubectl" version --client >/dev/null || die "built kubectl does not run"

if ((!build_servers)); then
  mv -f "$tmp/bin/kubectl" "$dest/kubectl"   # same file system: an atomic rename
  chmod 0755 "$dest/kubectl"
  { grep -v '^kubectl' "$stamp" || true; echo "kubectl=$k8s_ver built=$build_date seconds=$kubectl_seconds"; } >"$stamp.tmp"
  mv -f "$stamp.tmp" "$stamp"
  log "done in $(($(date +%s) - start_ts))s: $dest"
  emit "$dest"
fi

# --- etcd ------------------------------------------------------------------
etcd_gomod="$(gomod_of "go.etcd.io/etcd/server/v3@$etcd_ver")"
[[ -n "$etcd_gomod" && -f "$etcd_gomod" ]] || die "could not locate go.mod of go.etcd.io/etcd/server/v3@$etcd_ver"
etcd_go="$(go_directive_of "$etcd_gomod")"
require_go "go.etcd.io/etcd/server/v3 $etcd_ver" "$etcd_go"

etcd_dir="$tmp/etcd"
mkdir -p "$etcd_dir"
# The server module's own main package (server/main.go -> etcdmain.Main) is built directly;
# its sibling modules (api, client, pkg) resolve to the same version from the proxy.
cat >"$etcd_dir/go.mod" <<EOF
module envtest.local/etcd

go $etcd_go

require go.etcd.io/etcd/server/v3 $etcd_ver
EOF

t0=$(date +%s)
log "go build go.etcd.io/etcd/server/v3 ..."
(cd "$etcd_dir" && go build -trimpath \
  -ldflags "-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=$etcd_ver" \
  -o "$tmp/bin/etcd" go.etcd.io/etcd/server/v3) ||
  die "building etcd $etcd_ver failed (module: $etcd_dir/go.mod)"
log "etcd built in $(($(date +%s) - t0))s"

# --- sanity + install --------------------------------------------------------
"$tmp/bin/etcd" --version >/dev/null || die "built etcd does not run"
"$tmp/bin/kube-apiserver" --version >/dev/null || die "built kube-apiserver does not run"

mkdir -p "$dest"
rm -f "$stamp"
for bin in kube-apiserver etcd kubectl; do
  mv -f "$tmp/bin/$bin" "$dest/$bin"
  chmod 0755 "$dest/$bin"
done
{
  echo "k8s=$k8s_ver"
  echo "etcd=$etcd_ver"
  echo "go=go$go_have"
  echo "built=$build_date"
  echo "seconds=$(($(date +%s) - start_ts))"
  echo "kubectl=$k8s_ver built=$build_date seconds=$kubectl_seconds"
} >"$stamp.tmp"
mv -f "$stamp.tmp" "$stamp"

log "done in $(($(date +%s) - start_ts))s: $dest"
emit "$dest"
