package engines

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lava-operator/lava/api/v1alpha1"
	"github.com/lava-operator/lava/internal/engine"
	"github.com/lava-operator/lava/internal/engine/embedded"
	"github.com/lava-operator/lava/internal/engine/providers"
	"github.com/lava-operator/lava/internal/engine/state"
	"github.com/lava-operator/lava/internal/engine/tofu"
	"github.com/lava-operator/lava/internal/lang/policy"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/httpserver"
)

// Options configures the engines of a process. The embedded engine is always offered; tofu
// and terraform when their binary is set.
type Options struct {
	// ProviderDir is the provider mirror (OpenTofu filesystem-mirror layout) of every engine.
	ProviderDir string
	// Install configures provider installation for the embedded engine: when its CacheDir is
	// set, providers ProviderDir lacks are installed through the Provider Registry Protocol or
	// a network mirror into that shared cache (docs/embedded-engine.md, "Provider
	// installation"); empty: ProviderDir only.
	Install providers.Options
	// TofuBin and TerraformBin are the CLI binaries ("" leaves that engine out).
	TofuBin, TerraformBin string
	// CLIConfigFile is an optional CLI configuration for tofu and terraform (default: one that
	// installs providers only from ProviderDir).
	CLIConfigFile string
	// WorkDir holds per-operation workspaces and the shared plugin caches (default: a new
	// temporary directory "lava-<Process>-*").
	WorkDir string
	// Timeouts bound each step of every engine of the set: the embedded engine's plan,
	// drift scan, apply and destroy, and each CLI command (--plan-timeout, --apply-timeout,
	// --destroy-timeout; zero fields: engine.Timeouts' defaults).
	Timeouts engine.Timeouts
	// LockTimeout is how long the CLIs retry a held state lock (0: they do not).
	LockTimeout time.Duration
	// ProviderHost, when not nil, starts the embedded engine's providers in runners
	// (embedded.Options.ProviderHost); nil: as the engine's own children.
	ProviderHost embedded.ProviderHost
	// MaxProviderProcesses bounds the embedded engine's provider processes running at once
	// across all its operations (embedded.Options.MaxProcesses; 0:
	// embedded.DefaultMaxProcesses). Ignored when ProviderProcesses is set.
	MaxProviderProcesses int
	// ProviderProcesses, when not nil, is a budget of provider processes the embedded engine
	// shares with the other engine sets of the process (`lava up`: the applier's and drift's).
	ProviderProcesses *embedded.ProcessBudget
	// CLIMaxMemoryBytes bounds each CLI process's data (tofu.Config.MaxMemoryBytes; 0:
	// tofu.DefaultMaxMemoryBytes, negative: none), CLIMaxCPUSeconds its CPU time
	// (tofu.Config.MaxCPUSeconds).
	CLIMaxMemoryBytes, CLIMaxCPUSeconds int64
	// BackendAddr is the loopback address of the state backend (default "127.0.0.1:0", a free
	// port). The backend is served only when a CLI engine is offered.
	BackendAddr string
	// ArtifactQuota bounds what each namespace's plans store in lava-artifacts (plan
	// artifacts and review bodies are charged, state bodies counted: bus.ArtifactQuota); nil:
	// no quota.
	ArtifactQuota *bus.ArtifactQuota
	// BackendLimits bound the state backend's server (zero fields: the defaults of
	// internal/platform/httpserver; see [ServeBackend]).
	BackendLimits httpserver.Limits
	// State configures the state store (lock TTL, holder liveness); its Logger defaults to
	// [Open]'s log.
	State state.Options
	// Process names the process in errors and in the temporary work directory ("applier",
	// "drift").
	Process string
	// Policy is the tenant policy document (the one synth reads: --policy-file) whose
	// fileWriteRoots and fileReadRoots both engines hold every provider path attribute and
	// import id to at plan time, with the provider schemas (engine.FileAccess,
	// docs/design/0022-file-access-from-schemas.md). nil: no such check (the services always
	// set one; its empty Path is the built-in policy, which has no roots).
	Policy *policy.File
	// ProtectedDirs are directories, besides ProviderDir, Install.CacheDir and WorkDir, that no
	// provider path may reach and no root may overlap (`lava up`: its state directory).
	ProtectedDirs []string
}

// Set is what [Open] built. Close it to stop the engines (provider processes, generated
// files) and the backend.
type Set struct {
	// Store is the state store every engine of the set uses.
	Store *state.Store
	// Engines maps an engine name as the CRD spells it (api/v1alpha1.Engine*) to the engine.
	Engines map[string]engine.Engine
	// Backend is the loopback state backend of the CLI engines; nil when none is offered.
	Backend *Backend

	closers []func()
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

// Close stops the backend (a second Close is harmless).
func (b *Backend) Close() error { return b.srv.Close() }

// ServeBackend serves the state.Handler of store on addr (a loopback address such as
// "127.0.0.1:0") with limits (httpserver.Limits: connections, timeouts, header size; a zero
// MaxConnsPerClient is the whole MaxConns, since every CLI connects from the same loopback
// address); a request must carry a password issued from Backend.Tokens for the resource it
// names. Error: "state backend: listen ...".
func ServeBackend(store *state.Store, addr string, limits httpserver.Limits, log *slog.Logger) (*Backend, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("state backend: %w", err)
	}
	if limits.MaxConnsPerClient <= 0 {
		limits.MaxConnsPerClient = limits.WithDefaults().MaxConns
	}
	tokens := state.NewTokens() // a password per tofu operation and resource
	srv := limits.Server(state.NewHandler(store, state.HandlerOptions{Tokens: tokens, Logger: log}))
	go func() { _ = srv.Serve(limits.Listener(ln)) }()
	return &Backend{URL: "http://" + ln.Addr().String(), Tokens: tokens, srv: srv}, nil
}

