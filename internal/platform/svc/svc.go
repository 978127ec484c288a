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

	"github.com/lava-operator/lava/internal/platform/bus"
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
	// configuration error ([UsageError]).
	ExitUsage = 2
)

// Common is the configuration every service shares, filled from the same flags with the same
// help texts ([Common.Register]). A service's options type embeds it ([Options]); `lava up`
// sets its fields directly.
type Common struct {
	// NATS is how the service reaches JetStream through [bus.Connect]: --nats-url (URL,
	// default nats://127.0.0.1:4222), --nats-creds (CredsFile, optional), --nats-nkey
	// (NKeyFile: the service's nkey seed, docs/security.md), --nats-ca, --nats-cert and
	// --nats-key (TLS, optional). [Start] names
	// the connection "lava-" + the service when Name is empty.
	NATS bus.ConnectOptions
	// MetricsAddr (--metrics-addr, ":9090") serves /metrics; HealthAddr (--health-addr,
	// ":9091") /healthz and /readyz. Empty disables either.
	MetricsAddr, HealthAddr string
	// LogFormat (--log-format: json or text, default json) and LogLevel (--log-level: debug,
	// info, warn or error, default info).
	LogFormat, LogLevel string
	// Replicas (--replicas, default 1) is the JetStream replica count of the streams, consumers
	// and buckets ensured at start (3 on a NATS cluster).
	Replicas int
	// Stderr receives the logs (nil: os.Stderr). [Command] sets it to the binary's stderr.
	Stderr io.Writer
}

// Register defines the common flags on fs, bound to c's fields.
func (c *Common) Register(fs *pflag.FlagSet) {
	fs.StringVar(&c.NATS.URL, "nats-url", "nats://127.0.0.1:4222", "NATS server URL(s), comma-separated")
	fs.StringVar(&c.NATS.CredsFile, "nats-creds", "", "NATS credentials file (optional)")
	fs.StringVar(&c.NATS.NKeyFile, "nats-nkey", "", "NATS nkey user seed file: the service's bus identity (optional; docs/security.md)")
	fs.StringVar(&c.NATS.CAFile, "nats-ca", "", "PEM CA of the NATS server's certificate; set, TLS is required (optional)")
	fs.StringVar(&c.NATS.CertFile, "nats-cert", "", "PEM client certificate for mutual TLS to NATS (optional, with --nats-key)")
	fs.StringVar(&c.NATS.KeyFile, "nats-key", "", "PEM key of --nats-cert (optional)")
	fs.StringVar(&c.MetricsAddr, "metrics-addr", ":9090", "Prometheus /metrics listen address (empty disables)")
	fs.StringVar(&c.HealthAddr, "health-addr", ":9091", "/healthz and /readyz listen address (empty disables)")
	fs.StringVar(&c.LogFormat, "log-format", "json", "log format: json or text")
	fs.StringVar(&c.LogLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.IntVar(&c.Replicas, "replicas", 1, "JetStream replica count of the streams, consumers and buckets ensured at start (3 on a NATS cluster)")
}

// RegisterConcurrency defines --concurrency on fs, bound to p with the service's default def:
// how many messages each of the service's consumers handles at once (drift: its scans too).
// Every consuming service declares it through this one function, so the flag reads the same
// everywhere.
func RegisterConcurrency(fs *pflag.FlagSet, p *int, def int) {
	fs.IntVar(p, "concurrency", def, "messages each consumer handles at once (drift: scans too)")
}

// RegisterMaxPerNamespace defines --max-concurrency-per-namespace on fs, bound to p: how many
// of a consumer's --concurrency handlers (drift: its scans too) one namespace may hold at
// once, the rest going to other namespaces' messages in turn. 0, the default, is half of
// --concurrency rounded up ([bus.DefaultMaxPerKey]). The services that run tenant code
// (synth, the applier, drift) declare it through this one function.
func RegisterMaxPerNamespace(fs *pflag.FlagSet, p *int) {
	fs.IntVar(p, "max-concurrency-per-namespace", 0,
		"handlers (drift: scans too) one namespace may hold at once (0: half of --concurrency, rounded up)")
}

// MaxPerNamespace is the share of concurrency handlers one namespace may hold: set when
// positive (never above concurrency), else [bus.DefaultMaxPerKey] of concurrency.
func MaxPerNamespace(set, concurrency int) int {
	if set > 0 {
		return min(set, concurrency)
	}
	return bus.DefaultMaxPerKey(concurrency)
}

// CommonOptions returns c; promoted to the options type that embeds Common, it satisfies that
// part of [Options].
func (c *Common) CommonOptions() *Common { return c }

// Complete does nothing; a service whose flags need checking or loading after parsing defines
// its own (see [Options]).
func (c *Common) Complete() error { return nil }

// Options is implemented by a pointer to a service's options type: a struct that embeds
// [Common] and adds the service's own fields. [Command] turns it into the service binary.
type Options interface {
	// CommonOptions returns the embedded Common (promoted from [Common.CommonOptions]).
	CommonOptions() *Common
	// Flags defines the service's own flags on fs, bound to its fields, with their defaults.
	Flags(fs *pflag.FlagSet)
	// Complete runs after the command line and the LAVA_* variables were parsed: it checks the
	// options and loads what they name (a Kubernetes configuration, a routing file). An error
	// that is a [UsageError] exits [ExitUsage] with the usage; another exits [ExitRuntime].
	// [Common.Complete] is the do-nothing default.
	Complete() error
}

// UsageError marks a configuration error of the operator's making (a missing required flag,
// a bad configuration file): the binary exits [ExitUsage], not [ExitRuntime].
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// BadUsage wraps err as a [UsageError].
func BadUsage(err error) error { return &UsageError{Err: err} }

// NewFlagSet returns the flag set of service name bound to o: the [Common] flags and o's own.
func NewFlagSet(name string, o Options) *pflag.FlagSet {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	o.CommonOptions().Register(fs)
	o.Flags(fs)
	return fs
}

// Command returns the run function of the binary of service name (a bus.Service* name): it
// parses the command line and the LAVA_* variables into a zero O ([NewFlagSet], [Parse]),
// completes it ([Options.Complete]) and runs run with it until ctx ends. Exit codes and output
// are [Run]'s: a failure prints "NAME: error" to stderr; a run stopped by ctx while it was
// starting (its error is context.Canceled) is a graceful shutdown.
func Command[O any, P interface {
	*O
	Options
}](name string, run func(context.Context, O) error) Run {
	return func(ctx context.Context, args []string, lookup func(string) (string, bool), stdout, stderr io.Writer) int {
		var o O
		p := P(&o)
		fs := NewFlagSet(name, p)
		c := p.CommonOptions()
		if code, stop := Parse(fs, args, lookup, stdout, stderr, &c.LogFormat, &c.LogLevel); stop {
			return code
		}
		c.Stderr = stderr
		if err := p.Complete(); err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", name, err)
			var ue *UsageError
			if errors.As(err, &ue) {
				Usage(fs, stderr)
				return ExitUsage
			}
			return ExitRuntime
		}
		if err := run(ctx, o); err != nil {
			if ctx.Err() != nil && errors.Is(err, context.Canceled) {
				return ExitOK // stopped while starting
			}
			fmt.Fprintf(stderr, "%s: %v\n", name, err)
			var ue *UsageError
			if errors.As(err, &ue) {
				return ExitUsage
			}
			return ExitRuntime
		}
		return ExitOK
	}
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
// SIGTERM ends its context (the service then drains: in-flight messages finish and are acked,
// the servers shut down), and exits the process with the code run returns.
func Main(run Run) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.LookupEnv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
