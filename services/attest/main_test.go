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
		{"bad log level", []string{"--log-level", "loud"}, nil, "log level"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var stderr bytes.Buffer
			lookup := func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok }
			if code := run(t.Context(), tt.args, lookup, &stderr); code != 2 || !strings.Contains(stderr.String(), tt.want) {
				t.Fatalf("exit %d, stderr %q; want 2 and %q", code, stderr.String(), tt.want)
			}
		})
	}
}

// TestRun_serves: configured from the environment, the service creates the topology, runs,
// and exits 0 when its context ends.
func TestRun_serves(t *testing.T) {
	t.Parallel()
	srv := natstest.RunJetStream(t)
	env := map[string]string{
		"LAVA_NATS_URL": srv.URL(), "LAVA_CONNECT_ADDR": "127.0.0.1:0",
		"LAVA_METRICS_ADDR": "127.0.0.1:0", "LAVA_HEALTH_ADDR": "127.0.0.1:0",
	}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var stderr bytes.Buffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"--log-format", "text"}, lookup, &stderr) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := srv.JetStream().ObjectStore(t.Context(), bus.ObjectStoreArtifacts); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the topology was never created")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("exit %d:\n%s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "receipts are unsigned") {
		t.Fatalf("no warning about the missing signing key:\n%s", stderr.String())
	}
}
