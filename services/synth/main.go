package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/pflag"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/client/config"

	"github.com/lava-operator/lava/internal/platform/svc"
	"github.com/lava-operator/lava/internal/service/synth"
)

func main() { svc.Main(run) }

// run is the service (svc.Run, exit codes svc.Exit*).
func run(ctx context.Context, args []string, lookup func(string) (string, bool), stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("synth", pflag.ContinueOnError)
	o := synth.Options{}
	noKube := false
	svc.Common{NATSURL: &o.NATSURL, NATSCreds: &o.NATSCreds, MetricsAddr: &o.MetricsAddr, HealthAddr: &o.HealthAddr,
		LogFormat: &o.LogFormat, LogLevel: &o.LogLevel, Replicas: &o.Replicas}.Register(fs)
	fs.StringVar(&o.BindingsKeyFile, "bindings-key-file", "", "file with the installation's bindings key (32 bytes or 64 hex digits); required")
	fs.StringVar(&o.ConnectAddr, "connect-addr", ":8080", "RenderService (connect) listen address; empty disables it")
	fs.IntVar(&o.Concurrency, "concurrency", 8, "handlers running at once per consumer")
	fs.StringVar(&o.PolicyFile, "policy-file", "", "tenant policy document (docs/design/tenant-policy.md); empty: the built-in policy")
	fs.BoolVar(&noKube, "no-kube", false, "run without Kubernetes access (bindingsFrom then fails)")
	o.Identity.Register(fs)
	if code, stop := svc.Parse(fs, args, lookup, stdout, stderr, &o.LogFormat, &o.LogLevel); stop {
		return code
	}
	if o.BindingsKeyFile == "" {
		fmt.Fprintln(stderr, "synth: --bindings-key-file (LAVA_BINDINGS_KEY_FILE) is required")
		svc.Usage(fs, stderr)
		return 2
	}
	if !noKube {
		cfg, err := ctrlconfig.GetConfig()
		if err != nil {
			fmt.Fprintf(stderr, "synth: kubernetes config (use --no-kube to run without): %v\n", err)
			return 1
		}
		o.Kube = cfg
	}
	if err := synth.RunService(ctx, o); err != nil {
		fmt.Fprintln(stderr, "synth:", err)
		return 1
	}
	return 0
}
