package attest

import (
	"context"
	"errors"
	"net"
	"net/http"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"

	"github.com/lava-operator/lava/internal/gen/lava/v1/lavav1connect"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/kube"
	"github.com/lava-operator/lava/internal/platform/rpcauth"
	"github.com/lava-operator/lava/internal/platform/svc"
	"github.com/lava-operator/lava/internal/platform/telemetry"
	"github.com/lava-operator/lava/internal/readmodel"
)

// Options is the attest service's process configuration, one type: the common service options
// and attest's own (flags and LAVA_* variables, svc.Command; `lava up` and tests set them
// directly).
type Options struct {
	svc.Common
	// Service holds the consuming service's settings, bound by its flags (--concurrency: the
	// events handled at once per consumer, default 8); [Run] sets its Logger and BusMetrics.
	Service ServiceOptions
	// SigningKeyFile is the Ed25519 seed file (64 hex digits; in a cluster a Kubernetes Secret
	// mounted as a file). Required unless AllowUnsigned.
	SigningKeyFile string
	// AllowUnsigned (--allow-unsigned) lets attest start without a signing key: it then appends
	// unsigned receipts (algo "none"), which `lava receipts verify` refuses by default, and
	// warns at start. For development only.
	AllowUnsigned bool
	// ConnectAddr serves ReceiptService (connect, gRPC and gRPC-Web; HTTP/1.1 and cleartext
	// HTTP/2). Empty disables it.
	ConnectAddr string
	// Listener, if set, is used instead of listening on ConnectAddr (tests).
	Listener net.Listener
	// RPCTokenFile, if set, is the one bearer token ReceiptService accepts (`lava up`);
	// otherwise callers authenticate with a Kubernetes token and see the receipts of the
	// namespaces where they may get lavaarchitectures (internal/platform/rpcauth).
	RPCTokenFile string
	// RPC bounds ReceiptService: request size, requests in flight in total and per client,
	// connections and timeouts (the --rpc-* flags, rpcauth.Limits; zero fields: the defaults).
	RPC rpcauth.Limits
	// NoKube (--no-kube) runs without Kubernetes access; without RPCTokenFile, ReceiptService
	// is then not served.
	NoKube bool
	// KubeAPI is the Kubernetes API client's rate limit (--kube-api-qps, --kube-api-burst),
	// set on Kube by Complete.
	KubeAPI svc.KubeAPI
	// Kube reaches the Kubernetes API for TokenReview and SubjectAccessReview (Complete loads
	// it unless NoKube or RPCTokenFile).
	Kube *rest.Config
}

// Complete loads the Kubernetes configuration when ReceiptService authenticates callers with
// it (kube.Optional).
func (o *Options) Complete() error {
	if o.NoKube || o.RPCTokenFile != "" || o.ConnectAddr == "" {
		return nil
	}
	var err error
	o.Kube, err = kube.Optional(false)
	o.KubeAPI.Apply(o.Kube)
	return err
}

// Flags defines attest's own flags on fs.
func (o *Options) Flags(fs *pflag.FlagSet) {
	fs.StringVar(&o.SigningKeyFile, "signing-key-file", "", "Ed25519 seed file, 64 hex digits; required unless --allow-unsigned")
	fs.BoolVar(&o.AllowUnsigned, "allow-unsigned", false, "start without a signing key and append unsigned receipts (development only)")
	fs.StringVar(&o.RPCTokenFile, "rpc-token-file", "", "the one bearer token ReceiptService accepts instead of Kubernetes tokens (optional)")
	fs.BoolVar(&o.NoKube, "no-kube", false, "run without Kubernetes access (ReceiptService is then served only with --rpc-token-file)")
	svc.RegisterConcurrency(fs, &o.Service.Concurrency, 8)
	fs.StringVar(&o.ConnectAddr, "connect-addr", ":8080", "ReceiptService (connect, gRPC, gRPC-Web) listen address; empty disables it")
	o.RPC.Register(fs)
	o.KubeAPI.Register(fs)
}

// Run runs the attest service until ctx is cancelled: it loads the signing key, starts
// (svc.Start: NATS, topology, metrics and health), consumes PhaseChanged, TickReported and
// AnomalyDetected ([Service]) and serves ReceiptService ([Handler]); on cancellation it drains
// in-flight events and shuts the servers down. It returns nil after a clean shutdown.
func Run(ctx context.Context, o Options) error {
	var signer *readmodel.Signer
	if o.SigningKeyFile == "" && !o.AllowUnsigned {
		return errors.New("attest: no signing key (--signing-key-file, LAVA_SIGNING_KEY_FILE): receipts must be signed; --allow-unsigned starts without one for development")
	}
	if o.SigningKeyFile != "" {
		var err error
		if signer, err = readmodel.LoadSigner(o.SigningKeyFile); err != nil {
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
		log.Warn("attest: --allow-unsigned and no signing key file: receipts are unsigned (algo none); lava receipts verify refuses them by default")
	}
	metrics, err := NewMetrics(base.Registry)
	if err != nil {
		return err
	}
	onForeign := ForeignReporter(bus.NewPublisher(base.JS), log)
	store := NewStore(base.JS, StoreOptions{Signer: signer, Metrics: metrics, OnForeign: onForeign})
	so := o.Service
	so.Logger, so.BusMetrics = log, base.BusMetrics
	s := NewService(base.JS, store, so)
	runs := []func(context.Context) error{s.Run}
	ln := o.Listener
	if ln == nil && o.ConnectAddr != "" {
		if ln, err = telemetry.Listen(o.ConnectAddr); err != nil {
			return err
		}
	}
	if ln != nil {
		guard, err := rpcauth.New(o.Kube, o.RPCTokenFile, map[string]string{
			lavav1connect.ReceiptServiceGetChainProcedure: "get", lavav1connect.ReceiptServiceVerifyChainProcedure: "get"}, o.RPC)
		switch {
		case errors.Is(err, rpcauth.ErrNoAuthenticator):
			log.Warn("attest: ReceiptService is not served: no Kubernetes access and no --rpc-token-file to authenticate callers")
		case err != nil:
			return err
		default:
			mux := http.NewServeMux()
			mux.Handle(NewHandler(base.JS, metrics, onForeign).Mount(guard.HandlerOptions()...))
			log.Info("attest: serving ReceiptService", "addr", ln.Addr().String())
			runs = append(runs, func(ctx context.Context) error { return guard.Serve(ctx, ln, mux) })
		}
	}
	return base.Serve(ctx, runs...)
}
