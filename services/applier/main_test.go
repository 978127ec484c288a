package main

import (
	"testing"

	"github.com/lava-operator/lava/internal/platform/svc/svctest"
)

// TestRun_usage: --help prints the usage to stdout and exits 0; an unknown flag, a bad value
// or an argument prints the error and the usage to stderr and exits 2, as every service does.
func TestRun_usage(t *testing.T) {
	t.Parallel()
	svctest.Check(t, run, svctest.UsageCases("applier", "concurrency"))
}

// TestRun_runtimeFailure: a service that cannot start (nothing listens where it must connect)
// exits 1, not 2.
func TestRun_runtimeFailure(t *testing.T) {
	t.Parallel()
	svctest.RuntimeFailure(t, run, "--no-kube", "--nats-url", "nats://127.0.0.1:1")
}
