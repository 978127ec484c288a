package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/client/config"

	"github.com/lava-operator/lava/internal/svc"
	"github.com/lava-operator/lava/internal/synthsvc"
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
	fs := pflag.NewFlagSet("synth", pflag.ContinueOnError)
	o := synthsvc.Options{}
	noKube := false
	svc.Common{NATSURL: &o.NATSURL, NATSCreds: &o.NATSCreds, MetricsAddr: &o.MetricsAddr, HealthAddr: &o.HealthAddr,
		LogFormat: &o.LogFormat, LogLevel: &o.LogLevel, Replicas: &o.Replicas}.Register(fs)
	fs.StringVar(&o.BindingsKeyFile, "bindings-key-file", "", "file with the installation's bindings key (32 bytes or 64 hex digits); required")
	fs.StringVar(&o.ConnectAddr, "connect-addr", ":8080", "RenderService (connect) listen address; empty disables it")
	fs.IntVar(&o.Concurrency, "concurrency", 8, "handlers running at once per consumer")
	fs.BoolVar(&noKube, "no-kube", false, "run without Kubernetes access (bindingsFrom then fails)")
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
	if err := synthsvc.RunService(ctx, o); err != nil {
		fmt.Fprintln(stderr, "synth:", err)
		return 1
	}
	return 0
}
