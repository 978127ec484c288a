// Package svc is the one shape of every Lava service: the common flags and LAVA_* variables
// ([Common]), the binary built from a service's options type ([Command], [Options]: parse,
// complete, run, exit codes 0, 1 and 2), and the run scaffolding ([Start], [Base]: the logger,
// the NATS connection through bus.Connect, the JetStream topology, the metrics and health
// servers, and the drain on SIGTERM through [Main]'s context).
//
// A service package declares one options type: the common options, the settings its service
// takes (its Config, which its flags bind into, so each setting and its default is declared
// once) and what only the process needs:
//
//	type Options struct {
//		svc.Common
//		Config Config // bound by the flags; Run adds what Start built
//	}
//	func (o *Options) Flags(fs *pflag.FlagSet) {
//		svc.RegisterConcurrency(fs, &o.Config.Concurrency, DefaultConcurrency)
//	}
//	func Run(ctx context.Context, o Options) error {
//		base, err := svc.Start(ctx, bus.ServiceX, o.Common, svc.Setup{})
//		if err != nil { return err }
//		defer base.Close()
//		cfg := o.Config
//		cfg.JS, cfg.Logger, cfg.Registerer, cfg.BusMetrics = base.JS, base.Log, base.Registry, base.BusMetrics
//		s, err := New(ctx, cfg)
//		if err != nil { return err }
//		return base.Serve(ctx, s.Run)
//	}
//
// its binary (services/x/main.go) is
//
//	var run = svc.Command(bus.ServiceX, x.Run)
//	func main() { svc.Main(run) }
//
// and `lava up` (internal/up) calls x.Run with the Options it builds from the defaults of the
// service's own flag set. The applier and drift also embed the configuration they share
// (internal/engine/engines.Host: holder, engines, Kubernetes access, identities, credentials,
// one flag set). Every service consumes through internal/pipeline.Consumer, filled from its
// Base (JS, Log, BusMetrics) and its own --concurrency: one bus.ConsumeOptions for all, poison
// messages reported the same way (internal/pipeline.PoisonReporter), and one envelope guard
// for the services whose every event names a resource (Consumer.Resource). It lives in
// internal/pipeline, not here, because this package imports only internal/platform and
// internal/gen (hack/depcheck.sh), and the poison anomaly is pipeline vocabulary (its
// fingerprint and sanitizer).
package svc
