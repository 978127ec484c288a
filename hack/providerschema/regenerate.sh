#!/usr/bin/env bash
# Regenerates internal/lang/catalog/testdata/providerschemas/NAME.json.gz, the provider schemas
# the catalog tests validate the bundled architectures against, from the CDK-for-Terraform
# prebuilt packages below (fetched with `npm pack` from the npm registry; needs npm and the
# network). Each schema covers the types listed in NAME.types beside it, which
#   go test ./internal/lang/catalog -run TestSchemas_typesFiles -update
# rewrites from the architectures. Run from anywhere:
#   hack/providerschema/regenerate.sh [NAME...]      (default: every package below)
set -euo pipefail
cd "$(dirname "$0")/../.."
out=internal/lang/catalog/testdata/providerschemas

# NAME  PACKAGE  VERSION (the provider version it was generated from is in the output's "lava")
packages="
aws        @cdktf/provider-aws        21.22.1
azurerm    @cdktf/provider-azurerm    14.23.1
cloudflare @cdktf/provider-cloudflare 13.9.1
datadog    @cdktf/provider-datadog    12.15.2
github     @cdktf/provider-github     15.3.1
"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/providerschema" ./hack/providerschema
echo "$packages" | while read -r name pkg ver; do
  [ -n "$name" ] || continue
  if [ $# -gt 0 ] && ! printf '%s\n' "$@" | grep -qx "$name"; then
    continue
  fi
  mkdir -p "$tmp/$name"
  (cd "$tmp/$name" && npm pack --silent "$pkg@$ver" >/dev/null)
  tar xzf "$tmp/$name"/*.tgz -C "$tmp/$name" --wildcards 'package/.jsii*' package/package.json
  "$tmp/providerschema" -assembly "$tmp/$name/package/.jsii" -package-json "$tmp/$name/package/package.json" \
    -types-file "$out/$name.types" -o "$out/$name.json.gz"
  echo "$out/$name.json.gz: $pkg $ver"
done