// Open binds the state store (the lava-state bucket and the artifact store, which the
// topology must hold: bus.EnsureTopology) and builds the engines of o on it, with the
// loopback backend when a CLI engine is offered. Errors name o.Process and what failed (step
// timeouts a handler's deadline cuts short, engine.Timeouts.Check; binding a bucket, the
// backend, the work directory, a CLI engine); nothing is left running after an error.
func Open(ctx context.Context, js jetstream.JetStream, o Options, log *slog.Logger) (*Set, error) {
	wrap := func(format string, a ...any) error { return fmt.Errorf(o.Process+": "+format, a...) }
	if err := o.Timeouts.Check(bus.DefaultHandlerTimeout); err != nil {
		return nil, wrap("%w", err)
	}
	kv, err := js.KeyValue(ctx, bus.BucketState)
	if err != nil {
		return nil, wrap("bind %s: %w", bus.BucketState, err)
	}
	art, err := bus.NewArtifacts(ctx, js)
	if err != nil {
		return nil, wrap("%w", err)
	}
	so := o.State
	if so.Logger == nil {
		so.Logger = log
	}
	if so.ArtifactQuota == nil {
		so.ArtifactQuota = o.ArtifactQuota
	}
	var files *engine.FileAccess
	if o.Policy != nil {
		files = &engine.FileAccess{Policy: o.Policy,
			Protected: append([]string{o.ProviderDir, o.Install.CacheDir, o.WorkDir}, o.ProtectedDirs...)}
		// A root over the mirror, the cache or the work directory is refused at start.
		if err := files.CheckRoots(); err != nil {
			return nil, wrap("%w", err)
		}
	}
	s := &Set{Store: state.NewStore(kv, art, so), Engines: map[string]engine.Engine{}}
	var installer *providers.Installer
	if o.Install.CacheDir != "" {
		if installer, err = providers.NewInstaller(o.Install); err != nil {
			return nil, wrap("%w", err)
		}
	}
	emb := embedded.New(embedded.Options{Store: s.Store, Artifacts: art, ProviderDir: o.ProviderDir, Installer: installer, Logger: log,
		FileAccess: files, ProviderHost: o.ProviderHost, ArtifactQuota: o.ArtifactQuota, Timeouts: o.Timeouts,
		MaxProcesses: o.MaxProviderProcesses, Processes: o.ProviderProcesses})
	s.closers = append(s.closers, func() { _ = emb.Close() })
	s.Engines[string(v1alpha1.EngineEmbedded)] = emb
	if o.TofuBin == "" && o.TerraformBin == "" {
		return s, nil
	}
	addr := o.BackendAddr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	if s.Backend, err = ServeBackend(s.Store, addr, o.BackendLimits, log); err != nil {
		s.Close()
		return nil, wrap("%w", err)
	}
	s.closers = append(s.closers, func() { _ = s.Backend.Close() })
	workDir := o.WorkDir
	if workDir == "" {
		if workDir, err = os.MkdirTemp("", "lava-"+o.Process+"-"); err != nil {
			s.Close()
			return nil, wrap("work dir: %w", err)
		}
		if files != nil {
			files.Protected = append(files.Protected, workDir)
		}
	}
	for _, cli := range []struct {
		name v1alpha1.Engine
		bin  string
	}{{v1alpha1.EngineTofu, o.TofuBin}, {v1alpha1.EngineTerraform, o.TerraformBin}} {
		if cli.bin == "" {
			continue
		}
		name := string(cli.name)
		e, err := tofu.New(tofu.Config{
			Name: name, Bin: cli.bin, CLIConfigFile: o.CLIConfigFile, MirrorDir: o.ProviderDir,
			PluginCacheDir: filepath.Join(workDir, "plugin-cache-"+name), WorkDir: workDir,
			BackendURL: s.Backend.URL, BackendTokens: s.Backend.Tokens, Store: s.Store, Artifacts: art,
			Timeouts: o.Timeouts, LockTimeout: o.LockTimeout, Logger: log, FileAccess: files, MaxMemoryBytes: o.CLIMaxMemoryBytes,
			MaxCPUSeconds: o.CLIMaxCPUSeconds, ArtifactQuota: o.ArtifactQuota,
		})
		if err != nil {
			s.Close()
			return nil, wrap("%s engine: %w", name, err)
		}
		s.closers = append(s.closers, func() { _ = e.Close() })
		s.Engines[name] = e
	}
	return s, nil
}

// Close stops the engines, then the backend (the reverse of their start).
func (s *Set) Close() {
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
	s.closers = nil
}
