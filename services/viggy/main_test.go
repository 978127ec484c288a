package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/lava-operator/lava/internal/bus"
	"github.com/lava-operator/lava/internal/svc/svctest"
	"github.com/lava-operator/lava/internal/testutil/natstest"
)

// TestRun_config: flag and environment errors are exit 2 and name the problem.
func TestRun_config(t *testing.T) {
	t.Parallel()
	svctest.Check(t, run, []svctest.Case{
		{Name: "unknown flag", Args: []string{"--bogus"}, Code: 2, Stderr: "unknown flag: --bogus"},
		{Name: "argument", Args: []string{"extra"}, Code: 2, Stderr: "unexpected arguments"},
		{Name: "bad env", Env: map[string]string{"LAVA_CONCURRENCY": "many"}, Code: 2, Stderr: "LAVA_CONCURRENCY"},
		{Name: "bad log level", Args: []string{"--log-level", "loud", "--nats-url", "nats://127.0.0.1:1"}, Code: 2, Stderr: "log level"},
	})
}

// TestRun_serves: configured from the environment, the service creates the topology, runs,
// and exits 0 when its context ends.
func TestRun_serves(t *testing.T) {
	t.Parallel()
	srv := natstest.RunJetStream(t)
	env := map[string]string{"LAVA_NATS_URL": srv.URL(), "LAVA_METRICS_ADDR": "127.0.0.1:0", "LAVA_HEALTH_ADDR": "127.0.0.1:0",
		"LAVA_PROVIDER_DIR": t.TempDir()}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var stderr bytes.Buffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"--log-format", "text"}, lookup, io.Discard, &stderr) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := srv.JetStream().Consumer(t.Context(), bus.StreamPhases, bus.ServiceViggy); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the topology was never created")
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // let the consumers start
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("exit %d:\n%s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "viggy started") {
		t.Fatalf("no start line:\n%s", stderr.String())
	}
}

// TestRun_usage: --help prints the usage to stdout and exits 0; an unknown flag, a bad value
// or an argument prints the error and the usage to stderr and exits 2, as every service does.
func TestRun_usage(t *testing.T) {
	t.Parallel()
	svctest.Check(t, run, svctest.UsageCases("viggy", "concurrency"))
}

// TestRun_runtimeFailure: a service that cannot start (nothing listens where it must connect)
// exits 1, not 2.
func TestRun_runtimeFailure(t *testing.T) {
	t.Parallel()
	svctest.RuntimeFailure(t, run, "--nats-url", "nats://127.0.0.1:1")
}
