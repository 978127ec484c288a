#!/usr/bin/env bash
# build-natscli.sh OUTDIR
#
# Builds OUTDIR/nats, the NATS command line (github.com/nats-io/natscli v0.5.1, ~27 MB, about 3 min
# cold on 2 cores) from the Go module proxy: docs/operations.md backs up and restores the state
# bucket with its `nats stream backup` and `nats stream restore`, and the test of that procedure
# runs them (LAVA_NATS_CLI_BIN). Idempotent; runs from any directory. Env: NATSCLI_VERSION.
set -euo pipefail
OUT=${1:?usage: build-natscli.sh OUTDIR}
V=${NATSCLI_VERSION:-v0.5.1}
mkdir -p "$OUT"; OUT=$(cd "$OUT" && pwd)
if [ -x "$OUT/nats" ] && [ -f "$OUT/version" ] && [ "$(cat "$OUT/version")" = "$V" ]; then
  echo "[build-natscli] nats $V present, skipping" >&2; exit 0
fi
cd "${TMPDIR:-/tmp}"   # outside any module/workspace
GOWORK=off GOFLAGS=-buildvcs=false GOTOOLCHAIN=local CGO_ENABLED=0 GOBIN="$OUT" \
  go install -trimpath -ldflags "-s -w" "github.com/nats-io/natscli/nats@$V"
echo "$V" > "$OUT/version"
echo "[build-natscli] built nats $V" >&2
