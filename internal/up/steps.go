package up

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/pflag"
	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/rest"

	"github.com/lava-operator/lava/internal/engine"
	"github.com/lava-operator/lava/internal/engine/embedded"
	"github.com/lava-operator/lava/internal/engine/engines"
	"github.com/lava-operator/lava/internal/engine/runner"
	"github.com/lava-operator/lava/internal/lang/policy"
	"github.com/lava-operator/lava/internal/lang/render"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/identity"
	"github.com/lava-operator/lava/internal/platform/kube"
	"github.com/lava-operator/lava/internal/platform/natsauth"
	"github.com/lava-operator/lava/internal/platform/svc"
	"github.com/lava-operator/lava/internal/platform/telemetry"
	"github.com/lava-operator/lava/internal/readmodel"
	"github.com/lava-operator/lava/internal/service/anomaly"
	"github.com/lava-operator/lava/internal/service/applier"
	"github.com/lava-operator/lava/internal/service/attest"
	"github.com/lava-operator/lava/internal/service/drift"
	"github.com/lava-operator/lava/internal/service/synth"
	"github.com/lava-operator/lava/internal/service/viggy"
	"github.com/lava-operator/lava/internal/service/watcher"
)

// holder names lava up in the leases and state locks of the applier and drift.
const holder = "lava-up"

// session is one [Run]: what its steps set up, each step using what the earlier ones set.
// close releases it all, in reverse order.
type session struct {
	o Options

	// prepareStateDir
	unlock    func()
	logFile   *os.File // o.Log when Run opened it
	log       *slog.Logger
	policy    *policy.File // the tenant policy, for synth and the engines' file access
	protected []string     // what the policy's file roots may not overlap
	// ensureKeys: the key files under the state directory.
	bindingsKey, signingKey, rpcToken string
	// startBus
	credDir string
	srv     *server.Server
	url     string
	nc      *nats.Conn // the file source's connection, as the watcher
	js      jetstream.JetStream
	display *Display
	// connectKube: the cluster (nil without a kubeconfig).
	kube *rest.Config
	// startSource
	src        *Source // the file source (nil with a kubeconfig)
	snapshot   func() Snapshot
	changed    chan struct{} // signalled (without blocking) when the file source wrote an object
	stopPhases context.CancelFunc
	phaseDone  chan error
	// startServices: the provider runners (nil without Options.ProviderRunner), and the only
	// namespace applied when the kernel cannot sandbox them ("": every namespace).
	host          *runner.Host
	onlyNamespace string
	// processes is the provider process budget the applier's and drift's embedded engines
	// share (Options.MaxProviderProcesses), made by the first engines call.
	processes *embedded.ProcessBudget
}

// close stops what the steps started: the phase consumer, the connection, the NATS server,
// the log file, the state directory's lock.
func (s *session) close() {
	if s.stopPhases != nil {
		s.stopPhases()
	}
	if s.nc != nil {
		s.nc.Close()
	}
	if s.host != nil {
		_ = s.host.Close()
	}
	if s.srv != nil {
		s.srv.Shutdown()
		s.srv.WaitForShutdown()
	}
	if s.logFile != nil {
		s.logFile.Close()
	}
	if s.unlock != nil {
		s.unlock()
	}
}

