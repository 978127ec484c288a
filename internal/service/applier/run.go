package applier

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/pflag"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lava-operator/lava/internal/engine/engines"
	"github.com/lava-operator/lava/internal/engine/state"
	"github.com/lava-operator/lava/internal/gen/lava/v1/lavav1connect"
	"github.com/lava-operator/lava/internal/lang/bindingskey"
	"github.com/lava-operator/lava/internal/pipeline/synthesis"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/identity"
	"github.com/lava-operator/lava/internal/platform/rpcauth"
	"github.com/lava-operator/lava/internal/platform/svc"
	"github.com/lava-operator/lava/internal/platform/telemetry"
)

// OpenEngines builds the applier's engines on the state store (internal/engine/engines): a
// state lock older than lockTTL whose holder no longer holds the resource's lease in
// lava-leases ([HolderAlive]) can be taken over. Close the set when done.
func OpenEngines(ctx context.Context, js jetstream.JetStream, o engines.Options, lockTTL time.Duration, log *slog.Logger) (*engines.Set, error) {
	leases, err := js.KeyValue(ctx, bus.BucketLeases)
	if err != nil {
		return nil, fmt.Errorf("applier: bind %s: %w", bus.BucketLeases, err)
	}
	o.State = state.Options{LockTTL: lockTTL, HolderAlive: HolderAlive(leases), Logger: log}
	o.Process = bus.ServiceApplier
	return engines.Open(ctx, js, o, log)
}

// Options is the applier's process configuration, one type: the common service options, the
// configuration it shares with drift (engines.Host: --holder, the engines, --no-kube, the
// Kubernetes API rate limit, who it acts as, the providers' credentials) and its own settings
// (flags and LAVA_* variables, svc.Command; `lava up` sets them directly).
type Options struct {
	svc.Common
	engines.Host
	// Config holds the applier's own settings, bound by its flags (--concurrency,
	// --artifact-collect-interval, --artifact-min-age); [Run] sets its dependencies (JS,
	// Store, Engines, Holder, Kube, Identities, Credentials, Logger, Registerer, BusMetrics).
	Config Config
	// LockTTL: a state lock older than this whose holder lost its lease can be taken over.
	LockTTL time.Duration
	// ConnectAddr serves PlanService (--connect-addr, e.g. ":8080"); empty disables it. It
	// also needs BindingsKeyFile: a preview renders as synth does. Callers authenticate with a
	// Kubernetes bearer token and need update on lavaarchitectures in the request's namespace
	// (internal/platform/rpcauth: a preview shows an object's state, which only who may change
	// the object may see), or present RPCTokenFile's token.
	ConnectAddr string
	// Listener, if set, serves PlanService instead of listening on ConnectAddr (`lava up`,
	// tests).
	Listener net.Listener
	// RPCTokenFile, if set, is the one token PlanService accepts instead of Kubernetes tokens
	// (`lava up`).
	RPCTokenFile string
	// RPC bounds PlanService (the --rpc-* flags, rpcauth.Limits; zero fields: the defaults).
	RPC rpcauth.Limits
	// BindingsKeyFile holds the installation's bindings key (synth's --bindings-key-file),
	// with which a preview names the artifact of a render that binds Secrets as synth does.
	BindingsKeyFile string
	// Previews bounds the speculative plans run at once (--max-previews, default
	// DefaultMaxPreviews, more are refused with Unavailable; --max-previews-per-namespace and
	// --max-previews-per-user, default DefaultMaxPreviewsPerNamespace and
	// DefaultMaxPreviewsPerUser, more are refused with ResourceExhausted).
	Previews PreviewLimits
	// ArtifactQuota bounds what one namespace's plans store in lava-artifacts
	// (--artifact-quota-bytes, --artifact-quota-window; bus.ArtifactQuota: plan artifacts and
	// review bodies are charged, state bodies counted).
	ArtifactQuota bus.QuotaFlags
}

