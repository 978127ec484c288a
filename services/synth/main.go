package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/client/config"

	"github.com/lava-operator/lava/internal/envflag"
	"github.com/lava-operator/lava/internal/synthsvc"
)

func main() {
	if err := run(os.Args[1:]); err != nil && !errors.Is(err, pflag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "synth:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := pflag.NewFlagSet("synth", pflag.ContinueOnError)
	o := synthsvc.Options{}
	noKube := false
	fs.StringVar(&o.NATSURL, "nats-url", "nats://127.0.0.1:4222", "NATS server URL")
	fs.StringVar(&o.NATSCreds, "nats-creds", "", "NATS credentials file (optional)")
	fs.StringVar(&o.BindingsKeyFile, "bindings-key-file", "", "file with the installation's bindings key (32 bytes or 64 hex digits); required")
	fs.StringVar(&o.ConnectAddr, "connect-addr", ":8080", "RenderService (connect) listen address; empty disables it")
	fs.StringVar(&o.MetricsAddr, "metrics-addr", ":9090", "Prometheus /metrics listen address")
	fs.StringVar(&o.HealthAddr, "health-addr", ":9091", "/healthz and /readyz listen address")
	fs.StringVar(&o.LogFormat, "log-format", "json", "log format: json or text")
	fs.StringVar(&o.LogLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.IntVar(&o.Replicas, "replicas", 1, "JetStream replica count of the streams and buckets ensured at start")
	fs.IntVar(&o.Concurrency, "concurrency", 8, "handlers running at once per consumer")
	fs.BoolVar(&noKube, "no-kube", false, "run without Kubernetes access (bindingsFrom then fails)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := envflag.Apply(fs, "LAVA", os.LookupEnv); err != nil {
		return err
	}
	if o.BindingsKeyFile == "" {
		return fmt.Errorf("--bindings-key-file (LAVA_BINDINGS_KEY_FILE) is required")
	}
	if !noKube {
		cfg, err := ctrlconfig.GetConfig()
		if err != nil {
			return fmt.Errorf("kubernetes config (use --no-kube to run without): %w", err)
		}
		o.Kube = cfg
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return synthsvc.RunService(ctx, o)
}
