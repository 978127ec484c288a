#!/usr/bin/env bash
# build-kube-node.sh OUTDIR
#
# Builds the Kubernetes node and scheduler binaries a real one-node cluster needs (hack/cluster/up.sh),
# from the Go module proxy only, with the staging-module pinning of build-kube-testbin.sh:
#   OUTDIR/kube-scheduler  k8s.io/kubernetes v1.37.2 cmd/kube-scheduler
#   OUTDIR/kubelet         cmd/kubelet (runs pods through containerd's CRI socket)
#   OUTDIR/kube-proxy      cmd/kube-proxy (iptables mode)
#   OUTDIR/kubectl         cmd/kubectl at the cluster's version (build-kube-testbin.sh links the image's 1.32)
# kube-apiserver, kube-controller-manager and etcd come from build-kube-testbin.sh (make tools-kube).
# One `go build` for all four (they share most packages): ~12 min cold on 2 cores, ~3 GB RAM.
# Idempotent: nothing is rebuilt when every binary already reports KUBE_VERSION. Runs from any directory.
# Env: KUBE_VERSION (default v1.37.2), KEEP_BUILD_DIR=1.
set -euo pipefail

OUT=${1:?usage: build-kube-node.sh OUTDIR}
KUBE_VERSION=${KUBE_VERSION:-v1.37.2}
STAGING_VERSION=v0.${KUBE_VERSION#v1.}          # v1.37.2 -> v0.37.2
CMDS=(kube-scheduler kubelet kube-proxy kubectl)
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

# A throwaway module must not see the caller's workspace, vendor mode or toolchain switching.
export GOWORK=off GOFLAGS=-buildvcs=false GOTOOLCHAIN=local CGO_ENABLED=0

log() { echo "[build-kube-node] $*" >&2; }
have_version() { # binary substring (no `| grep -q`: with pipefail an early grep exit SIGPIPEs the writer)
  local out
  [ -x "$1" ] || return 1
  out=$("$1" --version 2>/dev/null || "$1" version --client 2>/dev/null || true)
  [[ $out == *"$2"* ]]
}

missing=()
for c in "${CMDS[@]}"; do have_version "$OUT/$c" "$KUBE_VERSION" || missing+=("$c"); done
if [ ${#missing[@]} = 0 ]; then
  log "${CMDS[*]} $KUBE_VERSION present, skipping"
  exit 0
fi

BUILD=$(mktemp -d "${TMPDIR:-/tmp}/kube-node.XXXXXX")
cleanup() { [ "${KEEP_BUILD_DIR:-}" = 1 ] || rm -rf "$BUILD"; }
trap cleanup EXIT

mod="$BUILD/kube"; mkdir -p "$mod"
gomod=$(cd "$mod" && go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
{
  printf 'module example.invalid/kubenode\n\ngo 1.26.0\n\nrequire k8s.io/kubernetes %s\n\nreplace (\n' "$KUBE_VERSION"
  # k8s.io/kubernetes requires its staging modules at v0.0.0 and maps them to ./staging,
  # which the module zip lacks: pin each one to the published v0.X.Y instead.
  awk '/^require[ (]/,/^\)/' "$gomod" | awk -v v="$STAGING_VERSION" '$2=="v0.0.0"{print "\t"$1" => "$1" "v}'
  printf ')\n'
} > "$mod/go.mod"
{
  printf '//go:build tools\n\npackage tools\n\nimport (\n'
  for c in "${CMDS[@]}"; do printf '\t_ "k8s.io/kubernetes/cmd/%s"\n' "$c"; done
  printf ')\n'
} > "$mod/tools.go"
(cd "$mod" && go mod tidy)

v=${KUBE_VERSION#v} pkg=k8s.io/component-base/version
ld="-s -w -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=${v%%.*} -X $pkg.gitMinor=$(echo "$v" | cut -d. -f2) -X $pkg.gitTreeState=clean"
ld="$ld -X k8s.io/client-go/pkg/version.gitVersion=$KUBE_VERSION"
pkgs=(); for c in "${missing[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$c"); done
log "building ${missing[*]} $KUBE_VERSION (one go build; several minutes)"; t=$SECONDS
# Into a staging directory first, so an interrupted build never leaves a half-written binary in OUT.
mkdir -p "$BUILD/bin"
(cd "$mod" && go build -trimpath -ldflags "$ld" -o "$BUILD/bin/" "${pkgs[@]}")
for c in "${missing[@]}"; do mv -f "$BUILD/bin/$c" "$OUT/$c"; done
log "built in $((SECONDS - t))s"
for c in "${CMDS[@]}"; do have_version "$OUT/$c" "$KUBE_VERSION" || { log "$c does not report $KUBE_VERSION"; exit 1; }; done
log "ready: $(ls "$OUT" | tr '\n' ' ')"
