package harness

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/childproc"
	"github.com/lava-operator/lava/internal/platform/testutil/natstest"
	"github.com/lava-operator/lava/internal/platform/testutil/tofutest"
)

// The services, in the order they are started.
const (
	Watcher = "watcher"
	Synth   = "synth"
	Applier = "applier"
	Attest  = "attest"
	Drift   = "drift"
	Viggy   = "viggy"
	Anomaly = "anomaly"
)

// Services returns every service name, in start order.
func Services() []string {
	return []string{Attest, Anomaly, Viggy, Drift, Applier, Synth, Watcher}
}

// Options configures [Start].
type Options struct {
	// Services are the services to start; nil starts every one ([Services]).
	Services []string
	// Args are extra command-line flags per service name, appended after the harness's.
	Args map[string][]string
	// ReadyTimeout bounds the wait for every /readyz (default 90s).
	ReadyTimeout time.Duration
	// NATSServers is the number of nats-server processes (default 1). 3 runs a JetStream
	// cluster joined by routes (natstest.RunCluster): the topology is created at R3 (`lava nats
	// bootstrap --replicas 3`), every service gets `--replicas 3` and the URL list of all three.
	NATSServers int
	// Replicas is the number of processes per service name (default 1): the first is named
	// after the service, the others <service>-2, <service>-3, ... ([Env.Replicas]), each with its
	// own ports, --holder and work directory; the watchers elect a leader.
	Replicas map[string]int
	// TestkitMirror gives the applier and drift the provider mirror of
	// tofutest.TestkitMirror: example/testkit 0.4.0 with its per-address create counter
	// (test/provider/testkit) instead of the tools' 0.1.0, for both engines (the tofu engine's
	// CLI configuration is generated for --provider-dir).
	TestkitMirror bool
}

// Env is a running installation: the API server, NATS and the services.
type Env struct {
	// Root is the repository root (the directory holding go.work).
	Root string
	// Dir is the state directory (a tb.TempDir): kube/, nats/, logs/, bin/, keys, work dirs.
	Dir string
	// BinDir holds the built binaries: one per service and lava.
	BinDir string
	// Kubeconfig is the admin kubeconfig of the API server.
	Kubeconfig string
	// NATSURL is nats://127.0.0.1:PORT (comma-separated, one per server, with
	// Options.NATSServers > 1): mutual TLS (PKI) and nkey authorization with the
	// permissions `lava nats authorization` printed for the seeds in CredsDir; the topology was
	// created by `lava nats bootstrap` (docs/security.md).
	NATSURL string
	// CredsDir holds one nkey seed per bus identity (`lava nats credentials`).
	CredsDir string
	// PKI is the CA, server and client certificates of NATS's TLS.
	PKI *natstest.PKI
	// NATS is the nats-server processes (one, or a cluster): kill, restart, find the meta leader.
	NATS *natstest.Cluster
	// Replicas is the JetStream replica count of the topology (Options.NATSServers, at most 3).
	Replicas int
	// PublicKeyFile holds attest's Ed25519 public key, 64 hex digits.
	PublicKeyFile string
	// KubectlBin is $KUBEBUILDER_ASSETS/kubectl.
	KubectlBin string
	// Tofu is the OpenTofu tool directory with the provider mirror.
	Tofu tofutest.Tools
	// FilesDir (Dir/files) is the only fileWriteRoots directory of synth's tenant policy
	// (Dir/policy.yaml, --policy-file; docs/design/0010-tenant-policy.md): a test's
	// local_file and testkit_file resources write under [Env.Files].
	FilesDir string

	providerDir string
	tb          testing.TB
	mu          sync.Mutex
	procs       map[string]*Proc
	ports       map[int]bool
}

// Proc is one process started by the harness.
type Proc struct {
	// Name is the service name.
	Name string
	// MetricsAddr, HealthAddr and ConnectAddr are host:port on 127.0.0.1 (empty when unused).
	MetricsAddr, HealthAddr, ConnectAddr string
	// LogPath is the file receiving stdout and stderr.
	LogPath string

	cmd  *exec.Cmd
	done chan struct{}
	err  error
	// killed is set by [Env.Kill]: the exit is the test's doing, not a death.
	killed bool
}

// PID is the process id.
func (p *Proc) PID() int { return p.cmd.Process.Pid }

