// Package svc is the one shape of every Lava service: the common flags and LAVA_* variables
// ([Common]), the binary built from a service's options type ([Command], [Options]: parse,
// complete, run, exit codes 0, 1 and 2), and the run scaffolding ([Start], [Base]: the logger,
// the NATS connection through bus.Connect, the JetStream topology, the metrics and health
// servers, and the drain on SIGTERM through [Main]'s context).
//
// A service package declares
//
//	type Options struct {
//		svc.Common
//		Concurrency int // its own fields
//	}
//	func (o *Options) Flags(fs *pflag.FlagSet) { fs.IntVar(&o.Concurrency, "concurrency", 8, "...") }
//	func Run(ctx context.Context, o Options) error {
//		base, err := svc.Start(ctx, bus.ServiceX, o.Common, svc.Setup{})
//		if err != nil { return err }
//		defer base.Close()
//		s, err := New(ctx, Config{JS: base.JS, Logger: base.Log, Registerer: base.Registry, BusMetrics: base.BusMetrics})
//		if err != nil { return err }
//		return base.Serve(ctx, s.Run)
//	}
//
// its binary (services/x/main.go) is
//
//	var run = svc.Command(bus.ServiceX, x.Run)
//	func main() { svc.Main(run) }
//
// and `lava up` (internal/up) calls x.Run with the Options it builds. Every service consumes
// through internal/pipeline.Consumer, filled from its Base (JS, Log, BusMetrics) and its own
// --concurrency: one bus.ConsumeOptions for all, poison messages reported the same way
// (internal/pipeline.PoisonReporter). It lives in internal/pipeline, not here, because this
// package imports only internal/platform and internal/gen (hack/depcheck.sh).
package svc
