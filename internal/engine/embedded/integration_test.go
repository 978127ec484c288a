//go:build integration

package embedded

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lava-operator/lava/internal/engine"
	"github.com/lava-operator/lava/internal/engine/enginetest"
	"github.com/lava-operator/lava/internal/engine/runner"
	"github.com/lava-operator/lava/internal/engine/state"
	"github.com/lava-operator/lava/internal/platform/testutil/tofutest"
)

// env is an embedded engine over a real JetStream state store and the real provider mirror.
type env struct {
	t     testing.TB
	tools tofutest.Tools
	store *state.Store
	art   *tofutest.ObjectArtifacts
	eng   *Engine
	logs  *syncBuffer
	key   state.Key
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// pid is the provider process's id (0 when unknown), for tests that look at the process.
func (p *process) pid() int {
	if rc := p.pc.ReattachConfig(); rc != nil {
		return rc.Pid
	}
	return 0
}

func newEnv(t testing.TB) *env {
	t.Helper()
	return newEnvAt(t, slog.LevelDebug)
}

// newEnvAt is newEnv with the engine and store logging at level (tests read the debug lines;
// a benchmark logs as the services do by default, --log-level info).
func newEnvAt(t testing.TB, level slog.Level) *env {
	t.Helper()
	return newEnvMirror(t, level, tofutest.Tofu(t).Mirror)
}

// newEnvMirror is newEnvAt with the engine's providers from mirror (a filesystem mirror
// directory, e.g. one [realMirror] merged).
func newEnvMirror(t testing.TB, level slog.Level, mirror string) *env {
	t.Helper()
	return newEnvHost(t, level, mirror, testRunners(t, mirror))
}

// newEnvHost is newEnvMirror with the engine's providers started by host (nil: in this process).
func newEnvHost(t testing.TB, level slog.Level, mirror string, host ProviderHost) *env {
	t.Helper()
	return newEnvOptions(t, level, Options{ProviderDir: mirror, ProviderHost: host})
}

// newEnvOptions is newEnvAt with the engine's options opts, its store, artifacts and logger
// the environment's.
func newEnvOptions(t testing.TB, level slog.Level, opts Options) *env {
	t.Helper()
	tools := tofutest.Tofu(t)
	_, js := tofutest.JetStream(t)
	kv := tofutest.StateBucket(t, js)
	art := tofutest.NewArtifacts(t, js)
	logs := &syncBuffer{}
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: level}))
	store := state.NewStore(kv, art, state.Options{Logger: log})
	opts.Store, opts.Artifacts, opts.Logger = store, art, log
	eng := New(opts)
	t.Cleanup(func() { _ = eng.Close() })
	return &env{t: t, tools: tools, store: store, art: art, eng: eng, logs: logs, key: state.Key{Namespace: "demo", Name: "files"}}
}

// With $LAVA_TEST_PROVIDER_RUNNER=1, the engines of [newEnv] start their providers in runners
// (this test binary as `lava runner`, TestMain), so the same tests check that plans and
// applies through a runner are those in process. The runners keep this user (the tests write
// under t.TempDir, private to it) and may write below the temporary directory.
const (
	providerRunnerEnv = "LAVA_TEST_PROVIDER_RUNNER"
	runnerChildEnv    = "LAVA_RUNNER_TEST_CHILD"
)

// testRunners is a runner host over mirror when $LAVA_TEST_PROVIDER_RUNNER is 1, else nil.
func testRunners(t testing.TB, mirror string) ProviderHost {
	t.Helper()
	if os.Getenv(providerRunnerEnv) != "1" {
		return nil
	}
	return runnerHost(t, mirror)
}

// runnerHost is a runner host over mirror: this test binary as `lava runner` (TestMain), as this
// user, writing below the temporary directory.
func runnerHost(t testing.TB, mirror string) ProviderHost {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	h, err := runner.NewHost(runner.Options{Exe: exe, Env: []string{runnerChildEnv + "=1"}, Mirror: mirror, UID: -1,
		WriteRoots: []string{os.TempDir()}, Stderr: os.Stderr})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	return h
}