// Flags defines the applier's flags on fs: engines.Host's and its own.
func (o *Options) Flags(fs *pflag.FlagSet) {
	o.Host.Register(fs)
	o.Engines.Timeouts.RegisterFlags(fs)
	fs.DurationVar(&o.Engines.LockTimeout, "lock-timeout", 0, "how long tofu/terraform retry a held state lock")
	fs.DurationVar(&o.LockTTL, "lock-ttl", state.DefaultLockTTL, "age after which a state lock whose holder is not tied to a lease can be taken over (a lease-tied holder's lock is taken over as soon as its lease is gone)")
	fs.StringVar(&o.Engines.BackendAddr, "backend-addr", "127.0.0.1:0", "loopback address of the Terraform http state backend")
	svc.RegisterConcurrency(fs, &o.Config.Concurrency, DefaultConcurrency)
	svc.RegisterMaxPerNamespace(fs, &o.Config.MaxPerNamespace)
	fs.DurationVar(&o.Config.CollectInterval, "artifact-collect-interval", bus.DefaultCollectInterval, "how often superseded artifacts are deleted from lava-artifacts")
	fs.DurationVar(&o.Config.CollectMinAge, "artifact-min-age", bus.DefaultCollectMinAge, "artifacts put within this long are kept, referenced or not (events in flight name digests no record holds yet)")
	fs.StringVar(&o.ConnectAddr, "connect-addr", "", "PlanService (connect) listen address, e.g. :8080; empty disables it (it needs --bindings-key-file too)")
	fs.StringVar(&o.RPCTokenFile, "rpc-token-file", "", "the one bearer token PlanService accepts instead of Kubernetes tokens (optional)")
	fs.StringVar(&o.BindingsKeyFile, "bindings-key-file", "", "file with the installation's bindings key (synth's); needed by PlanService")
	o.ArtifactQuota.Register(fs)
	fs.IntVar(&o.Config.MaxOrphanedStates, "max-orphaned-states-per-namespace", DefaultMaxOrphanedStates,
		"orphaned states (deletionPolicy Orphan, kept until adopted) one namespace may keep; past it an Orphan deletion waits (OrphanLimitReached)")
	fs.IntVar(&o.Previews.Total, "max-previews", DefaultMaxPreviews, "speculative plans (PlanService) run at once; more are refused (Unavailable)")
	fs.IntVar(&o.Previews.PerNamespace, "max-previews-per-namespace", DefaultMaxPreviewsPerNamespace, "speculative plans of one namespace run at once; more are refused (ResourceExhausted)")
	fs.IntVar(&o.Previews.PerUser, "max-previews-per-user", DefaultMaxPreviewsPerUser, "speculative plans of one caller run at once; more are refused (ResourceExhausted)")
	o.RPC.Register(fs)
}

// Complete loads the Kubernetes configuration unless --no-kube (engines.Host.Complete).
func (o *Options) Complete() error { return o.Host.Complete() }

// Run runs the applier until ctx is cancelled (svc.Start: NATS, topology, metrics and health;
// then the state store and loopback backend, the engines and the consumers). It returns nil
// after a graceful shutdown.
func Run(ctx context.Context, o Options) error {
	base, err := svc.Start(ctx, bus.ServiceApplier, o.Common, svc.Setup{})
	if err != nil {
		return err
	}
	defer base.Close()
	js, log := base.JS, base.Log
	o.Engines.ArtifactQuota = o.ArtifactQuota.Quota()
	set, err := OpenEngines(ctx, js, o.Engines, o.LockTTL, log)
	if err != nil {
		return err
	}
	deps, err := o.Host.Deps(set)
	if err != nil {
		return err
	}
	defer deps.Close()
	cfg := o.Config
	cfg.JS, cfg.Store, cfg.Engines, cfg.Holder = js, deps.Set.Store, deps.Set.Engines, deps.Holder
	cfg.Kube, cfg.Identities, cfg.Credentials = deps.Kube, deps.Identities, deps.Credentials
	cfg.Logger, cfg.Registerer, cfg.BusMetrics = log, base.Registry, base.BusMetrics
	cfg.Policy = o.Engines.Policy
	s, err := New(ctx, cfg)
	if err != nil {
		return err
	}
	backendURL := ""
	if deps.Set.Backend != nil {
		backendURL = deps.Set.Backend.URL
	}
	runs := []func(context.Context) error{s.Run}
	if serve, err := o.planService(s, deps.Kube, deps.Identities); err != nil {
		return err
	} else if serve != nil {
		runs = append(runs, serve)
	}
	log.Info("applier started", "holder", deps.Holder, "engines", len(deps.Set.Engines), "state_backend", backendURL, "connect", o.ConnectAddr)
	return base.Serve(ctx, runs...)
}

// planService returns what serves PlanService on o's listener (nil when it is not served: no
// --connect-addr, or no way to authenticate callers, logged), rendering with kube and ids as
// synth does.
func (o *Options) planService(s *Service, kube client.Reader, ids *identity.Clients) (func(context.Context) error, error) {
	if o.ConnectAddr == "" && o.Listener == nil {
		return nil, nil
	}
	if o.BindingsKeyFile == "" {
		return nil, svc.BadUsage(errors.New("--connect-addr serves PlanService, which needs --bindings-key-file (LAVA_BINDINGS_KEY_FILE)"))
	}
	key, err := bindingskey.Read(o.BindingsKeyFile)
	if err != nil {
		return nil, err
	}
	guard, err := rpcauth.New(o.Kube, o.RPCTokenFile, map[string]string{lavav1connect.PlanServicePreviewProcedure: PreviewVerb}, o.RPC)
	switch {
	case errors.Is(err, rpcauth.ErrNoAuthenticator):
		s.cfg.Logger.Warn("applier: PlanService is not served: no Kubernetes access and no --rpc-token-file to authenticate callers")
		return nil, nil
	case err != nil:
		return nil, err
	}
	ln := o.Listener
	if ln == nil {
		if ln, err = telemetry.Listen(o.ConnectAddr); err != nil {
			return nil, err
		}
	}
	mux := http.NewServeMux()
	mux.Handle(NewPlanHandler(s, synthesis.Renderer{Kube: kube, Identities: ids, BindingsKey: key, Policy: s.cfg.Policy}, o.Previews, guard.HandlerOptions()...))
	return func(ctx context.Context) error { return guard.Serve(ctx, ln, mux) }, nil
}
