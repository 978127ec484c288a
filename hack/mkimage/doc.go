// Command mkimage builds the OCI images of Lava's services and of the lava CLI from the
// repository, and those of the one-node cluster (hack/cluster), with
// github.com/google/go-containerregistry: no Docker daemon, no registry. `make images` runs it:
//
//	go run ./hack/mkimage [-out bin/images] [-registry ghcr.io/lava-operator] [-tag dev]
//	    [-providers DIR]... [-tofu PATH] [-coredns PATH] [-nats PATH] [image[:tag]...]
//
// Lava's images are watcher, synth, applier, drift, viggy, anomaly, attest (each
// <registry>/lava-<name>:<tag>, built from services/<name> on its own, GOWORK=off) and lava
// (<registry>/lava:<tag>, the CLI, ./cmd/lava); without arguments, every one. The one-node
// cluster's are built only when named, each <registry>/<name>:<tag>: pause (the pod sandbox,
// ./hack/cluster/pause), probe (the smoke test's workload, ./hack/cluster/probe), coredns
// (the CoreDNS binary -coredns gives, from hack/tools/build-coredns.sh) and nats (the
// nats-server binary -nats gives, which must be static; ports 4222, 6222, 8222; the
// cluster's NATS, hack/cluster/nats.yaml). An argument NAME:TAG
// gives that image TAG instead of -tag; hack/cluster/up.sh runs
//
//	go run ./hack/mkimage -out DIR -registry localhost/lava-node -tag 1 -coredns PATH pause probe coredns:v1.14.7
//
// # What an image holds
//
// Three kinds of layer, in this order:
//   - the base, the same in every image: /etc/passwd and /etc/group with the nonroot user
//     (65532), /etc/nsswitch.conf, the CA certificates at /etc/ssl/certs/ca-certificates.crt,
//     /tmp (mode 1777) and /home/nonroot (the working directory, owned by 65532);
//   - for the applier and drift only: the provider mirror at the chart's providerDir
//     (applier.providerDir and drift.providerDir in -values, /var/lib/lava/providers), the
//     -providers directories merged into it, an empty directory without any; and, with -tofu,
//     OpenTofu at tofuBin (/usr/local/tofu/tofu when the values leave it empty);
//   - the binary at /usr/local/bin/<image>, the entrypoint: static (CGO_ENABLED=0), -trimpath,
//     no VCS stamp, -ldflags="-s -w" (coredns and nats: the -coredns and -nats files as
//     they are).
//
// The configuration: user 65532:65532 (pause: 65535:65535, as Kubernetes' own pause image), the
// service's ports (9090 metrics, 9091 health, 8080 connect for synth and attest), probe's
// default argument serve, SSL_CERT_FILE, and the labels org.opencontainers.image.source,
// .revision (the commit, "-dirty" appended when tracked files have changes), .version (-version,
// default the image's tag), .created and .title.
//
// The CA certificates come from golang.org/x/crypto/x509roots/fallback, the Mozilla NSS roots
// packaged as a Go module at the version go.mod pins, so every build machine writes the same
// bundle (Debian's /etc/ssl/certs would make the image depend on the machine's packages). The
// roots NSS constrains with a distrust-after date are left out: PEM cannot say the constraint.
//
// # Reproducible
//
// The same commit, built with the same Go toolchain (and the same -coredns and -nats files), gives images
// with the same digests: the binaries have no paths or VCS stamp, every file and the image have
// the time SOURCE_DATE_EPOCH or else the commit's time, layer entries are sorted with fixed
// owners and no names, and the layers are gzip-compressed by the standard library. A mirror
// file whose bytes equal another's (the same provider under registry.opentofu.org and
// registry.terraform.io) is a hard link to it.
//
// # Output
//
// -out (bin/images) gets one tarball per image, <image>.tar in the docker-save format of
// go-containerregistry's tarball package: `ctr -n k8s.io images import`, `docker load`,
// `crane push` and `skopeo copy docker-archive:` read it. images.txt lists one image a line:
//
//	REF DIGEST ID FILE
//
// DIGEST is the manifest's digest, what a registry serves the image as after `crane push`; ID is
// the configuration's digest, the image ID a runtime shows (a runtime that imports the tarball
// writes its own manifest, so its digest for the image may differ, but the ID is the same).
package main
