// Package harness runs Lava as in production, for the end-to-end test and the pipeline
// benchmark: a nats-server process with JetStream, kube-apiserver, etcd and
// kube-controller-manager (hack/tools/kube-testenv.sh), and every service built from this
// repository with `go build` and started as its own process on its own loopback ports, each
// logging to a file whose tail is printed when the test fails.
//
// Every binary comes from the tool directories the Makefile exports (KUBEBUILDER_ASSETS,
// LAVA_NATS_SERVER_BIN, LAVA_TOFU_DIR); a missing one fails the test and names the `make tools`
// target that builds it.
package harness