// prepareStateDir creates the state directory and locks it, checks the policy's file roots
// against what Lava keeps, creates the built-in policy's file root (Options.FileRoot), and
// opens the log (<state-dir>/lava.log unless Options.Log).
func (s *session) prepareStateDir(context.Context) error {
	o := s.o
	// The state directory holds the NATS seeds, the keys and the RPC token: only this user may
	// use it, or another local user who made it first could plant the credentials lava up
	// then trusts (docs/design/0024-file-source-identity-and-roots.md).
	if err := os.MkdirAll(filepath.Dir(filepath.Clean(o.StateDir)), 0o755); err != nil {
		return fmt.Errorf("up: state dir: %w", err)
	}
	if err := ensurePrivateDir(o.StateDir, stateDirDir); err != nil {
		return err
	}
	for _, d := range []string{filepath.Join(o.StateDir, DirNATS), filepath.Join(o.StateDir, DirWork)} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("up: state dir: %w", err)
		}
	}
	unlock, err := LockStateDir(o.StateDir)
	if err != nil {
		return err
	}
	s.unlock = unlock
	// The policy's file roots may not overlap what Lava keeps: the state directory (keys,
	// seeds, the JetStream store, the engines' workspaces), the provider mirror and cache.
	s.policy = &policy.File{Path: o.PolicyFile, Default: NamespaceRootsPolicy(o.FileRoot)}
	s.protected = []string{o.StateDir, o.ProviderDir, o.Install.CacheDir}
	for _, bin := range []string{o.TofuBin, o.TerraformBin} { // a binary may appear there later
		if bin != "" {
			s.protected = append(s.protected, filepath.Dir(bin))
		}
	}
	if err := (&engine.FileAccess{Policy: s.policy, Protected: s.protected}).CheckRoots(); err != nil {
		return fmt.Errorf("up: %w", err)
	}
	// The built-in policy's roots, one per namespace, lie below a directory only this user
	// may use (docs/design/0024-file-source-identity-and-roots.md).
	if o.PolicyFile == "" {
		k := fileRootDir
		if o.ProviderRunner {
			k = k.forRunner(0o711, -1, -1)
		}
		if err := ensurePrivateDir(o.FileRoot, k); err != nil {
			return err
		}
	}
	if s.o.Log == nil {
		f, err := os.OpenFile(filepath.Join(o.StateDir, FileLog), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			return fmt.Errorf("up: log: %w", err)
		}
		s.logFile, s.o.Log = f, f
	}
	s.log, err = telemetry.NewLogger(s.o.Log, "text", o.LogLevel)
	return err
}

// ensureKeys creates, once, the installation's bindings key, attest's signing seed (and writes
// its public key) and the RPC token under the state directory.
func (s *session) ensureKeys(context.Context) error {
	dir := s.o.StateDir
	var err error
	s.bindingsKey, err = ensureKey(filepath.Join(dir, FileBindingsKey), func() (string, error) {
		k := make([]byte, render.BindingsKeySize)
		_, err := rand.Read(k)
		return hex.EncodeToString(k), err
	})
	if err != nil {
		return err
	}
	s.signingKey, err = ensureKey(filepath.Join(dir, FileSigningKey), func() (string, error) {
		_, seed, err := readmodel.GenerateSigner(nil)
		return hex.EncodeToString(seed), err
	})
	if err != nil {
		return err
	}
	signer, err := readmodel.LoadSigner(s.signingKey)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, FilePublicKey), []byte(hex.EncodeToString(signer.PublicKey())+"\n"), 0o644); err != nil {
		return fmt.Errorf("up: %w", err)
	}
	s.rpcToken, err = ensureKey(filepath.Join(dir, FileRPCToken), func() (string, error) { return rand.Text(), nil })
	return err
}

// startBus starts the embedded NATS server, admitting only the bus identities of the
// credential directory, writes its URL, runs the bootstrap step (as the chart's hook Job: the
// admin identity creates the topology; every service then only checks it), connects the file
// source as the watcher, and prints the run's first line.
func (s *session) startBus(ctx context.Context) error {
	o := s.o
	s.credDir = filepath.Join(o.StateDir, DirNATSCredentials)
	keys, err := natsauth.GenerateDir(s.credDir)
	if err != nil {
		return fmt.Errorf("up: %w", err)
	}
	seeds, err := os.ReadDir(s.credDir)
	if err != nil {
		return fmt.Errorf("up: %w", err)
	}
	for _, e := range seeds {
		if err := checkPrivateFile(filepath.Join(s.credDir, e.Name())); err != nil {
			return err
		}
	}
	users, err := natsauth.Users(bus.Declare(bus.TopologyOptions{Replicas: 1}), keys)
	if err != nil {
		return fmt.Errorf("up: %w", err)
	}
	if s.srv, err = startNATS(filepath.Join(o.StateDir, DirNATS), o.NATSAddr, users); err != nil {
		return err
	}
	s.url = s.srv.ClientURL()
	if err := os.WriteFile(filepath.Join(o.StateDir, FileNATSURL), []byte(s.url+"\n"), 0o644); err != nil {
		return fmt.Errorf("up: %w", err)
	}
	boot := s.as(bus.IdentityBootstrap)
	boot.Name = "lava-up-bootstrap"
	bnc, bjs, err := bus.Connect(boot)
	if err != nil {
		return fmt.Errorf("up: %w", err)
	}
	err = bus.EnsureTopology(ctx, bjs, bus.TopologyOptions{Replicas: 1})
	bnc.Close()
	if err != nil {
		return err
	}
	// The file source plays the watcher's role, with the watcher's identity.
	srcConn := s.as(bus.ServiceWatcher)
	srcConn.Name = "lava-up"
	if s.nc, s.js, err = bus.Connect(srcConn); err != nil {
		return fmt.Errorf("up: %w", err)
	}
	s.display = NewDisplay(o.Stdout, o.Terminal, nil)
	mode := "manifests from " + fmt.Sprint(o.Paths)
	if o.Kubeconfig != "" {
		mode = "cluster " + o.Kubeconfig
	}
	s.display.Println(fmt.Sprintf("lava up: %s · state %s · NATS %s · logs %s", mode, o.StateDir, s.url, filepath.Join(o.StateDir, FileLog)))
	if st, err := os.Stat(o.ProviderDir); err != nil || !st.IsDir() {
		s.display.Println(fmt.Sprintf("lava up: provider mirror %s is missing: run `make tools-tofu` (only terraform_data can apply without it)", o.ProviderDir))
	}
	return nil
}

