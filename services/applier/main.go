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

	"github.com/lava-operator/lava/internal/applier"
	"github.com/lava-operator/lava/internal/engine/state"
	"github.com/lava-operator/lava/internal/envflag"
	"github.com/lava-operator/lava/internal/telemetry"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.LookupEnv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run parses flags and LAVA_* variables (lookup) and runs the service until ctx ends. It
// returns the exit code: 0 after a graceful shutdown or for --help (usage on stdout), 2 for a
// usage or configuration error (an unknown flag, a bad flag or LAVA_* value, an argument: the
// error and the usage on stderr), 1 when the service failed at runtime.
func run(ctx context.Context, args []string, lookup func(string) (string, bool), stdout, stderr io.Writer) int {
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
	if code, stop := parseArgs(fs, args, stdout, stderr); stop {
		return code
	}
	if err := envflag.Apply(fs, "LAVA", lookup); err != nil {
		fmt.Fprintln(stderr, "applier:", err)
		return 2
	}
	if _, err := telemetry.NewLogger(io.Discard, o.LogFormat, o.LogLevel); err != nil {
		fmt.Fprintln(stderr, "applier:", err)
		return 2
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

// parseArgs parses args into fs (named SERVICE) and reports whether run must stop, with the
// exit code: --help (-h) prints the usage to stdout, code 0; an unknown flag, a bad value or a
// positional argument prints the error and the usage to stderr, code 2.
func parseArgs(fs *pflag.FlagSet, args []string, stdout, stderr io.Writer) (code int, stop bool) {
	fs.SetOutput(io.Discard) // pflag would print the error and usage itself; done below
	err := fs.Parse(args)
	if errors.Is(err, pflag.ErrHelp) {
		usage(fs, stdout)
		return 0, true
	}
	if err == nil && fs.NArg() > 0 {
		err = fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", fs.Name(), err)
		usage(fs, stderr)
		return 2, true
	}
	return 0, false
}

// usage writes "Usage of SERVICE:" and the flag defaults to w.
func usage(fs *pflag.FlagSet, w io.Writer) {
	fmt.Fprintf(w, "Usage of %s:\n", fs.Name())
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
}
