#!/usr/bin/env bash
# build-terraform.sh OUTDIR
#
# Builds OUTDIR/terraform (github.com/hashicorp/terraform v1.8.5, ~3.5 min cold on 2 cores) from the
# Go module proxy; newer versions do not build from the proxy. The ldflags mark it a release build.
# It uses the same filesystem provider mirror as OpenTofu (build-tofu.sh writes a CLI config that
# lists both registry.opentofu.org and registry.terraform.io).
# Idempotent; runs from any directory. Env: TERRAFORM_VERSION (default v1.8.5).
set -euo pipefail
OUT=${1:?usage: build-terraform.sh OUTDIR}
V=${TERRAFORM_VERSION:-v1.8.5}
mkdir -p "$OUT"; OUT=$(cd "$OUT" && pwd)
if [ -x "$OUT/terraform" ] && "$OUT/terraform" version 2>/dev/null | head -1 | grep -qx "Terraform $V"; then
  echo "[build-terraform] terraform $V present, skipping" >&2; exit 0
fi
cd "${TMPDIR:-/tmp}"
GOWORK=off GOFLAGS=-buildvcs=false GOTOOLCHAIN=local CGO_ENABLED=0 GOBIN="$OUT" \
  go install -trimpath -ldflags "-s -w -X github.com/hashicorp/terraform/version.dev=no" \
  "github.com/hashicorp/terraform@$V"
echo "[build-terraform] built $("$OUT/terraform" version | head -1)" >&2