// as is the connection options of identity on the embedded server (its nkey seed in the
// credential directory).
func (s *session) as(identity string) bus.ConnectOptions {
	return bus.ConnectOptions{URL: s.url, Identity: identity, NKeyFile: filepath.Join(s.credDir, natsauth.SeedFileName(identity))}
}

// connectKube loads the kubeconfig, when given, with Options.KubeAPI's rate limit, and, with
// impersonation on, checks that its identity may impersonate ServiceAccounts in the watched
// namespaces: otherwise every object that needs an identity would fail, one by one.
func (s *session) connectKube(ctx context.Context) error {
	if s.o.Kubeconfig == "" {
		return nil
	}
	cfg, err := kube.Config(s.o.Kubeconfig)
	if err != nil {
		return err
	}
	s.kube = s.o.KubeAPI.Apply(cfg)
	if !s.o.Identity.Impersonate {
		return nil
	}
	if err := identity.CheckImpersonation(ctx, s.kube, s.o.Namespaces); err != nil {
		if errors.Is(err, identity.ErrImpersonationRefused) {
			return fmt.Errorf("up: --impersonate: the kubeconfig's %w; grant it that (or watch only namespaces where it has it, --namespaces), "+
				"or run with --impersonate=false to act with the kubeconfig's own identity for every object (a cluster with a single tenant only)", err)
		}
		return fmt.Errorf("up: %w", err)
	}
	return nil
}

// common is the svc.Common of service: its own bus identity on the embedded server, text logs
// to Options.Log, one replica, no metrics or health listener.
func (s *session) common(service string) svc.Common {
	return svc.Common{NATS: s.as(service), LogFormat: "text", LogLevel: s.o.LogLevel, Replicas: 1, Stderr: s.o.Log}
}

// flagDefaults returns the options the flag set of a service declares: its Flags registered
// on a fresh flag set and nothing parsed, so lava up runs each service with the defaults of
// its one declaration and sets only what it must.
func flagDefaults[T any, P interface {
	*T
	Flags(*pflag.FlagSet)
}]() T {
	var o T
	P(&o).Flags(pflag.NewFlagSet("defaults", pflag.ContinueOnError))
	return o
}

// engines is e (an engine service's flag defaults) with lava up's provider mirror, installer,
// CLI binaries, step timeouts, policy and protected directories, the workspaces under
// <state-dir>/work/<service>, and the provider process budget every engine service of lava up
// shares.
func (s *session) engines(e engines.Options, service string) engines.Options {
	o := s.o
	e.ProviderDir, e.Install, e.TofuBin, e.TerraformBin = o.ProviderDir, o.Install, o.TofuBin, o.TerraformBin
	if o.ProviderRunner {
		// OpenTofu and Terraform run their providers themselves, outside any runner: with
		// runners on, they are not offered (an object naming them fails EngineUnavailable).
		e.TofuBin, e.TerraformBin = "", ""
	}
	e.Timeouts = o.Timeouts
	e.WorkDir, e.Policy, e.ProtectedDirs = filepath.Join(o.StateDir, DirWork, service), s.policy, s.protected
	if s.processes == nil {
		s.processes = embedded.NewProcessBudget(o.MaxProviderProcesses, s.log)
	}
	e.ProviderProcesses = s.processes
	if s.host != nil {
		e.ProviderHost = s.host
	}
	return e
}