// Exited reports whether the process has ended, and how.
func (p *Proc) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// tool checks that path is an executable file, failing the test naming target otherwise.
func tool(tb testing.TB, path, what, target string) string {
	tb.Helper()
	st, err := os.Stat(path)
	if err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
		tb.Fatalf("harness: %s binary %q is missing (%v): run `make %s` and the test through make", what, path, err, target)
	}
	return path
}

// RepoRoot walks up from the working directory to the directory holding go.work.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("harness: working directory: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("harness: no go.work above the working directory")
		}
		dir = parent
	}
}

// Start brings up the API server, NATS and the services, and registers cleanups that stop
// every process (SIGTERM, then SIGKILL of its process group after 15s) and, when the test
// failed, print the tail of every log.
func Start(tb testing.TB, o Options) *Env {
	tb.Helper()
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		tb.Fatal("harness: KUBEBUILDER_ASSETS is not set: run `make tools-kube` and the test through make")
	}
	for _, b := range []string{"kube-apiserver", "etcd", "kube-controller-manager", "kubectl"} {
		tool(tb, filepath.Join(assets, b), b, "tools-kube")
	}
	natsBin := os.Getenv("LAVA_NATS_SERVER_BIN")
	if natsBin == "" {
		tb.Fatal("harness: LAVA_NATS_SERVER_BIN is not set: run `make tools-nats` and the test through make")
	}
	tool(tb, natsBin, "nats-server", "tools-nats")
	servers := max(o.NATSServers, 1)
	root, err := RepoRoot()
	if err != nil {
		tb.Fatal(err)
	}
	e := &Env{Root: root, Dir: tb.TempDir(), KubectlBin: filepath.Join(assets, "kubectl"), Tofu: tofutest.Tofu(tb),
		Replicas: min(servers, 3), tb: tb, procs: map[string]*Proc{}, ports: map[int]bool{}}
	e.BinDir = filepath.Join(e.Dir, "bin")
	e.providerDir = e.Tofu.Mirror
	if o.TestkitMirror {
		e.providerDir = tofutest.TestkitMirror(tb, e.Tofu)
	}
	e.FilesDir = filepath.Join(e.Dir, "files")
	for _, d := range []string{e.BinDir, filepath.Join(e.Dir, "logs"), filepath.Join(e.Dir, "work"), e.FilesDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			tb.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(e.Dir, "policy.yaml"), []byte("cluster: {fileWriteRoots: ["+e.FilesDir+"]}\n"), 0o644); err != nil {
		tb.Fatal(err)
	}
	// Runs last of the cleanups registered below: every process has stopped by then.
	tb.Cleanup(func() {
		if tb.Failed() {
			tb.Log(e.Tails(40))
		}
	})
	services := o.Services
	if services == nil {
		services = Services()
	}
	e.build(tb, services)
	e.startKube(tb, assets)
	e.keys(tb)
	e.startNATS(tb, servers)
	e.bootstrap(tb)
	e.installCRDs(tb)
	var names []string
	for _, s := range services {
		for k := 1; k <= max(o.Replicas[s], 1); k++ {
			names = append(names, e.startService(tb, s, k, o.Args[s]))
		}
	}
	timeout := o.ReadyTimeout
	if timeout == 0 {
		timeout = 90 * time.Second
	}
	for _, name := range names {
		e.waitReady(tb, name, timeout)
	}
	return e
}

// build compiles lava and every service into BinDir. A service module listed in go.work is
// built from the root with the workspace; one not (yet) listed is built in its own directory
// with GOWORK=off (its go.mod replaces the root module with ../..).
func (e *Env) build(tb testing.TB, services []string) {
	tb.Helper()
	out, err := e.goCmd(e.Root, nil, "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		tb.Fatalf("harness: go list -m: %v", err)
	}
	inWork := map[string]bool{}
	for _, l := range strings.Fields(string(out)) {
		inWork[filepath.Clean(l)] = true
	}
	type job struct {
		dir, out, pkg string
		env           []string
	}
	jobs := []job{{dir: e.Root, out: filepath.Join(e.BinDir, "lava"), pkg: "./cmd/lava"}}
	for _, s := range services {
		mod := filepath.Join(e.Root, "services", s)
		if inWork[mod] {
			jobs = append(jobs, job{dir: e.Root, out: filepath.Join(e.BinDir, s), pkg: "./services/" + s})
		} else {
			jobs = append(jobs, job{dir: mod, out: filepath.Join(e.BinDir, s), pkg: ".", env: []string{"GOWORK=off"}})
		}
	}
	for _, j := range jobs {
		start := time.Now()
		cmd := e.goCmd(j.dir, j.env, "build", "-o", j.out, j.pkg)
		if b, err := cmd.CombinedOutput(); err != nil {
			tb.Fatalf("harness: go build %s (in %s): %v\n%s", j.pkg, j.dir, err, b)
		}
		tb.Logf("harness: built %s in %v", filepath.Base(j.out), time.Since(start).Round(time.Millisecond))
	}
}

