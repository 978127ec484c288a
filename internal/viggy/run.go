package viggy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"

	"github.com/lava-operator/lava/internal/bus"
	"github.com/lava-operator/lava/internal/telemetry"
)

// Options is the viggy process configuration (flags and LAVA_* variables, parsed by
// services/viggy).
type Options struct {
	// NATSURL and NATSCreds reach JetStream.
	NATSURL, NATSCreds string
	// MaxAttempts, Backoff, Concurrency and Cluster as in [Config].
	MaxAttempts int
	Backoff     Backoff
	Concurrency int
	Cluster     string
	// MetricsAddr and HealthAddr serve /metrics and /healthz, /readyz.
	MetricsAddr, HealthAddr string
	// LogFormat and LogLevel configure the logs.
	LogFormat, LogLevel string
	// Replicas is the JetStream replica count of the topology and of [Bucket].
	Replicas int
	// Stderr receives the logs.
	Stderr io.Writer
}

// RunService runs viggy until ctx is cancelled: NATS, topology, metrics and health, the
// consumers and the scheduler. It returns nil after a graceful shutdown.
func RunService(ctx context.Context, o Options) error {
	if o.Stderr == nil {
		o.Stderr = os.Stderr
	}
	log, err := telemetry.NewLogger(o.Stderr, o.LogFormat, o.LogLevel)
	if err != nil {
		return err
	}
	opts := []nats.Option{nats.Name("lava-viggy"), nats.MaxReconnects(-1)}
	if o.NATSCreds != "" {
		opts = append(opts, nats.UserCredentials(o.NATSCreds))
	}
	nc, err := nats.Connect(o.NATSURL, opts...)
	if err != nil {
		return fmt.Errorf("connect to NATS %s: %w", o.NATSURL, err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}
	if err := bus.EnsureTopology(ctx, js, bus.TopologyOptions{Replicas: o.Replicas}); err != nil {
		return err
	}
	reg := telemetry.NewRegistry()
	bm, err := bus.NewMetrics(reg)
	if err != nil {
		return err
	}
	svc, err := New(ctx, Config{JS: js, MaxAttempts: o.MaxAttempts, Backoff: o.Backoff, Concurrency: o.Concurrency,
		Cluster: o.Cluster, Logger: log, Registerer: reg, BusMetrics: bm})
	if err != nil {
		return err
	}
	health := &telemetry.Health{}
	health.AddReadyCheck("nats", func(context.Context) error {
		if !nc.IsConnected() {
			return errors.New("not connected")
		}
		return nil
	})
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return telemetry.Serve(gctx, o.MetricsAddr, o.HealthAddr, reg, health) })
	g.Go(func() error { return svc.Run(gctx) })
	log.Info("viggy started")
	return g.Wait()
}
