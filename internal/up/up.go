package up

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"golang.org/x/sync/errgroup"

	"github.com/lava-operator/lava/api/v1alpha1"
	"github.com/lava-operator/lava/internal/engine"
	"github.com/lava-operator/lava/internal/engine/providers"
	"github.com/lava-operator/lava/internal/engine/runner"
	"github.com/lava-operator/lava/internal/lang/policy"
	"github.com/lava-operator/lava/internal/manifest"
	"github.com/lava-operator/lava/internal/platform/identity"
	"github.com/lava-operator/lava/internal/platform/svc"
	"github.com/lava-operator/lava/internal/service/watcher"
)

// Files under the state directory.
const (
	// DirNATS is the JetStream file store.
	DirNATS = "nats"
	// DirStatus holds one object file per resource (<namespace>/<name>.yaml).
	DirStatus = "status"
	// DirWork holds the engines' workspaces and plugin caches.
	DirWork = "work"
	// FileBindingsKey is the installation's 32-byte bindings key (hex), created once.
	FileBindingsKey = "bindings.key"
	// FileSigningKey is attest's Ed25519 seed (hex), created once; FilePublicKey its public
	// key (hex), for `lava receipts verify --public-key`.
	FileSigningKey = "signing.key"
	FilePublicKey  = "signing.pub"
	// DirNATSCredentials holds one nkey seed per bus identity (natsauth.SeedFileName: the seven
	// services, "subscriber" and "bootstrap"), each mode 0600, created once: the embedded
	// server admits only these identities, each with its generated permissions
	// (docs/security.md, "Bus"); the CLI's receipts and state commands use bootstrap.nk.
	DirNATSCredentials = "nats-credentials"
	// FileRPCToken is the bearer token of the RPCs lava up serves on loopback (created once,
	// mode 0600): RenderService at the address in FileRenderAddr, ReceiptService at the one in
	// FileReceiptsAddr, PlanService at the one in FilePlanAddr (docs/security.md, "RPCs").
	FileRPCToken     = "rpc.token"
	FileRenderAddr   = "render.addr"
	FileReceiptsAddr = "receipts.addr"
	FilePlanAddr     = "plan.addr"
	// FileNATSURL holds the client URL of the running server (`nats sub -s $(cat ...)`).
	FileNATSURL = "nats.url"
	// FileLog receives every service's logs (text).
	FileLog = "lava.log"
	// FileLock is locked (flock) by the lava up using the state directory; it holds its pid.
	FileLock = "lock"
)

// DemoDir is the default [Options].FileRoot: the directory below which lava up's built-in
// policy gives each namespace its file root, DemoDir/NAMESPACE, where the examples of `make up`
// (examples/, namespace demo) write their files.
const DemoDir = "/tmp/lava-demo"

// DemoNamespace is the namespace of the examples of `make up`: the only one lava up applies
// when provider runners are asked for and the kernel has no Landlock to sandbox them
// ([SourceConfig].OnlyNamespace).
const DemoNamespace = "demo"

// landlockSupport is what the kernel offers a runner's sandbox ([runner.Support]); a variable
// so that a test can stand for a kernel without Landlock.
var landlockSupport = runner.Support

// DefaultPolicy is the policy `lava validate` and `lava render` check against without
// --policy: lava up's built-in policy with the default file root, [NamespaceRootsPolicy]
// ([DemoDir]).
func DefaultPolicy() policy.Config { return NamespaceRootsPolicy(DemoDir) }

// NamespaceRootsPolicy is lava up's policy when --policy is not given: the built-in cluster
// policy ([policy.Default]) with each namespace's file writes confined to a root of its own,
// fileRoot/NAMESPACE ([policy.Config].NamespaceFileRoot), so the demos apply while a manifest
// still cannot write lava up's state directory, provider mirror or plugin cache, nor another
// namespace's files (docs/design/0010-tenant-policy.md, "File writes";
// docs/design/0024-file-source-identity-and-roots.md).
func NamespaceRootsPolicy(fileRoot string) policy.Config {
	return policy.Config{NamespaceFileRoot: fileRoot}
}

// DefaultToolsDir is the OpenTofu tool directory `make tools-tofu` builds, relative to the home
// directory; $LAVA_TOFU_DIR overrides it.
const DefaultToolsDir = ".cache/lava/tools/tofu-v1.12.6"