// BuildLava compiles this repository's lava CLI (./cmd/lava) into dir with `go build`, as
// [Start] does, and returns the binary's path (dir/lava). A failed build fails tb.
func BuildLava(tb testing.TB, dir string) string {
	tb.Helper()
	root, err := RepoRoot()
	if err != nil {
		tb.Fatalf("harness: %v", err)
	}
	e := &Env{Root: root, BinDir: dir}
	e.build(tb, nil)
	return filepath.Join(dir, "lava")
}

func (e *Env) goCmd(dir string, env []string, args ...string) *exec.Cmd {
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	return cmd
}

// startKube runs hack/tools/kube-testenv.sh up (etcd, kube-apiserver, kube-controller-manager).
func (e *Env) startKube(tb testing.TB, assets string) {
	tb.Helper()
	script := filepath.Join(e.Root, "hack", "tools", "kube-testenv.sh")
	state := filepath.Join(e.Dir, "kube")
	tb.Cleanup(func() {
		if b, err := exec.Command(script, "down", state).CombinedOutput(); err != nil {
			tb.Errorf("harness: kube-testenv.sh down: %v\n%s", err, b)
		}
	})
	start := time.Now()
	cmd := exec.Command(script, "up", state, assets)
	cmd.Env = append(os.Environ(), "KUBE_TESTENV_KCM=1")
	if b, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("harness: kube-testenv.sh up: %v\n%s", err, b)
	}
	e.Kubeconfig = filepath.Join(state, "kubeconfig")
	tb.Logf("harness: API server up in %v", time.Since(start).Round(time.Millisecond))
}

// installCRDs installs the CRDs the documented way, `lava crds | kubectl apply -f -`, and
// waits until they are established (the watcher refuses to start without them).
func (e *Env) installCRDs(tb testing.TB) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(tb.Context(), 2*time.Minute)
	defer cancel()
	crds, err := e.Lava(ctx, "crds")
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := e.Kubectl(ctx, crds, "apply", "-f", "-"); err != nil {
		tb.Fatal(err)
	}
	if _, err := e.Kubectl(ctx, "", "wait", "--for=condition=Established", "--timeout=60s",
		"crd/lavaarchitectures.lava.pleme.io", "crd/remediationpolicies.lava.pleme.io",
		"crd/lavaarchitecturedependencies.lava.pleme.io"); err != nil {
		tb.Fatal(err)
	}
}

// FreePort returns a loopback TCP port no other process of this Env was given.
func (e *Env) FreePort() (int, error) {
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("harness: pick a port: %w", err)
		}
		p := l.Addr().(*net.TCPAddr).Port
		if err := l.Close(); err != nil {
			return 0, fmt.Errorf("harness: release port: %w", err)
		}
		e.mu.Lock()
		taken := e.ports[p]
		e.ports[p] = true
		e.mu.Unlock()
		if !taken {
			return p, nil
		}
	}
	return 0, errors.New("harness: no free port")
}

func (e *Env) addr(tb testing.TB) string {
	tb.Helper()
	p, err := e.FreePort()
	if err != nil {
		tb.Fatal(err)
	}
	return "127.0.0.1:" + strconv.Itoa(p)
}