func (e *env) target(doc string) engine.Target {
	e.t.Helper()
	d, err := e.art.Put(e.t.Context(), strings.NewReader(doc))
	if err != nil {
		e.t.Fatal(err)
	}
	return engine.Target{Key: e.key, RenderedDigest: d, ProviderSources: map[string]string{"testkit": "example/testkit"}, Holder: "test"}
}

// planApply plans doc and applies the plan.
func (e *env) planApply(doc string) (*engine.PlanRecord, error) {
	e.t.Helper()
	rec, err := e.eng.Plan(e.t.Context(), engine.PlanRequest{Target: e.target(doc)})
	if err != nil {
		return nil, err
	}
	_, err = e.eng.Apply(e.t.Context(), engine.ApplyRequest{Plan: rec, Holder: "test"})
	return rec, err
}

func (e *env) state() *State {
	e.t.Helper()
	_, body, err := e.store.Body(e.t.Context(), e.key)
	if err != nil {
		e.t.Fatal(err)
	}
	st, err := ParseState(body)
	if err != nil {
		e.t.Fatal(err)
	}
	return st
}

// applied returns, in log order, the addresses of the apply steps with the given action.
func (e *env) applied(action string) []string {
	var out []string
	for _, line := range strings.Split(e.logs.String(), "\n") {
		var rec struct{ Msg, Resource, Action string }
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "apply" && rec.Action == action {
			out = append(out, rec.Resource)
		}
	}
	return out
}

func addresses(st *State) []string {
	var out []string
	for _, r := range st.Resources {
		for _, in := range r.Instances {
			out = append(out, r.Type+"."+r.Name+keyString(normalizeKey(in.IndexKey)))
		}
	}
	return out
}

func actionsOf(rec *engine.PlanRecord) map[string]engine.Action {
	out := map[string]engine.Action{}
	for _, r := range rec.Resources {
		out[r.Address] = r.Action
	}
	return out
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("read %s: %v", p, err)
	}
	return string(b)
}

