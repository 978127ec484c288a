package natstest

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lava-operator/lava/internal/platform/childproc"
)

// Binary is a nats-server process started from the binary named by $LAVA_NATS_SERVER_BIN, from
// a configuration file, on fixed loopback ports chosen at start (client, monitoring and, in a
// [Cluster], routes), so clients reconnect to the same URL after [Binary.Restart].
type Binary struct {
	tb       testing.TB
	bin      string
	name     string
	storeDir string
	port     int
	httpPort int
	confPath string
	logPath  string

	mu  sync.Mutex
	cmd *exec.Cmd
}

// serverBin returns $LAVA_NATS_SERVER_BIN, failing the test naming `make tools-nats` when it is
// unset or missing.
func serverBin(tb testing.TB) string {
	tb.Helper()
	bin := os.Getenv(EnvServerBin)
	if bin == "" {
		tb.Fatalf("natstest: $%s is not set: build nats-server with `make tools-nats` and run tests through make (or export %s=~/.cache/lava/tools/nats-server-v2.15.2/nats-server)", EnvServerBin, EnvServerBin)
	}
	if st, err := os.Stat(bin); err != nil || st.IsDir() {
		tb.Fatalf("natstest: nats-server binary %s missing (%v): build it with `make tools-nats`", bin, err)
	}
	return bin
}

// freePort picks a free loopback TCP port (the port is released before it is returned).
func freePort(tb testing.TB) int {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("natstest: pick a port: %v", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		tb.Fatalf("natstest: release port: %v", err)
	}
	return port
}

// RunBinary starts nats-server with JetStream, its store in storeDir, and registers a cleanup
// that stops it. A missing $LAVA_NATS_SERVER_BIN or binary fails the test, naming `make tools-nats`.
func RunBinary(tb testing.TB, storeDir string) *Binary {
	tb.Helper()
	c := RunCluster(tb, ClusterConfig{Size: 1, Dir: tb.TempDir(), StoreDirs: []string{storeDir}})
	return c.Nodes[0]
}

// Name is the server's server_name ("n0", "n1", ...).
func (b *Binary) Name() string { return b.name }

// URL is the client URL, the same across restarts.
func (b *Binary) URL() string { return "nats://127.0.0.1:" + strconv.Itoa(b.port) }

// MonitorURL is the server's HTTP monitoring address (http://127.0.0.1:PORT).
func (b *Binary) MonitorURL() string { return "http://127.0.0.1:" + strconv.Itoa(b.httpPort) }

// LogPath is the file receiving the server's output.
func (b *Binary) LogPath() string { return b.logPath }

// Connect opens a connection that reconnects forever (every 50ms) across restarts, and a
// JetStream context on it; both are closed at the end of the test. The server must admit an
// anonymous plain-text client (no Extra authorization or TLS).
func (b *Binary) Connect(tb testing.TB) (*nats.Conn, jetstream.JetStream) {
	tb.Helper()
	return connect(tb, b.URL(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond),
		nats.RetryOnFailedConnect(true))
}

// Running reports whether the process runs (false after [Binary.Kill] or [Binary.Stop]).
func (b *Binary) Running() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.cmd != nil
}

// PID is the server process's id (a new one after [Binary.Restart]), for reading its CPU time
// or memory from /proc; 0 while it is stopped ([Binary.Stop], [Binary.Kill]).
func (b *Binary) PID() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cmd == nil {
		return 0
	}
	return b.cmd.Process.Pid
}

func (b *Binary) launch() {
	b.tb.Helper()
	logf, err := os.OpenFile(b.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		b.tb.Fatalf("natstest: open log: %v", err)
	}
	defer logf.Close()
	cmd := exec.Command(b.bin, "-c", b.confPath)
	cmd.Stdout, cmd.Stderr = logf, logf
	// The server dies with the test process, even when that is killed (a timeout, SIGKILL):
	// nothing a test starts outlives it (TestNoChildOutlivesAKilledTest in testutil/kubetest).
	childproc.DieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		b.tb.Fatalf("natstest: start %s: %v", b.bin, err)
	}
	b.mu.Lock()
	b.cmd = cmd
	b.mu.Unlock()
}

