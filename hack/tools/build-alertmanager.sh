#!/usr/bin/env bash
# build-alertmanager.sh OUTDIR
#
# Builds OUTDIR/alertmanager (github.com/prometheus/alertmanager v0.28.1, ~3.5 min cold on 2 cores) from
# the Go module proxy, for the anomaly service's Alertmanager v2 sink tests.
# Idempotent; runs from any directory. Env: ALERTMANAGER_VERSION (default v0.28.1).
set -euo pipefail
OUT=${1:?usage: build-alertmanager.sh OUTDIR}
V=${ALERTMANAGER_VERSION:-v0.28.1}
mkdir -p "$OUT"; OUT=$(cd "$OUT" && pwd)
if [ -x "$OUT/alertmanager" ]; then
  echo "[build-alertmanager] alertmanager present in $OUT, skipping" >&2; exit 0
fi
cd "${TMPDIR:-/tmp}"
GOWORK=off GOFLAGS=-buildvcs=false GOTOOLCHAIN=local CGO_ENABLED=0 GOBIN="$OUT" \
  go install -trimpath -ldflags "-s -w" "github.com/prometheus/alertmanager/cmd/alertmanager@$V"
echo "[build-alertmanager] built alertmanager $V" >&2