func jsonDoc(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// filesDoc is the test architecture: terraform_data feeding local_file (protocol 5) feeding
// testkit_file (protocol 6); the chain has values known only after apply.
func filesDoc(t *testing.T, dir, greeting string, delay int) string {
	return jsonDoc(t, map[string]any{
		"resource": map[string]any{
			"terraform_data": map[string]any{"seed": map[string]any{"input": greeting}},
			"local_file": map[string]any{"a": map[string]any{
				"filename": dir + "/a.txt",
				"content":  "${terraform_data.seed.output} from a",
			}},
			"testkit_file": map[string]any{"b": map[string]any{
				"filename":        dir + "/b.txt",
				"content":         "b after ${local_file.a.id}",
				"create_delay_ms": delay,
			}},
		},
		"output": map[string]any{"b_id": map[string]any{"value": "${testkit_file.b.id}"}},
	})
}

func TestEngine_lifecycle(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()

	// Create, in dependency order, with unknown values resolved at apply.
	rec, err := e.planApply(filesDoc(t, dir, "hello", 0))
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if rec.Summary != (engine.Summary{Add: 3}) || !rec.HasChanges {
		t.Errorf("create summary = %+v (changes %v)", rec.Summary, rec.HasChanges)
	}
	if got := readFile(t, dir+"/a.txt"); got != "hello from a" {
		t.Errorf("a.txt = %q", got)
	}
	if got := e.applied("create"); strings.Join(got, " ") != "terraform_data.seed local_file.a testkit_file.b" {
		t.Errorf("create order = %v, want dependencies first", got)
	}
	st := e.state()
	var aID string
	for _, r := range st.Resources {
		if r.Type == "local_file" {
			var attrs map[string]any
			_ = json.Unmarshal(r.Instances[0].Attributes, &attrs)
			aID, _ = attrs["id"].(string)
			if r.Provider != `provider["registry.opentofu.org/hashicorp/local"]` {
				t.Errorf("local_file provider = %s", r.Provider)
			}
		}
	}
	if got := readFile(t, dir+"/b.txt"); got != "b after "+aID || aID == "" {
		t.Errorf("b.txt = %q, want b after %q", got, aID)
	}
	out, err := e.eng.Outputs(t.Context(), e.key)
	if err != nil || len(out.Values["b_id"]) == 0 {
		t.Errorf("outputs = %+v, %v", out, err)
	}

	// No changes.
	rec, err = e.eng.Plan(t.Context(), engine.PlanRequest{Target: e.target(filesDoc(t, dir, "hello", 0))})
	if err != nil {
		t.Fatal(err)
	}
	if rec.HasChanges {
		t.Errorf("re-plan has changes: %v", actionsOf(rec))
	}

	// Update in place (testkit's create_delay_ms is not a replacing attribute).
	rec, err = e.planApply(filesDoc(t, dir, "hello", 1))
	if err != nil {
		t.Fatal(err)
	}
	if got := actionsOf(rec); got["testkit_file.b"] != engine.ActionUpdate || got["local_file.a"] != engine.ActionNoOp {
		t.Errorf("update actions = %v", got)
	}

	// Replace: a new greeting changes terraform_data in place, and local_file's content
	// (ForceNew) through it, which replaces b (its content references a's new id).
	rec, err = e.planApply(filesDoc(t, dir, "bonjour", 1))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]engine.Action{"terraform_data.seed": engine.ActionUpdate, "local_file.a": engine.ActionReplace, "testkit_file.b": engine.ActionReplace}
	for a, w := range want {
		if got := actionsOf(rec)[a]; got != w {
			t.Errorf("%s action = %s, want %s", a, got, w)
		}
	}
	if got := readFile(t, dir+"/a.txt"); got != "bonjour from a" {
		t.Errorf("a.txt after replace = %q", got)
	}

	// Plan ids: a stale plan is refused.
	stale, err := e.eng.Plan(t.Context(), engine.PlanRequest{Target: e.target(filesDoc(t, dir, "hola", 1))})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.planApply(filesDoc(t, dir, "ciao", 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.eng.Apply(t.Context(), engine.ApplyRequest{Plan: stale}); !errors.Is(err, engine.ErrPlanStale) {
		t.Errorf("apply of a stale plan: %v, want ErrPlanStale", err)
	}

	// Destroy in reverse order.
	res, err := e.eng.Destroy(t.Context(), engine.DestroyRequest{Target: e.target(filesDoc(t, dir, "ciao", 1))})
	if err != nil {
		t.Fatal(err)
	}
	if res.Destroyed != 3 {
		t.Errorf("destroyed %d, want 3", res.Destroyed)
	}
	if got := e.applied("delete"); strings.Join(got[len(got)-3:], " ") != "testkit_file.b local_file.a terraform_data.seed" {
		t.Errorf("delete order = %v, want dependents first", got)
	}
	if got := addresses(e.state()); len(got) != 0 {
		t.Errorf("state after destroy holds %v", got)
	}
	for _, f := range []string{"a.txt", "b.txt"} {
		if _, err := os.Stat(filepath.Join(dir, f)); !os.IsNotExist(err) {
			t.Errorf("%s still exists after destroy (%v)", f, err)
		}
	}
}

func TestEngine_providerUnavailable(t *testing.T) {
	e := newEnv(t)
	start := time.Now()
	_, err := e.eng.Plan(t.Context(), engine.PlanRequest{Target: e.target(`{"resource":{"aws_vpc":{"main":{"cidr_block":"10.42.0.0/16"}}}}`)})
	var pu *engine.ProviderUnavailableError
	if !errors.As(err, &pu) || !errors.Is(err, engine.ErrProviderUnavailable) {
		t.Fatalf("error = %v, want a ProviderUnavailableError", err)
	}
	if !strings.Contains(err.Error(), "hashicorp/aws") {
		t.Errorf("error %q does not name hashicorp/aws", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("provider-unavailable took %v", d)
	}
	if _, err := e.store.Get(t.Context(), e.key); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("a failed plan left a state record (or lock): %v", err)
	}
	if n := e.eng.Pool().Starts(); n != 0 {
		t.Errorf("%d provider processes started for an unavailable provider", n)
	}
}

func TestEngine_failMidApply(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	doc := func(fail bool) string {
		return jsonDoc(t, map[string]any{"resource": map[string]any{
			"local_file": map[string]any{"ok": map[string]any{"filename": dir + "/ok.txt", "content": "fine"}},
			"testkit_file": map[string]any{
				"first": map[string]any{"filename": dir + "/first.txt", "content": "1"},
				"bad":   map[string]any{"filename": dir + "/bad.txt", "content": "${testkit_file.first.id}", "fail_on_create": fail},
				"after": map[string]any{"filename": dir + "/after.txt", "content": "${testkit_file.bad.id}"},
			},
		}})
	}
	// The directory stands for a secret binding value: it must be redacted from the error.
	rec, err := e.eng.Plan(t.Context(), engine.PlanRequest{Target: e.target(doc(true))})
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.eng.Apply(t.Context(), engine.ApplyRequest{Plan: rec, Holder: "test", Redact: []string{dir}})
	if err == nil || !strings.Contains(err.Error(), "testkit_file.bad") || !strings.Contains(err.Error(), "fail_on_create") {
		t.Fatalf("error = %v, want testkit_file.bad's fail_on_create", err)
	}
	if strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), engine.RedactedText) {
		t.Errorf("error %q does not redact %q", err, dir)
	}
	got := strings.Join(addresses(e.state()), " ")
	for _, a := range []string{"local_file.ok", "testkit_file.first"} {
		if !strings.Contains(got, a) {
			t.Errorf("state %q lost %s", got, a)
		}
	}
	if strings.Contains(got, "testkit_file.after") {
		t.Errorf("state %q holds a resource that depends on the failure", got)
	}
	// The failure fixed, the next apply completes what is left.
	rec, err = e.planApply(doc(false))
	if err != nil {
		t.Fatal(err)
	}
	if rec.Summary.Add != 2 {
		t.Errorf("retry summary = %+v, want 2 to add", rec.Summary)
	}
}

