package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lava-operator/lava/internal/anomaly"
	"github.com/lava-operator/lava/internal/bus"
	"github.com/lava-operator/lava/internal/testutil/natstest"
)

// TestRun_config: flag, environment and routing-file errors are exit 2 and name the problem.
func TestRun_config(t *testing.T) {
	t.Parallel()
	bad := filepath.Join(t.TempDir(), "routing.yaml")
	if err := os.WriteFile(bad, []byte("rules: [{sinks: [nowhere]}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"unknown flag", []string{"--bogus"}, nil, "unknown flag: --bogus"},
		{"argument", []string{"--no-kube", "extra"}, nil, "unexpected arguments"},
		{"bad env", []string{"--no-kube"}, map[string]string{"LAVA_CONCURRENCY": "many"}, "LAVA_CONCURRENCY"},
		{"bad routing", []string{"--no-kube", "--config", bad}, nil, `unknown sink "nowhere"`},
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

// TestRun_serves: configured from the environment, the service creates the topology and its
// windows bucket, runs, and exits 0 when its context ends.
func TestRun_serves(t *testing.T) {
	t.Parallel()
	srv := natstest.RunJetStream(t)
	env := map[string]string{"LAVA_NATS_URL": srv.URL(), "LAVA_NO_KUBE": "true",
		"LAVA_METRICS_ADDR": "127.0.0.1:0", "LAVA_HEALTH_ADDR": "127.0.0.1:0", "LAVA_LOG_FORMAT": "text"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	ctx, cancel := context.WithCancel(t.Context())
	var stderr bytes.Buffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, nil, lookup, &stderr) }()
	js := srv.JetStream()
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, errKV := js.KeyValue(t.Context(), anomaly.BucketWindows)
		_, errC := js.Consumer(t.Context(), bus.StreamAnomalies, bus.ServiceAnomaly)
		if errKV == nil && errC == nil {
			break
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("bucket %v, consumer %v; stderr %s", errKV, errC, stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
}
