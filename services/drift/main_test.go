package main

import (
	"testing"

	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/svc/svctest"
)

// TestRun: the binary's contract (svctest.CheckContract): --help prints the usage to stdout
// and exits 0; an unknown flag, a bad value, an argument or a bad log level (on the command
// line or in a LAVA_* variable) prints the error and the usage to stderr and exits 2; a NATS
// URL nothing listens on exits 1; configured from the environment, the service creates its
// consumer, runs, and exits 0 when its context ends (with --no-kube: no API server here).
func TestRun(t *testing.T) {
	t.Parallel()
	svctest.CheckContract(t, run, svctest.Contract{Service: "drift", IntFlag: "concurrency",
		Stream: bus.StreamPhases, Consumer: bus.ServiceDrift, Started: "drift started", Args: []string{"--no-kube"}})
}