// A provider process that dies mid-create leaves the create's intent (the object may exist);
// testkit_file's identity lets the next operation, on a new process, find that it does not
// and create it (docs/design/0021).
func TestEngine_providerCrash(t *testing.T) {
	e := kitEnv(t)
	dir := t.TempDir()
	doc := jsonDoc(t, map[string]any{"resource": map[string]any{
		"testkit_file": map[string]any{
			"quick": map[string]any{"filename": dir + "/quick.txt", "content": "q"},
			"slow":  map[string]any{"filename": dir + "/slow.txt", "content": "s", "create_delay_ms": 20000},
		},
	}})
	rec, err := e.eng.Plan(t.Context(), engine.PlanRequest{Target: e.target(doc)})
	if err != nil {
		t.Fatal(err)
	}
	// Kill the provider once quick is saved (slow is then waiting in its delay).
	go func() {
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) {
			if _, body, err := e.store.Body(context.WithoutCancel(t.Context()), e.key); err == nil && strings.Contains(string(body), `"quick"`) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		e.eng.pool.mu.Lock()
		for _, en := range e.eng.pool.entries {
			if en.proc != nil && strings.Contains(en.key, "testkit") {
				if rc := en.proc.pc.ReattachConfig(); rc != nil {
					_ = syscall.Kill(rc.Pid, syscall.SIGKILL)
				}
			}
		}
		e.eng.pool.mu.Unlock()
	}()
	start := time.Now()
	_, err = e.eng.Apply(t.Context(), engine.ApplyRequest{Plan: rec})
	var crashed *ProviderCrashedError
	if !errors.As(err, &crashed) || !strings.Contains(err.Error(), "crashed") || !strings.Contains(err.Error(), "testkit_file.slow") {
		t.Fatalf("error = %v, want a provider crash on testkit_file.slow", err)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("crash detected after %v", d)
	}
	if got := addresses(e.state()); len(got) != 1 || got[0] != "testkit_file.quick" {
		t.Errorf("state after crash = %v, want [testkit_file.quick]", got)
	}
	// A new process serves the next operation.
	if _, err := e.planApply(strings.Replace(doc, "20000", "0", 1)); err != nil {
		t.Fatalf("apply after crash: %v", err)
	}
	if n := creates(t, dir+"/slow.txt"); n != 1 {
		t.Errorf("slow.txt created %d times, want once", n)
	}
}

