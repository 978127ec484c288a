// Package cluster tests a real one-node Kubernetes cluster that is already running (build tag
// cluster): `make test-cluster` brings one up with hack/cluster/up.sh, runs `go test -tags cluster
// ./test/cluster/` against it and tears it down with hack/cluster/down.sh. The tests bring no
// cluster up themselves; they read the admin kubeconfig in $LAVA_CLUSTER_DIR and fail when it is
// missing. TestCluster_chart installs Lava on it as docs/install.md says (it builds and imports
// the images, runs NATS, installs the chart, applies an example, checks a tenant's isolation and
// the metrics, lives through a deleted applier, a deleted NATS server, a scale-out and NATS cut
// off, and uninstalls); it needs root on the node (containerd's socket, /proc, the nats-server
// processes, the file volume's directory), $LAVA_HELM_BIN, $LAVA_NATS_SERVER_BIN and kubectl
// ($KUBE_NODE_DIR, or the PATH $LAVA_CLUSTER_DIR/env sets).
package cluster
