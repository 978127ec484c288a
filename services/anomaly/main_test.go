package main

import (
	"bytes"
	"context"
	"io"
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
			if code := run(t.Context(), tt.args, lookup, io.Discard, &stderr); code != 2 || !strings.Contains(stderr.String(), tt.want) {
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
	tests := []struct {
		name       string
		args       []string
		env        map[string]string
		code       int
		wantStdout string
		wantStderr string
	}{
		{"help", []string{"--help"}, nil, 0, "Usage of anomaly:", ""},
		{"h", []string{"-h"}, nil, 0, "Usage of anomaly:", ""},
		{"unknown flag", []string{"--bogus"}, nil, 2, "", "anomaly: unknown flag: --bogus\nUsage of anomaly:"},
		{"bad value", []string{"--concurrency=many"}, nil, 2, "", "invalid argument \"many\""},
		{"argument", []string{"extra"}, nil, 2, "", "anomaly: unexpected arguments [\"extra\"]\nUsage of anomaly:"},
		{"bad env value", nil, map[string]string{"LAVA_CONCURRENCY": "many"}, 2, "", "LAVA_CONCURRENCY"},
		{"bad log level", []string{"--log-level", "loud"}, nil, 2, "", "log level"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var stdout, stderr bytes.Buffer
			lookup := func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok }
			code := run(t.Context(), tt.args, lookup, &stdout, &stderr)
			if code != tt.code {
				t.Fatalf("exit %d, want %d; stdout %q, stderr %q", code, tt.code, stdout.String(), stderr.String())
			}
			if tt.wantStdout == "" && stdout.Len() > 0 {
				t.Errorf("stdout %q, want nothing", stdout.String())
			}
			if !strings.Contains(stdout.String(), tt.wantStdout) || !strings.Contains(stderr.String(), tt.wantStderr) {
				t.Errorf("stdout %q, stderr %q; want %q and %q", stdout.String(), stderr.String(), tt.wantStdout, tt.wantStderr)
			}
			if tt.code == 0 {
				if stderr.Len() > 0 {
					t.Errorf("stderr %q, want nothing", stderr.String())
				}
				if !strings.Contains(stdout.String(), "--nats-url") {
					t.Errorf("usage lists no flags: %q", stdout.String())
				}
			}
		})
	}
}

// TestRun_runtimeFailure: a service that cannot start (nothing listens where it must connect)
// exits 1, not 2.
func TestRun_runtimeFailure(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	env := map[string]string{"LAVA_METRICS_ADDR": "127.0.0.1:0", "LAVA_HEALTH_ADDR": "127.0.0.1:0", "LAVA_CONNECT_ADDR": "127.0.0.1:0"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	if code := run(t.Context(), []string{"--no-kube", "--nats-url", "nats://127.0.0.1:1"}, lookup, &stdout, &stderr); code != 1 {
		t.Fatalf("exit %d, want 1; stderr %q", code, stderr.String())
	}
}
