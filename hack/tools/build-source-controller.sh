#!/usr/bin/env bash
# build-source-controller.sh OUTDIR
#
# Builds OUTDIR/source-controller (Flux's github.com/fluxcd/source-controller, default v1.9.6:
# the newest release whose go.mod accepts go1.26) from the Go module proxy, and copies its CRDs
# (the module's config/crd/bases) into OUTDIR/crd, for the Flux source tests
# (internal/up/fluxsource_integration_test.go runs it as a process against the test
# kube-apiserver). The module's go.mod has replace directives (its api module, go-digest), so
# `go install pkg@version` refuses it: the module is downloaded with `go mod download` and built
# inside a writable copy of its directory. There the replace of the api module by ./api (a
# nested module, not in the module's zip) is dropped, so the same version comes from the proxy,
# and github.com/fluxcd/pkg/artifact is pinned to v0.18.0 (the proxy serves no v0.18.3, which
# v1.9.6 asks for; v0.18.0 builds and serves artifacts the same way).
# Idempotent; runs from any directory. Env: SOURCE_CONTROLLER_VERSION (default v1.9.6),
# SOURCE_CONTROLLER_ARTIFACT_VERSION (default v0.18.0).
set -euo pipefail
OUT=${1:?usage: build-source-controller.sh OUTDIR}
V=${SOURCE_CONTROLLER_VERSION:-v1.9.6}
mkdir -p "$OUT"; OUT=$(cd "$OUT" && pwd)
if [ -x "$OUT/source-controller" ] && [ -f "$OUT/crd/source.toolkit.fluxcd.io_gitrepositories.yaml" ]; then
  echo "[build-source-controller] source-controller present in $OUT, skipping" >&2; exit 0
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/source-controller.XXXXXX")
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
cd "$work"
dir=$(GOWORK=off GOFLAGS=-mod=mod go mod download -json "github.com/fluxcd/source-controller@$V" | jq -r .Dir)
[ -d "$dir" ] || { echo "[build-source-controller] go mod download gave no directory" >&2; exit 1; }
cp -r "$dir" src && chmod -R u+w src
cd src
GOWORK=off go mod edit -dropreplace github.com/fluxcd/source-controller/api \
  -require "github.com/fluxcd/pkg/artifact@${SOURCE_CONTROLLER_ARTIFACT_VERSION:-v0.18.0}"
GOWORK=off GOFLAGS="-buildvcs=false -mod=mod" GOTOOLCHAIN=local CGO_ENABLED=0 \
  go build -trimpath -ldflags "-s -w" -o "$OUT/source-controller.tmp" .
mkdir -p "$OUT/crd"
cp config/crd/bases/*.yaml "$OUT/crd/"
mv "$OUT/source-controller.tmp" "$OUT/source-controller"
echo "[build-source-controller] built source-controller $V" >&2