// runnerUID is the user runners run as: Options.RunnerUID, or -1 (lava up's own) when lava up
// is not root (only root starts a process as another user) or runners are off.
func (s *session) runnerUID() int {
	if !s.o.ProviderRunner || (os.Geteuid() != 0 && s.o.RunnerUID != os.Geteuid()) {
		return -1
	}
	return s.o.RunnerUID
}

// startRunners makes the provider runners' host when Options.ProviderRunner is set: runners
// run this executable's `lava runner` as the runner user, read the provider mirror, write
// below the built-in policy's file root, may not connect to NATS or to lava up's RPC ports
// (denied), and may not read the state directory. What the kernel's Landlock lacks is said
// at start.
func (s *session) startRunners(denied ...net.Listener) error {
	o := s.o
	if !o.ProviderRunner {
		return nil
	}
	abi, missing := landlockSupport()
	if abi < 1 {
		// No sandbox for the runners: a tenant's provider could read lava up's secrets, so only
		// the examples' namespace is applied (docs/design/0038-provider-runner.md).
		if o.Kubeconfig != "" && !slices.Equal(o.Namespaces, []string{DemoNamespace}) {
			return fmt.Errorf("up: --provider-runner: this kernel has no Landlock to sandbox provider runners: "+
				"with --kubeconfig, watch only --namespaces %s (watching %v)", DemoNamespace, o.Namespaces)
		}
		s.onlyNamespace = DemoNamespace
		missing = append(missing, "so only manifests of namespace "+DemoNamespace+" are applied; those of other namespaces are refused")
	}
	uid := s.runnerUID()
	if uid < 0 {
		s.display.Println(fmt.Sprintf("lava up: not root: runners run as this user (uid %d), not as uid %d; their Landlock rules still apply", os.Geteuid(), o.RunnerUID))
	} else if err := runnerUIDInUse(uid); err != nil {
		return err
	}
	s.display.Println(fmt.Sprintf("lava up: providers run in runners as uid %d (Landlock ABI v%d)", max(uid, os.Geteuid()), abi))
	s.display.Println("lava up: engines tofu and terraform are not offered: they start their providers themselves, outside the runners")
	for _, m := range missing {
		s.display.Println("lava up: " + m)
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("up: runner: %w", err)
	}
	u, err := url.Parse(s.url)
	if err != nil {
		return fmt.Errorf("up: runner: %w", err)
	}
	natsPort, err := strconv.Atoi(u.Port())
	if err != nil {
		return fmt.Errorf("up: runner: NATS port of %s: %w", s.url, err)
	}
	ports := []uint16{uint16(natsPort)}
	for _, ln := range denied {
		ports = append(ports, uint16(ln.Addr().(*net.TCPAddr).Port))
	}
	// The built-in policy's root holds a directory per namespace: a namespace's runners
	// write beneath their own only.
	var nsRoot string
	if o.PolicyFile == "" {
		nsRoot = o.FileRoot
	}
	s.host, err = runner.NewHost(runner.Options{Exe: exe, Args: []string{"runner"}, Mirror: o.ProviderDir,
		UID: uid, GID: o.RunnerGID, NamespaceRoot: nsRoot, DenyConnect: ports,
		Protect: []string{o.StateDir}, Stderr: s.o.Log})
	if err != nil {
		return fmt.Errorf("up: %w", err)
	}
	return nil
}

