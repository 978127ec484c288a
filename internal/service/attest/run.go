package attest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/spf13/pflag"

	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/svc"
	"github.com/lava-operator/lava/internal/platform/telemetry"
)

// Options is the attest service's process configuration: the common service options and
// attest's own (flags and LAVA_* variables, svc.Command; `lava up` and tests set them
// directly).
type Options struct {
	svc.Common
	// SigningKeyFile is the Ed25519 seed file (64 hex digits; in a cluster a Kubernetes Secret
	// mounted as a file). Empty appends unsigned receipts (algo "none") and logs a warning.
	SigningKeyFile string
	// Concurrency bounds the events handled at once per consumer. Default 8.
	Concurrency int
	// ConnectAddr serves ReceiptService (connect, gRPC and gRPC-Web; HTTP/1.1 and cleartext
	// HTTP/2). Empty disables it.
	ConnectAddr string
	// Listener, if set, is used instead of listening on ConnectAddr (tests).
	Listener net.Listener
}

// Flags defines attest's own flags on fs.
func (o *Options) Flags(fs *pflag.FlagSet) {
	fs.StringVar(&o.SigningKeyFile, "signing-key-file", "", "Ed25519 seed file, 64 hex digits (empty: unsigned receipts)")
	fs.IntVar(&o.Concurrency, "concurrency", 8, "events handled at once per consumer")
	fs.StringVar(&o.ConnectAddr, "connect-addr", ":8080", "ReceiptService (connect, gRPC, gRPC-Web) listen address; empty disables it")
}

// Run runs the attest service until ctx is cancelled: it loads the signing key, starts
// (svc.Start: NATS, topology, metrics and health), consumes PhaseChanged, TickReported and
// AnomalyDetected ([Service]) and serves ReceiptService ([Handler]); on cancellation it drains
// in-flight events and shuts the servers down. It returns nil after a clean shutdown.
func Run(ctx context.Context, o Options) error {
	var signer *Signer
	if o.SigningKeyFile != "" {
		var err error
		if signer, err = LoadSigner(o.SigningKeyFile); err != nil {
			return err
		}
	}
	base, err := svc.Start(ctx, bus.ServiceAttest, o.Common, svc.Setup{})
	if err != nil {
		return err
	}
	defer base.Close()
	log := base.Log
	if signer != nil {
		log.Info("attest: signing receipts", "key_id", signer.KeyID())
	} else {
		log.Warn("attest: no signing key file: receipts are unsigned (algo none)")
	}
	metrics, err := NewMetrics(base.Registry)
	if err != nil {
		return err
	}
	store := NewStore(base.JS, StoreOptions{Signer: signer, Metrics: metrics})
	s := NewService(base.JS, store, ServiceOptions{Concurrency: o.Concurrency, Logger: log, BusMetrics: base.BusMetrics})
	runs := []func(context.Context) error{s.Run}
	ln := o.Listener
	if ln == nil && o.ConnectAddr != "" {
		if ln, err = telemetry.Listen(o.ConnectAddr); err != nil {
			return err
		}
	}
	if ln != nil {
		mux := http.NewServeMux()
		mux.Handle(NewHandler(base.JS, metrics).Mount())
		log.Info("attest: serving ReceiptService", "addr", ln.Addr().String())
		runs = append(runs, func(ctx context.Context) error { return serveRPC(ctx, ln, mux) })
	}
	return base.Serve(ctx, runs...)
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
