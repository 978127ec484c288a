#!/usr/bin/env bash
# install-packages.sh: the Debian packages a one-node cluster (hack/cluster/up.sh) runs on:
#   containerd runc            the container runtime (containerd 1.6, CRI plugin, overlayfs snapshotter)
#   containernetworking-plugins bridge, host-local and portmap CNI plugins in /usr/lib/cni
#   iptables nftables conntrack ipset   what kube-proxy and the NetworkPolicy controller program
#   openssl curl iproute2      PKI, health checks, links and addresses
# Idempotent: apt runs only when a package is missing, `apt-get update` once before it. Needs root.
# Debian's containerd package ships only a systemd unit; on a machine without systemd nothing is started.
set -euo pipefail

PACKAGES=(containerd runc containernetworking-plugins iptables nftables conntrack ipset openssl curl iproute2)
log() { echo "[install-packages] $*" >&2; }

missing=()
for p in "${PACKAGES[@]}"; do
  [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)" = "install ok installed" ] || missing+=("$p")
done
if [ ${#missing[@]} = 0 ]; then
  log "${PACKAGES[*]} present, skipping"
  exit 0
fi
[ "$(id -u)" = 0 ] || { log "installing ${missing[*]} needs root"; exit 1; }
log "installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
log "installed: $(dpkg-query -W -f='${Package} ${Version}\n' "${missing[@]}" | tr '\n' ';')"
