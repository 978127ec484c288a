#!/usr/bin/env bash
# build-kubernetes-providers.sh OUTDIR
#
# Builds the providers hashicorp/kubernetes 1.13.4 and hashicorp/helm 1.3.2 (both on
# terraform-plugin-sdk v1, protocol 5) from the Go module proxy into one filesystem provider
# mirror, laid out like the testkit and OpenStack mirrors:
#   OUTDIR/registry.opentofu.org/hashicorp/kubernetes/1.13.4/linux_amd64/terraform-provider-kubernetes_v1.13.4
#   OUTDIR/registry.terraform.io/hashicorp/kubernetes/1.13.4/linux_amd64/terraform-provider-kubernetes_v1.13.4
#   OUTDIR/registry.opentofu.org/hashicorp/helm/1.3.2/linux_amd64/terraform-provider-helm_v1.3.2
#   OUTDIR/registry.terraform.io/hashicorp/helm/1.3.2/linux_amd64/terraform-provider-helm_v1.3.2
# Tests find OUTDIR through $LAVA_KUBERNETES_MIRROR (the real-provider tests against a real
# kube-apiserver).
#
# Both modules have replace directives, which `go install pkg@version` refuses and which do not
# apply to a module required by another. So each provider is built in a throwaway module that
# requires it and copies its replace lines (less the ones pointing into its own vendor
# directory, which the module zip does not carry). The module graph of both reaches
# vbom.ml/util (required by k8s.io/kubectl 0.18.8 and 0.19.1), which the module proxy does not
# serve; no package of it is compiled into either provider (kubectl imports its sortorder
# package only in pkg/cmd/get, which neither links), so it is replaced by a local stub module
# holding only a go.mod. github.com/modern-go/reflect2 is raised from v1.0.1 to v1.0.2 (as
# later releases of both providers did): v1.0.1 hands the runtime's map iterator a two-word
# iterator structure, which Go 1.18 and later write past (heap corruption whenever
# json-iterator, which client-go's decoders use, walks a map).
# Idempotent (skips a binary already built); runs from any directory.
# Env: KUBERNETES_PROVIDER_VERSION (default 1.13.4), HELM_PROVIDER_VERSION (default 1.3.2).
set -euo pipefail
OUT=${1:?usage: build-kubernetes-providers.sh OUTDIR}
mkdir -p "$OUT"; OUT=$(cd "$OUT" && pwd)
export GOWORK=off GOFLAGS="-buildvcs=false -mod=mod" GOTOOLCHAIN=local CGO_ENABLED=0
os_arch="$(go env GOOS)_$(go env GOARCH)"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/kubernetes-providers.XXXXXX")
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT

# build NAME VERSION: builds github.com/hashicorp/terraform-provider-NAME@vVERSION into OUT.
build() {
  local name=$1 v=$2 mod=github.com/hashicorp/terraform-provider-$1
  local file="terraform-provider-${name}_v$v" rel="hashicorp/$name/$v/$os_arch"
  if [ -x "$OUT/registry.opentofu.org/$rel/$file" ] && [ -x "$OUT/registry.terraform.io/$rel/$file" ]; then
    echo "[build-kubernetes-providers] $name $v present, skipping" >&2; return 0
  fi
  local work="$tmp/$name"
  mkdir -p "$work"
  local src; src=$(cd "$work" && go mod download -json "$mod@v$v" | jq -r .Dir)
  [ -d "$src" ] || { echo "[build-kubernetes-providers] go mod download gave no directory for $mod" >&2; return 1; }
  mkdir -p "$work/m/vbom" && printf 'module vbom.ml/util\n' >"$work/m/vbom/go.mod"
  cd "$work/m"
  go mod init lava.invalid/build-provider-"$name" >/dev/null 2>&1
  go mod edit -require "$mod@v$v" -require github.com/modern-go/reflect2@v1.0.2 -replace vbom.ml/util=./vbom
  # The provider's own replace lines, as `go mod edit -json` lists them; local paths dropped.
  (cd "$src" && go mod edit -json) | jq -r '.Replace // [] | .[]
      | select(.New.Version != null)
      | "-replace=\(.Old.Path)\(if .Old.Version then "@"+.Old.Version else "" end)=\(.New.Path)@\(.New.Version)"' |
    xargs -r go mod edit
  cp "$src/go.sum" go.sum && chmod u+w go.sum
  go get "$mod@v$v" >/dev/null 2>&1 || go get "$mod@v$v"
  go build -trimpath -ldflags "-s -w" -o "$work/$file" "$mod"
  for h in registry.opentofu.org registry.terraform.io; do
    mkdir -p "$OUT/$h/$rel"
    cp -f "$work/$file" "$OUT/$h/$rel/$file.tmp"
    chmod 0755 "$OUT/$h/$rel/$file.tmp"
    mv -f "$OUT/$h/$rel/$file.tmp" "$OUT/$h/$rel/$file"
  done
  cd /
  echo "[build-kubernetes-providers] built $name $v into $OUT" >&2
}

build kubernetes "${KUBERNETES_PROVIDER_VERSION:-1.13.4}"
build helm "${HELM_PROVIDER_VERSION:-1.3.2}"