// Options configures [Run].
type Options struct {
	// Paths are the manifest files and directories (-f). Required without Kubeconfig.
	Paths []string
	// Kubeconfig, when set, runs the watcher against that cluster instead of the file source.
	Kubeconfig string
	// Namespaces limits the watcher to these namespaces (Kubeconfig only; empty: all).
	Namespaces []string
	// KubeAPI is the rate limit of every Kubernetes API client (Kubeconfig only; zero:
	// svc.DefaultKubeAPIQPS and Burst).
	KubeAPI svc.KubeAPI
	// Identity is who synth, the applier and drift act as for an object's ConfigMaps and
	// Secrets (Kubeconfig only): their own options, registered on lava up's flags by
	// [identity.Options.Register] with their defaults (impersonation on). With Impersonate,
	// Run checks at start that the kubeconfig's identity may impersonate ServiceAccounts in
	// Namespaces. The zero value acts with the kubeconfig's identity for every object.
	Identity identity.Options
	// Lockdown is the watcher's refusal of references to another namespace (Kubeconfig only;
	// [watcher.Lockdown.Register]); the zero value refuses them, as the flag's default.
	Lockdown watcher.Lockdown
	// StateDir holds the JetStream store, the object files, keys and logs (default ".lava").
	StateDir string
	// ProviderDir is the provider mirror (default [DefaultProviderDir]).
	ProviderDir string
	// Install configures installing the providers ProviderDir lacks (embedded engine; empty
	// CacheDir: none).
	Install providers.Options
	// Timeouts bound each engine step of the applier (--plan-timeout, --apply-timeout,
	// --destroy-timeout; zero fields: engine.Timeouts' defaults); drift's scans keep its
	// --scan-timeout.
	Timeouts engine.Timeouts
	// TofuBin enables the tofu engine ("" : the tofu next to the mirror, offered before it
	// exists: see [Environment]).
	// TerraformBin enables the terraform engine ("" : $LAVA_TERRAFORM_BIN when set).
	TofuBin, TerraformBin string
	// NATSAddr is the host:port the embedded NATS server listens on (default
	// "127.0.0.1:0", a free port; the URL is written to <state-dir>/nats.url).
	NATSAddr string
	// Once exits when every resource settled ([Settled]) and every deletion finished.
	Once bool
	// Timeout bounds a run with Once (default 10m); running out is an error.
	Timeout time.Duration
	// Interval is how often manifests are re-read (default 1s).
	Interval time.Duration
	// Stdout receives the table; Terminal selects in-place redraws.
	Stdout   io.Writer
	Terminal bool
	// Log receives every service's logs (default <state-dir>/lava.log).
	Log io.Writer
	// LogLevel is the services' log level (default info).
	LogLevel string
	// PolicyFile is the tenant policy document synth checks every render against
	// (docs/design/0010-tenant-policy.md); "" is [NamespaceRootsPolicy] of FileRoot.
	PolicyFile string
	// FileRoot is the directory of the namespaces' file roots under the built-in policy
	// (PolicyFile ""; default [DemoDir]): lava up creates it with mode 0700, and refuses to
	// start when it is a symbolic link, not a directory, owned by another user or open to
	// others ([ensurePrivateDir]). It cannot be combined with PolicyFile.
	FileRoot string
	// ProviderRunner starts the embedded engine's providers in runner processes (`lava
	// runner`) under RunnerUID and RunnerGID (<= 0: [DefaultRunnerUID]), with Landlock rules,
	// instead of in lava up's own process (docs/design/0038-provider-runner.md). Run as root,
	// lava up refuses to start when another process already runs as RunnerUID.
	ProviderRunner       bool
	RunnerUID, RunnerGID int
	// MaxProviderProcesses bounds the embedded engine's provider processes running at once in
	// lava up, the applier's and drift's together (one embedded.ProcessBudget; <= 0:
	// embedded.DefaultMaxProcesses).
	MaxProviderProcesses int
}

// DefaultRunnerUID is the default of [Options].RunnerUID and RunnerGID (`--runner-uid`,
// `--runner-gid`): the first uid of the range systemd allocates to its dynamic users
// (61184-65519), which no account of a usual host has, rather than 65534 (nobody), which
// other daemons of the host run as.
const DefaultRunnerUID = 61184

// Result is what a run ended with.
type Result struct {
	// Objects are the resources at the end (file source), sorted.
	Objects []v1alpha1.LavaArchitecture
	// FileErrors are the manifest files that failed to read at the last scan.
	FileErrors []*manifest.FileError
}

