package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lava-operator/lava/internal/platform/svc/svctest"
)

// TestRun_usage: --help prints the usage to stdout and exits 0; an unknown flag, a bad value
// or an argument prints the error and the usage to stderr and exits 2, as every service does.
func TestRun_usage(t *testing.T) {
	t.Parallel()
	cases := svctest.UsageCases("synth", "concurrency")
	cases = append(cases, svctest.Case{Name: "missing bindings key", Args: []string{"--no-kube"}, Code: 2,
		Stderr: "--bindings-key-file (LAVA_BINDINGS_KEY_FILE) is required"})
	svctest.Check(t, run, cases)
}

// TestRun_runtimeFailure: a service that cannot start (nothing listens where it must connect)
// exits 1, not 2.
func TestRun_runtimeFailure(t *testing.T) {
	t.Parallel()
	key := filepath.Join(t.TempDir(), "bindings.key")
	if err := os.WriteFile(key, []byte(strings.Repeat("ab", 32)), 0o600); err != nil {
		t.Fatal(err)
	}
	svctest.RuntimeFailure(t, run, "--no-kube", "--nats-url", "nats://127.0.0.1:1", "--bindings-key-file", key)
}
