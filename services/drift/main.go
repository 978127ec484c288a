package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/lava-operator/lava/internal/drift"
	"github.com/lava-operator/lava/internal/envflag"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "drift:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := pflag.NewFlagSet("drift", pflag.ContinueOnError)
	o := drift.Options{}
	fs.StringVar(&o.NATSURL, "nats-url", "nats://127.0.0.1:4222", "NATS server URL")
	fs.StringVar(&o.NATSCreds, "nats-creds", "", "NATS credentials file (optional)")
	fs.StringVar(&o.Holder, "holder", "", "replica name in schedule claims and leases (default: the host name)")
	fs.StringVar(&o.Engines.ProviderDir, "provider-dir", "/var/lib/lava/providers", "provider mirror directory (OpenTofu filesystem-mirror layout)")
	fs.StringVar(&o.Engines.TofuBin, "tofu-bin", "", "OpenTofu binary; empty: resources applied with tofu are not scanned")
	fs.StringVar(&o.Engines.TerraformBin, "terraform-bin", "", "Terraform binary; empty: resources applied with terraform are not scanned")
	fs.StringVar(&o.Engines.CLIConfigFile, "cli-config-file", "", "CLI configuration for tofu/terraform (default: providers only from --provider-dir)")
	fs.StringVar(&o.Engines.WorkDir, "work-dir", "", "directory for per-scan workspaces (default: a temporary directory)")
	fs.StringSliceVar(&o.CosmeticPrefixes, "cosmetic-prefixes", nil, "attribute prefixes whose updates are cosmetic (default tags.,labels.)")
	fs.DurationVar(&o.DefaultInterval, "default-interval", drift.DefaultInterval, "scan interval of a resource whose spec was not seen")
	fs.DurationVar(&o.MinInterval, "min-interval", drift.DefaultMinInterval, "floor of every scan interval")
	fs.Float64Var(&o.Jitter, "jitter", drift.DefaultJitter, "relative jitter of the next scan time, in [0, 1)")
	fs.IntVar(&o.Concurrency, "concurrency", drift.DefaultConcurrency, "scans (and handlers per consumer) running at once")
	fs.DurationVar(&o.ClaimTTL, "claim-ttl", drift.DefaultClaimTTL, "how long a replica's claim on a due resource lasts")
	fs.DurationVar(&o.ScanTimeout, "scan-timeout", drift.DefaultScanTimeout, "bound of one scan")
	fs.BoolVar(&o.NoLease, "no-lease", false, "scan without holding the resource's work lease (scans may then overlap an apply)")
	fs.StringVar(&o.MetricsAddr, "metrics-addr", ":9090", "Prometheus /metrics listen address")
	fs.StringVar(&o.HealthAddr, "health-addr", ":9091", "/healthz and /readyz listen address")
	fs.StringVar(&o.LogFormat, "log-format", "json", "log format: json or text")
	fs.StringVar(&o.LogLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.IntVar(&o.Replicas, "replicas", 1, "JetStream replica count of the streams and buckets ensured at start")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := envflag.Apply(fs, "LAVA", os.LookupEnv); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return drift.RunService(ctx, o)
}
