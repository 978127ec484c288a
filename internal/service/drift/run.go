package drift

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lava-operator/lava/internal/engine"
	"github.com/lava-operator/lava/internal/engine/embedded"
	"github.com/lava-operator/lava/internal/engine/state"
	"github.com/lava-operator/lava/internal/engine/tofu"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/svc"
)

// EngineOptions configures the engines a drift process scans with. The embedded engine is
// always offered; tofu and terraform when their binary is set.
type EngineOptions struct {
	// ProviderDir is the provider mirror (OpenTofu filesystem-mirror layout).
	ProviderDir string
	// TofuBin and TerraformBin are the CLI binaries ("" leaves that engine out).
	TofuBin, TerraformBin string
	// CLIConfigFile is an optional CLI configuration for tofu and terraform.
	CLIConfigFile string
	// WorkDir holds per-scan workspaces (default: a temporary directory).
	WorkDir string
	// Timeouts per CLI step.
	Timeouts tofu.Timeouts
}

// NewEngines builds the engines of o over the state in lava-state and lava-artifacts. The CLI
// engines read state through a Terraform http backend served on a loopback port of this
// process (scans never lock). close stops the engines and the backend.
func NewEngines(ctx context.Context, js jetstream.JetStream, o EngineOptions, log *slog.Logger) (map[string]engine.Engine, func(), error) {
	kv, err := js.KeyValue(ctx, bus.BucketState)
	if err != nil {
		return nil, nil, fmt.Errorf("drift: bind %s: %w", bus.BucketState, err)
	}
	art, err := bus.NewArtifacts(ctx, js)
	if err != nil {
		return nil, nil, fmt.Errorf("drift: %w", err)
	}
	store := state.NewStore(kv, art, state.Options{Logger: log})
	var closers []func()
	closeAll := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	emb := embedded.New(embedded.Options{Store: store, Artifacts: art, ProviderDir: o.ProviderDir, Logger: log})
	closers = append(closers, func() { _ = emb.Close() })
	engines := map[string]engine.Engine{EngineEmbedded: emb}
	if o.TofuBin == "" && o.TerraformBin == "" {
		return engines, closeAll, nil
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		closeAll()
		return nil, nil, fmt.Errorf("drift: state backend: %w", err)
	}
	tokens := state.NewTokens() // a password per tofu operation and resource
	srv := &http.Server{Handler: state.NewHandler(store, state.HandlerOptions{Tokens: tokens, Logger: log}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	closers = append(closers, func() { _ = srv.Close() })
	workDir := o.WorkDir
	if workDir == "" {
		if workDir, err = os.MkdirTemp("", "lava-drift-"); err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("drift: work dir: %w", err)
		}
	}
	for _, cli := range []struct{ name, bin string }{{EngineTofu, o.TofuBin}, {EngineTerraform, o.TerraformBin}} {
		if cli.bin == "" {
			continue
		}
		e, err := tofu.New(tofu.Config{
			Name: cli.name, Bin: cli.bin, CLIConfigFile: o.CLIConfigFile, MirrorDir: o.ProviderDir,
			PluginCacheDir: filepath.Join(workDir, "plugin-cache-"+cli.name), WorkDir: workDir,
			BackendURL: "http://" + ln.Addr().String(), BackendTokens: tokens, Store: store, Artifacts: art,
			Timeouts: o.Timeouts, Logger: log,
		})
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("drift: %s engine: %w", cli.name, err)
		}
		closers = append(closers, func() { _ = e.Close() })
		engines[cli.name] = e
	}
	return engines, closeAll, nil
}

// Options is the drift process configuration (flags and LAVA_* variables, parsed by
// services/drift).
type Options struct {
	// NATSURL and NATSCreds reach JetStream.
	NATSURL, NATSCreds string
	// Holder names this replica (default: the host name); a random suffix is added.
	Holder string
	// Engines configures the engines.
	Engines EngineOptions
	// CosmeticPrefixes overrides the cosmetic attribute prefixes (nil: "tags.", "labels.").
	CosmeticPrefixes []string
	// DefaultInterval, MinInterval, Jitter, Concurrency, ClaimTTL and ScanTimeout as in
	// [Config].
	DefaultInterval, MinInterval time.Duration
	Jitter                       float64
	Concurrency                  int
	ClaimTTL, ScanTimeout        time.Duration
	// NoLease scans without holding the resource's work lease.
	NoLease bool
	// MetricsAddr and HealthAddr serve /metrics and /healthz, /readyz.
	MetricsAddr, HealthAddr string
	// LogFormat and LogLevel configure the logs.
	LogFormat, LogLevel string
	// Replicas is the JetStream replica count of the topology.
	Replicas int
	// Stderr receives the logs.
	Stderr io.Writer
}

// RunService runs the drift service until ctx is cancelled: NATS, topology, engines, metrics
// and health, the consumers and the scheduler. It returns nil after a graceful shutdown.
func RunService(ctx context.Context, o Options) error {
	log, err := svc.NewLogger(o.Stderr, o.LogFormat, o.LogLevel)
	if err != nil {
		return err
	}
	base, err := svc.Dial(ctx, o.NATSURL, o.NATSCreds, bus.ServiceDrift, bus.TopologyOptions{Replicas: o.Replicas})
	if err != nil {
		return err
	}
	defer base.Close()
	js := base.JS
	engines, closeEngines, err := NewEngines(ctx, js, o.Engines, log)
	if err != nil {
		return err
	}
	defer closeEngines()
	holder := o.Holder
	if holder == "" {
		holder, _ = os.Hostname()
	}
	holder += "/" + rand.Text()[:8]
	var leases *bus.Leases
	if !o.NoLease {
		if leases, err = bus.NewLeases(ctx, js, holder, base.BusMetrics); err != nil {
			return err
		}
	}
	s, err := New(ctx, Config{JS: js, Engines: engines, Holder: holder, CosmeticPrefixes: o.CosmeticPrefixes,
		DefaultInterval: o.DefaultInterval, MinInterval: o.MinInterval, Jitter: o.Jitter, Concurrency: o.Concurrency,
		ClaimTTL: o.ClaimTTL, ScanTimeout: o.ScanTimeout, Leases: leases, Logger: log, Registerer: base.Registry, BusMetrics: base.BusMetrics})
	if err != nil {
		return err
	}
	log.Info("drift started", "holder", holder, "engines", len(engines))
	return base.Serve(ctx, o.MetricsAddr, o.HealthAddr, s.Run)
}
