#!/usr/bin/env bash
# build-promtool.sh OUTDIR
#
# Builds OUTDIR/promtool (github.com/prometheus/prometheus/cmd/promtool, module version
# v0.316.0 = Prometheus 3.16.0) from the Go module proxy, for the chart's alerting rule unit
# tests (`promtool test rules`, test/chart/monitoring_integration_test.go).
# Idempotent; runs from any directory. Env: PROMTOOL_VERSION (default v0.316.0).
set -euo pipefail
OUT=${1:?usage: build-promtool.sh OUTDIR}
V=${PROMTOOL_VERSION:-v0.316.0}
mkdir -p "$OUT"; OUT=$(cd "$OUT" && pwd)
if [ -x "$OUT/promtool" ]; then
  echo "[build-promtool] promtool present in $OUT, skipping" >&2; exit 0
fi
cd "${TMPDIR:-/tmp}"
GOWORK=off GOFLAGS=-buildvcs=false GOTOOLCHAIN=local CGO_ENABLED=0 GOBIN="$OUT" \
  go install -trimpath -ldflags "-s -w" "github.com/prometheus/prometheus/cmd/promtool@$V"
echo "[build-promtool] built promtool $V" >&2