// TestEngine_schemaConversionLimits: a resource attribute is converted to the provider
// schema's type under the same limits as a function's parameter: a string of 4 million digits
// for testkit's number attribute create_delay_ms took 1 min 49 s and 33 GB to parse, nothing
// interrupting it.
func TestEngine_schemaConversionLimits(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	doc := jsonDoc(t, map[string]any{"resource": map[string]any{"testkit_file": map[string]any{
		"kit": map[string]any{"filename": dir + "/kit.txt", "content": "x",
			"create_delay_ms": `${replace(format("%04000000d", 0), "0", "7")}`},
	}}})
	_, err := e.planApply(doc)
	if !errors.Is(err, engine.ErrEvaluationLimit) || !strings.Contains(err.Error(), "testkit_file.kit.create_delay_ms") ||
		!strings.Contains(err.Error(), "a string of 4000000 bytes converted to a number") {
		t.Fatalf("plan: %v; want the conversion refused by the evaluation limits", err)
	}
	// A number written as a string converts as before.
	ok := jsonDoc(t, map[string]any{"resource": map[string]any{"testkit_file": map[string]any{
		"kit": map[string]any{"filename": dir + "/kit.txt", "content": "x", "create_delay_ms": "${tostring(1)}"},
	}}})
	if _, err := e.planApply(ok); err != nil {
		t.Fatal(err)
	}
}

func TestEngine_sensitiveAndDrift(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	const secret = "s3cr3t-Value-7f2a"
	doc := jsonDoc(t, map[string]any{"resource": map[string]any{
		"local_file": map[string]any{
			"secret": map[string]any{"filename": dir + "/secret.txt", "sensitive_content": secret},
			"plain":  map[string]any{"filename": dir + "/plain.txt", "content": "plain"},
		},
	}, "output": map[string]any{"leak": map[string]any{"value": "${local_file.secret.sensitive_content}"}}})
	if _, err := e.planApply(doc); err != nil {
		t.Fatal(err)
	}
	if readFile(t, dir+"/secret.txt") != secret {
		t.Fatal("secret file not written")
	}
	out, err := e.eng.Outputs(t.Context(), e.key)
	if err != nil {
		t.Fatal(err)
	}
	if _, leaked := out.Values["leak"]; leaked || len(out.Sensitive["leak"]) == 0 {
		t.Errorf("an output showing a sensitive attribute is not sensitive: %+v", out)
	}
	st := e.state()
	for _, r := range st.Resources {
		if r.Name == "secret" && !strings.Contains(string(r.Instances[0].SensitiveAttributes), "sensitive_content") {
			t.Errorf("sensitive_attributes = %s", r.Instances[0].SensitiveAttributes)
		}
	}
	// Drift: remove a file out of band.
	if err := os.Remove(dir + "/plain.txt"); err != nil {
		t.Fatal(err)
	}
	rep, err := e.eng.ScanDrift(t.Context(), engine.DriftRequest{Target: e.target(doc)})
	if err != nil {
		t.Fatal(err)
	}
	// Deleted out of band: a replacement, critical, as the tofu engine reports it.
	if len(rep.Findings) != 1 || rep.Findings[0].Address != "local_file.plain" || rep.Findings[0].Change != engine.ActionReplace ||
		rep.Findings[0].Attribute != "*" || rep.MaxSeverity != engine.SeverityCritical {
		t.Errorf("drift = %+v", rep)
	}
	b, _ := json.Marshal(rep)
	for name, text := range map[string]string{"logs": e.logs.String(), "drift report": string(b)} {
		if strings.Contains(text, secret) {
			t.Errorf("%s contain the sensitive value", name)
		}
	}
	if !strings.Contains(e.logs.String(), "local_file.secret") {
		t.Errorf("logs do not mention the resource at all; the test would prove nothing:\n%s", e.logs.String())
	}
}