// startServices starts synth, the applier, drift, viggy, anomaly and attest in g, each through
// its own Run as its binary does, with the defaults of its own flag set ([flagDefaults]) and
// what lava up sets: the bus identity and logs ([session.common]), the keys, the RPCs on
// loopback behind the state directory's token (addresses in FileRenderAddr, FileReceiptsAddr
// and FilePlanAddr), the holder, the engines ([session.engines]), the policy, the cluster and
// who synth, the applier and drift act as (Options.Identity: their own flags, on lava up's
// command line).
func (s *session) startServices(gctx context.Context, g *errgroup.Group) error {
	renderLn, err := s.rpcListen(FileRenderAddr)
	if err != nil {
		return err
	}
	receiptsLn, err := s.rpcListen(FileReceiptsAddr)
	if err != nil {
		renderLn.Close()
		return err
	}
	planLn, err := s.rpcListen(FilePlanAddr)
	if err != nil {
		renderLn.Close()
		receiptsLn.Close()
		return err
	}
	if err := s.startRunners(renderLn, receiptsLn, planLn); err != nil {
		planLn.Close()
		renderLn.Close()
		receiptsLn.Close()
		return err
	}
	so := flagDefaults[synth.Options]()
	so.Common, so.BindingsKeyFile, so.Kube = s.common(bus.ServiceSynth), s.bindingsKey, s.kube
	so.ConnectAddr, so.Listener, so.RPCTokenFile = renderLn.Addr().String(), renderLn, s.rpcToken
	so.PolicyFile, so.DefaultPolicy, so.Identity = s.o.PolicyFile, NamespaceRootsPolicy(s.o.FileRoot), s.o.Identity
	// Kept across runs under the private state directory (bounded by the cache's limits), not
	// a new temporary directory per run that a crash would leave behind.
	so.ArtifactCacheDir = filepath.Join(s.o.StateDir, DirWork, bus.ServiceSynth)
	ao := flagDefaults[applier.Options]()
	ao.Common, ao.Holder, ao.Kube, ao.Engines = s.common(bus.ServiceApplier), holder, s.kube, s.engines(ao.Engines, "applier")
	ao.Identity, ao.BindingsKeyFile = s.o.Identity, s.bindingsKey
	ao.ConnectAddr, ao.Listener, ao.RPCTokenFile = planLn.Addr().String(), planLn, s.rpcToken
	do := flagDefaults[drift.Options]()
	do.Common, do.Holder, do.Kube, do.Engines = s.common(bus.ServiceDrift), holder, s.kube, s.engines(do.Engines, "drift")
	do.Identity = s.o.Identity
	vo := flagDefaults[viggy.Options]()
	vo.Common = s.common(bus.ServiceViggy)
	no := flagDefaults[anomaly.Options]()
	no.Common, no.Kube = s.common(bus.ServiceAnomaly), s.kube
	to := flagDefaults[attest.Options]()
	to.Common, to.SigningKeyFile = s.common(bus.ServiceAttest), s.signingKey
	to.ConnectAddr, to.Listener, to.RPCTokenFile = receiptsLn.Addr().String(), receiptsLn, s.rpcToken
	for _, sv := range []struct {
		name string
		run  func(context.Context) error
	}{
		{bus.ServiceSynth, func(ctx context.Context) error { return synth.Run(ctx, so) }},
		{bus.ServiceApplier, func(ctx context.Context) error { return applier.Run(ctx, ao) }},
		{bus.ServiceDrift, func(ctx context.Context) error { return drift.Run(ctx, do) }},
		{bus.ServiceViggy, func(ctx context.Context) error { return viggy.Run(ctx, vo) }},
		{bus.ServiceAnomaly, func(ctx context.Context) error { return anomaly.Run(ctx, no) }},
		{bus.ServiceAttest, func(ctx context.Context) error { return attest.Run(ctx, to) }},
	} {
		runService(gctx, g, sv.name, sv.run)
	}
	return nil
}

// runService runs f in g until gctx is done; its error names the service.
func runService(gctx context.Context, g *errgroup.Group, name string, f func(context.Context) error) {
	g.Go(func() error {
		if err := f(gctx); err != nil {
			return fmt.Errorf("up: %s: %w", name, err)
		}
		return nil
	})
}

// rpcListen listens on a free loopback port and writes its address to addrFile under the
// state directory.
func (s *session) rpcListen(addrFile string) (net.Listener, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("up: %w", err)
	}
	if err := os.WriteFile(filepath.Join(s.o.StateDir, addrFile), []byte(ln.Addr().String()+"\n"), 0o644); err != nil {
		ln.Close()
		return nil, fmt.Errorf("up: %w", err)
	}
	return ln, nil
}

