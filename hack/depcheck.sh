#!/usr/bin/env bash
# Enforces the module dependency rules of docs/architecture.md:
#   - the root module never imports a service module;
#   - no service imports another service;
#   - internal/gen imports only protobuf and connect;
#   - internal/lang/arch imports only the standard library; internal/lang/tlisp only that and internal/lang/arch.
#   - the layers of internal/: lang, then platform, then engine, then pipeline and readmodel,
#     then service (see below);
#   - no package under internal/service/X imports one under internal/service/Y (Y != X);
#   - cmd/ (its packages and their tests) imports no internal/service/ package directly: it reads
#     what the services store through internal/readmodel (internal/up, which runs the services,
#     is the one composition root).
# A `go list` that fails (or lists nothing) fails the check: a rule is never passed unchecked.
set -euo pipefail
cd "$(dirname "$0")/.."
root=github.com/lava-operator/lava
fail=0

# golist runs `go list -deps ARGS...` (in the current directory) and prints the import paths;
# it exits the script with go list's error when go list fails or lists no package.
golist() {
  local out
  if ! out=$(go list -deps "$@"); then
    echo "[depcheck] go list -deps $* failed in $(pwd)" >&2
    exit 1
  fi
  if [ -z "$out" ]; then
    echo "[depcheck] go list -deps $* listed no package in $(pwd)" >&2
    exit 1
  fi
  printf '%s\n' "$out"
}

# nonstd prints the non-standard dependencies of the packages ARGS.
nonstd() {
  local out
  if ! out=$(go list -deps -f '{{if not .Standard}}{{.ImportPath}}{{end}}' "$@"); then
    echo "[depcheck] go list -deps $* failed" >&2
    exit 1
  fi
  printf '%s\n' "$out" | sed '/^$/d'
}

deps=$(golist ./...)
bad=$(printf '%s\n' "$deps" | grep "^$root/services/" || true)
[ -z "$bad" ] || { echo "root module imports services: $bad" >&2; fail=1; }

for s in services/*/; do
  [ -f "$s/go.mod" ] || continue
  name=$(basename "$s")
  deps=$(cd "$s" && golist ./...)
  bad=$(printf '%s\n' "$deps" | grep "^$root/services/" | grep -v "^$root/services/$name" || true)
  [ -z "$bad" ] || { echo "service $name imports another service: $bad" >&2; fail=1; }
done

if [ -d internal/gen ]; then
  deps=$(nonstd ./internal/gen/...)
  bad=$(printf '%s\n' "$deps" | grep -v -E "^($root/internal/gen|google.golang.org/protobuf|connectrpc.com/connect)" || true)
  [ -z "$bad" ] || { echo "internal/gen imports more than protobuf/connect: $bad" >&2; fail=1; }
fi
if [ -d internal/lang/arch ]; then
  deps=$(nonstd ./internal/lang/arch/...)
  bad=$(printf '%s\n' "$deps" | grep -v "^$root/internal/lang/arch" || true)
  [ -z "$bad" ] || { echo "internal/lang/arch imports outside the standard library: $bad" >&2; fail=1; }
fi
if [ -d internal/lang/tlisp ]; then
  deps=$(nonstd ./internal/lang/tlisp/...)
  bad=$(printf '%s\n' "$deps" | grep -v -E "^$root/internal/lang/(tlisp|arch)" || true)
  [ -z "$bad" ] || { echo "internal/lang/tlisp imports outside the standard library and internal/lang/arch: $bad" >&2; fail=1; }
fi
# The layers of internal/ (docs/architecture.md section 7): lang imports nothing of Lava's outside
# lang; platform only platform and gen; engine only engine, lang, platform and gen; pipeline (the
# services' shared vocabulary) only those and itself; readmodel (what the CLI and the read RPCs
# show) those, pipeline and itself.
layer() { # layer DIR ALLOWED-REGEX
  local deps bad
  deps=$(nonstd "./internal/$1/...")
  bad=$(printf '%s\n' "$deps" | grep "^$root/" | grep -v -E "^$root/(internal/($2)(/|$)|api/|config/)" || true)
  [ -z "$bad" ] || { echo "internal/$1 imports outside internal/{$2}: $bad" >&2; fail=1; }
}
layer lang 'lang'
layer platform 'platform|gen'
layer engine 'engine|lang|platform|gen'
layer pipeline 'pipeline|engine|lang|platform|gen'
layer readmodel 'readmodel|pipeline|engine|lang|platform|gen'

# A service is one package tree: internal/service/X never imports internal/service/Y (its tests
# may: an integration test runs the services it hands events to).
for s in internal/service/*/; do
  name=$(basename "$s")
  deps=$(golist "./internal/service/$name/...")
  bad=$(printf '%s\n' "$deps" | grep "^$root/internal/service/" | grep -v -E "^$root/internal/service/$name(/|$)" || true)
  [ -z "$bad" ] || { echo "internal/service/$name imports another service: $bad" >&2; fail=1; }
done

# cmd/ imports no service package itself, in its code or its tests of any build tag (internal/up
# does, and cmd/lava reaches the services only through it).
if [ -d cmd ]; then
  if ! cmdimports=$(go list -tags integration,e2e,terraform,soak \
    -f '{{.ImportPath}}: {{join .Imports " "}} {{join .TestImports " "}} {{join .XTestImports " "}}' ./cmd/...); then
    echo "[depcheck] go list ./cmd/... failed" >&2
    exit 1
  fi
  [ -n "$cmdimports" ] || { echo "[depcheck] go list ./cmd/... listed no package" >&2; exit 1; }
  bad=$(printf '%s\n' "$cmdimports" | awk -v svc="$root/internal/service/" '{
    for (i = 2; i <= NF; i++) if (index($i, svc) == 1) print $1 " " $i }' | sort -u)
  [ -z "$bad" ] || { echo "cmd/ imports internal/service/ (use internal/readmodel or internal/up): $bad" >&2; fail=1; }
fi

[ "$fail" = 0 ] && echo "[depcheck] module dependency rules hold" >&2
exit "$fail"
