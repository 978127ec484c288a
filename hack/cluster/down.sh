#!/usr/bin/env bash
# down.sh: stops the one-node cluster hack/cluster/up.sh started and undoes its changes to the host:
# the daemons (by the PIDs in CLUSTER_DIR/run) and the containerd shims that serve our socket, the
# pods' containers, the mounts under CLUSTER_DIR, the links (node and pod bridges, veths), kube-proxy's
# and kubelet's iptables chains (v4 and v6) and the iptables-nft tables they created, the nft table
# inet lava_cluster, kube-router's ipsets, conntrack entries of the pod and service ranges, the kubepods cgroups, libcni's
# cache entries, and the sysctls saved in CLUSTER_DIR/sysctl.saved. Then CLUSTER_DIR is removed but
# for its logs. Safe to run at any time, also after a failed or partial up.sh; it exits non-zero and
# says what when something is still left behind.
# Env: CLUSTER_DIR (default $HOME/.cache/lava/cluster), KUBE_NODE_DIR (for kube-proxy --cleanup).
set -uo pipefail
ids=

S=${CLUSTER_DIR:-$HOME/.cache/lava/cluster}
KUBE_NODE_DIR=${KUBE_NODE_DIR:-${TOOLS_DIR:-$HOME/.cache/lava/tools}/kube-node-v1.37.2}
NODE_LINK=lavanode0 POD_LINK=lavacni0 CLUSTER_CIDR=10.244.0.0/16 SVC_CIDR=10.96.0.0/16
T0=$(date +%s%N)
log() { local ms=$(( ($(date +%s%N) - T0) / 1000000 )); printf '[cluster-down %3d.%ds] %s\n' $((ms / 1000)) $((ms % 1000 / 100)) "$*" >&2; }
[ -d "$S" ] || { log "no cluster at $S"; exit 0; }
S=$(cd "$S" && pwd)
[ "$(id -u)" = 0 ] || { log "needs root"; exit 1; }

