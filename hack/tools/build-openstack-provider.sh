#!/usr/bin/env bash
# build-openstack-provider.sh OUTDIR
#
# Builds the OpenStack provider terraform-provider-openstack/openstack (module
# github.com/terraform-provider-openstack/terraform-provider-openstack/v3, SDKv2, protocol 5) from
# the Go module proxy into a filesystem provider mirror, laid out like the testkit mirror:
#   OUTDIR/registry.opentofu.org/terraform-provider-openstack/openstack/3.4.0/linux_amd64/terraform-provider-openstack_v3.4.0
#   OUTDIR/registry.terraform.io/terraform-provider-openstack/openstack/3.4.0/linux_amd64/terraform-provider-openstack_v3.4.0
# Tests find OUTDIR through $LAVA_OPENSTACK_MIRROR (the real-provider tests against Keystone).
# Idempotent (skips a binary already built); runs from any directory.
# Env: OPENSTACK_PROVIDER_VERSION (default 3.4.0).
set -euo pipefail
OUT=${1:?usage: build-openstack-provider.sh OUTDIR}
V=${OPENSTACK_PROVIDER_VERSION:-3.4.0}
MOD=github.com/terraform-provider-openstack/terraform-provider-openstack/v3
mkdir -p "$OUT"; OUT=$(cd "$OUT" && pwd)
export GOWORK=off GOFLAGS=-buildvcs=false GOTOOLCHAIN=local CGO_ENABLED=0
os_arch="$(go env GOOS)_$(go env GOARCH)"
name="terraform-provider-openstack_v$V"
rel="terraform-provider-openstack/openstack/$V/$os_arch/$name"
if [ -x "$OUT/registry.opentofu.org/$rel" ] && [ -x "$OUT/registry.terraform.io/$rel" ]; then
  echo "[build-openstack-provider] openstack $V present, skipping" >&2; exit 0
fi
bin=$(mktemp -d "${TMPDIR:-/tmp}/openstack-provider.XXXXXX")
trap 'rm -rf "$bin"' EXIT
cd "${TMPDIR:-/tmp}"
GOBIN="$bin" go install -trimpath -ldflags "-s -w" "$MOD@v$V"
for h in registry.opentofu.org registry.terraform.io; do
  d="$OUT/$h/$(dirname "$rel")"
  mkdir -p "$d"
  cp -f "$bin/terraform-provider-openstack" "$d/$name.tmp"
  chmod 0755 "$d/$name.tmp"
  mv -f "$d/$name.tmp" "$d/$name"
done
echo "[build-openstack-provider] built openstack $V into $OUT" >&2
