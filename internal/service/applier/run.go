package applier

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
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lava-operator/lava/internal/engine"
	"github.com/lava-operator/lava/internal/engine/embedded"
	"github.com/lava-operator/lava/internal/engine/state"
	"github.com/lava-operator/lava/internal/engine/tofu"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/identity"
	"github.com/lava-operator/lava/internal/platform/svc"
)

// EngineOptions configures the engines an applier process offers. The embedded engine is
// always offered; tofu and terraform when their binary is set.
type EngineOptions struct {
	// ProviderDir is the provider mirror (OpenTofu filesystem-mirror layout) for every engine.
	ProviderDir string
	// TofuBin and TerraformBin are the CLI binaries ("" leaves that engine out).
	TofuBin, TerraformBin string
	// CLIConfigFile is an optional CLI configuration for tofu and terraform (default: one that
	// installs providers only from ProviderDir).
	CLIConfigFile string
	// WorkDir holds per-operation workspaces and the shared plugin cache (default: a
	// temporary directory).
	WorkDir string
	// Timeouts per CLI step.
	Timeouts tofu.Timeouts
	// LockTimeout is how long the CLI retries a held state lock.
	LockTimeout time.Duration
}

// Backend is the Terraform http state backend served on loopback for the CLI engines.
type Backend struct {
	// URL is the base URL ("http://127.0.0.1:PORT").
	URL string
	// Tokens are the per-operation basic-auth passwords the handler accepts, each for one
	// resource's state while one tofu operation runs (state.Tokens).
	Tokens *state.Tokens
	srv    *http.Server
}

// Close stops the backend.
func (b *Backend) Close() error { return b.srv.Close() }

// ServeBackend serves the state.Handler of store on addr (a loopback address such as
// "127.0.0.1:0"); a request must carry a per-operation password issued from Backend.Tokens for
// the resource it names.
func ServeBackend(store *state.Store, addr string, log *slog.Logger) (*Backend, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("applier: state backend: %w", err)
	}
	tokens := state.NewTokens()
	srv := &http.Server{Handler: state.NewHandler(store, state.HandlerOptions{Tokens: tokens, Logger: log}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return &Backend{URL: "http://" + ln.Addr().String(), Tokens: tokens, srv: srv}, nil
}

// NewStore returns the state store over lava-state and lava-artifacts whose locks expire with
// their holder's lease: a lock older than lockTTL whose holder no longer holds the resource's
// lease can be taken over.
func NewStore(ctx context.Context, js jetstream.JetStream, lockTTL time.Duration, log *slog.Logger) (*state.Store, error) {
	kv, err := js.KeyValue(ctx, bus.BucketState)
	if err != nil {
		return nil, fmt.Errorf("applier: bind %s: %w", bus.BucketState, err)
	}
	leases, err := js.KeyValue(ctx, bus.BucketLeases)
	if err != nil {
		return nil, fmt.Errorf("applier: bind %s: %w", bus.BucketLeases, err)
	}
	art, err := bus.NewArtifacts(ctx, js)
	if err != nil {
		return nil, fmt.Errorf("applier: %w", err)
	}
	return state.NewStore(kv, art, state.Options{LockTTL: lockTTL, HolderAlive: HolderAlive(leases), Logger: log}), nil
}

// NewEngines builds the engines of o over store, the artifact store and the backend. close
// stops them (provider processes, generated files).
func NewEngines(ctx context.Context, js jetstream.JetStream, store *state.Store, backend *Backend, o EngineOptions, log *slog.Logger) (map[string]engine.Engine, func(), error) {
	art, err := bus.NewArtifacts(ctx, js)
	if err != nil {
		return nil, nil, fmt.Errorf("applier: %w", err)
	}
	var closers []func()
	closeAll := func() {
		for _, c := range closers {
			c()
		}
	}
	emb := embedded.New(embedded.Options{Store: store, Artifacts: art, ProviderDir: o.ProviderDir, Logger: log})
	closers = append(closers, func() { _ = emb.Close() })
	engines := map[string]engine.Engine{EngineEmbedded: emb}
	workDir := o.WorkDir
	if workDir == "" {
		if workDir, err = os.MkdirTemp("", "lava-applier-"); err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("applier: work dir: %w", err)
		}
	}
	for _, cli := range []struct{ name, bin string }{{EngineTofu, o.TofuBin}, {EngineTerraform, o.TerraformBin}} {
		if cli.bin == "" {
			continue
		}
		e, err := tofu.New(tofu.Config{
			Name: cli.name, Bin: cli.bin, CLIConfigFile: o.CLIConfigFile, MirrorDir: o.ProviderDir,
			PluginCacheDir: filepath.Join(workDir, "plugin-cache-"+cli.name), WorkDir: workDir,
			BackendURL: backend.URL, BackendTokens: backend.Tokens, Store: store, Artifacts: art,
			Timeouts: o.Timeouts, LockTimeout: o.LockTimeout, Logger: log,
		})
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("applier: %s engine: %w", cli.name, err)
		}
		closers = append(closers, func() { _ = e.Close() })
		engines[cli.name] = e
	}
	return engines, closeAll, nil
}

