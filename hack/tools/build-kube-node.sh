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
CMDS=(kube-scheduler kubelet kube-proxy kubectl)
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

# A throwaway module must not see the caller's workspace, vendor mode or toolchain switching.
export GOWORK=off GOFLAGS=-buildvcs=false GOTOOLCHAIN=local CGO_ENABLED=0

log() { echo "[build-kube-node] $*" >&2; }
# have_version, kube_module, kube_ldflags.
# shellcheck source=kube-module.sh
. "$(dirname "$0")/kube-module.sh"

missing=()
for c in "${CMDS[@]}"; do have_version "$OUT/$c" "$KUBE_VERSION" || missing+=("$c"); done
if [ ${#missing[@]} = 0 ]; then
  log "${CMDS[*]} $KUBE_VERSION present, skipping"
  exit 0
fi

BUILD=$(mktemp -d "${TMPDIR:-/tmp}/kube-node.XXXXXX")
cleanup() { [ "${KEEP_BUILD_DIR:-}" = 1 ] || rm -rf "$BUILD"; }
trap cleanup EXIT

mod="$BUILD/kube"
kube_module "$mod" kubenode "${CMDS[@]}"
pkgs=(); for c in "${missing[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$c"); done
log "building ${missing[*]} $KUBE_VERSION (one go build; several minutes)"; t=$SECONDS
# Into a staging directory first, so an interrupted build never leaves a half-written binary in OUT.
mkdir -p "$BUILD/bin"
(cd "$mod" && go build -trimpath -ldflags "$(kube_ldflags)" -o "$BUILD/bin/" "${pkgs[@]}")
for c in "${missing[@]}"; do mv -f "$BUILD/bin/$c" "$OUT/$c"; done
log "built in $((SECONDS - t))s"
for c in "${CMDS[@]}"; do have_version "$OUT/$c" "$KUBE_VERSION" || { log "$c does not report $KUBE_VERSION"; exit 1; }; done
log "ready: $(ls "$OUT" | tr '\n' ' ')"
