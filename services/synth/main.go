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

	"github.com/lava-operator/lava/internal/envflag"
	"github.com/lava-operator/lava/internal/synthsvc"
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
	if code, stop := parseArgs(fs, args, stdout, stderr); stop {
		return code
	}
	if err := envflag.Apply(fs, "LAVA", lookup); err != nil {
		fmt.Fprintln(stderr, "synth:", err)
		return 2
	}
	if _, err := telemetry.NewLogger(io.Discard, o.LogFormat, o.LogLevel); err != nil {
		fmt.Fprintln(stderr, "synth:", err)
		return 2
	}
	if o.BindingsKeyFile == "" {
		fmt.Fprintln(stderr, "synth: --bindings-key-file (LAVA_BINDINGS_KEY_FILE) is required")
		usage(fs, stderr)
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
