#!/usr/bin/env bash
# up.sh: a real one-node Kubernetes cluster on this machine (root; no systemd, no registry, no internet).
#
#   containerd + runc (Debian; hack/cluster/install-packages.sh), cgroupfs, overlayfs
#   etcd, kube-apiserver, kube-controller-manager    KUBE_DIR (make tools-kube)
#   kube-scheduler, kubelet, kube-proxy, kubectl     KUBE_NODE_DIR (make tools-kube-node)
#   bridge + host-local CNI (Debian), kube-proxy in iptables mode, CoreDNS as a pod (make tools-coredns)
#   kube-router's NetworkPolicy controller alone (no router, no proxy), with ipset/iptables (make tools-kube-router)
#
# Everything lives under CLUSTER_DIR (default $HOME/.cache/lava/cluster): configuration, PKI, etcd
# and containerd data, sockets, pod volumes, pod logs, the daemons' logs (CLUSTER_DIR/logs) and PIDs.
# After it: CLUSTER_DIR/kubeconfig (admin, group system:masters) and CLUSTER_DIR/env to source.
# hack/cluster/down.sh stops it and undoes every change to the host.
#
# What it changes on the host, and how it is contained:
#   - a port-less bridge NODE_LINK holding NODE_IP/32 (this kernel has no dummy driver); every
#     daemon listens on NODE_IP or on a unix socket, containerd's CRI stream server on 127.0.0.1;
#   - the pods' bridge POD_LINK (made by the bridge CNI plugin), veth pairs and network namespaces
#     (under containerd's state dir, not /run/netns);
#   - sysctls: net.ipv4.ip_forward=1 here, and kubelet's own (vm.overcommit_memory, kernel.panic,
#     kernel.panic_on_oops, ...); the values before are saved once in CLUSTER_DIR/sysctl.saved;
#   - kube-proxy's and kube-router's KUBE-* iptables chains, kube-router's ipsets, and an nft table
#     `inet lava_cluster` (priority -10, before kube-proxy's rules) that keeps pod traffic on the
#     pods' bridge: forwarding only between two ports of POD_LINK (no pod reaches another network,
#     nothing else reaches a pod, and when forwarding was off before, ip_forward=1 makes the host a
#     router for nothing else), and from a pod to the host only the API server on NODE_IP:6443.
#     The bridge CNI plugin runs with ipMasq false: nothing is masqueraded to the outside;
#   - libcni's result cache in /var/lib/cni (containerd 1.6 cannot move it);
#   - cgroups under /sys/fs/cgroup/*/kubepods (kubelet, cgroupfs driver) and mounts under CLUSTER_DIR.
# Images come from tarballs hack/mkimage writes (pause and probe built from hack/cluster/pause and
# hack/cluster/probe, coredns from COREDNS_DIR), imported with `ctr -n k8s.io images import`;
# containerd's registry hosts point at a closed loopback port, so nothing is ever pulled.
# One cluster per machine: it refuses to start beside another cluster's kube-proxy rules.
# Trust: a test cluster. etcd (plain HTTP) and kubelet (anonymous, AlwaysAllow) trust whoever can
# reach NODE_IP, which is this host's processes only: pods are kept off every host port but 6443.
# Idempotent: a running cluster is left alone. A failed start runs down.sh (logs are kept).
#
# Env: CLUSTER_DIR, KUBE_DIR, KUBE_NODE_DIR, COREDNS_DIR, KUBE_ROUTER_DIR (the Makefile sets these), NODE_IP (10.99.0.1).
set -euo pipefail