// TestEngine_driftCases: the out-of-band changes every engine family reports alike
// (enginetest.DriftCases; the tofu engine's TestEngine_driftCases runs the same).
func TestEngine_driftCases(t *testing.T) {
	enginetest.RunDriftCases(t, func(t *testing.T) enginetest.DriftEngine {
		e := newEnv(t)
		return enginetest.DriftEngine{
			Apply: func(doc string) error { _, err := e.planApply(doc); return err },
			Scan: func(doc string) (*engine.DriftReport, error) {
				return e.eng.ScanDrift(t.Context(), engine.DriftRequest{Target: e.target(doc)})
			},
		}
	})
}

// TestEngine_blockCases: the dialect's moved, removed, check and variable blocks applied
// (enginetest.BlockCases; the tofu engine's TestEngine_blockCases runs the same).
func TestEngine_blockCases(t *testing.T) {
	enginetest.RunBlockCases(t, func(t *testing.T) enginetest.BlockEngine {
		e := newEnv(t)
		return enginetest.BlockEngine{
			Plan: func(doc string) (*engine.PlanRecord, error) {
				return e.eng.Plan(t.Context(), engine.PlanRequest{Target: e.target(doc)})
			},
			Apply: func(p *engine.PlanRecord) (*engine.ApplyResult, error) {
				return e.eng.Apply(t.Context(), engine.ApplyRequest{Plan: p, Holder: "test"})
			},
		}
	})
}

func TestPool_warmAndBounded(t *testing.T) {
	tools := tofutest.Tofu(t)
	pool := NewPool(Mirror{Dir: tools.Mirror}, nil, 1)
	configure := func(ctx context.Context, c Client) error {
		ps, err := c.Schema(ctx)
		if err != nil {
			return err
		}
		return c.Configure(ctx, allNull(ps.Provider.Block))
	}
	local, _ := ParseProviderSource("hashicorp/local")
	kit, _ := ParseProviderSource("example/testkit")
	get := func(addr ProviderAddr) *Lease {
		l, err := pool.Get(t.Context(), addr, "", "cfg", nil, configure)
		if err != nil {
			t.Fatalf("get %s: %v", addr, err)
		}
		return l
	}
	l1 := get(local)
	if l1.ProtocolVersion() != 5 || l1.Version != "1.4.0" {
		t.Errorf("local: protocol %d version %s", l1.ProtocolVersion(), l1.Version)
	}
	l1.Release()
	l2 := get(local) // warm: no new process
	l2.Release()
	if pool.Starts() != 1 {
		t.Errorf("starts = %d after reusing a warm provider, want 1", pool.Starts())
	}
	l3 := get(kit)
	if l3.ProtocolVersion() != 6 {
		t.Errorf("testkit protocol %d, want 6", l3.ProtocolVersion())
	}
	l3.Release()
	if w := pool.Warm(); w != 1 {
		t.Errorf("warm = %d with MaxWarm 1", w)
	}
	pool.SetIdleTimeout(time.Nanosecond)
	pool.Prune()
	if w := pool.Warm(); w != 0 || !l3.Exited() {
		t.Errorf("after Prune past the idle timeout: warm %d, testkit exited %v", w, l3.Exited())
	}
	l4 := get(local)
	if err := pool.Close(); err != nil {
		t.Fatal(err)
	}
	l4.Release()
	l3 = l4
	if w := pool.Warm(); w != 0 || !l3.Exited() {
		t.Errorf("after Close and release: warm %d, local exited %v", w, l3.Exited())
	}
	if _, err := pool.Get(t.Context(), local, "", "cfg", nil, configure); !errors.Is(err, ErrPoolClosed) {
		t.Errorf("get after close: %v", err)
	}
}

