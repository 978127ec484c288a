package up

import (
	"context"
	"crypto/rand"
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
	"k8s.io/client-go/rest"

	"github.com/lava-operator/lava/api/v1alpha1"
	"github.com/lava-operator/lava/internal/engine/engines"
	"github.com/lava-operator/lava/internal/engine/providers"
	"github.com/lava-operator/lava/internal/lang/policy"
	"github.com/lava-operator/lava/internal/lang/render"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/kube"
	"github.com/lava-operator/lava/internal/platform/natsauth"
	"github.com/lava-operator/lava/internal/platform/svc"
	"github.com/lava-operator/lava/internal/platform/telemetry"
	"github.com/lava-operator/lava/internal/service/anomaly"
	"github.com/lava-operator/lava/internal/service/applier"
	"github.com/lava-operator/lava/internal/service/attest"
	"github.com/lava-operator/lava/internal/service/drift"
	"github.com/lava-operator/lava/internal/service/synth"
	"github.com/lava-operator/lava/internal/service/viggy"
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
	// FileReceiptsAddr (docs/security.md, "RPCs").
	FileRPCToken     = "rpc.token"
	FileRenderAddr   = "render.addr"
	FileReceiptsAddr = "receipts.addr"
	// FileNATSURL holds the client URL of the running server (`nats sub -s $(cat ...)`).
	FileNATSURL = "nats.url"
	// FileLog receives every service's logs (text).
	FileLog = "lava.log"
	// FileLock is locked (flock) by the lava up using the state directory; it holds its pid.
	FileLock = "lock"
)

// DemoDir is where the examples of `make up` (examples/) write their files; [DefaultPolicy]
// lets file-writing resources write under it and nowhere else.
const DemoDir = "/tmp/lava-demo"

// DefaultPolicy is lava up's policy when --policy is not given, also the one `lava validate`
// and `lava render` check against without --policy: the built-in cluster policy
// ([policy.Default]) with fileWriteRoots [DemoDir], so the demos apply while a manifest still
// cannot write lava up's state directory, provider mirror or plugin cache
// (docs/design/0010-tenant-policy.md, "File writes").
func DefaultPolicy() policy.Config {
	return policy.Config{Cluster: policy.Settings{FileWriteRoots: &[]string{DemoDir}}}
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
	// StateDir holds the JetStream store, the object files, keys and logs (default ".lava").
	StateDir string
	// ProviderDir is the provider mirror (default [DefaultProviderDir]).
	ProviderDir string
	// Install configures installing the providers ProviderDir lacks (embedded engine; empty
	// CacheDir: none).
	Install providers.Options
	// TofuBin enables the tofu engine ("" : the tofu next to the mirror, when it exists).
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
	// (docs/design/0010-tenant-policy.md); "" is [DefaultPolicy].
	PolicyFile string
}