// waitHealthy polls the server's /healthz until it answers 200 or startTimeout passes. With
// jsOnly, JetStream being enabled is enough (a cluster's first node cannot be current before
// its peers run); without, JetStream must be current: a meta leader known and every stream
// and consumer of this server caught up (nats-server's health check).
func (b *Binary) waitHealthy(jsOnly bool) {
	b.tb.Helper()
	url := b.MonitorURL() + "/healthz"
	if jsOnly {
		url += "?js-enabled-only=true"
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout+40*time.Second)
	defer cancel()
	var last string
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			var body [512]byte
			n, _ := resp.Body.Read(body[:])
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
			last = fmt.Sprintf("%d %s", resp.StatusCode, body[:n])
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			log, _ := os.ReadFile(b.logPath)
			b.tb.Fatalf("natstest: nats-server %s (port %d) not healthy: %s\n%s", b.name, b.port, last, log)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Stop stops the server (SIGTERM, then SIGKILL after 10s) and waits for it. Safe to call when
// already stopped.
func (b *Binary) Stop() { b.signal(syscall.SIGTERM) }

// Kill ends the server with SIGKILL (no shutdown, no leadership hand-over) and waits for it.
// Safe to call when already stopped.
func (b *Binary) Kill() { b.signal(syscall.SIGKILL) }

func (b *Binary) signal(sig syscall.Signal) {
	b.mu.Lock()
	cmd := b.cmd
	b.cmd = nil
	b.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(sig)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// Restart stops the server and starts it again on the same ports and store, waiting until it
// is healthy (in a cluster: caught up with its peers).
func (b *Binary) Restart() {
	b.tb.Helper()
	b.Stop()
	b.Start()
}

// Start starts a stopped or killed server again on the same ports and store and waits until it
// is healthy (in a cluster: caught up with its peers). No-op while it runs.
func (b *Binary) Start() {
	b.tb.Helper()
	if b.Running() {
		return
	}
	b.launch()
	b.waitHealthy(false)
}

// ClusterConfig configures [RunCluster].
type ClusterConfig struct {
	// Size is the number of servers (default 3). With 1 the server runs standalone (no
	// cluster block); JetStream clustering needs 3 for a quorum that survives one loss.
	Size int
	// Name is the cluster's name (default "lava-test").
	Name string
	// Extra is NATS configuration appended to every server's file: the client tls block, an
	// authorization block (`lava nats authorization`). Routes are plain TCP on loopback.
	Extra string
	// Dir holds every server's configuration, log and (unless StoreDirs) store, per server
	// in Dir/<name>; default tb.TempDir().
	Dir string
	// StoreDirs overrides the JetStream store directory per server (index = server).
	StoreDirs []string
}

// Cluster is Size nats-server processes with JetStream on loopback, joined by routes.
type Cluster struct {
	// Nodes are the servers, named n0, n1, ... in order.
	Nodes []*Binary
}

// RunCluster starts the servers of cfg from $LAVA_NATS_SERVER_BIN, waits until every one is
// healthy (a JetStream meta leader elected and every server current), and registers cleanups
// that stop them. A missing binary fails the test, naming `make tools-nats`.
func RunCluster(tb testing.TB, cfg ClusterConfig) *Cluster {
	tb.Helper()
	bin := serverBin(tb)
	if cfg.Size <= 0 {
		cfg.Size = 3
	}
	if cfg.Name == "" {
		cfg.Name = "lava-test"
	}
	if cfg.Dir == "" {
		cfg.Dir = tb.TempDir()
	}
	c := &Cluster{}
	routes := make([]int, cfg.Size)
	for i := range cfg.Size {
		d := filepath.Join(cfg.Dir, "n"+strconv.Itoa(i))
		if err := os.MkdirAll(d, 0o755); err != nil {
			tb.Fatalf("natstest: %v", err)
		}
		b := &Binary{tb: tb, bin: bin, name: "n" + strconv.Itoa(i), storeDir: filepath.Join(d, "store"),
			port: freePort(tb), httpPort: freePort(tb), confPath: filepath.Join(d, "nats.conf"), logPath: filepath.Join(d, "nats-server.log")}
		if i < len(cfg.StoreDirs) && cfg.StoreDirs[i] != "" {
			b.storeDir = cfg.StoreDirs[i]
		}
		routes[i] = freePort(tb)
		c.Nodes = append(c.Nodes, b)
	}
	for i, b := range c.Nodes {
		var conf strings.Builder
		fmt.Fprintf(&conf, "server_name: %q\nlisten: \"127.0.0.1:%d\"\nhttp: \"127.0.0.1:%d\"\njetstream { store_dir: %q }\n",
			b.name, b.port, b.httpPort, b.storeDir)
		if cfg.Size > 1 {
			var peers []string
			for j, p := range routes {
				if j != i {
					peers = append(peers, fmt.Sprintf("nats-route://127.0.0.1:%d", p))
				}
			}
			fmt.Fprintf(&conf, "cluster { name: %q, listen: \"127.0.0.1:%d\", routes: [%s] }\n", cfg.Name, routes[i], strings.Join(peers, ", "))
		}
		conf.WriteString(cfg.Extra)
		conf.WriteString("\n")
		if err := os.WriteFile(b.confPath, []byte(conf.String()), 0o600); err != nil {
			tb.Fatalf("natstest: %v", err)
		}
	}
	for _, b := range c.Nodes {
		tb.Cleanup(b.Stop)
		b.launch()
	}
	for _, b := range c.Nodes {
		b.waitHealthy(true)
	}
	for _, b := range c.Nodes {
		b.waitHealthy(false)
	}
	return c
}

// URLs is every server's client URL, comma-separated (what nats.Connect and bus.Connect take).
func (c *Cluster) URLs() string {
	var u []string
	for _, b := range c.Nodes {
		u = append(u, b.URL())
	}
	return strings.Join(u, ",")
}

// MetaLeader returns the running server that is the JetStream meta leader, asking each running
// server's /jsz (meta_cluster.leader) until one names a running leader or d passes.
func (c *Cluster) MetaLeader(d time.Duration) (*Binary, error) {
	deadline := time.Now().Add(d)
	for {
		for _, b := range c.Nodes {
			if !b.Running() {
				continue
			}
			leader, err := b.metaLeader()
			if err != nil || leader == "" {
				continue
			}
			for _, n := range c.Nodes {
				// A server that is down may still be named until its peers notice.
				if n.name == leader && n.Running() {
					return n, nil
				}
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("natstest: no JetStream meta leader within %s", d)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (b *Binary) metaLeader() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, b.MonitorURL()+"/jsz", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var jsz struct {
		Meta *struct {
			Leader string `json:"leader"`
		} `json:"meta_cluster"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&jsz); err != nil {
		return "", fmt.Errorf("/jsz of %s: %w", b.name, err)
	}
	if jsz.Meta == nil {
		return "", nil
	}
	return jsz.Meta.Leader, nil
}