// DefaultProviderDir is $LAVA_TOFU_DIR/providers, else ~/.cache/lava/tools/tofu-v1.12.6/providers.
func DefaultProviderDir() string {
	if d := os.Getenv("LAVA_TOFU_DIR"); d != "" {
		return filepath.Join(d, "providers")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return filepath.Join(home, DefaultToolsDir, "providers")
}

// ErrNotSettled is returned by a run with Once that timed out.
var ErrNotSettled = errors.New("up: resources did not settle in time")

// Run runs `lava up` until ctx is done (or, with Once, until every resource settled). It
// returns after every service drained and the NATS server stopped. Its steps, in order
// (steps.go): prepareStateDir (lock, log, file-access policy), ensureKeys, startBus (the
// embedded NATS server, the topology, the file source's connection), connectKube,
// startServices, startSource (the file source, or the watcher against the cluster), drive
// (the display, and the end of a --once run) and finish (drain, fold, final table).
func Run(ctx context.Context, o Options) (Result, error) {
	if err := o.defaults(); err != nil {
		return Result{}, err
	}
	if len(o.Paths) == 0 && o.Kubeconfig == "" {
		return Result{}, errors.New("up: no manifests: give -f DIR|FILE or --kubeconfig")
	}
	if _, err := manifest.ListFiles(o.Paths); err != nil {
		return Result{}, err
	}
	s := &session{o: o}
	defer s.close()
	for _, step := range []func(context.Context) error{s.prepareStateDir, s.ensureKeys, s.startBus, s.connectKube} {
		if err := step(ctx); err != nil {
			return Result{}, err
		}
	}
	// Every service runs until svcCtx is cancelled; the driver cancels it when ctx is done or,
	// with Once, when everything settled.
	svcCtx, stop := context.WithCancel(ctx)
	defer stop()
	g, gctx := errgroup.WithContext(svcCtx)
	if err := s.startServices(gctx, g); err != nil {
		return Result{}, err
	}
	if err := s.startSource(ctx, gctx, g, stop); err != nil {
		return Result{}, err
	}
	var driverErr error
	g.Go(func() error {
		defer stop()
		driverErr = s.drive(gctx)
		return nil
	})
	res, err := s.finish(ctx, waitDrained(svcCtx, g, s.display, s.snapshot))
	if err != nil && !errors.Is(err, context.Canceled) {
		return res, err
	}
	return res, driverErr
}

// minSnapshotGap is the least time between two snapshots of a --once run's driver when writes
// wake it.
const minSnapshotGap = 10 * time.Millisecond

// foldTimeout bounds how long Run waits, after the services stopped, for their last phase
// events to be folded.
const foldTimeout = 10 * time.Second

// drainNotice is how long the services may take to stop before Run says what it waits for.
const drainNotice = time.Second

// waitDrained waits for g (the services). Once svcCtx is done (Ctrl-C, or --once finished),
// if they have not stopped within [drainNotice] it prints "stopping: waiting for N in-flight
// operations", N being the resources the pipeline is working on.
func waitDrained(svcCtx context.Context, g *errgroup.Group, display *Display, snapshot func() Snapshot) error {
	done := make(chan error, 1)
	go func() { done <- g.Wait() }()
	select {
	case err := <-done:
		return err
	case <-svcCtx.Done():
	}
	t := time.NewTimer(drainNotice)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
	}
	n := 0
	for _, o := range snapshot().Objects {
		if activity(o) != "" {
			n++
		}
	}
	what := "the services to stop"
	if n > 0 {
		what = fmt.Sprintf("%d in-flight operation", n)
		if n > 1 {
			what += "s"
		}
	}
	display.Println("lava up: stopping: waiting for " + what)
	return <-done
}

// ready reports whether a --once run may stop: the source loaded its inputs and every object
// settled.
func ready(snap Snapshot) bool {
	if !snap.Loaded {
		return false
	}
	for _, o := range snap.Objects {
		if !Settled(o) {
			return false
		}
	}
	return true
}

