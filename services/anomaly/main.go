package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/client/config"

	"github.com/lava-operator/lava/internal/anomaly"
	"github.com/lava-operator/lava/internal/envflag"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.LookupEnv, os.Stderr)
	stop()
	os.Exit(code)
}

// run parses flags and LAVA_* variables and runs the service until ctx ends. Exit codes: 0
// after a graceful stop, 1 when the service failed, 2 for a configuration error.
func run(ctx context.Context, args []string, lookup func(string) (string, bool), stderr io.Writer) int {
	o, err := parse(args, lookup)
	if err != nil {
		fmt.Fprintln(stderr, "anomaly:", err)
		return 2
	}
	o.Stderr = stderr
	if err := anomaly.RunService(ctx, o); err != nil {
		fmt.Fprintln(stderr, "anomaly:", err)
		if errors.Is(err, anomaly.ErrConfig) {
			return 2
		}
		return 1
	}
	return 0
}

func parse(args []string, lookup func(string) (string, bool)) (anomaly.Options, error) {
	fs := pflag.NewFlagSet("anomaly", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o := anomaly.Options{}
	noKube := false
	fs.StringVar(&o.NATSURL, "nats-url", "nats://127.0.0.1:4222", "NATS server URL")
	fs.StringVar(&o.NATSCreds, "nats-creds", "", "NATS credentials file (optional)")
	fs.StringVar(&o.ConfigFile, "config", "", "routing configuration (YAML or JSON: window, cluster, sinks, rules); empty publishes on the bus only")
	fs.StringVar(&o.Cluster, "cluster", "", "cluster name in every anomaly (overrides the configuration's)")
	fs.StringVar(&o.MetricsAddr, "metrics-addr", ":9090", "Prometheus /metrics listen address")
	fs.StringVar(&o.HealthAddr, "health-addr", ":9091", "/healthz and /readyz listen address")
	fs.StringVar(&o.LogFormat, "log-format", "json", "log format: json or text")
	fs.StringVar(&o.LogLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.IntVar(&o.Replicas, "replicas", 1, "JetStream replica count of the streams and buckets ensured at start")
	fs.IntVar(&o.Concurrency, "concurrency", 8, "handlers running at once per consumer")
	fs.StringVar(&o.Instance, "instance", "", "reportingInstance of Kubernetes Events (default the host name, the pod name in a cluster)")
	fs.BoolVar(&noKube, "no-kube", false, "run without Kubernetes access (kubernetesEvents sinks are then refused)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if err := envflag.Apply(fs, "LAVA", lookup); err != nil {
		return o, err
	}
	if !noKube {
		cfg, err := ctrlconfig.GetConfig()
		if err != nil {
			return o, fmt.Errorf("kubernetes config (use --no-kube to run without): %w", err)
		}
		o.Kube = cfg
	}
	return o, nil
}
