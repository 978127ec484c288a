package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/pflag"

	"github.com/lava-operator/lava/internal/platform/svc"
	"github.com/lava-operator/lava/internal/service/drift"
)

func main() { svc.Main(run) }

// run is the service (svc.Run, exit codes svc.Exit*).
func run(ctx context.Context, args []string, lookup func(string) (string, bool), stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("drift", pflag.ContinueOnError)
	o := drift.Options{}
	svc.Common{NATSURL: &o.NATSURL, NATSCreds: &o.NATSCreds, MetricsAddr: &o.MetricsAddr, HealthAddr: &o.HealthAddr,
		LogFormat: &o.LogFormat, LogLevel: &o.LogLevel, Replicas: &o.Replicas}.Register(fs)
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
	if code, stop := svc.Parse(fs, args, lookup, stdout, stderr, &o.LogFormat, &o.LogLevel); stop {
		return code
	}
	o.Stderr = stderr
	if err := drift.RunService(ctx, o); err != nil {
		fmt.Fprintln(stderr, "drift:", err)
		return 1
	}
	return 0
}