func (o *Options) defaults() error {
	if o.StateDir == "" {
		o.StateDir = ".lava"
	}
	if o.RunnerUID <= 0 {
		o.RunnerUID = DefaultRunnerUID // never root: zero is an unset field here
	}
	if o.RunnerGID <= 0 {
		o.RunnerGID = DefaultRunnerUID
	}
	if o.ProviderDir == "" {
		o.ProviderDir = DefaultProviderDir()
	}
	if o.TofuBin == "" {
		// Offered even before it is built: a resource of engine tofu fails EngineUnavailable
		// until the binary appears, and is then planned again (the environment changed).
		o.TofuBin = filepath.Join(filepath.Dir(o.ProviderDir), "bin", "tofu")
	}
	if o.TerraformBin == "" {
		if p := os.Getenv("LAVA_TERRAFORM_BIN"); p != "" && fileExists(p) {
			o.TerraformBin = p
		}
	}
	if o.NATSAddr == "" {
		o.NATSAddr = "127.0.0.1:0"
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Minute
	}
	if o.Interval <= 0 {
		o.Interval = time.Second
	}
	if o.Stdout == nil {
		o.Stdout = io.Discard
	}
	if o.LogLevel == "" {
		o.LogLevel = "info"
	}
	switch {
	case o.PolicyFile != "" && o.FileRoot != "":
		return errors.New("up: --file-root is the built-in policy's; with --policy, the document's fileWriteRoots apply")
	case o.PolicyFile == "" && o.FileRoot == "":
		o.FileRoot = DemoDir
	case o.PolicyFile == "":
		abs, err := filepath.Abs(o.FileRoot)
		if err != nil {
			return fmt.Errorf("up: --file-root: %w", err)
		}
		o.FileRoot = abs
	}
	return nil
}

// Environment returns what digests the environment of this process's engines: the files of
// the provider mirror (paths and sizes), read once, now, as the engines pin the mirror when they
// open (a provider added later is used after a restart), and the CLI binaries offered (paths and
// sizes, -1 while one is not there), looked at on every call, so a binary built while lava up
// runs is picked up. The digest is 16 hex digits of a SHA-256, which only has to change when the
// environment does ([SourceConfig].Environment).
func Environment(providerDir string, bins ...string) func() string {
	mirror := sha256.New()
	_ = filepath.WalkDir(providerDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(providerDir, p)
		fmt.Fprintf(mirror, "provider %s %d\n", rel, info.Size())
		return nil
	})
	sum := mirror.Sum(nil)
	return func() string {
		h := sha256.New()
		h.Write(sum)
		for _, b := range bins {
			if b == "" {
				continue
			}
			size := int64(-1)
			if st, err := os.Stat(b); err == nil && !st.IsDir() {
				size = st.Size()
			}
			fmt.Fprintf(h, "bin %s %d\n", b, size)
		}
		return hex.EncodeToString(h.Sum(nil))[:16]
	}
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// ensureKey returns path, creating it (mode 0600) with gen's content when it does not exist.
func ensureKey(path string, gen func() (string, error)) (string, error) {
	if _, err := os.Lstat(path); err == nil {
		return path, checkPrivateFile(path)
	}
	v, err := gen()
	if err != nil {
		return "", fmt.Errorf("up: generate %s: %w", filepath.Base(path), err)
	}
	if err := os.WriteFile(path, []byte(v+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("up: %w", err)
	}
	return path, nil
}

// checkPrivateFile refuses a key or seed file lava up kept from an earlier run that is not as
// lava up writes it: a regular file (not a link), of this user, open to nobody else (mode
// 0600 or tighter). One that is not was written by something else, whose content lava up would
// trust (a provider that wrote its chart cache over the NATS admin seed, found by a
// twenty-second trial): the error names it and what to do.
func checkPrivateFile(path string) error {
	st, err := os.Lstat(path)
	if err != nil {
		return fmt.Errorf("up: %w", err)
	}
	uid, known := ownerOf(st)
	if !st.Mode().IsRegular() || (known && uid != os.Getuid()) || st.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("up: %s is not as lava up writes its keys (a regular file of uid %d, mode 0600; it is %v, uid %d): "+
			"something else may have replaced it; remove it and lava up makes a new one (seeds and keys of a state directory belong to its lava up alone)",
			path, os.Getuid(), st.Mode(), uid)
	}
	return nil
}

// startNATS starts the embedded nats-server with JetStream, its store in storeDir, listening
// on addr (host:port, port 0 for a free one), admitting only users (no anonymous client).
func startNATS(storeDir, addr string, users []*server.NkeyUser) (*server.Server, error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("up: --nats-addr %q: %w", addr, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return nil, fmt.Errorf("up: --nats-addr %q: bad port", addr)
	}
	if port == 0 {
		port = server.RANDOM_PORT
	}
	srv, err := server.NewServer(&server.Options{
		ServerName: "lava-up", Host: host, Port: port, JetStream: true, StoreDir: storeDir, NoLog: true, NoSigs: true,
		Nkeys: users,
	})
	if err != nil {
		return nil, fmt.Errorf("up: nats-server: %w", err)
	}
	srv.Start()
	if !srv.ReadyForConnections(30 * time.Second) {
		srv.Shutdown()
		return nil, fmt.Errorf("up: nats-server on %s not ready (is the port in use?)", addr)
	}
	return srv, nil
}
