#!/usr/bin/env bash
# hoststate.sh DIR: records the host state a one-node cluster changes, one file per view, so that a
# snapshot taken before hack/cluster/up.sh and one taken after hack/cluster/down.sh can be compared
# with `diff -r BEFORE AFTER` (make test-cluster does). Views: links and addresses, network
# namespaces, iptables/ip6tables rules (counters stripped), the nft ruleset, ipsets, mounts, TCP and UDP
# listeners (address and program, no pid), the cgroup v1/v2 directories one and two levels deep,
# and every sysctl but the ones that change on their own (counters, random, per-process).
set -euo pipefail
D=${1:?usage: hoststate.sh DIR}
mkdir -p "$D"

ip -o link show | sed -E 's/^[0-9]+: //; s/ qlen [0-9]+//' | awk '{print $1, $2}' | sort > "$D/ip-link"
ip -o addr show | awk '{print $2, $3, $4}' | sort > "$D/ip-addr"
ip -o route show table all | sort > "$D/ip-route"
ip netns list 2>/dev/null | sort > "$D/netns"
# (sed, not grep -v: an empty ruleset must not fail the pipeline.)
iptables-save | sed -E '/^#/d; s/\[[0-9]+:[0-9]+\]//' > "$D/iptables"
ip6tables-save | sed -E '/^#/d; s/\[[0-9]+:[0-9]+\]//' > "$D/ip6tables"
nft list ruleset > "$D/nft" 2>&1   # with its warnings (an xt target nft cannot show)
ipset list -n | sort > "$D/ipset"
awk '{print $1, $2, $3}' /proc/mounts | sort > "$D/mounts"
# Listeners outside loopback: protocol, local address, program name. Loopback is left out: other
# programs on a shared machine come and go there (up.sh itself listens only on the node address).
ss -H -ltunp | awk '$5 !~ /^(127\.|\[::1\]|\[::ffff:127\.)/ {p=$7; sub(/^users:\(\("/, "", p); sub(/".*/, "", p); print $1, $5, p}' | sort -u > "$D/listeners"
# cgroups one and two levels deep, without the per-job groups of the machine's process supervisor.
for c in /sys/fs/cgroup/*/; do
  find "$c" -mindepth 1 -maxdepth 2 -type d 2>/dev/null
done | sed '/\/process_api\//d' | sort > "$D/cgroups"
sysctl -a 2>/dev/null | sed -E '/^(fs\.(dentry-state|file-nr|inode-nr|inode-state|quota\.)|kernel\.(random\.|ns_last_pid|pty\.nr|tainted|sched_domain)|net\.netfilter\.nf_conntrack_count|vm\.(nr_|stat_)|kernel\.perf_event_max_sample_rate|fs\.aio-nr|net\.ipv4\.tcp_mem|net\.ipv4\.udp_mem|net\.ipv6\.route\.gc_|dev\.|user\.)/d' | sort > "$D/sysctl"
