package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/pflag"

	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/svc"
	"github.com/lava-operator/lava/internal/platform/telemetry"
	"github.com/lava-operator/lava/internal/service/attest"
)

func main() { svc.Main(run) }

// run is the service (svc.Run, exit codes svc.Exit*).
func run(ctx context.Context, args []string, lookup func(string) (string, bool), stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("attest", pflag.ContinueOnError)
	var (
		cfg                 attest.Config
		logFormat, logLevel string
	)
	fs.StringVar(&cfg.NATSURL, "nats-url", "nats://127.0.0.1:4222", "NATS server URL")
	fs.StringVar(&cfg.NATSCreds, "nats-creds", "", "NATS credentials file")
	fs.StringVar(&cfg.SigningKeyFile, "signing-key-file", "", "Ed25519 seed file, 64 hex digits (empty: unsigned receipts)")
	fs.IntVar(&cfg.Topology.Replicas, "replicas", 1, "JetStream replica count of the streams and buckets ensured at start (3 on a NATS cluster)")
	fs.IntVar(&cfg.Concurrency, "concurrency", 8, "events handled at once per consumer")
	fs.StringVar(&cfg.ConnectAddr, "connect-addr", ":8080", "ReceiptService (connect, gRPC, gRPC-Web) listen address; empty disables it")
	fs.StringVar(&cfg.MetricsAddr, "metrics-addr", ":9090", "/metrics address (empty disables)")
	fs.StringVar(&cfg.HealthAddr, "health-addr", ":9091", "/healthz and /readyz address (empty disables)")
	fs.StringVar(&logFormat, "log-format", "json", "log format: json or text")
	fs.StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn or error")
	if code, stop := svc.Parse(fs, args, lookup, stdout, stderr, &logFormat, &logLevel); stop {
		return code
	}
	log, err := telemetry.NewLogger(stderr, logFormat, logLevel)
	if err != nil {
		fmt.Fprintln(stderr, "attest:", err)
		return 2
	}
	cfg.Logger = log.With("service", bus.ServiceAttest)
	if err := attest.Run(ctx, cfg); err != nil {
		cfg.Logger.Error("attest: stopped", "error", err)
		return 1
	}
	return 0
}
