#!/usr/bin/env bash
# build.sh OUTDIR
#
# Builds the test provider example/testkit 0.4.0 (this directory, its own Go module) into a
# filesystem provider mirror:
#   OUTDIR/registry.opentofu.org/example/testkit/0.4.0/linux_amd64/terraform-provider-testkit_v0.4.0
#   OUTDIR/registry.terraform.io/example/testkit/0.4.0/linux_amd64/terraform-provider-testkit_v0.4.0
# Tests find OUTDIR through $LAVA_TESTKIT_MIRROR. Rebuilds only when a source file is newer than
# the binary. Runs from any directory; needs only the Go module cache (or the module proxy).
set -euo pipefail

OUT=${1:?usage: build.sh OUTDIR}
VERSION=0.4.0
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
export GOWORK=off GOFLAGS=-buildvcs=false CGO_ENABLED=0
os_arch="$(go env GOOS)_$(go env GOARCH)"
first="$OUT/registry.opentofu.org/example/testkit/$VERSION/$os_arch/terraform-provider-testkit_v$VERSION"

if [ -x "$first" ] && [ -z "$(find "$SRC" -newer "$first" \( -name '*.go' -o -name 'go.mod' -o -name 'go.sum' \) -print -quit)" ]; then
  echo "[testkit] example/testkit $VERSION up to date in $OUT" >&2
  exit 0
fi
tmp=$(mktemp "${TMPDIR:-/tmp}/testkit.XXXXXX")
trap 'rm -f "$tmp"' EXIT
(cd "$SRC" && go build -trimpath -ldflags "-s -w" -o "$tmp" .)
for h in registry.opentofu.org registry.terraform.io; do
  d="$OUT/$h/example/testkit/$VERSION/$os_arch"
  mkdir -p "$d"
  cp -f "$tmp" "$d/terraform-provider-testkit_v$VERSION.tmp"
  chmod 0755 "$d/terraform-provider-testkit_v$VERSION.tmp"
  mv -f "$d/terraform-provider-testkit_v$VERSION.tmp" "$d/terraform-provider-testkit_v$VERSION"
done
echo "[testkit] built example/testkit $VERSION into $OUT" >&2