// startSource starts what turns LavaArchitectures into events and folds their status: with a
// kubeconfig the watcher against the cluster (its flag defaults, without leader election, with
// Secrets watched, Options.Lockdown), the snapshot listing from the cluster; otherwise the
// file source in g and its phase consumer, which outlives the services (what they publish
// while they drain, an apply finishing after Ctrl-C, is folded before the final table) and
// stops everything (stop) when it fails.
func (s *session) startSource(ctx, gctx context.Context, g *errgroup.Group, stop context.CancelFunc) error {
	o := s.o
	if o.Kubeconfig != "" {
		wo := flagDefaults[watcher.Options]()
		wo.Common, wo.Kubeconfig, wo.Namespaces, wo.KubeAPI = s.common(bus.ServiceWatcher), o.Kubeconfig, o.Namespaces, o.KubeAPI
		wo.BindingsKeyFile, wo.WatchSecrets, wo.LeaderElect, wo.Lockdown = s.bindingsKey, true, false, o.Lockdown
		runService(gctx, g, bus.ServiceWatcher, func(ctx context.Context) error { return watcher.Run(ctx, wo) })
		kv, err := newKubeView(s.kube, o.Namespaces)
		if err != nil {
			return err
		}
		s.snapshot = func() Snapshot { return kv.Snapshot(gctx) }
		return nil
	}
	s.changed = make(chan struct{}, 1)
	src, err := NewSource(ctx, SourceConfig{JS: s.js, Paths: o.Paths, StatusDir: filepath.Join(o.StateDir, DirStatus), FileRoot: o.FileRoot,
		RunnerUID: s.runnerUID(), RunnerGID: o.RunnerGID, OnlyNamespace: s.onlyNamespace,
		Environment: Environment(o.ProviderDir, o.TofuBin, o.TerraformBin), Logger: s.log.With("service", "file-source"),
		OnChange: func() {
			select {
			case s.changed <- struct{}{}:
			default:
			}
		}})
	if err != nil {
		return err
	}
	s.src = src
	runService(gctx, g, "file source", func(ctx context.Context) error { return src.Run(ctx, o.Interval) })
	phaseCtx, stopPhases := context.WithCancel(context.WithoutCancel(ctx))
	s.stopPhases, s.phaseDone = stopPhases, make(chan error, 1)
	go func() {
		err := src.RunPhases(phaseCtx, nil)
		if err != nil && phaseCtx.Err() == nil {
			stop() // the consumer failed: stop everything
			err = fmt.Errorf("up: phase consumer: %w", err)
		} else {
			err = nil
		}
		s.phaseDone <- err
	}()
	s.snapshot = func() Snapshot {
		fe, loaded := src.FileErrors()
		return Snapshot{Objects: src.Objects(), FileErrors: fe, Loaded: loaded}
	}
	return nil
}

// drive updates the display from a snapshot every tick (or, with --once, as soon as the file
// source wrote) until gctx is done; with --once it returns when every resource settled, or
// [ErrNotSettled] when Options.Timeout ran out first.
func (s *session) drive(gctx context.Context) error {
	o := s.o
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
	var wake <-chan struct{} // with --once, a write by the file source wakes the driver before its tick
	if o.Once {
		tm := time.NewTimer(o.Timeout)
		defer tm.Stop()
		deadline, wake = tm.C, s.changed
	}
	settledSince := time.Time{}
	var last time.Time
	for {
		select {
		case <-gctx.Done():
			return nil
		case <-deadline:
			return fmt.Errorf("%w (%s)", ErrNotSettled, o.Timeout)
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
		snap := s.snapshot()
		s.display.Update(snap)
		switch {
		case !o.Once || !ready(snap):
			settledSince = time.Time{}
		case s.src != nil:
			// Every object settled: one more scan, at once, confirms that the manifests did
			// not change meanwhile (a change makes an object unsettled again).
			if err := s.src.ScanNow(gctx); err == nil && ready(s.snapshot()) {
				return nil
			}
		case settledSince.IsZero():
			// The cluster's objects settled: they must stay settled a moment, so that the
			// watcher had time to observe a change made meanwhile.
			settledSince = time.Now()
		case time.Since(settledSince) >= o.Interval+250*time.Millisecond:
			return nil
		}
	}
}

// finish ends a run once the services drained (err is how they ended): it folds what they
// published while they drained, stops the phase consumer, and shows the final table. The
// error is err, else the phase consumer's.
func (s *session) finish(ctx context.Context, err error) (Result, error) {
	if s.src != nil {
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), foldTimeout)
		if ferr := s.src.WaitPhasesFolded(fctx); ferr != nil {
			s.log.Warn("up: phase events left unfolded at exit", "error", ferr)
		}
		cancel()
		s.stopPhases()
		if perr := <-s.phaseDone; perr != nil && err == nil {
			err = perr
		}
	}
	snap := s.snapshot()
	s.display.Final(snap)
	return Result{Objects: snap.Objects, FileErrors: snap.FileErrors}, err
}
