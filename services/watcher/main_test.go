package main

import (
	"path/filepath"
	"testing"

	"github.com/lava-operator/lava/internal/platform/svc/svctest"
)

// TestRun_usage: --help prints the usage to stdout and exits 0; an unknown flag, a bad value
// or an argument prints the error and the usage to stderr and exits 2, as every service does.
func TestRun_usage(t *testing.T) {
	t.Parallel()
	cases := svctest.UsageCases("watcher", "replicas")
	cases = append(cases, svctest.Case{Name: "deprecated stream-replicas", Env: map[string]string{"LAVA_STREAM_REPLICAS": "many"},
		Code: 2, Stderr: "LAVA_STREAM_REPLICAS"})
	svctest.Check(t, run, cases)
}

// TestRun_runtimeFailure: a service that cannot start (nothing listens where it must connect)
// exits 1, not 2.
func TestRun_runtimeFailure(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "no-kubeconfig")
	svctest.RuntimeFailure(t, run, "--kubeconfig", missing)
}