stop_pids() { # pid...: SIGTERM to all, SIGKILL to those still there after 10 s
  local pid left
  kill "$@" 2>/dev/null
  for _ in $(seq 1 100); do
    left=; for pid in "$@"; do kill -0 "$pid" 2>/dev/null && left=1; done
    [ -z "$left" ] && return 0; sleep 0.1
  done
  for pid in "$@"; do
    kill -0 "$pid" 2>/dev/null && log "SIGKILL $pid ($(tr '\0' ' ' </proc/"$pid"/cmdline 2>/dev/null | cut -c1-80))" && kill -9 "$pid" 2>/dev/null
  done
  sleep 0.5
}
stop() { # name...: the daemons up.sh recorded in run/NAME.pid, together
  local n pids=()
  for n in "$@"; do [ -f "$S/run/$n.pid" ] && pids+=("$(cat "$S/run/$n.pid")"); done
  [ ${#pids[@]} = 0 ] || stop_pids "${pids[@]}"
  for n in "$@"; do rm -f "$S/run/$n.pid"; done
}
# The PIDs of processes whose command line names our containerd socket (its shims).
shims() { pgrep -f -- " -address $S/run/containerd.sock" || true; }

# ---- daemons, then the pods' containers (kubelet first, so it restarts nothing)
stop proxy kube-router kubelet scheduler kcm
if [ -S "$S/run/containerd.sock" ] && [ -f "$S/run/containerd.pid" ]; then
  CTR="ctr --address $S/run/containerd.sock -n k8s.io"
  ids=$($CTR containers ls -q 2>/dev/null)   # pod sandboxes among them: their libcni cache entries go below
  for id in $($CTR tasks ls -q 2>/dev/null); do $CTR tasks kill -a -s SIGKILL "$id" >/dev/null 2>&1; done
  for _ in $(seq 1 50); do [ -z "$($CTR tasks ls 2>/dev/null | awk 'NR>1 && $3!="STOPPED"')" ] && break; sleep 0.2; done
  for id in $($CTR tasks ls -q 2>/dev/null); do $CTR tasks delete -f "$id" >/dev/null 2>&1; done
  for id in $($CTR containers ls -q 2>/dev/null); do $CTR containers delete "$id" >/dev/null 2>&1; done
fi
log "kubelet, kube-proxy, scheduler, controller manager stopped; pods' containers removed"
stop containerd
pids=$(shims); [ -z "$pids" ] || stop_pids $pids
stop apiserver; stop etcd   # kube-apiserver shuts down slowly without etcd
log "containerd, its shims, kube-apiserver, etcd stopped"

# ---- mounts under the state dir (netns bind mounts, sandbox shm, pod volumes, overlay rootfs), deepest first
for _ in 1 2 3; do
  awk -v p="$S/" 'index($2, p) == 1 {print $2}' /proc/mounts | sort -r | while read -r m; do
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null
  done
done

# ---- links: pod veths (their namespaces are gone with the mounts), the pod bridge, the node bridge
for l in $(ip -o link show master "$POD_LINK" 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1); do ip link del "$l" 2>/dev/null; done
ip link del "$POD_LINK" 2>/dev/null
ip link del "$NODE_LINK" 2>/dev/null

log "mounts and links removed"

# ---- packet filtering: kube-proxy's own cleanup, then any KUBE-* chain left (kubelet's canaries)
if [ -d "$S/run" ] && [ -x "$KUBE_NODE_DIR/kube-proxy" ] && command -v iptables >/dev/null; then
  timeout 60 "$KUBE_NODE_DIR/kube-proxy" --cleanup >"$S/logs/proxy-cleanup.log" 2>&1
fi
for ipt in iptables ip6tables; do
  command -v $ipt >/dev/null || continue
  for t in filter nat mangle raw; do
    $ipt -t $t -S 2>/dev/null | awk '/^-A / && /KUBE-/' | sed 's/^-A/-D/' | while read -r r; do eval "$ipt -t $t $r" 2>/dev/null; done
    for c in $($ipt -t $t -S 2>/dev/null | awk '/^-N KUBE-/{print $2}'); do $ipt -t $t -F "$c" 2>/dev/null; done
    for c in $($ipt -t $t -S 2>/dev/null | awk '/^-N KUBE-/{print $2}'); do $ipt -t $t -X "$c" 2>/dev/null; done
  done
done
if command -v nft >/dev/null; then
  nft delete table inet lava_cluster 2>/dev/null
  # iptables-nft tables (ip filter, ip6 nat, ...) that were not there before up.sh and hold no rule now.
  if [ -f "$S/nft-tables.saved" ]; then
    nft list tables 2>/dev/null | while read -r _ fam name; do
      grep -qx "table $fam $name" "$S/nft-tables.saved" && continue
      nft list table "$fam" "$name" 2>/dev/null | awk '/^\t\t/ && !/^\t\ttype / {r=1} END {exit r}' && nft delete table "$fam" "$name"
    done
  fi
fi
command -v conntrack >/dev/null && for r in "$CLUSTER_CIDR" "$SVC_CIDR"; do
  conntrack -D -s "$r" >/dev/null 2>&1; conntrack -D -d "$r" >/dev/null 2>&1
done

# kube-router's ipsets (no rule refers to them any more): the ones that were not there before up.sh.
if command -v ipset >/dev/null && [ -f "$S/ipsets.saved" ]; then
  for set in $(ipset list -n 2>/dev/null); do
    grep -qxF -- "$set" "$S/ipsets.saved" || ipset destroy "$set" 2>/dev/null
  done
fi
log "iptables, ipsets, nft and conntrack cleaned"

# ---- cgroups kubelet made (cgroupfs driver: one kubepods tree per v1 hierarchy), deepest first
for d in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods; do
  [ -d "$d" ] && find "$d" -depth -type d -exec rmdir {} \; 2>/dev/null
done

# ---- libcni's cache; the directories when up.sh created them
for id in ${ids:-}; do rm -f /var/lib/cni/results/*-"$id"-* 2>/dev/null; done
rm -f /var/lib/cni/results/lava-* 2>/dev/null
if grep -qx var_lib_cni=0 "$S/host.saved" 2>/dev/null; then
  find /var/lib/cni -depth -type d -empty -delete 2>/dev/null
fi
if grep -qx run_containerd=0 "$S/host.saved" 2>/dev/null; then
  find /run/containerd -depth -type d -empty -delete 2>/dev/null
fi

# ---- sysctls: the values before up.sh, where they differ now
if [ -f "$S/sysctl.saved" ]; then
  while read -r k _ v; do   # lines "key = value"
    [ -n "$k" ] && [ "$(sysctl -n "$k" 2>/dev/null)" != "$v" ] && sysctl -qw "$k=$v"
  done <"$S/sysctl.saved"
fi

# ---- what is left, if anything
left=()
[ -n "$(shims)" ] && left+=("containerd shims: $(shims | tr '\n' ' ')")
awk -v p="$S/" 'index($2, p) == 1' /proc/mounts | grep -q . && left+=("mounts under $S")
ip link show "$POD_LINK" >/dev/null 2>&1 && left+=("link $POD_LINK")
ip link show "$NODE_LINK" >/dev/null 2>&1 && left+=("link $NODE_LINK")
command -v iptables-save >/dev/null && iptables-save 2>/dev/null | grep -q KUBE- && left+=("KUBE- iptables rules")
command -v ipset >/dev/null && [ -f "$S/ipsets.saved" ] && [ -n "$(ipset list -n 2>/dev/null | grep -vxFf "$S/ipsets.saved")" ] && left+=("ipsets")
for d in /sys/fs/cgroup/*/kubepods; do [ -d "$d" ] && left+=("cgroup $d"); done
if [ ${#left[@]} -gt 0 ]; then
  log "left behind: ${left[*]} (state kept in $S)"
  exit 1
fi
find "$S" -mindepth 1 -maxdepth 1 ! -name logs -exec rm -rf {} + 2>/dev/null
log "stopped; logs in $S/logs"
