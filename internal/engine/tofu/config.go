package tofu

import (
	"errors"
	"fmt"
	"github.com/lava-operator/lava/internal/platform/bus"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/lava-operator/lava/internal/engine"
	"github.com/lava-operator/lava/internal/engine/state"
)

// Config configures an [Engine].
type Config struct {
	// Name is the engine name, "tofu" or "terraform" (default: the binary's base name).
	Name string
	// Bin is the tofu or terraform binary.
	Bin string
	// MaxMemoryBytes bounds the data (heap) of every CLI process and of the providers it
	// starts, each (RLIMIT_DATA, on Linux): OpenTofu evaluates the tenant's expressions with
	// no budget of its own. 0: [DefaultMaxMemoryBytes]; negative: no limit.
	MaxMemoryBytes int64
	// MaxCPUSeconds bounds the CPU time of every CLI process and of the providers it starts,
	// each (RLIMIT_CPU, on Linux; killed at the limit). 0: [DefaultMaxCPUSeconds]; negative:
	// no limit.
	MaxCPUSeconds int64
	// CLIConfigFile is the CLI configuration (TF_CLI_CONFIG_FILE), e.g. a tool directory's
	// tofurc. When empty, one is generated that installs providers only from MirrorDir.
	CLIConfigFile string
	// MirrorDir is the filesystem provider mirror (<host>/<namespace>/<type>/<version>/<os_arch>/).
	// When set, providers are checked against it before init, so a missing provider fails fast
	// with [engine.ErrProviderUnavailable].
	MirrorDir string
	// PluginCacheDir is the provider plugin cache shared by every operation of the process
	// (TF_PLUGIN_CACHE_DIR), used when providers come from the CLI config alone (no MirrorDir);
	// inits that fill it are serialised. With an (unpacked) MirrorDir no cache is used: init
	// links each provider straight from the mirror, which is already a shared, read-only store,
	// and OpenTofu 1.12's cache is not safe while another init writes to it (measured: plans
	// failing to start a provider being re-installed, and init crashing in
	// providercache.Dir.LinkFromOtherCache).
	PluginCacheDir string
	// WorkDir is where per-operation workspaces are created (os.TempDir() when empty).
	WorkDir string
	// BackendURL is the base URL of the [state.Handler] ("http://127.0.0.1:7070").
	BackendURL string
	// BackendPassword is the handler's password (sent as TF_HTTP_PASSWORD, never written to
	// a file or a plan).
	BackendPassword string
	// BackendTokens, when set, replaces BackendPassword with a password issued per operation
	// for the operation's resource and revoked when it ends (the handler must share them:
	// state.HandlerOptions.Tokens).
	BackendTokens *state.Tokens
	// Store is the state store behind the handler; the engine reads records from it directly
	// (serial and lineage checks, outputs, lock details).
	Store *state.Store
	// Artifacts holds rendered JSON, plan files and state bodies.
	Artifacts state.Artifacts
	// Timeouts bound each CLI step: init, plan (and a drift scan's), show and providers
	// schema, apply, destroy (zero fields: engine.Timeouts' defaults).
	Timeouts engine.Timeouts
	// LockTimeout is how long the CLI retries a held state lock (-lock-timeout; 0: fail at once).
	LockTimeout time.Duration
	// TailBytes bounds the output tail kept in errors (default 2048).
	TailBytes int
	// Env adds environment variables for the CLI and providers (e.g. cloud credentials); the
	// process environment is inherited.
	Env map[string]string
	// Logger receives step timings at debug level (slog.DiscardHandler when nil).
	Logger *slog.Logger
	// FileAccess holds every plan's and drift scan's provider path attributes and import ids
	// to the tenant policy's file roots, with the providers' schemas (`providers schema
	// -json`), before any provider touches a file (docs/design/0022-file-access-from-schemas.md);
	// nil: no such check.
	FileAccess *engine.FileAccess
	// ArtifactQuota is charged with each plan file and review body before it is stored,
	// against the resource's namespace; a plan past it fails with the *bus.QuotaExceededError
	// (nil: no quota).
	ArtifactQuota *bus.ArtifactQuota
}

func (c *Config) validate() error {
	var errs []error
	if c.Bin == "" {
		errs = append(errs, errors.New("no binary"))
	}
	if c.CLIConfigFile == "" && c.MirrorDir == "" {
		errs = append(errs, errors.New("neither a CLI config file nor a provider mirror"))
	}
	if c.PluginCacheDir == "" && c.MirrorDir == "" {
		errs = append(errs, errors.New("no plugin cache directory (required without a mirror)"))
	}
	if c.BackendURL == "" {
		errs = append(errs, errors.New("no state backend URL"))
	}
	if c.Store == nil || c.Artifacts == nil {
		errs = append(errs, errors.New("no state store or artifact store"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("tofu engine config: %w", err)
	}
	if c.Name == "" {
		c.Name = filepath.Base(c.Bin)
	}
	if c.MaxMemoryBytes == 0 {
		c.MaxMemoryBytes = DefaultMaxMemoryBytes
	}
	if c.MaxCPUSeconds == 0 {
		c.MaxCPUSeconds = DefaultMaxCPUSeconds
	}
	if c.WorkDir == "" {
		c.WorkDir = os.TempDir()
	}
	// The CLI runs in each workspace directory, so every path handed to it (the generated CLI
	// configuration lives under WorkDir) must not depend on this process's working directory.
	for _, p := range []*string{&c.WorkDir, &c.CLIConfigFile, &c.MirrorDir, &c.PluginCacheDir} {
		if *p == "" {
			continue
		}
		abs, err := filepath.Abs(*p)
		if err != nil {
			return fmt.Errorf("tofu engine config: %s: %w", *p, err)
		}
		*p = abs
	}
	if c.TailBytes <= 0 {
		c.TailBytes = 2048
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	c.Timeouts = c.Timeouts.WithDefaults()
	return nil
}

// writeCLIConfig writes a CLI config that installs providers only from mirror.
func writeCLIConfig(dir, mirror string) (string, error) {
	abs, err := filepath.Abs(mirror)
	if err != nil {
		return "", fmt.Errorf("tofu engine: mirror path: %w", err)
	}
	f, err := os.CreateTemp(dir, "lava-cli-*.tfrc")
	if err != nil {
		return "", fmt.Errorf("tofu engine: write CLI config: %w", err)
	}
	defer f.Close()
	_, err = fmt.Fprintf(f, `# Written by Lava: providers only from the filesystem mirror, never online.
provider_installation {
  filesystem_mirror {
    path    = %q
    include = ["*/*/*"]
  }
}
disable_checkpoint = true
`, abs)
	if err != nil {
		return "", fmt.Errorf("tofu engine: write CLI config: %w", err)
	}
	return f.Name(), nil
}
