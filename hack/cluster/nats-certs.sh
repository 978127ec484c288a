#!/usr/bin/env bash
# nats-certs.sh DIR [NAMESPACE]: a throwaway PKI for the cluster's NATS (hack/cluster/nats.yaml)
# with openssl, into DIR: ca.crt/ca.key (the CA, ECDSA P-256, 30 days), server.crt/server.key
# (nats.NAMESPACE.svc and the servers' names under nats-headless; server and client use, as the
# routes present it to each other) and client.crt/client.key (CN lava, client use: Lava's
# mutual TLS certificate). NAMESPACE defaults to nats. Existing files are kept. For production,
# issue the certificates from your own CA (cert-manager, ...).
set -euo pipefail
dir=${1:?usage: nats-certs.sh DIR [NAMESPACE]}
ns=${2:-nats}
mkdir -p "$dir"
cd "$dir"
umask 077
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }
if [ ! -f ca.crt ]; then
  key ca.key
  openssl req -x509 -new -key ca.key -subj "/CN=lava-nats-ca" -days 30 -out ca.crt \
    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign
fi
# sign NAME CN EXTENSIONS: NAME.key and NAME.crt signed by the CA.
sign() {
  [ -f "$1.crt" ] && return 0
  key "$1.key"
  openssl req -new -key "$1.key" -subj "/CN=$2" -out "$1.csr"
  printf '%s\n' "$3" >"$1.ext"
  openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 30 -extfile "$1.ext" -out "$1.crt" 2>/dev/null
  rm -f "$1.csr" "$1.ext"
}
h=nats-headless.$ns.svc
sign server "nats.$ns.svc" "subjectAltName=DNS:nats.$ns.svc,DNS:nats.$ns.svc.cluster.local,DNS:*.$h,DNS:*.$h.cluster.local
keyUsage=critical,digitalSignature
extendedKeyUsage=serverAuth,clientAuth"
sign client lava "keyUsage=critical,digitalSignature
extendedKeyUsage=clientAuth"
chmod 0644 ca.crt server.crt client.crt