// TestEngine_demoArchitectures applies what synth renders for the demo manifests
// (examples/local-files.yaml, examples/greeting.tlisp), with the directory moved into the
// test's, and checks the files, then destroys them.
func TestEngine_demoArchitectures(t *testing.T) {
	tests := []struct {
		name, rendered string
		files          map[string]string
		outputs        []string
	}{
		{
			name: "local-files",
			rendered: `{"resource":{"terraform_data":{"run":{"input":"DIR"}},"local_file":{
			  "hello-0":{"filename":"DIR/hello-ana.txt","content":"hello ana\n"},
			  "hello-1":{"filename":"DIR/hello-bo.txt","content":"hello bo\n"}}}}`,
			files: map[string]string{"hello-ana.txt": "hello ana\n", "hello-bo.txt": "hello bo\n"},
		},
		{
			name: "greeting",
			rendered: `{"resource":{"local_file":{"greeting":{"filename":"DIR/greeting.txt","content":"hello lava\n"}}},
			  "output":{"greeting-file":{"value":"${local_file.greeting.filename}"}}}`,
			files:   map[string]string{"greeting.txt": "hello lava\n"},
			outputs: []string{"greeting-file"},
		},
	}
	e := newEnv(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			e.key = state.Key{Namespace: "demo", Name: tt.name}
			doc := strings.ReplaceAll(tt.rendered, "DIR", dir)
			if _, err := e.planApply(doc); err != nil {
				t.Fatalf("apply: %v", err)
			}
			for f, want := range tt.files {
				if got := readFile(t, filepath.Join(dir, f)); got != want {
					t.Errorf("%s = %q, want %q", f, got, want)
				}
			}
			out, err := e.eng.Outputs(t.Context(), e.key)
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range tt.outputs {
				if len(out.Values[o]) == 0 {
					t.Errorf("output %s missing: %v", o, out.Values)
				}
			}
			if _, err := e.eng.Destroy(t.Context(), engine.DestroyRequest{Target: e.target(doc)}); err != nil {
				t.Fatal(err)
			}
			for f := range tt.files {
				if _, err := os.Stat(filepath.Join(dir, f)); !os.IsNotExist(err) {
					t.Errorf("%s survived destroy", f)
				}
			}
		})
	}
}

