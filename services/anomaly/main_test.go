package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/svc/svctest"
	"github.com/lava-operator/lava/internal/platform/testutil/natstest"
	"github.com/lava-operator/lava/internal/service/anomaly"
)

// TestRun_config: flag, environment and routing-file errors are exit 2 and name the problem.
func TestRun_config(t *testing.T) {
	t.Parallel()
	bad := filepath.Join(t.TempDir(), "routing.yaml")
	if err := os.WriteFile(bad, []byte("rules: [{sinks: [nowhere]}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	svctest.Check(t, run, []svctest.Case{
		{Name: "unknown flag", Args: []string{"--bogus"}, Code: 2, Stderr: "unknown flag: --bogus"},
		{Name: "argument", Args: []string{"--no-kube", "extra"}, Code: 2, Stderr: "unexpected arguments"},
		{Name: "bad env", Args: []string{"--no-kube"}, Env: map[string]string{"LAVA_CONCURRENCY": "many"}, Code: 2, Stderr: "LAVA_CONCURRENCY"},
		{Name: "bad routing", Args: []string{"--no-kube", "--config", bad}, Code: 2, Stderr: `unknown sink "nowhere"`},
	})
}

// TestRun_serves: configured from the environment, the service creates the topology and its
// windows bucket, runs, and exits 0 when its context ends.
func TestRun_serves(t *testing.T) {
	t.Parallel()
	srv := natstest.RunJetStream(t)
	bootstrap(t, srv)
	env := map[string]string{"LAVA_NATS_URL": srv.URL(), "LAVA_NO_KUBE": "true",
		"LAVA_METRICS_ADDR": "127.0.0.1:0", "LAVA_HEALTH_ADDR": "127.0.0.1:0", "LAVA_LOG_FORMAT": "text"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	ctx, cancel := context.WithCancel(t.Context())
	var stderr bytes.Buffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, nil, lookup, io.Discard, &stderr) }()
	js := srv.JetStream()
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, errKV := js.KeyValue(t.Context(), anomaly.BucketWindows)
		_, errC := js.Consumer(t.Context(), bus.StreamAnomalies, bus.ServiceAnomaly)
		_, errP := js.KeyValue(t.Context(), bus.BucketAnomalyProgress)
		if errKV == nil && errC == nil && errP == nil {
			break
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("bucket %v, consumer %v, progress bucket %v; stderr %s", errKV, errC, errP, stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // let the consumers start: a cancel during start-up is exit 1
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
}

// TestRun_usage: --help prints the usage to stdout and exits 0; an unknown flag, a bad value
// or an argument prints the error and the usage to stderr and exits 2, as every service does.
func TestRun_usage(t *testing.T) {
	t.Parallel()
	svctest.Check(t, run, svctest.UsageCases("anomaly", "concurrency"))
}

// TestRun_runtimeFailure: a service that cannot start (nothing listens where it must connect)
// exits 1, not 2.
func TestRun_runtimeFailure(t *testing.T) {
	t.Parallel()
	svctest.RuntimeFailure(t, run, "--no-kube", "--nats-url", "nats://127.0.0.1:1")
}

// bootstrap creates the topology as the bootstrap step does (`lava nats bootstrap`): the
// service only checks it.
func bootstrap(t *testing.T, srv *natstest.Server) {
	t.Helper()
	if err := bus.EnsureTopology(t.Context(), srv.JetStream(), bus.TopologyOptions{}); err != nil {
		t.Fatal(err)
	}
}
