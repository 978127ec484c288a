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

	"github.com/lava-operator/lava/internal/anomaly"
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
	o, code, stop := parse(args, lookup, stdout, stderr)
	if stop {
		return code
	}
	o.Stderr = stderr
	if err := anomaly.RunService(ctx, o); err != nil {
		fmt.Fprintln(stderr, "anomaly:", err)
		if errors.Is(err, anomaly.ErrConfig) {
			return 2
		}
		return 1
	}
	return 0
}

// parse reads the options from args, the LAVA_* variables and the Kubernetes configuration,
// and reports whether run must stop with code (see run).
func parse(args []string, lookup func(string) (string, bool), stdout, stderr io.Writer) (o anomaly.Options, code int, stop bool) {
	fs := pflag.NewFlagSet("anomaly", pflag.ContinueOnError)
	noKube := false
	fs.StringVar(&o.NATSURL, "nats-url", "nats://127.0.0.1:4222", "NATS server URL")
	fs.StringVar(&o.NATSCreds, "nats-creds", "", "NATS credentials file (optional)")
	fs.StringVar(&o.ConfigFile, "config", "", "routing configuration (YAML or JSON: window, cluster, sinks, rules); empty publishes on the bus only")
	fs.StringVar(&o.Cluster, "cluster", "", "cluster name in every anomaly (overrides the configuration's)")
	fs.StringVar(&o.MetricsAddr, "metrics-addr", ":9090", "Prometheus /metrics listen address")
	fs.StringVar(&o.HealthAddr, "health-addr", ":9091", "/healthz and /readyz listen address")
	fs.StringVar(&o.LogFormat, "log-format", "json", "log format: json or text")
	fs.StringVar(&o.LogLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.IntVar(&o.Replicas, "replicas", 1, "JetStream replica count of the streams and buckets ensured at start")
	fs.IntVar(&o.Concurrency, "concurrency", 8, "handlers running at once per consumer")
	fs.StringVar(&o.Instance, "instance", "", "reportingInstance of Kubernetes Events (default the host name, the pod name in a cluster)")
	fs.BoolVar(&noKube, "no-kube", false, "run without Kubernetes access (kubernetesEvents sinks are then refused)")
	if code, stop := parseArgs(fs, args, stdout, stderr); stop {
		return o, code, true
	}
	if err := envflag.Apply(fs, "LAVA", lookup); err != nil {
		fmt.Fprintln(stderr, "anomaly:", err)
		return o, 2, true
	}
	if _, err := telemetry.NewLogger(io.Discard, o.LogFormat, o.LogLevel); err != nil {
		fmt.Fprintln(stderr, "anomaly:", err)
		return o, 2, true
	}
	if !noKube {
		cfg, err := ctrlconfig.GetConfig()
		if err != nil {
			fmt.Fprintf(stderr, "anomaly: kubernetes config (use --no-kube to run without): %v\n", err)
			return o, 1, true
		}
		o.Kube = cfg
	}
	return o, 0, false
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
