#!/usr/bin/env bash
# build.sh OUTDIR COREDNS_BIN
#
# Builds the one-node cluster's images (this directory, its own Go module, so go-containerregistry
# stays out of the root module): the pause and probe binaries into OUTDIR/bin, then OUTDIR/pause.tar,
# OUTDIR/probe.tar and OUTDIR/coredns.tar (COREDNS_BIN from hack/tools/build-coredns.sh), each
# importable with `ctr -n k8s.io images import`. The images are reproducible (fixed timestamps), so
# a rebuild from the same binaries gives the same digests. Seconds with a warm Go build cache.
set -euo pipefail

OUT=${1:?usage: build.sh OUTDIR COREDNS_BIN}
COREDNS_BIN=${2:?usage: build.sh OUTDIR COREDNS_BIN}
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
[ -x "$COREDNS_BIN" ] || { echo "[images] $COREDNS_BIN missing: run make tools-coredns" >&2; exit 1; }
mkdir -p "$OUT/bin"
OUT=$(cd "$OUT" && pwd)
export GOWORK=off GOFLAGS=-buildvcs=false GOTOOLCHAIN=local CGO_ENABLED=0
(cd "$SRC" && go build -trimpath -ldflags "-s -w" -o "$OUT/bin/" . ./pause ./probe)
"$OUT/bin/images" -out "$OUT" -pause "$OUT/bin/pause" -probe "$OUT/bin/probe" -coredns "$COREDNS_BIN" >&2
