package attest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/telemetry"
)

// Config is the attest service's configuration (services/attest turns flags and LAVA_*
// variables into it; `lava up` builds it directly).
type Config struct {
	// NATSURL is the NATS server URL. Required.
	NATSURL string
	// NATSCreds is an optional NATS credentials file.
	NATSCreds string
	// SigningKeyFile is the Ed25519 seed file (64 hex digits; in a cluster a Kubernetes Secret
	// mounted as a file). Empty appends unsigned receipts (algo "none") and logs a warning.
	SigningKeyFile string
	// Topology configures bus.EnsureTopology, run at start (idempotent).
	Topology bus.TopologyOptions
	// Concurrency bounds the events handled at once per consumer. Default 8.
	Concurrency int
	// ConnectAddr serves ReceiptService (connect, gRPC and gRPC-Web; HTTP/1.1 and cleartext
	// HTTP/2). Empty disables it.
	ConnectAddr string
	// Listener, if set, is used instead of listening on ConnectAddr (tests, `lava up`).
	Listener net.Listener
	// MetricsAddr serves /metrics; HealthAddr serves /healthz and /readyz. Empty disables.
	MetricsAddr, HealthAddr string
	// Logger is the service's logger; default: discard.
	Logger *slog.Logger
	// Registry receives the attest and bus metrics; default telemetry.NewRegistry().
	Registry *prometheus.Registry
}

// Run runs the attest service until ctx is cancelled: it connects to NATS, ensures the
// topology, loads the signing key, consumes PhaseChanged, TickReported and AnomalyDetected ([Service]),
// serves ReceiptService ([Handler]), metrics and health, and on cancellation drains in-flight
// events and shuts the servers down. It returns nil after a clean shutdown.
func Run(ctx context.Context, cfg Config) error {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	reg := cfg.Registry
	if reg == nil {
		reg = telemetry.NewRegistry()
	}
	if cfg.NATSURL == "" {
		return errors.New("attest: no NATS URL")
	}
	var signer *Signer
	if cfg.SigningKeyFile != "" {
		var err error
		if signer, err = LoadSigner(cfg.SigningKeyFile); err != nil {
			return err
		}
		log.Info("attest: signing receipts", "key_id", signer.KeyID())
	} else {
		log.Warn("attest: no signing key file: receipts are unsigned (algo none)")
	}
	metrics, err := NewMetrics(reg)
	if err != nil {
		return err
	}
	busMetrics, err := bus.NewMetrics(reg)
	if err != nil {
		return fmt.Errorf("attest: %w", err)
	}

	opts := []nats.Option{nats.Name("lava-attest"), nats.MaxReconnects(-1)}
	if cfg.NATSCreds != "" {
		opts = append(opts, nats.UserCredentials(cfg.NATSCreds))
	}
	nc, err := nats.Connect(cfg.NATSURL, opts...)
	if err != nil {
		return fmt.Errorf("attest: connect to %s: %w", cfg.NATSURL, err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("attest: jetstream: %w", err)
	}
	if err := bus.EnsureTopology(ctx, js, cfg.Topology); err != nil {
		if ctx.Err() != nil {
			return nil // shut down while starting
		}
		return fmt.Errorf("attest: %w", err)
	}

	store := NewStore(js, StoreOptions{Signer: signer, Metrics: metrics})
	svc := NewService(js, store, ServiceOptions{Concurrency: cfg.Concurrency, Logger: log, BusMetrics: busMetrics})
	health := &telemetry.Health{}
	health.AddReadyCheck("nats", func(context.Context) error {
		if s := nc.Status(); s != nats.CONNECTED {
			return fmt.Errorf("connection %s", s)
		}
		return nil
	})

	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return svc.Run(gctx) })
	g.Go(func() error { return telemetry.Serve(gctx, cfg.MetricsAddr, cfg.HealthAddr, reg, health) })
	ln := cfg.Listener
	if ln == nil && cfg.ConnectAddr != "" {
		if ln, err = telemetry.Listen(cfg.ConnectAddr); err != nil {
			return err
		}
	}
	if ln != nil {
		mux := http.NewServeMux()
		mux.Handle(NewHandler(js, metrics).Mount())
		log.Info("attest: serving ReceiptService", "addr", ln.Addr().String())
		g.Go(func() error { return serveRPC(gctx, ln, mux) })
	}
	return g.Wait()
}

// serveRPC serves h on ln over HTTP/1.1 and cleartext HTTP/2 (for gRPC clients) until ctx
// is done, then shuts down within 10 seconds.
func serveRPC(ctx context.Context, ln net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	srv.Protocols = new(http.Protocols)
	srv.Protocols.SetHTTP1(true)
	srv.Protocols.SetUnencryptedHTTP2(true)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("attest: serve %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("attest: shutdown %s: %w", ln.Addr(), err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("attest: serve %s: %w", ln.Addr(), err)
	}
	return nil
}