T0=$(date +%s%N)
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
HERE=$REPO/hack/cluster
S=${CLUSTER_DIR:-$HOME/.cache/lava/cluster}
TOOLS=${TOOLS_DIR:-$HOME/.cache/lava/tools}
KUBE_DIR=${KUBE_DIR:-$TOOLS/kube-v1.37.2}
KUBE_NODE_DIR=${KUBE_NODE_DIR:-$TOOLS/kube-node-v1.37.2}
COREDNS_DIR=${COREDNS_DIR:-$TOOLS/coredns-v1.14.7}
KUBE_ROUTER_DIR=${KUBE_ROUTER_DIR:-$TOOLS/kube-router-v2.1.0}
NODE=lava-node NODE_IP=${NODE_IP:-10.99.0.1} NODE_LINK=lavanode0 POD_LINK=lavacni0
POD_CIDR=10.244.0.0/24 CLUSTER_CIDR=10.244.0.0/16 SVC_CIDR=10.96.0.0/16 DNS_IP=10.96.0.10
# The images' references: NODE_IMAGES/{pause,probe}:1 (test/cluster names probe's), and CoreDNS's version.
NODE_IMAGES=localhost/lava-node PAUSE_IMAGE=localhost/lava-node/pause:1 COREDNS_IMAGE=localhost/lava-node/coredns:v1.14.7
# Every sysctl this script, kubelet and kube-proxy may write; down.sh writes the saved values back.
SYSCTLS=(net.ipv4.ip_forward net.ipv4.conf.all.forwarding net.ipv4.conf.default.forwarding
  net.bridge.bridge-nf-call-iptables net.bridge.bridge-nf-call-ip6tables net.ipv4.conf.all.route_localnet
  vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops kernel.keys.root_maxkeys
  kernel.keys.root_maxbytes net.netfilter.nf_conntrack_max net.netfilter.nf_conntrack_tcp_timeout_established
  net.netfilter.nf_conntrack_tcp_timeout_close_wait net.netfilter.nf_conntrack_tcp_be_liberal)

log() { local ms=$(( ($(date +%s%N) - T0) / 1000000 )); printf '[cluster-up %3d.%ds] %s\n' $((ms / 1000)) $((ms % 1000 / 100)) "$*" >&2; }
fail() { echo "[cluster-up] $*" >&2; exit 1; }
alive() { [ -f "$S/run/$1.pid" ] && kill -0 "$(cat "$S/run/$1.pid")" 2>/dev/null; }
start() { # name cmd...: a daemon in its own session, its PID in run/NAME.pid, its output in logs/NAME.log
  local n=$1; shift
  setsid "$@" >"$S/logs/$n.log" 2>&1 </dev/null &
  echo $! >"$S/run/$n.pid"
}
waitfor() { # description timeout-seconds cmd...: polls cmd every 0.2 s; a daemon that died fails at once
  local d=$1 t=$2 n; shift 2
  for _ in $(seq 1 $((t * 5))); do
    "$@" >/dev/null 2>&1 && return 0
    for n in containerd etcd apiserver kcm scheduler kubelet proxy kube-router; do
      if [ -f "$S/run/$n.pid" ] && ! alive "$n"; then tail -n 20 "$S/logs/$n.log" >&2; fail "$n exited (log: $S/logs/$n.log)"; fi
    done
    sleep 0.2
  done
  fail "timed out after ${t}s waiting for $d (logs: $S/logs)"
}

# ---- preconditions: root, the built binaries, the Debian packages; no other cluster
[ "$(id -u)" = 0 ] || fail "needs root (network links, iptables, cgroups, mounts)"
for b in "$KUBE_DIR/etcd:tools-kube" "$KUBE_DIR/kube-apiserver:tools-kube" "$KUBE_DIR/kube-controller-manager:tools-kube" \
  "$KUBE_NODE_DIR/kube-scheduler:tools-kube-node" "$KUBE_NODE_DIR/kubelet:tools-kube-node" \
  "$KUBE_NODE_DIR/kube-proxy:tools-kube-node" "$KUBE_NODE_DIR/kubectl:tools-kube-node" "$COREDNS_DIR/coredns:tools-coredns" \
  "$KUBE_ROUTER_DIR/kube-router:tools-kube-router"; do
  [ -x "${b%%:*}" ] || fail "${b%%:*} missing: run make ${b##*:}"
done
for c in containerd containerd-shim-runc-v2 runc ctr iptables iptables-save nft conntrack ipset openssl curl /usr/lib/cni/bridge /usr/lib/cni/host-local /usr/lib/cni/loopback; do
  command -v "$c" >/dev/null || fail "$c missing: run hack/cluster/install-packages.sh"
done
mkdir -p "$S"; S=$(cd "$S" && pwd)
mkdir -p "$S"/{logs,run,pki,cni/net.d,cni/ipam,cni/cache,kubelet,podlogs,certs.d,images}
if alive kubelet && alive apiserver && alive containerd; then log "already running ($S)"; exit 0; fi
if [ ! -f "$S/run/containerd.pid" ] && { ip link show "$POD_LINK" >/dev/null 2>&1 || iptables -t nat -S KUBE-SERVICES >/dev/null 2>&1; }; then
  fail "another cluster's bridge or kube-proxy rules are on this machine (one cluster per machine)"
