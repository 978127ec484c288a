package main

import (
	"bytes"
	"context"
	"io"
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
			if code := run(t.Context(), tt.args, lookup, io.Discard, &stderr); code == 0 || !strings.Contains(stderr.String(), tt.want) {
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
	tests := []struct {
		name       string
		args       []string
		env        map[string]string
		code       int
		wantStdout string
		wantStderr string
	}{
		{"help", []string{"--help"}, nil, 0, "Usage of viggy:", ""},
		{"h", []string{"-h"}, nil, 0, "Usage of viggy:", ""},
		{"unknown flag", []string{"--bogus"}, nil, 2, "", "viggy: unknown flag: --bogus\nUsage of viggy:"},
		{"bad value", []string{"--concurrency=many"}, nil, 2, "", "invalid argument \"many\""},
		{"argument", []string{"extra"}, nil, 2, "", "viggy: unexpected arguments [\"extra\"]\nUsage of viggy:"},
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
	if code := run(t.Context(), []string{"--nats-url", "nats://127.0.0.1:1"}, lookup, &stdout, &stderr); code != 1 {
		t.Fatalf("exit %d, want 1; stderr %q", code, stderr.String())
	}
}
