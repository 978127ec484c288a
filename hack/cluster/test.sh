#!/usr/bin/env bash
# test.sh: the one-node cluster's whole check (make test-cluster): records the host state
# (hoststate.sh), brings the cluster up (up.sh), checks what the cluster shows the host (nothing
# listens outside NODE_IP and loopback; nothing is masqueraded but kube-proxy's marked service
# traffic), runs the tests (go test -tags cluster ./test/cluster/: smoke, isolation, NetworkPolicy,
# the chart with NATS, which builds and imports the images), always tears the cluster
# down (down.sh) and fails when the host state afterwards differs from before.
# Timings go to stderr; snapshots and the diff stay in CLUSTER_DIR/logs/host-{before,up,after}.
# Env: as up.sh (CLUSTER_DIR, KUBE_DIR, KUBE_NODE_DIR, COREDNS_DIR, NODE_IP), GO_TEST_FLAGS.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
S=${CLUSTER_DIR:-$HOME/.cache/lava/cluster}
NODE_IP=${NODE_IP:-10.99.0.1}
export CLUSTER_DIR=$S
L=$S/logs
log() { echo "[test-cluster] $*" >&2; }

mkdir -p "$L"
rm -rf "$L/host-before" "$L/host-up" "$L/host-after"
"$HERE/hoststate.sh" "$L/host-before"
rc=0
t=$SECONDS
if "$HERE/up.sh"; then
  log "up in $((SECONDS - t))s"
  "$HERE/hoststate.sh" "$L/host-up"
  # Listeners outside loopback the cluster added: each must be on NODE_IP.
  if stray=$(comm -13 "$L/host-before/listeners" "$L/host-up/listeners" | awk -v ip="$NODE_IP:" 'index($2, ip) != 1') && [ -n "$stray" ]; then
    log "listening outside $NODE_IP and loopback:"; echo "$stray" >&2; rc=1
  fi
  # MASQUERADE only in KUBE-POSTROUTING (service traffic kube-proxy marked); the CNI plugin masquerades nothing.
  if masq=$(iptables-save | grep -- '-j MASQUERADE' | grep -v '^-A KUBE-POSTROUTING ') && [ -n "$masq" ]; then
    log "MASQUERADE rules besides kube-proxy's:"; echo "$masq" >&2; rc=1
  fi
  t=$SECONDS
  (cd "$REPO" && LAVA_CLUSTER_DIR=$S go test -tags cluster ${GO_TEST_FLAGS:--count=1 -timeout=25m} -v ./test/cluster/) || rc=1
  log "tests in $((SECONDS - t))s"
else
  rc=1
fi
t=$SECONDS
"$HERE/down.sh" || rc=1
log "down in $((SECONDS - t))s"
"$HERE/hoststate.sh" "$L/host-after"
if ! diff -r "$L/host-before" "$L/host-after" >"$L/host.diff"; then
  log "the host differs after down.sh from before up.sh:"; cat "$L/host.diff" >&2; rc=1
else
  log "host state after down.sh equals the state before up.sh"
fi
exit $rc