fi
trap 'rc=$?; if [ $rc != 0 ]; then echo "[cluster-up] failed; stopping what started (logs kept in $S/logs)" >&2; CLUSTER_DIR=$S "$HERE/down.sh"; fi' EXIT
K="$KUBE_NODE_DIR/kubectl --kubeconfig $S/kubeconfig"

# ---- images (no registry): pause (the sandbox), probe (the smoke test), coredns; S/images/NAME.tar
(cd "$REPO" && GOTOOLCHAIN=local go run ./hack/mkimage -out "$S/images" -registry "$NODE_IMAGES" -tag 1 \
  -coredns "$COREDNS_DIR/coredns" pause probe "coredns:${COREDNS_IMAGE##*:}")
log "images built"

# ---- host network: the node address, forwarding, the pod traffic guard
[ -f "$S/sysctl.saved" ] || for k in "${SYSCTLS[@]}"; do sysctl -e "$k"; done >"$S/sysctl.saved"
ip link show "$NODE_LINK" >/dev/null 2>&1 || ip link add "$NODE_LINK" type bridge
ip addr show dev "$NODE_LINK" | grep -q "inet $NODE_IP/" || ip addr add "$NODE_IP/32" dev "$NODE_LINK"
ip link set "$NODE_LINK" up
sysctl -qw net.ipv4.ip_forward=1 net.bridge.bridge-nf-call-iptables=1
# /var/lib/cni: libcni's result cache, which containerd 1.6 does not let us move; down.sh removes
# what is ours there, and the directory itself when this created it.
# Likewise /run/containerd (containerd 1.6 keeps its shims' sockets there, whatever its state dir).
if [ ! -f "$S/host.saved" ]; then
  for d in /var/lib/cni:var_lib_cni /run/containerd:run_containerd; do
    [ -d "${d%%:*}" ] && echo "${d##*:}=1" || echo "${d##*:}=0"
  done >"$S/host.saved"
fi
# The nft tables there were before (iptables-nft makes its tables on first use; down.sh removes new empty ones).
[ -f "$S/nft-tables.saved" ] || nft list tables >"$S/nft-tables.saved"
[ -f "$S/ipsets.saved" ] || ipset list -n >"$S/ipsets.saved"
# Forwarding was off: while ip_forward=1, forward nothing but pod-to-pod traffic.
route_nothing_else=
grep -qx 'net.ipv4.ip_forward = 0' "$S/sysctl.saved" && route_nothing_else="counter drop"
nft delete table inet lava_cluster 2>/dev/null || true
nft -f - <<EOF
table inet lava_cluster {
  chain forward {
    type filter hook forward priority -10; policy accept;
    iifname "$POD_LINK" oifname "$POD_LINK" accept
    iifname "$POD_LINK" counter drop
    oifname "$POD_LINK" counter drop
    ip saddr $CLUSTER_CIDR counter drop
    ip daddr $CLUSTER_CIDR counter drop
    $route_nothing_else
  }
  chain input {
    type filter hook input priority -10; policy accept;
    iifname "$POD_LINK" ct state established,related accept
    iifname "$POD_LINK" ip daddr $NODE_IP tcp dport 6443 accept
    iifname "$POD_LINK" counter drop
  }
}
EOF
log "node address $NODE_IP on $NODE_LINK; nft table inet lava_cluster"

# ---- containerd
for h in docker.io registry.k8s.io ghcr.io quay.io gcr.io k8s.gcr.io localhost; do
  mkdir -p "$S/certs.d/$h"; printf 'server = "http://127.0.0.1:1"\n' >"$S/certs.d/$h/hosts.toml"
done
cat >"$S/containerd.toml" <<EOF
version = 2
root = "$S/containerd/root"
state = "$S/containerd/state"
[grpc]
  address = "$S/run/containerd.sock"
