#!/usr/bin/env bash
# first-up.sh [--tofu]
#
# How long the first `make up` takes on a fresh machine: from a fresh $HOME (so no
# ~/.cache/lava/tools), an empty Go module cache and build cache, and a clean clone of this
# repository's HEAD, it runs `make up` and prints the seconds from its start to
#   - the first resource Applied,
#   - every resource of the embedded engine Applied (every example but tofu-files.yaml),
#   - with --tofu, demo/tofu-greetings Applied (OpenTofu built in the background).
# Then it stops lava up and the background build and removes everything it made. Needs Go, make
# and git, and the Go module proxy this machine's `go env GOPROXY` names. Not a test: the figure
# goes in README.md and bench/README.md (docs/design/0041-first-make-up.md).
set -euo pipefail
TOFU=0
[ "${1:-}" = --tofu ] && TOFU=1
REPO=$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel)
W=$(mktemp -d "${TMPDIR:-/tmp}/lava-first-up.XXXXXX")
export HOME=$W/home GOPATH=$W/gopath GOMODCACHE=$W/gopath/pkg/mod GOCACHE=$W/gocache
mkdir -p "$HOME"
git clone -q "$REPO" "$W/src"
cd "$W/src"
pid=
cleanup() {
  set +e
  if [ -n "$pid" ]; then
    kill -- "-$pid" 2>/dev/null && sleep 2
    kill -9 -- "-$pid" 2>/dev/null
  fi
  chmod -R u+w "$W" 2>/dev/null
  rm -rf "$W"
}
trap cleanup EXIT
start=$(date +%s.%N)
setsid make up > "$W/up.log" 2>&1 &
pid=$!
since() { awk -v now="$(date +%s.%N)" -v start="$start" 'BEGIN { printf "%.1f", now - start }'; }
applied() { { grep -ls '^  phase: Applied' .lava/status/demo/*.yaml 2>/dev/null || true; } | wc -l; }
embedded=$(awk '/^kind: LavaArchitecture/ { n++ } END { print n }' $(grep -L 'engine: *tofu' examples/*.yaml))
first= all= tofu=
deadline=$((SECONDS + 1800))
while kill -0 "$pid" 2>/dev/null && [ $SECONDS -lt $deadline ]; do
  n=$(applied)
  [ -z "$first" ] && [ "$n" -ge 1 ] && first=$(since) && echo "first Applied: ${first} s"
  if [ -z "$all" ] && [ "$n" -ge "$embedded" ] && ! grep -qs '^  phase: Applied' .lava/status/demo/tofu-greetings.yaml; then
    all=$(since) && echo "every embedded-engine resource ($embedded) Applied: ${all} s"
  fi
  if grep -qs '^  phase: Applied' .lava/status/demo/tofu-greetings.yaml; then
    tofu=$(since) && echo "demo/tofu-greetings Applied: ${tofu} s" && [ -z "$all" ] && all=$tofu && echo "(every embedded-engine resource Applied by then)"
  fi
  if [ -n "$all" ] && { [ "$TOFU" = 0 ] || [ -n "$tofu" ]; }; then
    exit 0
  fi
  sleep 1
done
echo "make up exited or took over 30 minutes before the milestones; its output:" >&2
cat "$W/up.log" >&2
exit 1
