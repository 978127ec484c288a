#!/usr/bin/env bash
# build-kube-router.sh OUTDIR
#
# Builds kube-router, for its NetworkPolicy controller only (hack/cluster/up.sh runs it with
# --run-firewall and neither its router nor its service proxy), from the Go module proxy:
#   OUTDIR/kube-router  github.com/cloudnativelabs/kube-router/v2 v2.1.0 cmd/kube-router
# v2.1.0 is the only v2 version the module proxy serves here (later ones answer 403). The advisory
# against it that the Go vulnerability database carries, GHSA-phqm-jgc3-qf8g, is in the service
# proxy (Service externalIPs and load-balancer IPs copied to the node unchecked), which up.sh does
# not run. It needs ipset and iptables on the host (hack/cluster/install-packages.sh).
# Idempotent: skips when OUTDIR/kube-router already reports KUBE_ROUTER_VERSION. Runs from any directory.
# Env: KUBE_ROUTER_VERSION (default v2.1.0).
set -euo pipefail

OUT=${1:?usage: build-kube-router.sh OUTDIR}
KUBE_ROUTER_VERSION=${KUBE_ROUTER_VERSION:-v2.1.0}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

export GOWORK=off GOFLAGS=-buildvcs=false GOTOOLCHAIN=local CGO_ENABLED=0

log() { echo "[build-kube-router] $*" >&2; }
out=
[ -x "$OUT/kube-router" ] && out=$("$OUT/kube-router" --version 2>&1 || true)
if [[ $out == *" version $KUBE_ROUTER_VERSION,"* ]]; then
  log "kube-router $KUBE_ROUTER_VERSION present, skipping"
  exit 0
fi

BIN=$(mktemp -d "${TMPDIR:-/tmp}/kube-router.XXXXXX")
trap 'rm -rf "$BIN"' EXIT
log "building kube-router $KUBE_ROUTER_VERSION"; t=$SECONDS
# go install pkg@version: kube-router's go.mod has no replace directives.
(cd "$BIN" && GOBIN=$BIN go install -trimpath \
  -ldflags "-s -w -X github.com/cloudnativelabs/kube-router/v2/pkg/version.Version=$KUBE_ROUTER_VERSION" \
  "github.com/cloudnativelabs/kube-router/v2/cmd/kube-router@$KUBE_ROUTER_VERSION")
mv -f "$BIN/kube-router" "$OUT/kube-router"
log "built in $((SECONDS - t))s: $("$OUT/kube-router" --version 2>&1 | head -1)"
