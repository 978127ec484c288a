// Package cluster tests a real one-node Kubernetes cluster that is already running (build tag
// cluster): `make test-cluster` brings one up with hack/cluster/up.sh, runs `go test -tags cluster
// ./test/cluster/` against it and tears it down with hack/cluster/down.sh. The tests bring nothing
// up themselves; they read the admin kubeconfig in $LAVA_CLUSTER_DIR and fail when it is missing.
package cluster
