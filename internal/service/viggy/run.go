package viggy

import (
	"context"

	"github.com/spf13/pflag"

	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/svc"
)

// Options is the viggy process configuration: the common service options and viggy's own
// (flags and LAVA_* variables, svc.Command; `lava up` sets them directly).
type Options struct {
	svc.Common
	// MaxAttempts, Backoff, Concurrency and Cluster as in [Config].
	MaxAttempts int
	Backoff     bus.Backoff
	Concurrency int
	Cluster     string
}

// Flags defines viggy's own flags on fs.
func (o *Options) Flags(fs *pflag.FlagSet) {
	def := DefaultBackoff()
	fs.IntVar(&o.MaxAttempts, "max-attempts", DefaultMaxAttempts, "attempts of a failing stage before the resource stalls")
	fs.DurationVar(&o.Backoff.Base, "retry-base", def.Base, "delay before the first retry (doubles per attempt)")
	fs.DurationVar(&o.Backoff.Max, "retry-max", def.Max, "cap of the retry delay")
	fs.Float64Var(&o.Backoff.Jitter, "retry-jitter", def.Jitter, "relative jitter of the retry delay, in [0, 1)")
	fs.IntVar(&o.Concurrency, "concurrency", DefaultConcurrency, "handlers running at once per consumer")
	fs.StringVar(&o.Cluster, "cluster", "", "cluster name carried by anomalies")
}

// Run runs viggy until ctx is cancelled (svc.Start: NATS, topology, metrics and health; then
// the consumers and the scheduler). It returns nil after a graceful shutdown.
func Run(ctx context.Context, o Options) error {
	base, err := svc.Start(ctx, bus.ServiceViggy, o.Common, svc.Setup{})
	if err != nil {
		return err
	}
	defer base.Close()
	s, err := New(ctx, Config{JS: base.JS, MaxAttempts: o.MaxAttempts, Backoff: o.Backoff, Concurrency: o.Concurrency,
		Cluster: o.Cluster, Logger: base.Log, Registerer: base.Registry, BusMetrics: base.BusMetrics})
	if err != nil {
		return err
	}
	base.Log.Info("viggy started")
	return base.Serve(ctx, s.Run)
}
