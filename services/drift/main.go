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

	"github.com/lava-operator/lava/internal/drift"
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
	if code, stop := parseArgs(fs, args, stdout, stderr); stop {
		return code
	}
	if err := envflag.Apply(fs, "LAVA", lookup); err != nil {
		fmt.Fprintln(stderr, "drift:", err)
		return 2
	}
	if _, err := telemetry.NewLogger(io.Discard, o.LogFormat, o.LogLevel); err != nil {
		fmt.Fprintln(stderr, "drift:", err)
		return 2
	}
	o.Stderr = stderr
	if err := drift.RunService(ctx, o); err != nil {
		fmt.Fprintln(stderr, "drift:", err)
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