// startNATS runs n nats-server processes with JetStream (natstest.RunCluster: routes between
// them when n > 1), stores and logs under Dir/nats, each from a configuration file with mutual
// TLS (e.PKI) and the authorization block `lava nats authorization` prints for the identities in
// e.CredsDir (no anonymous client).
func (e *Env) startNATS(tb testing.TB, n int) {
	tb.Helper()
	auth, err := e.Lava(tb.Context(), "nats", "authorization", e.CredsDir)
	if err != nil {
		tb.Fatalf("harness: %v", err)
	}
	extra := fmt.Sprintf("tls { cert_file: %q, key_file: %q, ca_file: %q, verify: true, timeout: 5 }\n%s",
		e.PKI.ServerCert, e.PKI.ServerKey, e.PKI.CAFile, auth)
	e.NATS = natstest.RunCluster(tb, natstest.ClusterConfig{Size: n, Name: "lava-e2e", Extra: extra, Dir: filepath.Join(e.Dir, "nats")})
	e.NATSURL = e.NATS.URLs()
}

// natsEnv are the LAVA_NATS_* variables of the lava CLI: the bootstrap (admin) identity over
// mutual TLS.
func (e *Env) natsEnv() []string {
	return []string{"LAVA_NATS_NKEY=" + filepath.Join(e.CredsDir, "bootstrap.nk"), "LAVA_NATS_CA=" + e.PKI.CAFile,
		"LAVA_NATS_CERT=" + e.PKI.ClientCert, "LAVA_NATS_KEY=" + e.PKI.ClientKey}
}

// natsArgs are a service's NATS flags: its own identity's seed and the client certificate.
func (e *Env) natsArgs(service string) []string {
	return []string{"--nats-url", e.NATSURL, "--nats-nkey", filepath.Join(e.CredsDir, service+".nk"),
		"--nats-ca", e.PKI.CAFile, "--nats-cert", e.PKI.ClientCert, "--nats-key", e.PKI.ClientKey}
}

// ConnectAs connects to NATS as identity (a service, "subscriber" or "bootstrap") through
// bus.Connect, as that identity's process would; the connection is closed at the end of the
// test.
func (e *Env) ConnectAs(tb testing.TB, identity string) *nats.Conn {
	tb.Helper()
	nc, _, err := bus.Connect(bus.ConnectOptions{URL: e.NATSURL, Name: "e2e-" + identity, Identity: identity,
		NKeyFile: filepath.Join(e.CredsDir, identity+".nk"), CAFile: e.PKI.CAFile, CertFile: e.PKI.ClientCert, KeyFile: e.PKI.ClientKey})
	if err != nil {
		tb.Fatalf("harness: connect as %s: %v", identity, err)
	}
	tb.Cleanup(nc.Close)
	return nc
}

// bootstrap creates the topology with `lava nats bootstrap` (the bootstrap identity): the
// services only check it.
func (e *Env) bootstrap(tb testing.TB) {
	tb.Helper()
	if _, err := e.Lava(tb.Context(), "nats", "bootstrap", "--nats-url", e.NATSURL, "--replicas", strconv.Itoa(e.Replicas)); err != nil {
		tb.Fatalf("harness: %v", err)
	}
}

// Files returns a new directory under FilesDir for one test's files.
func (e *Env) Files(tb testing.TB) string {
	tb.Helper()
	d, err := os.MkdirTemp(e.FilesDir, "t")
	if err != nil {
		tb.Fatal(err)
	}
	return d
}

// keys writes attest's signing key (lava receipts keygen), synth's bindings key, the bus
// identities' seeds (lava nats credentials) and NATS's certificates.
func (e *Env) keys(tb testing.TB) {
	tb.Helper()
	e.PKI = natstest.NewPKI(tb)
	e.CredsDir = filepath.Join(e.Dir, "nats-credentials")
	if _, err := e.Lava(tb.Context(), "nats", "credentials", e.CredsDir); err != nil {
		tb.Fatalf("harness: %v", err)
	}
	secret := filepath.Join(e.Dir, "attest-signing.key")
	out, err := exec.Command(filepath.Join(e.BinDir, "lava"), "receipts", "keygen", "--secret-file", secret).Output()
	if err != nil {
		tb.Fatalf("harness: lava receipts keygen: %v", err)
	}
	pub, ok := strings.CutPrefix(strings.TrimSpace(string(out)), "PUBLIC ")
	if !ok || len(pub) != 64 {
		tb.Fatalf("harness: lava receipts keygen printed %q, want PUBLIC <64 hex digits>", out)
	}
	e.PublicKeyFile = filepath.Join(e.Dir, "attest-signing.pub")
	if err := os.WriteFile(e.PublicKeyFile, []byte(pub+"\n"), 0o600); err != nil {
		tb.Fatal(err)
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key) // crypto/rand.Read never fails (Go 1.24+)
	if err := os.WriteFile(filepath.Join(e.Dir, "bindings.key"), []byte(hex.EncodeToString(key)+"\n"), 0o600); err != nil {
		tb.Fatal(err)
	}
}

