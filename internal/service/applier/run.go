package applier

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/pflag"

	"github.com/lava-operator/lava/internal/engine/engines"
	"github.com/lava-operator/lava/internal/engine/state"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/svc"
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
}

// Flags defines the applier's flags on fs: engines.Host's and its own.
func (o *Options) Flags(fs *pflag.FlagSet) {
	o.Host.Register(fs)
	fs.DurationVar(&o.Engines.LockTimeout, "lock-timeout", 0, "how long tofu/terraform retry a held state lock")
	fs.DurationVar(&o.LockTTL, "lock-ttl", state.DefaultLockTTL, "age after which a state lock whose holder is not tied to a lease can be taken over (a lease-tied holder's lock is taken over as soon as its lease is gone)")
	fs.StringVar(&o.Engines.BackendAddr, "backend-addr", "127.0.0.1:0", "loopback address of the Terraform http state backend")
	svc.RegisterConcurrency(fs, &o.Config.Concurrency, DefaultConcurrency)
	fs.DurationVar(&o.Config.CollectInterval, "artifact-collect-interval", DefaultCollectInterval, "how often superseded artifacts are deleted from lava-artifacts")
	fs.DurationVar(&o.Config.CollectMinAge, "artifact-min-age", DefaultCollectMinAge, "artifacts put within this long are kept, referenced or not (events in flight name digests no record holds yet)")
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
	log.Info("applier started", "holder", deps.Holder, "engines", len(deps.Set.Engines), "state_backend", backendURL)
	return base.Serve(ctx, s.Run)
}
