//go:build integration || terraform

package tofu_test

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lava-operator/lava/internal/engine"
	"github.com/lava-operator/lava/internal/engine/state"
	"github.com/lava-operator/lava/internal/engine/tofu"
	"github.com/lava-operator/lava/internal/platform/testutil/tofutest"
)

// harness is a real engine: tofu (or terraform) from the tool directory, state in an
// in-process JetStream, the http backend on loopback.
type harness struct {
	t     testing.TB
	eng   *tofu.Engine
	store *state.Store
	art   *tofutest.ObjectArtifacts
	tools tofutest.Tools
	opts  harnessOpts
	key   state.Key
	// natsURL is the in-process nats-server's client URL (for another process on the same
	// stores).
	natsURL string
}

type harnessOpts struct {
	bin          string // default: the tool directory's tofu
	name         string
	lockTTL      time.Duration
	noMirror     bool // rely on the CLI config alone (no mirror pre-check)
	lockTimeout  time.Duration
	holderAlive  state.HolderAlive
	applyTimeout time.Duration
	mirror       string // a mirror directory of its own (the CLI config is generated for it)
	workDir      string // default: a t.TempDir()
	// tokens, when set, makes the backend accept only passwords issued per operation
	// (Config.BackendTokens, as engines.New sets it) instead of the fixed "backend-pw".
	tokens *state.Tokens
	// files is the engine's file-access check (Config.FileAccess; nil: none).
	files *engine.FileAccess
	// maxStateBytes is the state store's largest body (0: its default).
	maxStateBytes int64
	// maxMemory is Config.MaxMemoryBytes, maxCPU Config.MaxCPUSeconds (0: their defaults).
	maxMemory, maxCPU int64
}

func newHarness(t testing.TB, o harnessOpts) *harness {
	t.Helper()
	tools := tofutest.Tofu(t)
	srv, js := tofutest.JetStream(t)
	kv := tofutest.StateBucket(t, js)
	art := tofutest.NewArtifacts(t, js)
	store := state.NewStore(kv, art, state.Options{LockTTL: o.lockTTL, HolderAlive: o.holderAlive, MaxStateBytes: o.maxStateBytes})
	h := &harness{t: t, store: store, art: art, tools: tools, opts: o,
		key: state.Key{Namespace: "default", Name: "files"}, natsURL: srv.URL()}
	h.eng = h.replica()
	return h
}

// replica returns another engine on the same state and artifact stores, with its own
// loopback backend server, plugin cache and work directory: another applier replica.
func (h *harness) replica() *tofu.Engine {
	t, o := h.t, h.opts
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: state.NewHandler(h.store, state.HandlerOptions{Password: "backend-pw", Tokens: o.tokens}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	cfg := tofu.Config{
		Name:            o.name,
		Bin:             h.tools.Bin,
		CLIConfigFile:   h.tools.CLIConfig,
		MirrorDir:       h.tools.Mirror,
		PluginCacheDir:  filepath.Join(t.TempDir(), "plugins"),
		WorkDir:         t.TempDir(),
		BackendURL:      "http://" + ln.Addr().String(),
		BackendPassword: "backend-pw",
		Store:           h.store,
		Artifacts:       h.art,
		LockTimeout:     o.lockTimeout,
		Timeouts:        engine.Timeouts{Init: time.Minute, Plan: 2 * time.Minute, Apply: 2 * time.Minute, Destroy: 2 * time.Minute},
		FileAccess:      o.files,
		MaxMemoryBytes:  o.maxMemory,
		MaxCPUSeconds:   o.maxCPU,
	}
	if o.bin != "" {
		cfg.Bin = o.bin
	}
	if o.tokens != nil {
		cfg.BackendPassword, cfg.BackendTokens = "", o.tokens
	}
	if o.workDir != "" {
		cfg.WorkDir = o.workDir
	}
	if o.applyTimeout > 0 {
		cfg.Timeouts.Apply = o.applyTimeout
	}
	if os.Getenv("LAVA_ENGINE_DEBUG") != "" {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if o.noMirror {
		cfg.MirrorDir = ""
	}
	if o.mirror != "" {
		cfg.MirrorDir, cfg.CLIConfigFile = o.mirror, ""
	}
	eng, err := tofu.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.Close() })
	return eng
}

