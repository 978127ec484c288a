package viggy

import (
	"context"
	"io"

	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/svc"
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
	log, err := svc.NewLogger(o.Stderr, o.LogFormat, o.LogLevel)
	if err != nil {
		return err
	}
	base, err := svc.Dial(ctx, o.NATSURL, o.NATSCreds, bus.ServiceViggy, bus.TopologyOptions{Replicas: o.Replicas})
	if err != nil {
		return err
	}
	defer base.Close()
	js := base.JS
	s, err := New(ctx, Config{JS: js, MaxAttempts: o.MaxAttempts, Backoff: o.Backoff, Concurrency: o.Concurrency,
		Cluster: o.Cluster, Logger: log, Registerer: base.Registry, BusMetrics: base.BusMetrics})
	if err != nil {
		return err
	}
	log.Info("viggy started")
	return base.Serve(ctx, o.MetricsAddr, o.HealthAddr, s.Run)
}