// ReplicaName is the process name of replica k (1-based) of service: the service's name for the
// first, <service>-<k> for the others.
func ReplicaName(service string, k int) string {
	if k <= 1 {
		return service
	}
	return service + "-" + strconv.Itoa(k)
}

// serviceArgs is the production-like command line of replica p.Name of service name.
func (e *Env) serviceArgs(tb testing.TB, name string, p *Proc) []string {
	tb.Helper()
	suffix := strings.TrimPrefix(p.Name, name) // "" or "-2", ...
	p.MetricsAddr, p.HealthAddr = e.addr(tb), e.addr(tb)
	args := append(e.natsArgs(name), "--metrics-addr", p.MetricsAddr, "--health-addr", p.HealthAddr,
		"--log-format", "json", "--log-level", "info", "--replicas", strconv.Itoa(e.Replicas))
	// The end-to-end objects name no ServiceAccount: synth, the applier and drift act with the
	// admin kubeconfig (impersonation, their default, is tested by TestUp_kubeconfigLockdown and
	// the services' impersonation tests).
	noImpersonation := "--impersonate=false"
	work := func() string {
		d := filepath.Join(e.Dir, "work", p.Name)
		if err := os.MkdirAll(d, 0o755); err != nil {
			tb.Fatal(err)
		}
		return d
	}
	switch name {
	case Watcher:
		args = append(args, "--kubeconfig", e.Kubeconfig, "--leader-elect=true", "--leader-election-namespace", "default",
			"--bindings-key-file", filepath.Join(e.Dir, "bindings.key"), "--watch-secrets")
	case Synth:
		p.ConnectAddr = e.addr(tb)
		args = append(args, "--bindings-key-file", filepath.Join(e.Dir, "bindings.key"), "--connect-addr", p.ConnectAddr,
			"--policy-file", filepath.Join(e.Dir, "policy.yaml"), noImpersonation)
	case Applier:
		args = append(args, "--holder", "applier-e2e"+suffix, "--provider-dir", e.providerDir, "--tofu-bin", e.Tofu.Bin, "--work-dir", work(),
			"--policy-file", filepath.Join(e.Dir, "policy.yaml"), noImpersonation)
	case Drift:
		args = append(args, "--holder", "drift-e2e"+suffix, "--provider-dir", e.providerDir, "--tofu-bin", e.Tofu.Bin, "--work-dir", work(),
			"--policy-file", filepath.Join(e.Dir, "policy.yaml"), noImpersonation)
	case Attest:
		p.ConnectAddr = e.addr(tb)
		args = append(args, "--signing-key-file", filepath.Join(e.Dir, "attest-signing.key"), "--connect-addr", p.ConnectAddr)
	case Viggy, Anomaly:
	default:
		tb.Fatalf("harness: unknown service %q", name)
	}
	return args
}

// startService starts replica k of service name and returns its process name.
func (e *Env) startService(tb testing.TB, name string, k int, extra []string) string {
	tb.Helper()
	p := &Proc{Name: ReplicaName(name, k)}
	args := append(e.serviceArgs(tb, name, p), extra...)
	// Production reads the kubeconfig from the pod; here every service with Kubernetes access
	// gets the admin kubeconfig. TF_CLI_CONFIG_FILE: this machine's points at a missing file.
	env := []string{"KUBECONFIG=" + e.Kubeconfig, "TF_CLI_CONFIG_FILE=" + e.Tofu.CLIConfig, "CHECKPOINT_DISABLE=1"}
	q := e.spawn(tb, p.Name, filepath.Join(e.BinDir, name), args, env)
	q.MetricsAddr, q.HealthAddr, q.ConnectAddr = p.MetricsAddr, p.HealthAddr, p.ConnectAddr
	return p.Name
}