[ttrpc]
  address = "$S/run/containerd.sock.ttrpc"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  netns_mounts_under_state_dir = true
  enable_selinux = false
  # Root here lacks CAP_SYS_RESOURCE, so the negative oom_score_adj kubelet asks for every sandbox
  # fails in runc init; clamp it to containerd's own (with kubelet oomScoreAdj 0).
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "$S/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$S/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "$S/certs.d"
EOF
cat >"$S/cni/net.d/10-lava.conflist" <<EOF
{"cniVersion": "1.0.0", "name": "lava", "plugins": [
  {"type": "bridge", "bridge": "$POD_LINK", "isGateway": true, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "dataDir": "$S/cni/ipam", "ranges": [[{"subnet": "$POD_CIDR"}]], "routes": [{"dst": "0.0.0.0/0"}]}}
]}
EOF
alive containerd || start containerd containerd --config "$S/containerd.toml" --log-level warn
CTR="ctr --address $S/run/containerd.sock -n k8s.io"
waitfor containerd 30 $CTR version
for t in pause probe coredns; do $CTR images import "$S/images/$t.tar" >/dev/null; done
log "containerd up; images: $($CTR images ls -q | grep -v '^sha256:' | tr '\n' ' ')"

# ---- PKI: the service-account key pair and static bearer tokens (the API server's serving
# certificate is self-signed by kube-apiserver in pki/ on its first start)
[ -f "$S/pki/sa.key" ] || { openssl genrsa -out "$S/pki/sa.key" 2048 2>/dev/null && openssl rsa -in "$S/pki/sa.key" -pubout -out "$S/pki/sa.pub" 2>/dev/null; }
if [ ! -f "$S/pki/tokens.csv" ]; then
  for u in "admin,admin,system:masters" "system:node:$NODE,node,system:nodes" "system:kube-proxy,kube-proxy," \
    "system:kube-scheduler,kube-scheduler," "system:kube-controller-manager,kube-controller-manager," \
    "system:kube-router,kube-router,"; do
    IFS=, read -r user uid group <<<"$u"
    printf '%s,%s,%s-uid%s\n' "$(openssl rand -hex 16)" "$user" "$uid" "${group:+,$group}"
  done >"$S/pki/tokens.csv"
  chmod 600 "$S/pki/tokens.csv"
fi
API=https://$NODE_IP:6443
kubeconfig() { # file user
  local token; token=$(awk -F, -v u="$2" '$2==u{print $1}' "$S/pki/tokens.csv")
  (umask 077; cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters: [{name: lava-node, cluster: {server: "$API", certificate-authority: "$S/pki/apiserver.crt"}}]
users: [{name: user, user: {token: "$token"}}]
contexts: [{name: lava-node, context: {cluster: lava-node, user: user, namespace: default}}]
current-context: lava-node
EOF
  )
}
kubeconfig "$S/kubeconfig" admin
kubeconfig "$S/pki/kubelet.kubeconfig" "system:node:$NODE"
kubeconfig "$S/pki/proxy.kubeconfig" system:kube-proxy
kubeconfig "$S/pki/scheduler.kubeconfig" system:kube-scheduler
kubeconfig "$S/pki/kcm.kubeconfig" system:kube-controller-manager
kubeconfig "$S/pki/kube-router.kubeconfig" system:kube-router

# ---- etcd, kube-apiserver
alive etcd || start etcd "$KUBE_DIR/etcd" --name node --data-dir "$S/etcd" \
  --listen-client-urls "http://$NODE_IP:2379" --advertise-client-urls "http://$NODE_IP:2379" \
  --listen-peer-urls "http://$NODE_IP:2380" --initial-advertise-peer-urls "http://$NODE_IP:2380" \
  --initial-cluster "node=http://$NODE_IP:2380" --listen-metrics-urls "http://$NODE_IP:2381" --log-level warn
waitfor etcd 30 curl -sf "http://$NODE_IP:2379/health"
log "etcd up"
alive apiserver || start apiserver "$KUBE_DIR/kube-apiserver" --etcd-servers="http://$NODE_IP:2379" \
  --bind-address="$NODE_IP" --advertise-address="$NODE_IP" --secure-port=6443 --cert-dir="$S/pki" \
  --service-account-issuer=https://kubernetes.default.svc.cluster.local \
  --service-account-key-file="$S/pki/sa.pub" --service-account-signing-key-file="$S/pki/sa.key" \
  --token-auth-file="$S/pki/tokens.csv" --authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction \
  --service-cluster-ip-range="$SVC_CIDR" --allow-privileged=false --kubelet-preferred-address-types=InternalIP
waitfor kube-apiserver 180 $K get --raw /readyz
log "kube-apiserver up"
cat >"$S/env" <<EOF
export KUBECONFIG=$S/kubeconfig
export PATH=$KUBE_NODE_DIR:\$PATH
export CONTAINERD_ADDRESS=$S/run/containerd.sock CONTAINERD_NAMESPACE=k8s.io
EOF