// Result is what a run ended with.
type Result struct {
	// Objects are the resources at the end (file source), sorted.
	Objects []v1alpha1.LavaArchitecture
	// FileErrors are the manifest files that failed to read at the last scan.
	FileErrors []*FileError
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
// returns after every service drained and the NATS server stopped.
func Run(ctx context.Context, o Options) (Result, error) {
	if err := o.defaults(); err != nil {
		return Result{}, err
	}
	if len(o.Paths) == 0 && o.Kubeconfig == "" {
		return Result{}, errors.New("up: no manifests: give -f DIR|FILE or --kubeconfig")
	}
	if _, err := ListFiles(o.Paths); err != nil {
		return Result{}, err
	}
	for _, d := range []string{o.StateDir, filepath.Join(o.StateDir, DirNATS), filepath.Join(o.StateDir, DirWork)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return Result{}, fmt.Errorf("up: state dir: %w", err)
		}
	}
	unlock, err := LockStateDir(o.StateDir)
	if err != nil {
		return Result{}, err
	}
	defer unlock()
	if o.Log == nil {
		f, err := os.OpenFile(filepath.Join(o.StateDir, FileLog), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			return Result{}, fmt.Errorf("up: log: %w", err)
		}
		defer f.Close()
		o.Log = f
	}
	log, err := telemetry.NewLogger(o.Log, "text", o.LogLevel)
	if err != nil {
		return Result{}, err
	}
	keyFile, err := ensureKey(filepath.Join(o.StateDir, FileBindingsKey), func() (string, error) {
		k := make([]byte, render.BindingsKeySize)
		_, err := rand.Read(k)
		return hex.EncodeToString(k), err
	})
	if err != nil {
		return Result{}, err
	}
	signingKey, err := ensureKey(filepath.Join(o.StateDir, FileSigningKey), func() (string, error) {
		_, seed, err := attest.GenerateSigner(nil)
		return hex.EncodeToString(seed), err
	})
	if err != nil {
		return Result{}, err
	}
	signer, err := attest.LoadSigner(signingKey)
	if err != nil {
		return Result{}, err
	}
	if err := os.WriteFile(filepath.Join(o.StateDir, FilePublicKey), []byte(hex.EncodeToString(signer.PublicKey())+"\n"), 0o644); err != nil {
		return Result{}, fmt.Errorf("up: %w", err)
	}

	credDir := filepath.Join(o.StateDir, DirNATSCredentials)
	keys, err := natsauth.GenerateDir(credDir)
	if err != nil {
		return Result{}, fmt.Errorf("up: %w", err)
	}
	users, err := natsauth.Users(bus.Declare(bus.TopologyOptions{Replicas: 1}), keys)
	if err != nil {
		return Result{}, fmt.Errorf("up: %w", err)
	}
	// as is the connection options of identity on the embedded server.
	as := func(url, identity string) bus.ConnectOptions {
		return bus.ConnectOptions{URL: url, Identity: identity, NKeyFile: filepath.Join(credDir, natsauth.SeedFileName(identity))}
	}
	srv, err := startNATS(filepath.Join(o.StateDir, DirNATS), o.NATSAddr, users)
	if err != nil {
		return Result{}, err
	}
	defer func() {
		srv.Shutdown()
		srv.WaitForShutdown()
	}()
	url := srv.ClientURL()
	if err := os.WriteFile(filepath.Join(o.StateDir, FileNATSURL), []byte(url+"\n"), 0o644); err != nil {
		return Result{}, fmt.Errorf("up: %w", err)
	}
	// The bootstrap step, as the chart's hook Job runs it: the admin identity creates the
	// topology; every service then runs with its own identity and only checks it.
	boot := as(url, bus.IdentityBootstrap)
	boot.Name = "lava-up-bootstrap"
	bnc, bjs, err := bus.Connect(boot)
	if err != nil {
		return Result{}, fmt.Errorf("up: %w", err)
	}
	err = bus.EnsureTopology(ctx, bjs, bus.TopologyOptions{Replicas: 1})
	bnc.Close()
	if err != nil {
		return Result{}, err
	}
	// The file source plays the watcher's role, with the watcher's identity.
	srcConn := as(url, bus.ServiceWatcher)
	srcConn.Name = "lava-up"
	nc, js, err := bus.Connect(srcConn)
	if err != nil {
		return Result{}, fmt.Errorf("up: %w", err)
	}
	defer nc.Close()

	display := NewDisplay(o.Stdout, o.Terminal, nil)
	mode := "manifests from " + fmt.Sprint(o.Paths)
	if o.Kubeconfig != "" {
		mode = "cluster " + o.Kubeconfig
	}
	display.Println(fmt.Sprintf("lava up: %s · state %s · NATS %s · logs %s", mode, o.StateDir, url, filepath.Join(o.StateDir, FileLog)))
	if st, err := os.Stat(o.ProviderDir); err != nil || !st.IsDir() {
		display.Println(fmt.Sprintf("lava up: provider mirror %s is missing: run `make tools-tofu` (only terraform_data can apply without it)", o.ProviderDir))
	}

	var kubeCfg *rest.Config
	if o.Kubeconfig != "" {
		if kubeCfg, err = kube.Config(o.Kubeconfig); err != nil {
			return Result{}, err
		}
		o.KubeAPI.Apply(kubeCfg)
	}

	// Every service runs until svcCtx is cancelled; the driver below cancels it when ctx is
	// done or, with Once, when everything settled.
	svcCtx, stop := context.WithCancel(ctx)
	defer stop()
	g, gctx := errgroup.WithContext(svcCtx)
	runSvc := func(name string, f func(context.Context) error) {
		g.Go(func() error {
			if err := f(gctx); err != nil {
				return fmt.Errorf("up: %s: %w", name, err)
			}
			return nil
		})
	}
	// Every service runs as its binary does (internal/platform/svc), on the embedded server,
	// without metrics or health listeners, logging to o.Log.
	// Each with its own bus identity (credentials in DirNATSCredentials).
	commonBase := svc.Common{LogFormat: "text", LogLevel: o.LogLevel, Replicas: 1, Stderr: o.Log}
	common := func(service string) svc.Common {
		c := commonBase
		c.NATS = as(url, service)
		return c
	}
	workDir := filepath.Join(o.StateDir, DirWork)
	// The RPCs on loopback, behind the state directory's token.
	tokenFile, err := ensureKey(filepath.Join(o.StateDir, FileRPCToken), func() (string, error) { return rand.Text(), nil })
	if err != nil {
		return Result{}, err
	}
	rpcListen := func(addrFile string) (net.Listener, error) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("up: %w", err)
		}
		if err := os.WriteFile(filepath.Join(o.StateDir, addrFile), []byte(ln.Addr().String()+"\n"), 0o644); err != nil {
			ln.Close()
			return nil, fmt.Errorf("up: %w", err)
		}
		return ln, nil
	}
	renderLn, err := rpcListen(FileRenderAddr)
	if err != nil {
		return Result{}, err
	}
	receiptsLn, err := rpcListen(FileReceiptsAddr)
	if err != nil {
		renderLn.Close()
		return Result{}, err
	}
	runSvc(bus.ServiceSynth, func(ctx context.Context) error {
		return synth.Run(ctx, synth.Options{Common: common(bus.ServiceSynth), BindingsKeyFile: keyFile, Concurrency: 8, Kube: kubeCfg,
			Listener: renderLn, RPCTokenFile: tokenFile, PolicyFile: o.PolicyFile, DefaultPolicy: DefaultPolicy()})
	})
	runSvc(bus.ServiceApplier, func(ctx context.Context) error {
		return applier.Run(ctx, applier.Options{Common: common(bus.ServiceApplier), Holder: "lava-up", Concurrency: 4, Kube: kubeCfg,
			Engines: engines.Options{ProviderDir: o.ProviderDir, Install: o.Install, TofuBin: o.TofuBin, TerraformBin: o.TerraformBin,
				WorkDir: filepath.Join(workDir, "applier")}})
	})
	runSvc(bus.ServiceDrift, func(ctx context.Context) error {
		return drift.Run(ctx, drift.Options{Common: common(bus.ServiceDrift), Holder: "lava-up", Kube: kubeCfg,
			Engines: engines.Options{ProviderDir: o.ProviderDir, Install: o.Install, TofuBin: o.TofuBin, TerraformBin: o.TerraformBin,
				WorkDir: filepath.Join(workDir, "drift")}})
	})
	runSvc(bus.ServiceViggy, func(ctx context.Context) error {
		return viggy.Run(ctx, viggy.Options{Common: common(bus.ServiceViggy), MaxAttempts: viggy.DefaultMaxAttempts, Backoff: viggy.DefaultBackoff(),
			Concurrency: viggy.DefaultConcurrency})
	})
	runSvc(bus.ServiceAnomaly, func(ctx context.Context) error {
		return anomaly.Run(ctx, anomaly.Options{Common: common(bus.ServiceAnomaly), Kube: kubeCfg})
	})
	runSvc(bus.ServiceAttest, func(ctx context.Context) error {
		return attest.Run(ctx, attest.Options{Common: common(bus.ServiceAttest), SigningKeyFile: signingKey,
			Listener: receiptsLn, RPCTokenFile: tokenFile})
	})

	phaseCtx, stopPhases := context.WithCancel(context.WithoutCancel(ctx))
	defer stopPhases()
	phaseDone := make(chan error, 1)

	var snapshot func() Snapshot
	var src *Source
	// changed is signalled (without blocking) whenever the file source wrote an object, so the
	// driver looks at once instead of at its next tick.
	changed := make(chan struct{}, 1)
	if o.Kubeconfig != "" {
		runSvc(bus.ServiceWatcher, func(ctx context.Context) error {
			return watcher.Run(ctx, watcher.Options{Common: common(bus.ServiceWatcher), Kubeconfig: o.Kubeconfig, Namespaces: o.Namespaces, KubeAPI: o.KubeAPI,
				BindingsKeyFile: keyFile, WatchSecrets: true})
		})
		kv, err := newKubeView(kubeCfg, o.Namespaces)
		if err != nil {
			return Result{}, err
		}
		snapshot = func() Snapshot { return kv.Snapshot(gctx) }
	} else {
		src, err = NewSource(ctx, SourceConfig{JS: js, Paths: o.Paths, StatusDir: filepath.Join(o.StateDir, DirStatus),
			Environment: Environment(o.ProviderDir, o.TofuBin, o.TerraformBin), Logger: log.With("service", "file-source"),
			OnChange: func() {
				select {
				case changed <- struct{}{}:
				default:
				}
			}})
		if err != nil {
			return Result{}, err
		}
		runSvc("file source", func(ctx context.Context) error { return src.Run(ctx, o.Interval) })
		// The phase consumer outlives the services: what they publish while they drain (an
		// apply finishing after Ctrl-C) is folded before the final table.
		go func() {
			err := src.RunPhases(phaseCtx, nil)
			if err != nil && phaseCtx.Err() == nil {
				stop() // the consumer failed: stop everything
				err = fmt.Errorf("up: phase consumer: %w", err)
			} else {
				err = nil
			}
			phaseDone <- err
		}()
		snapshot = func() Snapshot {
			fe, loaded := src.FileErrors()
			return Snapshot{Objects: src.Objects(), FileErrors: fe, Loaded: loaded}
		}
	}

	var driverErr error
	g.Go(func() error {
		defer stop()
		tick := 250 * time.Millisecond
		switch {
		case o.Kubeconfig != "":
			tick = 500 * time.Millisecond // each snapshot lists from the API server
		case !o.Terminal:
			tick = 100 * time.Millisecond
		}
		t := time.NewTicker(tick)
		defer t.Stop()
		var deadline <-chan time.Time
		if o.Once {
			tm := time.NewTimer(o.Timeout)
			defer tm.Stop()
			deadline = tm.C
		}
		settledSince := time.Time{}
		// With --once, a write by the file source wakes the driver before its tick.
		var wake <-chan struct{}
		if o.Once {
			wake = changed
		}
		var last time.Time
		for {
			select {
			case <-gctx.Done():
				return nil
			case <-deadline:
				driverErr = fmt.Errorf("%w (%s)", ErrNotSettled, o.Timeout)
				return nil
			case <-t.C:
			case <-wake:
				// At most one snapshot per minSnapshotGap: each copies every object.
				if d := minSnapshotGap - time.Since(last); d > 0 {
					select {
					case <-gctx.Done():
						return nil
					case <-time.After(d):
					}
				}
			}
			last = time.Now()
			snap := snapshot()
			display.Update(snap)
			if !o.Once {
				continue
			}
			if src != nil {
				// Every object settled: one more scan, at once, confirms that the manifests
				// did not change meanwhile (a change makes an object unsettled again).
				if ready(snap) {
					if err := src.ScanNow(gctx); err == nil && ready(snapshot()) {
						return nil
					}
				}
				continue
			}
			if ready(snap) {
				// The cluster's objects settled twice in a row a moment apart: the watcher had
				// time to observe a change made meanwhile.
				if settledSince.IsZero() {
					settledSince = time.Now()
				} else if time.Since(settledSince) >= o.Interval+250*time.Millisecond {
					return nil
				}
			} else {
				settledSince = time.Time{}
			}
		}
	})
	err = waitDrained(svcCtx, g, display, snapshot)
	if src != nil {
		// Fold what the services published while they drained, then stop the consumer.
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), foldTimeout)
		if ferr := src.WaitPhasesFolded(fctx); ferr != nil {
			log.Warn("up: phase events left unfolded at exit", "error", ferr)
		}
		cancel()
		stopPhases()
		if perr := <-phaseDone; perr != nil && err == nil {
			err = perr
		}
	}
	snap := snapshot()
	display.Final(snap)
	res := Result{Objects: snap.Objects, FileErrors: snap.FileErrors}
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
	if o.ProviderDir == "" {
		o.ProviderDir = DefaultProviderDir()
	}
	if o.TofuBin == "" {
		if p := filepath.Join(filepath.Dir(o.ProviderDir), "bin", "tofu"); fileExists(p) {
			o.TofuBin = p
		}
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
	return nil
}

// Environment digests what the engines of this process can use: the files of the provider
// mirror (paths and sizes) and the CLI binaries offered: 16 hex digits of a SHA-256, which
// only has to change when the environment does.
func Environment(providerDir string, bins ...string) string {
	h := sha256.New()
	_ = filepath.WalkDir(providerDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(providerDir, p)
		fmt.Fprintf(h, "provider %s %d\n", rel, info.Size())
		return nil
	})
	for _, b := range bins {
		if b != "" {
			fmt.Fprintf(h, "bin %s\n", b)
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// ensureKey returns path, creating it (mode 0600) with gen's content when it does not exist.
func ensureKey(path string, gen func() (string, error)) (string, error) {
	if _, err := os.Stat(path); err == nil {
		return path, nil
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
