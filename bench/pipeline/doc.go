// Package pipeline benchmarks Lava's whole pipeline (bench/README.md): N LavaArchitectures, each
// a few terraform_data resources, created in one burst through a real kube-apiserver, NATS and
// every service as its own process (package test/e2e/harness) with the embedded engine, timed
// from create to Applied, next to the floor: a bare client-go program that creates N objects
// with one client while a second client adds a finalizer to each and patches its status once to
// Applied, at the same client QPS and burst as Lava's services. Run it with
// `go test -tags integration -run '^$' -bench Pipeline ./bench/pipeline/ [-args -n 1000 -qps 50 -burst 100]`.
package pipeline