// target stores the rendered JSON and returns a target for it.
func (h *harness) target(rendered string) engine.Target {
	h.t.Helper()
	d, err := h.art.Put(h.t.Context(), strings.NewReader(rendered))
	if err != nil {
		h.t.Fatal(err)
	}
	return engine.Target{Key: h.key, RenderedDigest: d, Holder: "test-replica",
		ProviderSources: map[string]string{"testkit": "example/testkit"}}
}

func (h *harness) plan(rendered string) *engine.PlanRecord {
	h.t.Helper()
	p, err := h.eng.Plan(h.t.Context(), engine.PlanRequest{Target: h.target(rendered), BindingsDigest: "b0"})
	if err != nil {
		h.t.Fatalf("Plan: %v", err)
	}
	return p
}

func (h *harness) apply(p *engine.PlanRecord) *engine.ApplyResult {
	h.t.Helper()
	r, err := h.eng.Apply(h.t.Context(), engine.ApplyRequest{Plan: p, Holder: "test-replica"})
	if err != nil {
		h.t.Fatalf("Apply: %v", err)
	}
	return r
}

func (h *harness) record() state.Record {
	h.t.Helper()
	r, err := h.store.Get(h.t.Context(), h.key)
	if err != nil {
		h.t.Fatal(err)
	}
	return r
}

func actions(p *engine.PlanRecord) map[string]engine.Action {
	m := map[string]engine.Action{}
	for _, r := range p.Resources {
		m[r.Address] = r.Action
	}
	return m
}

func fileContent(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return string(b)
}

// childProcesses returns the pids of this process's children whose command name is comm.
func childProcesses(comm string) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	me := os.Getpid()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		open, closeIdx := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
		if open < 0 || closeIdx < 0 {
			continue
		}
		fields := strings.Fields(string(b[closeIdx+1:]))
		if len(fields) < 2 || string(b[open+1:closeIdx]) != comm {
			continue
		}
		if ppid, _ := strconv.Atoi(fields[1]); ppid == me {
			out = append(out, pid)
		}
	}
	return out
}

func kill(pids []int) {
	for _, p := range pids {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
}

// waitFor polls cond every 50ms until it holds or the deadline passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkApplyFailureMessage applies a resource that fails on create after one that succeeds and
// checks the StepError: the message is the error summary, the tail names the address, and no
// progress output is in either.
func checkApplyFailureMessage(t *testing.T, h *harness) {
	t.Helper()
	dir := t.TempDir()
	js := fmt.Sprintf(`{"resource":{"testkit_file":{"ok":{"filename":%q,"content":"x"},"boom":{"filename":%q,"content":"x","fail_on_create":true,"depends_on":["testkit_file.ok"]}}}}`,
		filepath.Join(dir, "ok.txt"), filepath.Join(dir, "boom.txt"))
	p, err := h.eng.Plan(t.Context(), engine.PlanRequest{Target: h.target(js)})
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.eng.Apply(t.Context(), engine.ApplyRequest{Plan: p})
	var se *engine.StepError
	if !errors.As(err, &se) || se.Step != "apply" {
		t.Fatalf("apply of a failing resource: %v, want a StepError of apply", err)
	}
	t.Logf("error: %v", err)
	if msg := se.Err.Error(); strings.Contains(msg, "exit status") || !strings.Contains(msg, "fail_on_create") {
		t.Errorf("message %q: want the CLI's error summary, not its exit status", msg)
	}
	if !strings.Contains(se.Tail, "with testkit_file.boom,") {
		t.Errorf("tail %q does not name the failing address", se.Tail)
	}
	for _, progress := range []string{"Creating...", "Creation complete", "apply_start", `"@level"`} {
		if strings.Contains(err.Error(), progress) {
			t.Errorf("error %q has the CLI's progress output (%q)", err, progress)
		}
	}
}
