package svc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/telemetry"
)

// NewLogger returns the service's logger writing to w (os.Stderr when nil) in format ("json"
// or "text") at level ("debug", "info", "warn", "error"); errors are telemetry.NewLogger's.
func NewLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	if w == nil {
		w = os.Stderr
	}
	return telemetry.NewLogger(w, format, level)
}

// Connect connects to the NATS server at url as client "lava-"+service, reconnecting forever,
// with the credentials file creds when not empty, and returns the connection and a JetStream
// context on it. The caller closes the connection. Errors: "connect to NATS URL: ..." when the
// first connection fails, "jetstream: ..." (the connection then closed).
func Connect(url, creds, service string) (*nats.Conn, jetstream.JetStream, error) {
	opts := []nats.Option{nats.Name("lava-" + service), nats.MaxReconnects(-1)}
	if creds != "" {
		opts = append(opts, nats.UserCredentials(creds))
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("connect to NATS %s: %w", url, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("jetstream: %w", err)
	}
	return nc, js, nil
}

// Base is what every NATS service builds around its consumers: the Prometheus registry it
// registers on (with the bus metrics already on it) and the health whose readiness includes a
// "nats" check.
type Base struct {
	// NC and JS are the service's NATS connection and JetStream context (Dial's; NewBase's
	// arguments).
	NC *nats.Conn
	JS jetstream.JetStream
	// Registry is served on /metrics.
	Registry *prometheus.Registry
	// BusMetrics are the bus's metrics on Registry, for the service's consumers.
	BusMetrics *bus.Metrics
	// Health is served on /healthz and /readyz; /readyz fails while nc is not connected.
	Health *telemetry.Health
}

// NewBase ensures the JetStream topology (topo: replicas and windows, internal/platform/bus) on js and
// returns the registry, bus metrics and health of a service connected by nc. Errors are
// bus.EnsureTopology's and bus.NewMetrics'.
func NewBase(ctx context.Context, nc *nats.Conn, js jetstream.JetStream, topo bus.TopologyOptions) (*Base, error) {
	if err := bus.EnsureTopology(ctx, js, topo); err != nil {
		return nil, err
	}
	reg := telemetry.NewRegistry()
	bm, err := bus.NewMetrics(reg)
	if err != nil {
		return nil, err
	}
	health := &telemetry.Health{}
	health.AddReadyCheck("nats", func(context.Context) error {
		if !nc.IsConnected() {
			return errors.New("not connected")
		}
		return nil
	})
	return &Base{NC: nc, JS: js, Registry: reg, BusMetrics: bm, Health: health}, nil
}

// Dial connects to NATS as Connect does and sets up the service's Base with NewBase (topo
// ensured). The caller closes it with Close. Errors are Connect's and NewBase's (the connection
// then closed).
func Dial(ctx context.Context, url, creds, service string, topo bus.TopologyOptions) (*Base, error) {
	nc, js, err := Connect(url, creds, service)
	if err != nil {
		return nil, err
	}
	b, err := NewBase(ctx, nc, js, topo)
	if err != nil {
		nc.Close()
		return nil, err
	}
	return b, nil
}

// Close closes the NATS connection.
func (b *Base) Close() { b.NC.Close() }

// Serve serves /metrics on metricsAddr and /healthz, /readyz on healthAddr (empty disables
// either, telemetry.Serve) and runs each of runs, all until ctx ends or one fails; it returns
// the first error, nil after a graceful shutdown.
func (b *Base) Serve(ctx context.Context, metricsAddr, healthAddr string, runs ...func(context.Context) error) error {
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return telemetry.Serve(gctx, metricsAddr, healthAddr, b.Registry, b.Health) })
	for _, run := range runs {
		g.Go(func() error { return run(gctx) })
	}
	return g.Wait()
}
