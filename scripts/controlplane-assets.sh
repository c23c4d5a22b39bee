#!/usr/bin/env bash
# controlplane-assets.sh — kube-controller-manager and kube-scheduler as a cached test asset, for
# the live tests that need Kubernetes' own controllers (StatefulSet, ReplicaSet, Job, pod GC, node
# lifecycle, taint eviction) and a scheduler next to the envtest kube-apiserver.
#
# Prints exactly one line on stdout: the absolute path of a directory holding the executables
# `kube-controller-manager` and `kube-scheduler`. Everything else goes to stderr (the conventions
# of scripts/lib/go-asset.sh).
#
#   KUBE_CONTROLPLANE_ASSETS=/dir           use that directory (both binaries in it), build nothing
#   KUBE_CONTROLPLANE_ASSETS_NO_BUILD=1     never build: exit 3 when the pair is not cached
#   KUBE_CONTROLPLANE_VERSION               k8s.io/kubernetes version (default: ENVTEST_K8S_VERSION,
#                                           else v1.37.2, so the pair matches the envtest apiserver)
#
# Cache: ${XDG_CACHE_HOME:-$HOME/.cache}/whereabouts-controller/controlplane/<version>/bin/.
# Built as envtest-assets.sh builds kube-apiserver: a throwaway module that requires
# k8s.io/kubernetes and replaces each of its ./staging/ modules by the published k8s.io/X v0.Y.Z,
# with the same version ldflags, so `--version` says the release.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"
KUBE_CONTROLPLANE_VERSION="${KUBE_CONTROLPLANE_VERSION:-${ENVTEST_K8S_VERSION:-v1.37.2}}"
k8s_ver="v${KUBE_CONTROLPLANE_VERSION#v}"

GA_NAME=controlplane
GA_OVERRIDE=KUBE_CONTROLPLANE_ASSETS
GA_BIN=bin
GA_DIR=1
# shellcheck source=lib/go-asset.sh
source "$here/lib/go-asset.sh"

[[ "$k8s_ver" =~ ^v1\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]] || ga_die "bad KUBE_CONTROLPLANE_VERSION: $KUBE_CONTROLPLANE_VERSION"
GA_KEY="$k8s_ver"
BINARIES=(kube-controller-manager kube-scheduler)

# An override directory must hold both binaries (go-asset.sh only checks that it is a directory).
if [[ -n "${KUBE_CONTROLPLANE_ASSETS:-}" ]]; then
  for b in "${BINARIES[@]}"; do
    [[ -f "$KUBE_CONTROLPLANE_ASSETS/$b" && -x "$KUBE_CONTROLPLANE_ASSETS/$b" ]] ||
      ga_die "KUBE_CONTROLPLANE_ASSETS=$KUBE_CONTROLPLANE_ASSETS lacks an executable $b (unset it to let this script build both)"
  done
fi

# The staging replaces of k8s.io/kubernetes' go.mod (k8s.io/X => ./staging/src/k8s.io/X), by name.
staging_of() {
  grep -E '^[[:space:]]*(replace[[:space:]]+)?k8s\.io/[^[:space:]]+[[:space:]]+=>[[:space:]]+\./staging/' "$1" |
    sed -E 's/^[[:space:]]*(replace[[:space:]]+)?(k8s\.io\/[^[:space:]]+).*/\2/' | sort -u
}

ga_build() {
  local gomod staging_ver="v0.${k8s_ver#v1.}" minor m r
  gomod="$(ga_gomod_of "k8s.io/kubernetes@$k8s_ver")"
  [[ -n "$gomod" && -f "$gomod" ]] || ga_die "could not locate the go.mod of k8s.io/kubernetes@$k8s_ver"
  ga_require_go_of "k8s.io/kubernetes $k8s_ver" "$gomod"
  local staging
  mapfile -t staging < <(staging_of "$gomod")
  ((${#staging[@]})) || ga_die "no staging replace directives in $gomod (unexpected kubernetes go.mod layout)"
  {
    echo "module whereabouts-controller.local/assets/$GA_NAME"
    echo
    echo "go $(sed -n 's/^go[[:space:]]\{1,\}\([0-9][0-9.]*\).*/\1/p' "$gomod" | head -n1)"
    echo
    echo "require k8s.io/kubernetes $k8s_ver"
    echo
    echo "replace ("
    for m in "${staging[@]}"; do echo "	$m => $m $staging_ver"; done
    while IFS= read -r r; do [[ -n "$r" ]] && echo "	$r"; done < <(ga_replaces_of "$gomod")
    echo ")"
  } >go.mod
  ga_log "k8s.io/kubernetes $k8s_ver: ${#staging[@]} staging modules -> $staging_ver"
  export GOFLAGS="-mod=mod -buildvcs=false"
  minor="${k8s_ver#v1.}"
  minor="${minor%%.*}"
  local ldflags="-s -w" pkg built
  built="$(date -u +'%Y-%m-%dT%H:%M:%SZ')"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=$k8s_ver -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean -X $pkg.buildDate=$built"
  done
  mkdir -p "$1"
  for m in "${BINARIES[@]}"; do
    local t0=$SECONDS
    ga_log "go build k8s.io/kubernetes/cmd/$m ..."
    go build -trimpath -ldflags "$ldflags" -o "$1/$m" "k8s.io/kubernetes/cmd/$m" || return 1
    ga_log "$m built in $((SECONDS - t0))s"
  done
}

ga_check() {
  local m v
  for m in "${BINARIES[@]}"; do
    v="$("$1/$m" --version)" || return 1
    [[ "$v" == *"$k8s_ver"* ]] || { ga_log "$m --version says '$v', not $k8s_ver"; return 1; }
    ga_log "$m: $v"
  done
}

ga_main