// spawn starts bin in its own process group, logging to Dir/logs/NAME.log. The inherited
// environment loses every LAVA_* variable, so only the flags configure the service.
func (e *Env) spawn(tb testing.TB, name, bin string, args, env []string) *Proc {
	tb.Helper()
	var full []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LAVA_") && !strings.HasPrefix(kv, "KUBECONFIG=") && !strings.HasPrefix(kv, "TF_CLI_CONFIG_FILE=") {
			full = append(full, kv)
		}
	}
	return e.spawnCmd(tb, name, bin, args, append(full, env...))
}

// spawnCmd starts bin with exactly the environment env, as [Env.spawn] describes.
func (e *Env) spawnCmd(tb testing.TB, name, bin string, args, env []string) *Proc {
	tb.Helper()
	logPath := filepath.Join(e.Dir, "logs", name+".log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		tb.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(bin, args...)
	cmd.Dir = e.Dir
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own group, so a stop also ends what it started; killed if the test process dies
	// without running its cleanups (a go test -timeout panic).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	childproc.DieWithParent(cmd)
	cmd.Env = env
	if err := cmd.Start(); err != nil {
		tb.Fatalf("harness: start %s: %v", name, err)
	}
	p := &Proc{Name: name, LogPath: logPath, cmd: cmd, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	e.mu.Lock()
	e.procs[name] = p
	e.mu.Unlock()
	tb.Cleanup(func() { e.stop(tb, p) })
	return p
}

func (e *Env) stop(tb testing.TB, p *Proc) {
	if exited, err := p.Exited(); exited {
		e.mu.Lock()
		killed := p.killed
		e.mu.Unlock()
		if killed {
			return
		}
		var ee *exec.ExitError
		if err != nil && !(errors.As(err, &ee) && ee.ExitCode() == 0) {
			tb.Errorf("harness: %s had exited before the cleanup: %v", p.Name, err)
		}
		_ = syscall.Kill(-p.PID(), syscall.SIGKILL)
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		tb.Errorf("harness: %s did not stop within 15s of SIGTERM; killed", p.Name)
	}
	// Whatever the process started (provider plugins, tofu) goes with its group.
	_ = syscall.Kill(-p.PID(), syscall.SIGKILL)
	<-p.done
}

// Kill ends the named process and everything it started with SIGKILL to its process group
// (what a node or container runtime does to a pod: no shutdown, no lease released, provider
// plugins and tofu gone with it) and waits until it has exited. [Env.Dead] does not count it;
// [Env.Restart] starts it again.
func (e *Env) Kill(name string) error {
	p := e.Proc(name)
	if p == nil {
		return fmt.Errorf("harness: no process %s", name)
	}
	e.mu.Lock()
	p.killed = true
	e.mu.Unlock()
	if err := syscall.Kill(-p.PID(), syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("harness: SIGKILL %s: %w", name, err)
	}
	<-p.done
	return nil
}

// Restart starts the named process again, after [Env.Kill], with the command line, environment
// and ports it had (same log file, appended), and waits up to d for its /readyz. It returns how
// long the new process took to be ready.
func (e *Env) Restart(tb testing.TB, name string, d time.Duration) time.Duration {
	tb.Helper()
	old := e.Proc(name)
	if old == nil {
		tb.Fatalf("harness: no process %s", name)
	}
	if exited, _ := old.Exited(); !exited {
		tb.Fatalf("harness: %s still runs: Kill it first", name)
	}
	start := time.Now()
	q := e.spawnCmd(tb, name, old.cmd.Path, old.cmd.Args[1:], old.cmd.Env)
	q.MetricsAddr, q.HealthAddr, q.ConnectAddr = old.MetricsAddr, old.HealthAddr, old.ConnectAddr
	if q.HealthAddr != "" {
		e.waitReady(tb, name, d)
	}
	return time.Since(start)
}

// Proc returns the named process (nil when not started).
func (e *Env) Proc(name string) *Proc {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.procs[name]
}

// Dead returns an error naming every process that exited, nil while all run.
func (e *Env) Dead() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	var errs []error
	for _, p := range e.procs {
		if exited, err := p.Exited(); exited && !p.killed {
			errs = append(errs, fmt.Errorf("%s exited: %v", p.Name, err))
		}
	}
	return errors.Join(errs...)
}

func (e *Env) waitReady(tb testing.TB, name string, d time.Duration) {
	tb.Helper()
	p := e.Proc(name)
	e.waitHTTP(tb, p, "http://"+p.HealthAddr+"/readyz", d)
}

func (e *Env) waitHTTP(tb testing.TB, p *Proc, url string, d time.Duration) {
	tb.Helper()
	start := time.Now()
	deadline := start.Add(d)
	var last string
	for time.Now().Before(deadline) {
		if exited, err := p.Exited(); exited {
			tb.Fatalf("harness: %s exited while starting: %v\n%s", p.Name, err, tail(p.LogPath, 30))
		}
		resp, err := http.Get(url)
		if err == nil {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				tb.Logf("harness: %s ready in %v", p.Name, time.Since(start).Round(time.Millisecond))
				return
			}
			last = fmt.Sprintf("%s: %s", resp.Status, b)
		} else {
			last = err.Error()
		}
		time.Sleep(100 * time.Millisecond)
	}
	tb.Fatalf("harness: %s not ready within %v (%s)\n%s", p.Name, d, last, tail(p.LogPath, 30))
}

