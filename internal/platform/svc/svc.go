package svc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/lava-operator/lava/internal/platform/envflag"
	"github.com/lava-operator/lava/internal/platform/telemetry"
)

// Exit codes of every service binary.
const (
	// ExitOK: a graceful shutdown, or --help.
	ExitOK = 0
	// ExitRuntime: the service failed while running (or could not start).
	ExitRuntime = 1
	// ExitUsage: an unknown flag, a bad flag or LAVA_* value, a positional argument or another
	// configuration error.
	ExitUsage = 2
)

// Common points at the options fields every NATS service (applier, synth, drift, viggy,
// anomaly) fills from the same flags with the same help texts. Register binds them; every
// pointer must be set.
type Common struct {
	// NATSURL (--nats-url, default nats://127.0.0.1:4222) and NATSCreds (--nats-creds, a
	// credentials file, optional) reach JetStream.
	NATSURL, NATSCreds *string
	// MetricsAddr (--metrics-addr, ":9090") serves /metrics; HealthAddr (--health-addr,
	// ":9091") /healthz and /readyz.
	MetricsAddr, HealthAddr *string
	// LogFormat (--log-format: json or text, default json) and LogLevel (--log-level: debug,
	// info, warn or error, default info).
	LogFormat, LogLevel *string
	// Replicas (--replicas, default 1) is the JetStream replica count of the streams and
	// buckets ensured at start.
	Replicas *int
}

// Register defines the common flags on fs, bound to c's fields.
func (c Common) Register(fs *pflag.FlagSet) {
	fs.StringVar(c.NATSURL, "nats-url", "nats://127.0.0.1:4222", "NATS server URL")
	fs.StringVar(c.NATSCreds, "nats-creds", "", "NATS credentials file (optional)")
	fs.StringVar(c.MetricsAddr, "metrics-addr", ":9090", "Prometheus /metrics listen address")
	fs.StringVar(c.HealthAddr, "health-addr", ":9091", "/healthz and /readyz listen address")
	fs.StringVar(c.LogFormat, "log-format", "json", "log format: json or text")
	fs.StringVar(c.LogLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.IntVar(c.Replicas, "replicas", 1, "JetStream replica count of the streams and buckets ensured at start")
}

// Parse parses args into fs (named after the service), then applies the LAVA_* variables
// (lookup, internal/platform/envflag) to the flags args did not set, then checks that logFormat and
// logLevel (the values bound to --log-format and --log-level) make a logger. It reports
// whether the service must stop, with the exit code: --help (-h) prints the usage to stdout,
// ExitOK; an unknown flag, a bad value, a positional argument, a bad LAVA_* value or a bad log
// format or level prints "SERVICE: error" (and, for command-line errors, the usage) to stderr,
// ExitUsage.
func Parse(fs *pflag.FlagSet, args []string, lookup func(string) (string, bool), stdout, stderr io.Writer, logFormat, logLevel *string) (code int, stop bool) {
	fs.SetOutput(io.Discard) // pflag would print the error and usage itself; done below
	err := fs.Parse(args)
	if errors.Is(err, pflag.ErrHelp) {
		Usage(fs, stdout)
		return ExitOK, true
	}
	if err == nil && fs.NArg() > 0 {
		err = fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", fs.Name(), err)
		Usage(fs, stderr)
		return ExitUsage, true
	}
	if err := envflag.Apply(fs, "LAVA", lookup); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", fs.Name(), err)
		return ExitUsage, true
	}
	if _, err := telemetry.NewLogger(io.Discard, *logFormat, *logLevel); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", fs.Name(), err)
		return ExitUsage, true
	}
	return ExitOK, false
}

// Usage writes "Usage of SERVICE:" and the flag defaults of fs to w.
func Usage(fs *pflag.FlagSet, w io.Writer) {
	fmt.Fprintf(w, "Usage of %s:\n", fs.Name())
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
}

// Run is a service binary's run function: it parses args and the LAVA_* variables (lookup)
// with Parse, runs the service until ctx ends and returns the exit code: ExitOK after a
// graceful shutdown or for --help (usage on stdout), ExitUsage for a usage or configuration
// error (the error and, for the command line, the usage on stderr), ExitRuntime when the
// service failed at runtime.
type Run func(ctx context.Context, args []string, lookup func(string) (string, bool), stdout, stderr io.Writer) int

// Main runs run with the process's arguments, environment, stdout and stderr, until SIGINT or
// SIGTERM ends its context, and exits the process with the code run returns.
func Main(run Run) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.LookupEnv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
