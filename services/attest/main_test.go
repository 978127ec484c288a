package main

import (
	"context"
	"errors"
	"testing"

	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/svc/svctest"
	"github.com/lava-operator/lava/internal/platform/testutil/natstest"
)

// TestRun_config: flag and environment errors are exit 2 and name the problem.
func TestRun_config(t *testing.T) {
	t.Parallel()
	svctest.Check(t, run, []svctest.Case{
		{Name: "unknown flag", Args: []string{"--bogus"}, Code: 2, Stderr: "unknown flag: --bogus"},
		{Name: "argument", Args: []string{"extra"}, Code: 2, Stderr: "unexpected arguments"},
		{Name: "bad env", Env: map[string]string{"LAVA_CONCURRENCY": "many"}, Code: 2, Stderr: "LAVA_CONCURRENCY"},
		{Name: "bad log level", Args: []string{"--log-level", "loud"}, Code: 2, Stderr: "log level"},
	})
}

// TestRun_serves: configured from the environment, the service checks the topology, runs,
// and exits 0 when its context ends.
func TestRun_serves(t *testing.T) {
	t.Parallel()
	srv := natstest.RunJetStream(t)
	bootstrap(t, srv)
	env := map[string]string{
		"LAVA_NATS_URL": srv.URL(), "LAVA_CONNECT_ADDR": "127.0.0.1:0",
		"LAVA_METRICS_ADDR": "127.0.0.1:0", "LAVA_HEALTH_ADDR": "127.0.0.1:0",
		"LAVA_ALLOW_UNSIGNED": "true", "LAVA_NO_KUBE": "true",
	}
	ready := func(ctx context.Context) error {
		// The topology exists (bootstrap); the service is up once it pulls from its consumer.
		c, err := srv.JetStream().Consumer(ctx, bus.StreamPhases, bus.ServiceAttest)
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
	svctest.Serves(t, run, []string{"--log-format", "text"}, env, ready, 0, "receipts are unsigned")
}

// TestRun_usage: --help prints the usage to stdout and exits 0; an unknown flag, a bad value
// or an argument prints the error and the usage to stderr and exits 2, as every service does.
func TestRun_usage(t *testing.T) {
	t.Parallel()
	svctest.Check(t, run, svctest.UsageCases("attest", "concurrency"))
}

// TestRun_runtimeFailure: a service that cannot start (nothing listens where it must connect)
// exits 1, not 2.
func TestRun_runtimeFailure(t *testing.T) {
	t.Parallel()
	svctest.RuntimeFailure(t, run, "--nats-url", "nats://127.0.0.1:1")
}

// bootstrap creates the topology as the bootstrap step does (`lava nats bootstrap`): the
// service only checks it.
func bootstrap(t *testing.T, srv *natstest.Server) {
	t.Helper()
	if err := bus.EnsureTopology(t.Context(), srv.JetStream(), bus.TopologyOptions{}); err != nil {
		t.Fatal(err)
	}
}
