package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/lava-operator/lava/internal/bus"
	"github.com/lava-operator/lava/internal/testutil/natstest"
)

// TestRun_config: flag and environment errors are exit 2 and name the problem.
func TestRun_config(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"unknown flag", []string{"--bogus"}, nil, "unknown flag: --bogus"},
		{"argument", []string{"extra"}, nil, "unexpected arguments"},
		{"bad env", nil, map[string]string{"LAVA_CONCURRENCY": "many"}, "LAVA_CONCURRENCY"},
		{"bad log level", []string{"--log-level", "loud", "--nats-url", "nats://127.0.0.1:1"}, nil, "log level"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var stderr bytes.Buffer
			lookup := func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok }
			if code := run(t.Context(), tt.args, lookup, &stderr); code == 0 || !strings.Contains(stderr.String(), tt.want) {
				t.Fatalf("exit %d, stderr %q; want an error naming %q", code, stderr.String(), tt.want)
			}
		})
	}
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
	go func() { done <- run(ctx, []string{"--log-format", "text"}, lookup, &stderr) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := srv.JetStream().Consumer(t.Context(), bus.StreamPhases, bus.ServiceDrift); err == nil {
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
	if !strings.Contains(stderr.String(), "drift started") {
		t.Fatalf("no start line:\n%s", stderr.String())
	}
}
