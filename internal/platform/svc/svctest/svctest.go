package svctest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/svc"
	"github.com/lava-operator/lava/internal/platform/testutil/natstest"
)

// Run is a service's run function (svc.Run).
type Run = svc.Run

// Case is one invocation of a service's run and what it must print and return.
type Case struct {
	// Name names the subtest.
	Name string
	// Args are the command-line arguments; Env the LAVA_* variables seen.
	Args []string
	Env  map[string]string
	// Code is the exit code run must return.
	Code int
	// Stdout and Stderr must be contained in what run writes there; an empty Stdout means
	// nothing may be written to stdout.
	Stdout, Stderr string
}

// UsageCases returns the cases every service must pass (service is the binary's name in the
// usage, intFlag the name of one of its integer flags): --help and -h print the usage to
// stdout and exit 0; an unknown flag, a bad value of intFlag on the command line or in its
// LAVA_* variable, an argument and a bad log level print the error (and usage) to stderr and
// exit 2.
func UsageCases(service, intFlag string) []Case {
	env := "LAVA_" + strings.ToUpper(strings.ReplaceAll(intFlag, "-", "_"))
	return []Case{
		{"help", []string{"--help"}, nil, 0, "Usage of " + service + ":", ""},
		{"h", []string{"-h"}, nil, 0, "Usage of " + service + ":", ""},
		{"unknown flag", []string{"--bogus"}, nil, 2, "", service + ": unknown flag: --bogus\nUsage of " + service + ":"},
		{"bad value", []string{"--" + intFlag + "=many"}, nil, 2, "", "invalid argument \"many\""},
		{"argument", []string{"extra"}, nil, 2, "", service + ": unexpected arguments [\"extra\"]\nUsage of " + service + ":"},
		{"bad env value", nil, map[string]string{env: "many"}, 2, "", env},
		{"bad log level", []string{"--log-level", "loud"}, nil, 2, "", "log level"},
	}
}

// Check runs each case in a parallel subtest and fails it when run returns another code or
// its output lacks the wanted text; for code 0 stderr must be empty and stdout must list
// --nats-url.
func Check(t *testing.T, run Run, cases []Case) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.Name, func(t *testing.T) {
			t.Parallel()
			var stdout, stderr bytes.Buffer
			code := run(t.Context(), tt.Args, Lookup(tt.Env), &stdout, &stderr)
			if code != tt.Code {
				t.Fatalf("exit %d, want %d; stdout %q, stderr %q", code, tt.Code, stdout.String(), stderr.String())
			}
			if tt.Stdout == "" && stdout.Len() > 0 {
				t.Errorf("stdout %q, want nothing", stdout.String())
			}
			if !strings.Contains(stdout.String(), tt.Stdout) || !strings.Contains(stderr.String(), tt.Stderr) {
				t.Errorf("stdout %q, stderr %q; want %q and %q", stdout.String(), stderr.String(), tt.Stdout, tt.Stderr)
			}
			if tt.Code == 0 {
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

// RuntimeFailure checks that run with args (and the metrics, health and connect listeners on
// loopback port 0) exits 1: the service cannot start, which is a runtime failure, not a usage
// error.
func RuntimeFailure(t *testing.T, run Run, args ...string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	env := map[string]string{"LAVA_METRICS_ADDR": "127.0.0.1:0", "LAVA_HEALTH_ADDR": "127.0.0.1:0", "LAVA_CONNECT_ADDR": "127.0.0.1:0"}
	if code := run(t.Context(), args, Lookup(env), &stdout, &stderr); code != 1 {
		t.Fatalf("exit %d, want 1; stderr %q", code, stderr.String())
	}
}

// Lookup returns a LAVA_* lookup function reading env (nil: no variable set).
func Lookup(env map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := env[k]; return v, ok }
}

// Serves runs run with args and env (the LAVA_* variables; the metrics and health listeners
// should be on loopback port 0) until ready returns nil (polled every 10ms, at most 10s: "the
// topology was never created"), waits settle (consumers starting), cancels its context, and
// checks that run exits 0 and wrote started (a start line, a warning) to stderr.
func Serves(t *testing.T, run Run, args []string, env map[string]string, ready func(context.Context) error, settle time.Duration, started string) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var stderr bytes.Buffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, args, Lookup(env), io.Discard, &stderr) }()
	deadline := time.Now().Add(10 * time.Second)
	for ready(t.Context()) != nil {
		if time.Now().After(deadline) {
			t.Fatal("the topology was never created")
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(settle)
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("exit %d:\n%s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), started) {
		t.Fatalf("stderr lacks %q:\n%s", started, stderr.String())
	}
}

// Contract is the command-line and start-up contract of a service binary whose only start-up
// sign is a durable consumer (drift, viggy): see [CheckContract].
type Contract struct {
	// Service is the binary's name in the usage; IntFlag one of its integer flags
	// ([UsageCases]).
	Service, IntFlag string
	// Stream and Consumer name the durable consumer whose existence shows the service started.
	Stream, Consumer string
	// Started is a line the service logs once it runs ("drift started").
	Started string
	// Args are extra flags of the runtime-failure and serves runs (e.g. "--no-kube").
	Args []string
}

// CheckContract runs, in parallel subtests, the usage cases ([UsageCases]: exit 0 or 2), the
// runtime failure of a NATS URL nothing listens on ([RuntimeFailure]: exit 1) and a start
// against a real JetStream server (natstest) configured from LAVA_* variables that creates
// c's consumer, logs c.Started and exits 0 when its context ends ([Serves]).
func CheckContract(t *testing.T, run Run, c Contract) {
	t.Helper()
	t.Run("usage", func(t *testing.T) {
		t.Parallel()
		Check(t, run, UsageCases(c.Service, c.IntFlag))
	})
	t.Run("runtime failure", func(t *testing.T) {
		t.Parallel()
		RuntimeFailure(t, run, append([]string{"--nats-url", "nats://127.0.0.1:1"}, c.Args...)...)
	})
	t.Run("serves", func(t *testing.T) {
		t.Parallel()
		srv := natstest.RunJetStream(t)
		// The bootstrap step (`lava nats bootstrap`) creates the topology; the service checks it.
		if err := bus.EnsureTopology(t.Context(), srv.JetStream(), bus.TopologyOptions{}); err != nil {
			t.Fatal(err)
		}
		env := map[string]string{"LAVA_NATS_URL": srv.URL(), "LAVA_METRICS_ADDR": "127.0.0.1:0", "LAVA_HEALTH_ADDR": "127.0.0.1:0",
			"LAVA_PROVIDER_DIR": t.TempDir()}
		ready := func(ctx context.Context) error { return Pulling(ctx, srv, c.Stream, c.Consumer) }
		Serves(t, run, append([]string{"--log-format", "text"}, c.Args...), env, ready, 200*time.Millisecond, c.Started)
	})
}

// Pulling returns nil once a client pulls from the durable consumer of stream on srv (the
// service under test has started), an error before.
func Pulling(ctx context.Context, srv *natstest.Server, stream, consumer string) error {
	c, err := srv.JetStream().Consumer(ctx, stream, consumer)
	if err != nil {
		return err
	}
	ci, err := c.Info(ctx)
	if err != nil {
		return err
	}
	if ci.NumWaiting == 0 {
		return errors.New("not pulling yet")
	}
	return nil
}
