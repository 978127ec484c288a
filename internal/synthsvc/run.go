package synthsvc

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lava-operator/lava/internal/bus"
	"github.com/lava-operator/lava/internal/synth"
	"github.com/lava-operator/lava/internal/telemetry"
)

// Options is the synth service's process configuration (flags and LAVA_* variables, parsed
// by services/synth).
type Options struct {
	// NATSURL and NATSCreds reach JetStream (LAVA_NATS_URL, LAVA_NATS_CREDS: an optional
	// credentials file).
	NATSURL, NATSCreds string
	// BindingsKeyFile holds the installation's bindings key: 32 raw bytes or 64 hex digits.
	BindingsKeyFile string
	// ConnectAddr serves RenderService (":8080"); MetricsAddr /metrics (":9090"); HealthAddr
	// /healthz and /readyz (":9091"). Empty disables one.
	ConnectAddr, MetricsAddr, HealthAddr string
	// LogFormat ("json" or "text") and LogLevel ("debug", "info", "warn", "error").
	LogFormat, LogLevel string
	// Replicas is the JetStream replica count of the topology this process ensures (1 or 3).
	Replicas int
	// Concurrency bounds handlers per consumer.
	Concurrency int
	// Kube reaches the Kubernetes API for bindingsFrom (nil: no Kubernetes access).
	Kube *rest.Config
	// Stderr receives the logs.
	Stderr io.Writer
}

// ReadBindingsKey reads a bindings key file: 32 raw bytes, or 64 hex digits (surrounding
// blank space ignored).
func ReadBindingsKey(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("bindings key: %w", err)
	}
	if len(b) == synth.BindingsKeySize {
		return b, nil
	}
	if k, err := hex.DecodeString(strings.TrimSpace(string(b))); err == nil && len(k) == synth.BindingsKeySize {
		return k, nil
	}
	return nil, fmt.Errorf("bindings key %s: want %d raw bytes or %d hex digits", path, synth.BindingsKeySize, 2*synth.BindingsKeySize)
}

// Connect opens the NATS connection of a service (named name) and a JetStream context.
func Connect(url, creds, name string) (*nats.Conn, jetstream.JetStream, error) {
	opts := []nats.Option{nats.Name("lava-" + name), nats.MaxReconnects(-1)}
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

// RunService runs the synth service until ctx is cancelled: it connects to NATS, ensures the
// topology, serves RenderService, metrics and health, and consumes. It returns nil after a
// graceful shutdown.
func RunService(ctx context.Context, o Options) error {
	if o.Stderr == nil {
		o.Stderr = os.Stderr
	}
	log, err := telemetry.NewLogger(o.Stderr, o.LogFormat, o.LogLevel)
	if err != nil {
		return err
	}
	key, err := ReadBindingsKey(o.BindingsKeyFile)
	if err != nil {
		return err
	}
	nc, js, err := Connect(o.NATSURL, o.NATSCreds, bus.ServiceSynth)
	if err != nil {
		return err
	}
	defer nc.Close()
	if err := bus.EnsureTopology(ctx, js, bus.TopologyOptions{Replicas: o.Replicas}); err != nil {
		return err
	}
	reg := telemetry.NewRegistry()
	bm, err := bus.NewMetrics(reg)
	if err != nil {
		return err
	}
	var kube client.Reader
	if o.Kube != nil {
		if kube, err = client.New(o.Kube, client.Options{}); err != nil {
			return fmt.Errorf("kubernetes client: %w", err)
		}
	}
	svc, err := New(ctx, Config{JS: js, Kube: kube, BindingsKey: key, Logger: log, Registerer: reg, BusMetrics: bm,
		Concurrency: o.Concurrency})
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
	if o.ConnectAddr != "" {
		ln, err := telemetry.Listen(o.ConnectAddr)
		if err != nil {
			return err
		}
		mux := http.NewServeMux()
		mux.Handle(NewRenderHandler())
		g.Go(func() error { return telemetry.ServeListener(gctx, ln, mux) })
	}
	g.Go(func() error { return svc.Run(gctx) })
	log.Info("synth started", "nats", o.NATSURL, "connect", o.ConnectAddr, "kubernetes", o.Kube != nil)
	err = g.Wait()
	if ctx.Err() != nil && err == nil {
		log.Info("synth stopped")
	}
	return err
}
