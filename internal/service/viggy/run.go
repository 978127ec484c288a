package viggy

import (
	"context"

	"github.com/spf13/pflag"

	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/svc"
)

// Options is the viggy process configuration, one type: the common service options and
// viggy's settings (flags and LAVA_* variables, svc.Command; `lava up` sets them directly).
type Options struct {
	svc.Common
	// Config holds viggy's settings, bound by its flags (--max-attempts, --retry-base,
	// --retry-max, --retry-jitter, --concurrency, --cluster); [Run] sets its dependencies (JS,
	// Logger, Registerer, BusMetrics).
	Config Config
}

// Flags defines viggy's own flags on fs.
func (o *Options) Flags(fs *pflag.FlagSet) {
	def := DefaultBackoff()
	fs.IntVar(&o.Config.MaxAttempts, "max-attempts", DefaultMaxAttempts, "attempts of a failing stage before the resource stalls")
	fs.DurationVar(&o.Config.Backoff.Base, "retry-base", def.Base, "delay before the first retry (doubles per attempt)")
	fs.DurationVar(&o.Config.Backoff.Max, "retry-max", def.Max, "cap of the retry delay")
	fs.Float64Var(&o.Config.Backoff.Jitter, "retry-jitter", def.Jitter, "relative jitter of the retry delay, in [0, 1)")
	svc.RegisterConcurrency(fs, &o.Config.Concurrency, DefaultConcurrency)
	fs.StringVar(&o.Config.Cluster, "cluster", "", "cluster name carried by anomalies")
}

// Run runs viggy until ctx is cancelled (svc.Start: NATS, topology, metrics and health; then
// the consumers and the scheduler). It returns nil after a graceful shutdown.
func Run(ctx context.Context, o Options) error {
	base, err := svc.Start(ctx, bus.ServiceViggy, o.Common, svc.Setup{})
	if err != nil {
		return err
	}
	defer base.Close()
	cfg := o.Config
	cfg.JS, cfg.Logger, cfg.Registerer, cfg.BusMetrics = base.JS, base.Log, base.Registry, base.BusMetrics
	s, err := New(ctx, cfg)
	if err != nil {
		return err
	}
	base.Log.Info("viggy started")
	return base.Serve(ctx, s.Run)
}
