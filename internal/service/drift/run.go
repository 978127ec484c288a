package drift

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/pflag"

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
	pw := rand.Text()
	srv := &http.Server{Handler: state.NewHandler(store, state.HandlerOptions{Password: pw, Logger: log}), ReadHeaderTimeout: 10 * time.Second}
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
			BackendURL: "http://" + ln.Addr().String(), BackendPassword: pw, Store: store, Artifacts: art,
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

// Options is the drift process configuration: the common service options and drift's own
// (flags and LAVA_* variables, svc.Command; `lava up` sets them directly).
type Options struct {
	svc.Common
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
}

// Flags defines drift's own flags on fs.
func (o *Options) Flags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Holder, "holder", "", "replica name in schedule claims and leases (default: the host name)")
	fs.StringVar(&o.Engines.ProviderDir, "provider-dir", "/var/lib/lava/providers", "provider mirror directory (OpenTofu filesystem-mirror layout)")
	fs.StringVar(&o.Engines.TofuBin, "tofu-bin", "", "OpenTofu binary; empty: resources applied with tofu are not scanned")
	fs.StringVar(&o.Engines.TerraformBin, "terraform-bin", "", "Terraform binary; empty: resources applied with terraform are not scanned")
	fs.StringVar(&o.Engines.CLIConfigFile, "cli-config-file", "", "CLI configuration for tofu/terraform (default: providers only from --provider-dir)")
	fs.StringVar(&o.Engines.WorkDir, "work-dir", "", "directory for per-scan workspaces (default: a temporary directory)")
	fs.StringSliceVar(&o.CosmeticPrefixes, "cosmetic-prefixes", nil, "attribute prefixes whose updates are cosmetic (default tags.,labels.)")
	fs.DurationVar(&o.DefaultInterval, "default-interval", DefaultInterval, "scan interval of a resource whose spec was not seen")
	fs.DurationVar(&o.MinInterval, "min-interval", DefaultMinInterval, "floor of every scan interval")
	fs.Float64Var(&o.Jitter, "jitter", DefaultJitter, "relative jitter of the next scan time, in [0, 1)")
	fs.IntVar(&o.Concurrency, "concurrency", DefaultConcurrency, "scans (and handlers per consumer) running at once")
	fs.DurationVar(&o.ClaimTTL, "claim-ttl", DefaultClaimTTL, "how long a replica's claim on a due resource lasts")
	fs.DurationVar(&o.ScanTimeout, "scan-timeout", DefaultScanTimeout, "bound of one scan")
	fs.BoolVar(&o.NoLease, "no-lease", false, "scan without holding the resource's work lease (scans may then overlap an apply)")
}

// Run runs the drift service until ctx is cancelled (svc.Start: NATS, topology, metrics and
// health; then the engines, the consumers and the scheduler). It returns nil after a graceful
// shutdown.
func Run(ctx context.Context, o Options) error {
	base, err := svc.Start(ctx, bus.ServiceDrift, o.Common, svc.Setup{})
	if err != nil {
		return err
	}
	defer base.Close()
	js, log := base.JS, base.Log
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
	return base.Serve(ctx, s.Run)
}
