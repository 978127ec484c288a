package svc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/telemetry"
)

// Setup is what a service asks of [Start] besides its [Common] options.
type Setup struct {
	// Topology is checked on JetStream at start (bus.CheckTopology: the service's consumers,
	// streams and buckets must exist; the bootstrap step, `lava nats bootstrap`, creates them);
	// a zero Replicas is Common.Replicas.
	Topology bus.TopologyOptions
	// Gatherer, when set, is served on /metrics along with the service's Registry, which then
	// has no Go and process collectors: Gatherer provides them, as controller-runtime's
	// sigs.k8s.io/controller-runtime/pkg/metrics.Registry does (the watcher).
	Gatherer prometheus.Gatherer
}

// Base is what every service runs on: its logger, its NATS connection and JetStream context,
// the Prometheus registry it registers on (with the bus metrics already on it) and the health
// whose readiness includes a "nats" check. [Start] builds it; [Base.Serve] runs the service
// on it; [Base.Close] closes the connection.
type Base struct {
	// Log is the service's logger (Common's format and level, attribute service=NAME).
	Log *slog.Logger
	// NC and JS are the service's NATS connection and JetStream context (bus.Connect).
	NC *nats.Conn
	JS jetstream.JetStream
	// Registry is served on /metrics.
	Registry *prometheus.Registry
	// BusMetrics are the bus's metrics on Registry, for the service's consumers.
	BusMetrics *bus.Metrics
	// Health is served on /healthz and /readyz; /readyz fails while NC is not connected.
	Health *telemetry.Health

	metricsAddr, healthAddr string
	gatherer                prometheus.Gatherer
}

// Start builds the [Base] of service (a bus.Service* name) from c: the logger (writing to
// c.Stderr, os.Stderr when nil), the connection (bus.Connect with c.NATS, named
// "lava-"+service unless c.NATS.Name is set, as the bus identity service unless
// c.NATS.Identity is set), the topology check (s.Topology), the registry with the
// bus metrics and the health. The caller closes it with [Base.Close]. Errors:
// telemetry.NewLogger's, bus.Connect's, bus.CheckTopology's (the connection then closed; it names what is missing), and
// bus.NewMetrics'.
func Start(ctx context.Context, service string, c Common, s Setup) (*Base, error) {
	w := c.Stderr
	if w == nil {
		w = os.Stderr
	}
	log, err := telemetry.NewLogger(w, c.LogFormat, c.LogLevel)
	if err != nil {
		return nil, err
	}
	conn := c.NATS
	if conn.Name == "" {
		conn.Name = "lava-" + service
	}
	if conn.Identity == "" {
		conn.Identity = service
	}
	nc, js, err := bus.Connect(conn)
	if err != nil {
		return nil, err
	}
	topo := s.Topology
	if topo.Replicas == 0 {
		topo.Replicas = c.Replicas
	}
	if err := bus.CheckTopology(ctx, js, service, topo); err != nil {
		nc.Close()
		return nil, err
	}
	reg := telemetry.NewRegistry()
	if s.Gatherer != nil {
		reg = prometheus.NewRegistry()
	}
	bm, err := bus.NewMetrics(reg)
	if err != nil {
		nc.Close()
		return nil, err
	}
	health := &telemetry.Health{}
	health.AddReadyCheck("nats", func(context.Context) error {
		if s := nc.Status(); s != nats.CONNECTED {
			return fmt.Errorf("connection %s", s)
		}
		return nil
	})
	return &Base{Log: log.With("service", service), NC: nc, JS: js, Registry: reg, BusMetrics: bm, Health: health,
		metricsAddr: c.MetricsAddr, healthAddr: c.HealthAddr, gatherer: s.Gatherer}, nil
}

// Close closes the NATS connection.
func (b *Base) Close() { b.NC.Close() }

// Serve serves /metrics and /healthz, /readyz on Common's addresses (empty disables either,
// telemetry.Serve) and runs each of runs (the service's consumers, schedulers and RPC
// servers), all until ctx ends or one fails. It returns the first error; nil after a graceful
// shutdown (each run drained its work and returned nil or, ctx being done, context.Canceled).
func (b *Base) Serve(ctx context.Context, runs ...func(context.Context) error) error {
	g, gctx := errgroup.WithContext(ctx)
	var also []prometheus.Gatherer
	if b.gatherer != nil {
		also = append(also, b.gatherer)
	}
	g.Go(func() error { return telemetry.Serve(gctx, b.metricsAddr, b.healthAddr, b.Registry, b.Health, also...) })
	for _, run := range runs {
		g.Go(func() error { return run(gctx) })
	}
	err := g.Wait()
	if err != nil && ctx.Err() != nil && errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}
