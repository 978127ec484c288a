package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/lava-operator/lava/internal/envflag"
	"github.com/lava-operator/lava/internal/viggy"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.LookupEnv, os.Stderr)
	stop()
	os.Exit(code)
}

// run parses flags and LAVA_* variables (lookup) and runs the service until ctx ends. It
// returns the exit code: 0 after a graceful shutdown, 2 for a configuration error, 1 otherwise.
func run(ctx context.Context, args []string, lookup func(string) (string, bool), stderr io.Writer) int {
	fs := pflag.NewFlagSet("viggy", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	o := viggy.Options{}
	def := viggy.DefaultBackoff()
	fs.StringVar(&o.NATSURL, "nats-url", "nats://127.0.0.1:4222", "NATS server URL")
	fs.StringVar(&o.NATSCreds, "nats-creds", "", "NATS credentials file (optional)")
	fs.IntVar(&o.MaxAttempts, "max-attempts", viggy.DefaultMaxAttempts, "attempts of a failing stage before the resource stalls")
	fs.DurationVar(&o.Backoff.Base, "retry-base", def.Base, "delay before the first retry (doubles per attempt)")
	fs.DurationVar(&o.Backoff.Max, "retry-max", def.Max, "cap of the retry delay")
	fs.Float64Var(&o.Backoff.Jitter, "retry-jitter", def.Jitter, "relative jitter of the retry delay, in [0, 1)")
	fs.IntVar(&o.Concurrency, "concurrency", viggy.DefaultConcurrency, "handlers running at once per consumer")
	fs.StringVar(&o.Cluster, "cluster", "", "cluster name carried by anomalies")
	fs.StringVar(&o.MetricsAddr, "metrics-addr", ":9090", "Prometheus /metrics listen address")
	fs.StringVar(&o.HealthAddr, "health-addr", ":9091", "/healthz and /readyz listen address")
	fs.StringVar(&o.LogFormat, "log-format", "json", "log format: json or text")
	fs.StringVar(&o.LogLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.IntVar(&o.Replicas, "replicas", 1, "JetStream replica count of the streams and buckets ensured at start")
	if err := fs.Parse(args); err != nil {
		fmt.Fprintln(stderr, "viggy:", err)
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintln(stderr, "viggy: unexpected arguments:", fs.Args())
		return 2
	}
	if err := envflag.Apply(fs, "LAVA", lookup); err != nil {
		fmt.Fprintln(stderr, "viggy:", err)
		return 2
	}
	o.Stderr = stderr
	if err := viggy.RunService(ctx, o); err != nil {
		fmt.Fprintln(stderr, "viggy:", err)
		return 1
	}
	return 0
}
