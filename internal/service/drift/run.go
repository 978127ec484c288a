package drift

import (
	"context"

	"github.com/spf13/pflag"

	"github.com/lava-operator/lava/internal/engine/engines"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/svc"
)

// Options is the drift process configuration, one type: the common service options, the
// configuration it shares with the applier (engines.Host: --holder, the engines, --no-kube, the
// Kubernetes API rate limit, who it acts as, the providers' credentials: a scan's providers get
// the credentials an apply's get) and its own settings (flags and LAVA_* variables,
// svc.Command; `lava up` sets them directly). Scans never lock, so Engines.State stays zero.
type Options struct {
	svc.Common
	engines.Host
	// Config holds drift's own settings, bound by its flags (--cosmetic-prefixes,
	// --default-interval, --min-interval, --jitter, --concurrency, --claim-ttl,
	// --scan-timeout); [Run] sets its dependencies (JS, Engines, Holder, Kube, Identities,
	// Credentials, Leases, Logger, Registerer, BusMetrics).
	Config Config
	// NoLease scans without holding the resource's work lease.
	NoLease bool
}

// Flags defines drift's flags on fs: engines.Host's and its own.
func (o *Options) Flags(fs *pflag.FlagSet) {
	o.Host.Register(fs)
	fs.StringSliceVar(&o.Config.CosmeticPrefixes, "cosmetic-prefixes", nil, "attribute prefixes whose updates are cosmetic (default tags.,labels.)")
	fs.DurationVar(&o.Config.DefaultInterval, "default-interval", DefaultInterval, "scan interval of a resource whose spec was not seen")
	fs.DurationVar(&o.Config.MinInterval, "min-interval", DefaultMinInterval, "floor of every scan interval")
	fs.Float64Var(&o.Config.Jitter, "jitter", DefaultJitter, "relative jitter of the next scan time, in [0, 1)")
	svc.RegisterConcurrency(fs, &o.Config.Concurrency, DefaultConcurrency)
	svc.RegisterMaxPerNamespace(fs, &o.Config.MaxPerNamespace)
	fs.DurationVar(&o.Config.ClaimTTL, "claim-ttl", DefaultClaimTTL, "how long a replica's claim on a due resource lasts")
	fs.DurationVar(&o.Config.ScanTimeout, "scan-timeout", DefaultScanTimeout, "bound of one scan")
	fs.BoolVar(&o.NoLease, "no-lease", false, "scan without holding the resource's work lease (scans may then overlap an apply)")
}

// Complete loads the Kubernetes configuration unless --no-kube (engines.Host.Complete).
func (o *Options) Complete() error { return o.Host.Complete() }

// Run runs the drift service until ctx is cancelled (svc.Start: NATS, topology, metrics and
// health; then the engines, the consumers and the scheduler). It returns nil after a graceful
// shutdown.
func Run(ctx context.Context, o Options) error {
	base, err := svc.Start(ctx, bus.ServiceDrift, o.Common, svc.Setup{})
	if err != nil {
		return err
	}
	defer base.Close()
	js, log := base.JS, base.Log
	o.Engines.Process = bus.ServiceDrift
	set, err := engines.Open(ctx, js, o.Engines, log)
	if err != nil {
		return err
	}
	deps, err := o.Host.Deps(set)
	if err != nil {
		return err
	}
	defer deps.Close()
	cfg := o.Config
	if !o.NoLease {
		if cfg.Leases, err = bus.NewLeases(ctx, js, deps.Holder, base.BusMetrics); err != nil {
			return err
		}
	}
	cfg.JS, cfg.Engines, cfg.Holder = js, deps.Set.Engines, deps.Holder
	cfg.Kube, cfg.Identities, cfg.Credentials = deps.Kube, deps.Identities, deps.Credentials
	cfg.Logger, cfg.Registerer, cfg.BusMetrics = log, base.Registry, base.BusMetrics
	s, err := New(ctx, cfg)
	if err != nil {
		return err
	}
	log.Info("drift started", "holder", deps.Holder, "engines", len(deps.Set.Engines))
	return base.Serve(ctx, s.Run)
}
