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

	"github.com/lava-operator/lava/internal/envflag"
	"github.com/lava-operator/lava/internal/telemetry"
	"github.com/lava-operator/lava/internal/watcher"
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
	var cfg watcher.Config
	fs := pflag.NewFlagSet("watcher", pflag.ContinueOnError)
	fs.StringVar(&cfg.Kubeconfig, "kubeconfig", "", "kubeconfig file (default: in-cluster, else $KUBECONFIG or ~/.kube/config)")
	fs.StringSliceVar(&cfg.Namespaces, "namespaces", nil, "namespaces to watch, comma-separated (default: all)")
	fs.StringVar(&cfg.NATSURL, "nats-url", "nats://127.0.0.1:4222", "NATS server URL")
	fs.StringVar(&cfg.NATSCreds, "nats-creds", "", "NATS credentials file (optional)")
	fs.StringVar(&cfg.PhaseConsumer, "phase-consumer", "watcher", "durable consumer on LAVA_PHASES; another name is created filtered to --namespaces")
	fs.IntVar(&cfg.StreamReplicas, "stream-replicas", 1, "replicas of the JetStream streams and buckets the watcher ensures (3 on a NATS cluster)")
	fs.BoolVar(&cfg.LeaderElect, "leader-elect", true, "elect a leader among replicas (only the leader reconciles and consumes phase events)")
	fs.StringVar(&cfg.LeaderElectionID, "leader-election-id", watcher.DefaultLeaderElectionID, "name of the leader election Lease")
	fs.StringVar(&cfg.LeaderElectionNamespace, "leader-election-namespace", "", "namespace of the leader election Lease (default: the pod's namespace)")
	fs.StringVar(&cfg.MetricsAddr, "metrics-addr", ":9090", "address serving /metrics (empty disables)")
	fs.StringVar(&cfg.HealthAddr, "health-addr", ":9091", "address serving /healthz and /readyz (empty disables)")
	fs.StringVar(&cfg.LogFormat, "log-format", "json", "log format: json or text")
	fs.StringVar(&cfg.LogLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.StringVar(&cfg.ClusterName, "cluster-name", "", "this cluster's name in LavaArchitectureDependency references")
	if code, stop := parseArgs(fs, args, stdout, stderr); stop {
		return code
	}
	if err := envflag.Apply(fs, "LAVA", lookup); err != nil {
		fmt.Fprintln(stderr, "watcher:", err)
		return 2
	}
	if _, err := telemetry.NewLogger(io.Discard, cfg.LogFormat, cfg.LogLevel); err != nil {
		fmt.Fprintln(stderr, "watcher:", err)
		return 2
	}
	if err := watcher.Run(ctx, cfg, stderr); err != nil {
		fmt.Fprintln(stderr, "watcher:", err)
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
