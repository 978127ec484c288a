package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/pflag"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/client/config"

	"github.com/lava-operator/lava/internal/engine/state"
	"github.com/lava-operator/lava/internal/platform/svc"
	"github.com/lava-operator/lava/internal/service/applier"
)

func main() { svc.Main(run) }

// run is the service (svc.Run, exit codes svc.Exit*).
func run(ctx context.Context, args []string, lookup func(string) (string, bool), stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("applier", pflag.ContinueOnError)
	o := applier.Options{}
	noKube := false
	svc.Common{NATSURL: &o.NATSURL, NATSCreds: &o.NATSCreds, MetricsAddr: &o.MetricsAddr, HealthAddr: &o.HealthAddr,
		LogFormat: &o.LogFormat, LogLevel: &o.LogLevel, Replicas: &o.Replicas}.Register(fs)
	fs.StringVar(&o.Holder, "holder", "", "replica name in leases and state locks (default: the host name)")
	fs.StringVar(&o.Engines.ProviderDir, "provider-dir", "/var/lib/lava/providers", "provider mirror directory (OpenTofu filesystem-mirror layout)")
	fs.StringVar(&o.Engines.TofuBin, "tofu-bin", "", "OpenTofu binary; empty disables engine tofu")
	fs.StringVar(&o.Engines.TerraformBin, "terraform-bin", "", "Terraform binary; empty disables engine terraform")
	fs.StringVar(&o.Engines.CLIConfigFile, "cli-config-file", "", "CLI configuration for tofu/terraform (default: providers only from --provider-dir)")
	fs.StringVar(&o.Engines.WorkDir, "work-dir", "", "directory for per-operation workspaces and the plugin cache (default: a temporary directory)")
	fs.DurationVar(&o.Engines.LockTimeout, "lock-timeout", 0, "how long tofu/terraform retry a held state lock")
	fs.DurationVar(&o.LockTTL, "lock-ttl", state.DefaultLockTTL, "age after which a state lock whose holder lost its lease can be taken over")
	fs.StringVar(&o.BackendAddr, "backend-addr", "127.0.0.1:0", "loopback address of the Terraform http state backend")
	fs.IntVar(&o.Concurrency, "concurrency", 4, "handlers running at once per consumer")
	fs.BoolVar(&noKube, "no-kube", false, "run without Kubernetes access (sensitive outputs are then not stored)")
	o.Identity.Register(fs)
	if code, stop := svc.Parse(fs, args, lookup, stdout, stderr, &o.LogFormat, &o.LogLevel); stop {
		return code
	}
	if !noKube {
		cfg, err := ctrlconfig.GetConfig()
		if err != nil {
			fmt.Fprintf(stderr, "applier: kubernetes config (use --no-kube to run without): %v\n", err)
			return 1
		}
		o.Kube = cfg
	}
	if err := applier.RunService(ctx, o); err != nil {
		fmt.Fprintln(stderr, "applier:", err)
		return 1
	}
	return 0
}
