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

	"github.com/lava-operator/lava/internal/applier"
	"github.com/lava-operator/lava/internal/engine/state"
	"github.com/lava-operator/lava/internal/envflag"
)

func main() {
	if err := run(os.Args[1:]); err != nil && !errors.Is(err, pflag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "applier:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := pflag.NewFlagSet("applier", pflag.ContinueOnError)
	o := applier.Options{}
	noKube := false
	fs.StringVar(&o.NATSURL, "nats-url", "nats://127.0.0.1:4222", "NATS server URL")
	fs.StringVar(&o.NATSCreds, "nats-creds", "", "NATS credentials file (optional)")
	fs.StringVar(&o.Holder, "holder", "", "replica name in leases and state locks (default: the host name)")
	fs.StringVar(&o.Engines.ProviderDir, "provider-dir", "/var/lib/lava/providers", "provider mirror directory (OpenTofu filesystem-mirror layout)")
	fs.StringVar(&o.Engines.TofuBin, "tofu-bin", "", "OpenTofu binary; empty disables engine tofu")
	fs.StringVar(&o.Engines.TerraformBin, "terraform-bin", "", "Terraform binary; empty disables engine terraform")
	fs.StringVar(&o.Engines.CLIConfigFile, "cli-config-file", "", "CLI configuration for tofu/terraform (default: providers only from --provider-dir)")
	fs.StringVar(&o.Engines.WorkDir, "work-dir", "", "directory for per-operation workspaces and the plugin cache (default: a temporary directory)")
	fs.DurationVar(&o.Engines.LockTimeout, "lock-timeout", 0, "how long tofu/terraform retry a held state lock")
	fs.DurationVar(&o.LockTTL, "lock-ttl", state.DefaultLockTTL, "age after which a state lock whose holder lost its lease can be taken over")
	fs.StringVar(&o.BackendAddr, "backend-addr", "127.0.0.1:0", "loopback address of the Terraform http state backend")
	fs.StringVar(&o.MetricsAddr, "metrics-addr", ":9090", "Prometheus /metrics listen address")
	fs.StringVar(&o.HealthAddr, "health-addr", ":9091", "/healthz and /readyz listen address")
	fs.StringVar(&o.LogFormat, "log-format", "json", "log format: json or text")
	fs.StringVar(&o.LogLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.IntVar(&o.Replicas, "replicas", 1, "JetStream replica count of the streams and buckets ensured at start")
	fs.IntVar(&o.Concurrency, "concurrency", 4, "handlers running at once per consumer")
	fs.BoolVar(&noKube, "no-kube", false, "run without Kubernetes access (sensitive outputs are then not stored)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := envflag.Apply(fs, "LAVA", os.LookupEnv); err != nil {
		return err
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
	return applier.RunService(ctx, o)
}
