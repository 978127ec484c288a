package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/pflag"

	"github.com/lava-operator/lava/internal/platform/svc"
	"github.com/lava-operator/lava/internal/service/viggy"
)

func main() { svc.Main(run) }

// run is the service (svc.Run, exit codes svc.Exit*).
func run(ctx context.Context, args []string, lookup func(string) (string, bool), stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("viggy", pflag.ContinueOnError)
	o := viggy.Options{}
	def := viggy.DefaultBackoff()
	svc.Common{NATSURL: &o.NATSURL, NATSCreds: &o.NATSCreds, MetricsAddr: &o.MetricsAddr, HealthAddr: &o.HealthAddr,
		LogFormat: &o.LogFormat, LogLevel: &o.LogLevel, Replicas: &o.Replicas}.Register(fs)
	fs.IntVar(&o.MaxAttempts, "max-attempts", viggy.DefaultMaxAttempts, "attempts of a failing stage before the resource stalls")
	fs.DurationVar(&o.Backoff.Base, "retry-base", def.Base, "delay before the first retry (doubles per attempt)")
	fs.DurationVar(&o.Backoff.Max, "retry-max", def.Max, "cap of the retry delay")
	fs.Float64Var(&o.Backoff.Jitter, "retry-jitter", def.Jitter, "relative jitter of the retry delay, in [0, 1)")
	fs.IntVar(&o.Concurrency, "concurrency", viggy.DefaultConcurrency, "handlers running at once per consumer")
	fs.StringVar(&o.Cluster, "cluster", "", "cluster name carried by anomalies")
	if code, stop := svc.Parse(fs, args, lookup, stdout, stderr, &o.LogFormat, &o.LogLevel); stop {
		return code
	}
	o.Stderr = stderr
	if err := viggy.RunService(ctx, o); err != nil {
		fmt.Fprintln(stderr, "viggy:", err)
		return 1
	}
	return 0
}
