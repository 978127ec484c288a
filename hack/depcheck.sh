#!/usr/bin/env bash
# Enforces the module dependency rules of docs/architecture.md:
#   - the root module never imports a service module;
#   - no service imports another service;
#   - internal/gen imports only protobuf and connect;
#   - internal/arch imports only the standard library; internal/tlisp only that and internal/arch.
set -euo pipefail
cd "$(dirname "$0")/.."
root=github.com/lava-operator/lava
fail=0
std() { go list -deps -f '{{if not .Standard}}{{.ImportPath}}{{end}}' "$@" 2>/dev/null | sed '/^$/d'; }

bad=$(go list -deps ./... 2>/dev/null | grep "^$root/services/" || true)
[ -z "$bad" ] || { echo "root module imports services: $bad" >&2; fail=1; }

for s in services/*/; do
  [ -f "$s/go.mod" ] || continue
  name=$(basename "$s")
  bad=$( (cd "$s" && go list -deps ./... 2>/dev/null) | grep "^$root/services/" | grep -v "^$root/services/$name" || true)
  [ -z "$bad" ] || { echo "service $name imports another service: $bad" >&2; fail=1; }
done

if [ -d internal/gen ]; then
  bad=$(std ./internal/gen/... | grep -v -E "^($root/internal/gen|google.golang.org/protobuf|connectrpc.com/connect)" || true)
  [ -z "$bad" ] || { echo "internal/gen imports more than protobuf/connect: $bad" >&2; fail=1; }
fi
if [ -d internal/arch ]; then
  bad=$(std ./internal/arch/... | grep -v "^$root/internal/arch" || true)
  [ -z "$bad" ] || { echo "internal/arch imports outside the standard library: $bad" >&2; fail=1; }
fi
if [ -d internal/tlisp ]; then
  bad=$(std ./internal/tlisp/... | grep -v -E "^$root/internal/(tlisp|arch)" || true)
  [ -z "$bad" ] || { echo "internal/tlisp imports outside the standard library and internal/arch: $bad" >&2; fail=1; }
fi
[ "$fail" = 0 ] && echo "[depcheck] module dependency rules hold" >&2
exit "$fail"