# ---- controller-manager, scheduler (no serving port: --secure-port=0)
alive kcm || start kcm "$KUBE_DIR/kube-controller-manager" --kubeconfig="$S/pki/kcm.kubeconfig" --secure-port=0 \
  --leader-elect=false --controllers='*' --use-service-account-credentials=true \
  --service-account-private-key-file="$S/pki/sa.key" --root-ca-file="$S/pki/apiserver.crt" \
  --cluster-cidr="$CLUSTER_CIDR" --service-cluster-ip-range="$SVC_CIDR" --allocate-node-cidrs=false
alive scheduler || start scheduler "$KUBE_NODE_DIR/kube-scheduler" --kubeconfig="$S/pki/scheduler.kubeconfig" \
  --secure-port=0 --leader-elect=false

# ---- kubelet
printf 'nameserver 127.0.0.1\n' >"$S/host-resolv.conf"   # pods with dnsPolicy Default resolve nothing outside
cat >"$S/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $NODE_IP
port: 10250
readOnlyPort: 0
healthzBindAddress: $NODE_IP
healthzPort: 10248
authentication: {anonymous: {enabled: true}, webhook: {enabled: false}, x509: {}}
authorization: {mode: AlwaysAllow}
cgroupDriver: cgroupfs
# This machine runs cgroup v1 (hybrid); kubelet 1.35+ refuses it unless told not to.
failCgroupV1: false
failSwapOn: false
# See restrict_oom_score_adj in containerd.toml.
oomScoreAdj: 0
containerRuntimeEndpoint: unix://$S/run/containerd.sock
clusterDNS: [$DNS_IP]
clusterDomain: cluster.local
resolvConf: $S/host-resolv.conf
podCIDR: $POD_CIDR
podLogsDirectory: $S/podlogs
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%"}
serializeImagePulls: false
rotateCertificates: false
registerNode: true
maxPods: 60
EOF
alive kubelet || start kubelet "$KUBE_NODE_DIR/kubelet" --config="$S/kubelet.yaml" --kubeconfig="$S/pki/kubelet.kubeconfig" \
  --root-dir="$S/kubelet" --cert-dir="$S/kubelet/pki" --hostname-override="$NODE" --node-ip="$NODE_IP"

# ---- kube-proxy (conntrack settings 0: leave the kernel's values alone)
cat >"$S/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: "$S/pki/proxy.kubeconfig"}
mode: iptables
clusterCIDR: $CLUSTER_CIDR
hostnameOverride: $NODE
bindAddress: $NODE_IP
healthzBindAddress: $NODE_IP:10256
metricsBindAddress: $NODE_IP:10249
nodePortAddresses: ["$NODE_IP/32"]
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
EOF
alive proxy || start proxy "$KUBE_NODE_DIR/kube-proxy" --config="$S/kube-proxy.yaml"

waitfor "node $NODE Ready" 180 sh -c "$K get node $NODE -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].status}' | grep -qx True"
waitfor "the default ServiceAccount" 60 $K get serviceaccount default
log "node $NODE Ready"

# ---- NetworkPolicies: kube-router's controller only (its health and metrics ports off: no listener)
$K apply -f "$HERE/kube-router.yaml" >/dev/null
alive kube-router || start kube-router "$KUBE_ROUTER_DIR/kube-router" --run-firewall=true --run-router=false \
  --run-service-proxy=false --kubeconfig="$S/pki/kube-router.kubeconfig" --hostname-override="$NODE" \
  --service-cluster-ip-range="$SVC_CIDR" --health-port=0 --metrics-port=0
waitfor "kube-router's NetworkPolicy chains" 120 iptables -S KUBE-ROUTER-FORWARD
log "kube-router enforces NetworkPolicies"

# ---- cluster DNS: CoreDNS as a pod, cluster.local only (no upstream)
sed -e "s#@IMAGE@#$COREDNS_IMAGE#" -e "s#@DNS_IP@#$DNS_IP#" "$HERE/coredns.yaml" | $K apply -f - >/dev/null
waitfor "CoreDNS Ready" 180 sh -c "$K -n kube-system get deployment coredns -o jsonpath='{.status.readyReplicas}' | grep -qx 1"
log "CoreDNS Ready at $DNS_IP; cluster up: source $S/env (KUBECONFIG=$S/kubeconfig)"