// TestEngine_dataSourceDeferred reads a data source whose configuration is known only after
// apply: it is read during apply, after its dependency, and feeds a resource.
func TestEngine_dataSourceDeferred(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	if err := os.WriteFile(dir+"/in.txt", []byte("from disk"), 0o644); err != nil {
		t.Fatal(err)
	}
	doc := jsonDoc(t, map[string]any{
		"resource": map[string]any{
			"terraform_data": map[string]any{"path": map[string]any{"input": dir + "/in.txt"}},
			"local_file":     map[string]any{"out": map[string]any{"filename": dir + "/out.txt", "content": "${data.local_file.in.content}!"}},
		},
		"data": map[string]any{"local_file": map[string]any{"in": map[string]any{"filename": "${terraform_data.path.output}"}}},
	})
	rec, err := e.planApply(doc)
	if err != nil {
		t.Fatal(err)
	}
	if got := actionsOf(rec)["data.local_file.in"]; got != engine.ActionRead {
		t.Errorf("data source action = %q, want read (deferred to apply)", got)
	}
	if got := readFile(t, dir+"/out.txt"); got != "from disk!" {
		t.Errorf("out.txt = %q", got)
	}
	rec, err = e.eng.Plan(t.Context(), engine.PlanRequest{Target: e.target(doc)})
	if err != nil || rec.HasChanges {
		t.Errorf("re-plan: %v, changes %v", err, rec != nil && rec.HasChanges)
	}
}

// TestEngine_cancelStopsProvider cancels an apply while a provider is busy: the provider is
// told to stop (StopProvider), the apply returns promptly, and what was done is in state.
func TestEngine_cancelStopsProvider(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	doc := jsonDoc(t, map[string]any{"resource": map[string]any{"testkit_file": map[string]any{
		"quick": map[string]any{"filename": dir + "/quick.txt", "content": "q"},
		"slow":  map[string]any{"filename": dir + "/slow.txt", "content": "s", "create_delay_ms": 30000},
	}}})
	rec, err := e.eng.Plan(t.Context(), engine.PlanRequest{Target: e.target(doc)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() {
		for ctx.Err() == nil {
			if _, body, err := e.store.Body(ctx, e.key); err == nil && strings.Contains(string(body), `"quick"`) {
				time.Sleep(100 * time.Millisecond)
				cancel()
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	start := time.Now()
	if _, err := e.eng.Apply(ctx, engine.ApplyRequest{Plan: rec}); err == nil {
		t.Fatal("cancelled apply succeeded")
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("cancelled apply returned after %v", d)
	}
	if got := addresses(e.state()); len(got) != 1 || got[0] != "testkit_file.quick" {
		t.Errorf("state after cancel = %v", got)
	}
	if _, err := os.Stat(dir + "/slow.txt"); !os.IsNotExist(err) {
		t.Errorf("slow.txt written although the provider was stopped (%v)", err)
	}
}

// TestEngine_providerConfigurations configures providers from provider blocks, aliases
// included, and rejects arguments a provider's schema does not have.
func TestEngine_providerConfigurations(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	doc := jsonDoc(t, map[string]any{
		"provider": map[string]any{"local": []any{map[string]any{}, map[string]any{"alias": "other"}}},
		"resource": map[string]any{"local_file": map[string]any{
			"a": map[string]any{"filename": dir + "/a.txt", "content": "a"},
			"b": map[string]any{"filename": dir + "/b.txt", "content": "b", "provider": "local.other"},
		}},
	})
	if _, err := e.planApply(doc); err != nil {
		t.Fatal(err)
	}
	for _, r := range e.state().Resources {
		want := `provider["registry.opentofu.org/hashicorp/local"]`
		if r.Name == "b" {
			want += ".other"
		}
		if r.Provider != want {
			t.Errorf("%s provider = %s, want %s", r.Name, r.Provider, want)
		}
	}
	e.key = state.Key{Namespace: "demo", Name: "bad-provider"}
	bad := jsonDoc(t, map[string]any{
		"provider": map[string]any{"local": map[string]any{"region": "nowhere"}},
		"resource": map[string]any{"local_file": map[string]any{"a": map[string]any{"filename": dir + "/x.txt", "content": "x"}}},
	})
	if _, err := e.eng.Plan(t.Context(), engine.PlanRequest{Target: e.target(bad)}); err == nil || !strings.Contains(err.Error(), `provider local: Extraneous JSON object property: No argument or block type is named "region"`) {
		t.Errorf("bad provider config: %v", err)
	}
}
