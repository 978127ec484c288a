#!/usr/bin/env bash
# Fails on dead code: a function that nothing which should call it reaches, as
# golang.org/x/tools/cmd/deadcode finds it. Run by `make lint`:
#
#   hack/deadcode.sh DEADCODE-BINARY
#
# The rule (CONTRIBUTING.md "Dead code"):
#   - The binaries are every main package of the workspace's modules (cmd/lava, services/*,
#     bench/bus, hack/funclen, hack/mkimage, hack/cluster/pause, hack/cluster/probe) and
#     test/provider/testkit (its own module, outside the workspace).
#   - Test support is a package under test/ or internal/platform/testutil/, or one named like
#     net/http/httptest (svctest, enginetest, receipttest; a service such as attest is not).
#     Each of its functions is reached from a test of any build tag, or from a binary
#     (deadcode -test).
#   - Every other package is product code: a binary links it, and each of its functions is
#     reached from a binary (deadcode without -test). A function that only tests call is dead:
#     delete it, or move it into a _test.go file (export_test.go when an external test package
#     calls it) or into test support.
# Only packages with Go code besides doc.go count (bench/up, test/e2e hold tests alone), and
# deadcode reports no function of a generated file. A `go list` that fails or lists nothing
# fails the check: a rule is never passed unchecked.
set -euo pipefail
cd "$(dirname "$0")/.."
deadcode=${1:?usage: hack/deadcode.sh DEADCODE-BINARY}
root=github.com/lava-operator/lava
# Every test build tag (`go vet` in make lint, plus soak).
tags=integration,e2e,terraform,providers,soak,cluster

# list runs `go list ARGS...` and prints its lines, sorted, without empty ones; it exits the
# script when go list fails or prints nothing.
list() {
  local out
  if ! out=$(go list "$@"); then
    echo "[deadcode] go list $* failed" >&2
    exit 1
  fi
  out=$(printf '%s\n' "$out" | sed '/^$/d' | sort -u)
  if [ -z "$out" ]; then
    echo "[deadcode] go list $* listed nothing" >&2
    exit 1
  fi
  printf '%s\n' "$out"
}

# testsupport keeps the import paths on stdin that name test support.
testsupport() {
  grep -E "^$root/(test|internal/platform/testutil)/|/[a-z0-9]+test\$" |
    grep -v -E "^$root/(services|internal/service)/[^/]+\$" || true
}

# regex prints an anchored regular expression matching exactly the import paths on stdin.
regex() { printf '^(%s)$' "$(sed 's/[.]/\\./g' | paste -sd'|')"; }

mapfile -t patterns < <(list -m -f '{{.Dir}}/...')
mains=$(list -f '{{if eq .Name "main"}}{{.ImportPath}}{{end}}' "${patterns[@]}")
linked=$(list -deps -f '{{if not .Standard}}{{.ImportPath}}{{end}}' $mains)
code=$(list -f '{{$p := .ImportPath}}{{range .GoFiles}}{{if ne . "doc.go"}}{{$p}}{{"\n"}}{{end}}{{end}}' "${patterns[@]}")
support=$(printf '%s\n' "$code" | testsupport)
product=$(comm -23 <(printf '%s\n' "$code") <(printf '%s\n' "$support"))
[ -n "$product" ] || { echo "[deadcode] no product package in $root" >&2; exit 1; }

fail=0
unlinked=$(comm -23 <(printf '%s\n' "$product") <(printf '%s\n' "$linked"))
if [ -n "$unlinked" ]; then
  echo "[deadcode] no binary links these packages, and they are not test support (test/, internal/platform/testutil/, *test):" >&2
  printf '  %s\n' $unlinked >&2
  fail=1
fi

out=$("$deadcode" -filter "$(printf '%s\n' "$product" | regex)" $mains)
if [ -n "$out" ]; then
  echo "[deadcode] functions no binary reaches (delete them, or move what only tests call into a _test.go file or test support):" >&2
  printf '%s\n' "$out" >&2
  fail=1
fi

if [ -n "$support" ]; then
  out=$("$deadcode" -test -tags "$tags" -filter "$(printf '%s\n' "$support" | regex)" "${patterns[@]}")
  if [ -n "$out" ]; then
    echo "[deadcode] test-support functions no test or binary reaches (delete them):" >&2
    printf '%s\n' "$out" >&2
    fail=1
  fi
fi

out=$(cd test/provider/testkit && GOWORK=off "$deadcode" .)
if [ -n "$out" ]; then
  echo "[deadcode] functions the test provider (test/provider/testkit) does not reach:" >&2
  printf '%s\n' "$out" >&2
  fail=1
fi

[ "$fail" = 0 ] && echo "[deadcode] every function is reached: product code by a binary, test support by a test" >&2
exit "$fail"