// Options is the applier's process configuration (flags and LAVA_* variables, parsed by
// services/applier).
type Options struct {
	// NATSURL and NATSCreds reach JetStream.
	NATSURL, NATSCreds string
	// Holder names this replica (default: the host name); a random suffix is added per
	// process.
	Holder string
	// Engines configures the engines.
	Engines EngineOptions
	// BackendAddr is the loopback address of the state backend ("127.0.0.1:0").
	BackendAddr string
	// LockTTL: a state lock older than this whose holder lost its lease can be taken over.
	LockTTL time.Duration
	// MetricsAddr and HealthAddr serve /metrics and /healthz, /readyz.
	MetricsAddr, HealthAddr string
	// LogFormat and LogLevel configure the logs.
	LogFormat, LogLevel string
	// Replicas is the JetStream replica count of the topology.
	Replicas int
	// Concurrency bounds handlers per consumer.
	Concurrency int
	// Kube reaches the Kubernetes API for the outputs Secret (nil: sensitive outputs are not
	// stored).
	Kube *rest.Config
	// Identity chooses who the service acts as for an object's ConfigMaps and Secrets
	// (--impersonate, --default-service-account, --allow-own-identity).
	Identity identity.Options
	// Stderr receives the logs.
	Stderr io.Writer
}

// RunService runs the applier until ctx is cancelled: NATS, topology, state store and loopback
// backend, engines, metrics and health, and the consumers. It returns nil after a graceful
// shutdown.
func RunService(ctx context.Context, o Options) error {
	log, err := svc.NewLogger(o.Stderr, o.LogFormat, o.LogLevel)
	if err != nil {
		return err
	}
	base, err := svc.Dial(ctx, o.NATSURL, o.NATSCreds, bus.ServiceApplier, bus.TopologyOptions{Replicas: o.Replicas})
	if err != nil {
		return err
	}
	defer base.Close()
	js := base.JS
	if o.BackendAddr == "" {
		o.BackendAddr = "127.0.0.1:0"
	}
	store, err := NewStore(ctx, js, o.LockTTL, log)
	if err != nil {
		return err
	}
	backend, err := ServeBackend(store, o.BackendAddr, log)
	if err != nil {
		return err
	}
	defer backend.Close()
	engines, closeEngines, err := NewEngines(ctx, js, store, backend, o.Engines, log)
	if err != nil {
		return err
	}
	defer closeEngines()
	holder := o.Holder
	if holder == "" {
		holder, _ = os.Hostname()
	}
	holder += "/" + rand.Text()[:8]
	var kube client.Client
	if o.Kube != nil {
		if kube, err = client.New(o.Kube, client.Options{}); err != nil {
			return fmt.Errorf("kubernetes client: %w", err)
		}
	}
	ids, err := o.Identity.Clients(o.Kube)
	if err != nil {
		return err
	}
	s, err := New(ctx, Config{JS: js, Store: store, Engines: engines, Holder: holder, Kube: kube, Logger: log,
		Registerer: base.Registry, BusMetrics: base.BusMetrics, Concurrency: o.Concurrency, Identities: ids})
	if err != nil {
		return err
	}
	log.Info("applier started", "holder", holder, "engines", len(engines), "state_backend", backend.URL)
	return base.Serve(ctx, o.MetricsAddr, o.HealthAddr, s.Run)
}
