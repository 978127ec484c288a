#!/usr/bin/env bash
# build-coredns.sh OUTDIR
#
# Builds a slim CoreDNS for the one-node cluster's DNS (hack/cluster/up.sh), from the Go module proxy only:
#   OUTDIR/coredns  github.com/coredns/coredns v1.14.7 with only the plugins a cluster.local server uses
#                   (reload ready health errors log loadbalance cache kubernetes loop; no forward: the
#                   cluster answers cluster.local and nothing else). ~2-4 min cold on 2 cores.
# The main package is generated here (CoreDNS's documented way to choose plugins at compile time: set
# dnsserver.Directives, import the plugins, call coremain.Run) into a throwaway module.
# Idempotent: skips when OUTDIR/coredns already reports COREDNS_VERSION. Runs from any directory.
# Env: COREDNS_VERSION (default v1.14.7), KEEP_BUILD_DIR=1.
set -euo pipefail

OUT=${1:?usage: build-coredns.sh OUTDIR}
COREDNS_VERSION=${COREDNS_VERSION:-v1.14.7}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

export GOWORK=off GOFLAGS=-buildvcs=false GOTOOLCHAIN=local CGO_ENABLED=0

log() { echo "[build-coredns] $*" >&2; }
out=$("$OUT/coredns" -version 2>/dev/null || true)
if [[ $out == *"CoreDNS-${COREDNS_VERSION#v}"* ]]; then
  log "coredns $COREDNS_VERSION present, skipping"
  exit 0
fi

BUILD=$(mktemp -d "${TMPDIR:-/tmp}/coredns.XXXXXX")
cleanup() { [ "${KEEP_BUILD_DIR:-}" = 1 ] || rm -rf "$BUILD"; }
trap cleanup EXIT

printf 'module example.invalid/corednsslim\n\ngo 1.26.0\n\nrequire github.com/coredns/coredns %s\n' "$COREDNS_VERSION" > "$BUILD/go.mod"
# The directives keep the order of CoreDNS's plugin.cfg (it decides the order plugins see a query).
cat > "$BUILD/main.go" <<'GO'
// Command coredns is CoreDNS with the plugins a cluster.local server needs.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
)

func main() {
	dnsserver.Directives = []string{"reload", "ready", "health", "errors", "log", "loadbalance", "cache", "kubernetes", "loop"}
	coremain.Run()
}
GO
log "building coredns $COREDNS_VERSION"; t=$SECONDS
(cd "$BUILD" && go mod tidy && go build -trimpath -ldflags "-s -w" -o "$BUILD/coredns" .)
mv -f "$BUILD/coredns" "$OUT/coredns"
log "built in $((SECONDS - t))s: $("$OUT/coredns" -version | head -1)"
