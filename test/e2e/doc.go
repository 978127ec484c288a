// Package e2e is Lava's end-to-end test (build tag e2e, `go test -tags e2e ./test/e2e/`): every
// service as its own process against a real kube-apiserver, etcd, kube-controller-manager,
// nats-server, OpenTofu and the provider mirror, driven with kubectl as a user would (see
// e2e_test.go and package harness).
package e2e