// Kubectl runs kubectl against the API server with stdin (may be empty) and returns its
// standard output; the error carries the standard error.
func (e *Env) Kubectl(ctx context.Context, stdin string, args ...string) (string, error) {
	return e.run(ctx, e.KubectlBin, stdin, []string{"KUBECONFIG=" + e.Kubeconfig}, args...)
}

// Lava runs the built lava CLI and returns its standard output; the error carries the
// standard error.
func (e *Env) Lava(ctx context.Context, args ...string) (string, error) {
	env := []string{"KUBECONFIG=" + e.Kubeconfig}
	if e.PKI != nil {
		env = append(env, e.natsEnv()...)
	}
	return e.run(ctx, filepath.Join(e.BinDir, "lava"), "", env, args...)
}

func (e *Env) run(ctx context.Context, bin, stdin string, env []string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), env...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%s %s: %w: %s", filepath.Base(bin), strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}

// Metrics fetches the text exposition of a service's /metrics.
func (e *Env) Metrics(ctx context.Context, name string) ([]byte, error) {
	p := e.Proc(name)
	if p == nil || p.MetricsAddr == "" {
		return nil, fmt.Errorf("harness: %s serves no metrics", name)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.MetricsAddr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	// Ask for the text format (Prometheus would negotiate protobuf or OpenMetrics).
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("harness: %s /metrics: %w", name, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("harness: %s /metrics: %w", name, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("harness: %s /metrics: %s", name, resp.Status)
	}
	return b, nil
}

// PeakRSS is a process's peak resident set size in bytes (VmHWM of /proc/PID/status).
func (e *Env) PeakRSS(name string) (int64, error) {
	p := e.Proc(name)
	if p == nil {
		return 0, fmt.Errorf("harness: no process %s", name)
	}
	f, err := os.Open(filepath.Join("/proc", strconv.Itoa(p.PID()), "status"))
	if err != nil {
		return 0, fmt.Errorf("harness: %s: %w", name, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("harness: %s VmHWM %q: %w", name, v, err)
			}
			return kb * 1024, nil
		}
	}
	return 0, fmt.Errorf("harness: %s: no VmHWM in /proc/%d/status", name, p.PID())
}

// Tails returns the last n lines of every process's log.
func (e *Env) Tails(n int) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var b strings.Builder
	if e.NATS != nil {
		for _, s := range e.NATS.Nodes {
			fmt.Fprintf(&b, "----- nats-server %s (%s), last %d lines -----\n%s\n", s.Name(), s.LogPath(), n, tail(s.LogPath(), n))
		}
	}
	names := slices.Sorted(maps.Keys(e.procs))
	for _, name := range names {
		p := e.procs[name]
		fmt.Fprintf(&b, "----- %s (%s), last %d lines -----\n%s\n", name, p.LogPath, n, tail(p.LogPath, n))
	}
	for _, f := range []string{"apiserver.log", "kcm.log"} {
		path := filepath.Join(e.Dir, "kube", f)
		fmt.Fprintf(&b, "----- %s, last 10 lines -----\n%s\n", path, tail(path, 10))
	}
	return b.String()
}

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
