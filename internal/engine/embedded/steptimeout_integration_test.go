//go:build integration

package embedded

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lava-operator/lava/internal/engine"
)

// timeoutEnv is kitEnv (example/testkit with resource identity) with the engine's step
// timeouts set to timeouts; setup is an engine on the same stores with the default timeouts.
func timeoutEnv(t *testing.T, timeouts engine.Timeouts) (e *env, setup *Engine) {
	t.Helper()
	e = kitEnv(t)
	setup = e.eng
	e.eng = New(Options{Store: e.store, Artifacts: e.art, ProviderDir: setup.opts.ProviderDir, Logger: setup.opts.Logger, Timeouts: timeouts})
	eng := e.eng
	t.Cleanup(func() { _ = eng.Close() })
	return e, setup
}

// wantStepTimeout fails the test unless err is the embedded engine's timeout of step after d.
func wantStepTimeout(t *testing.T, err error, step string, d time.Duration) {
	t.Helper()
	t.Logf("%s error: %v", step, err)
	var te *engine.StepTimeoutError
	if !errors.Is(err, engine.ErrStepTimeout) || !errors.As(err, &te) || te.Engine != "embedded" || te.Step != step || te.After != d {
		t.Fatalf("%s: %v, want the embedded %s timed out after %s", step, err, step, d)
	}
	var se *engine.StepError
	if !errors.As(err, &se) || se.Step != step || !strings.HasPrefix(err.Error(), step+": embedded "+step+" timed out after "+d.String()) {
		t.Fatalf("%s: %q, want a StepError of %s saying it timed out after %s", step, err, step, d)
	}
}

// mkfifo replaces path with a named pipe nobody writes or reads: the testkit provider's
// os.ReadFile or os.WriteFile of it blocks in open(2) for good, whatever its context says, as a
// request to an endpoint that accepts connections and never answers does.
func mkfifo(t *testing.T, path string) {
	t.Helper()
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestEngine_applyTimeoutStopsProvider: a create that sleeps far longer than the apply timeout
// (create_delay_ms 3,000,000) ends the apply at the timeout as a cancellation does: the
// provider is asked to stop (StopProvider: testkit's create returns its "cancelled"
// diagnostic well before the stop grace), the object created beside it is in the state, the
// stopped create left no intent, the lock is released, and the error says the apply timed out
// after 3s. Without the bound the apply ran until the test's own deadline.
func TestEngine_applyTimeoutStopsProvider(t *testing.T) {
	const timeout = 3 * time.Second
	e, _ := timeoutEnv(t, engine.Timeouts{Apply: timeout})
	dir := t.TempDir()
	doc := jsonDoc(t, map[string]any{"resource": map[string]any{"testkit_file": map[string]any{
		"quick": map[string]any{"filename": dir + "/quick.txt", "content": "q"},
		"slow":  map[string]any{"filename": dir + "/slow.txt", "content": "s", "create_delay_ms": 3000000},
	}}})
	rec, err := e.eng.Plan(t.Context(), engine.PlanRequest{Target: e.target(doc)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 45*time.Second) // far past the apply timeout
	defer cancel()
	start := time.Now()
	_, err = e.eng.Apply(ctx, engine.ApplyRequest{Plan: rec, Holder: "test"})
	took := time.Since(start)
	wantStepTimeout(t, err, "apply", timeout)
	if !strings.Contains(err.Error(), "testkit_file.slow") || !strings.Contains(err.Error(), "cancelled") {
		t.Errorf("error %q does not carry testkit_file.slow's answer to StopProvider (its \"cancelled\" diagnostic)", err)
	}
	if took > timeout+20*time.Second {
		t.Errorf("the apply returned %s after it started, its timeout %s", took, timeout)
	}
	if got := addresses(e.state()); len(got) != 1 || got[0] != "testkit_file.quick" {
		t.Errorf("state after the timeout = %v, want [testkit_file.quick]", got)
	}
	r, err := e.store.Get(t.Context(), e.key)
	if err != nil || r.Lock != nil || len(r.Intents) != 0 {
		t.Errorf("record after the timeout: lock %+v, intents %+v, %v; want neither", r.Lock, r.Intents, err)
	}
	if _, err := os.Stat(dir + "/slow.txt.create-started"); err != nil {
		t.Errorf("the slow create never started: %v", err)
	}
	if _, err := os.Stat(dir + "/slow.txt"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("slow.txt written although the provider was stopped (%v)", err)
	}
}

// TestEngine_planTimeoutHungRead: a refresh whose ReadResource never returns (the object's file
// is a named pipe nobody writes) ends the plan, and a drift scan, at the plan timeout; the
// provider process, still blocked in the read, is stopped rather than kept warm; once the
// file is back a plan succeeds on a new process. Without the bound the plan ran until the
// test's own deadline.
func TestEngine_planTimeoutHungRead(t *testing.T) {
	const timeout = 3 * time.Second
	e, setup := timeoutEnv(t, engine.Timeouts{Plan: timeout})
	dir := t.TempDir()
	file := filepath.Join(dir, "a.txt")
	doc := jsonDoc(t, map[string]any{"resource": map[string]any{"testkit_file": map[string]any{
		"a": map[string]any{"filename": file, "content": "a"},
	}}})
	rec, err := setup.Plan(t.Context(), engine.PlanRequest{Target: e.target(doc)})
	if err == nil {
		_, err = setup.Apply(t.Context(), engine.ApplyRequest{Plan: rec, Holder: "test"})
	}
	if err != nil {
		t.Fatal(err)
	}
	mkfifo(t, file)
	ctx, cancel := context.WithTimeout(t.Context(), 45*time.Second)
	defer cancel()
	start := time.Now()
	_, err = e.eng.Plan(ctx, engine.PlanRequest{Target: e.target(doc)})
	wantStepTimeout(t, err, "plan", timeout)
	if took := time.Since(start); took > timeout+20*time.Second {
		t.Errorf("the plan returned %s after it started, its timeout %s", took, timeout)
	}
	if n := e.eng.pool.Warm(); n != 0 {
		t.Errorf("%d provider processes kept warm after a plan abandoned their read, want 0", n)
	}
	_, err = e.eng.ScanDrift(ctx, engine.DriftRequest{Target: e.target(doc)})
	wantStepTimeout(t, err, "drift", timeout)
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte("a"), 0o644); err != nil {
		t.Fatal(err)
	}
	if rec, err := e.eng.Plan(ctx, engine.PlanRequest{Target: e.target(doc)}); err != nil || rec.HasChanges {
		t.Errorf("plan with the file back: %v, changes %v; want none", err, rec != nil && rec.HasChanges)
	}
}

// TestEngine_applyTimeoutProviderIgnoresStop: a create that ignores StopProvider (testkit's
// write of a named pipe nobody reads blocks in open(2)) is abandoned the stop grace after the
// apply timeout: the apply fails with the timeout, the create's intent stays in the state
// record (the object may exist), the provider process is stopped. A destroy whose recovery
// reads the same pipe ends at the destroy timeout. Once the pipe is gone the next plan settles
// the intent by the object's identity and the object is created once. Without the grace the
// apply waited for the provider for good.
func TestEngine_applyTimeoutProviderIgnoresStop(t *testing.T) {
	const timeout = 3 * time.Second
	e, _ := timeoutEnv(t, engine.Timeouts{Apply: timeout, Destroy: timeout})
	e.eng.runner.stopGrace = 3 * time.Second
	dir := t.TempDir()
	file := filepath.Join(dir, "x.txt")
	doc := jsonDoc(t, map[string]any{"resource": map[string]any{"testkit_file": map[string]any{
		"x": map[string]any{"filename": file, "content": "x"},
	}}})
	mkfifo(t, file)
	rec, err := e.eng.Plan(t.Context(), engine.PlanRequest{Target: e.target(doc)})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := e.eng.Apply(t.Context(), engine.ApplyRequest{Plan: rec, Holder: "test"})
		done <- err
	}()
	select {
	case err = <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("the apply still waits for a provider that ignores StopProvider 60s after it started")
	}
	wantStepTimeout(t, err, "apply", timeout)
	if took := time.Since(start); took > timeout+e.eng.runner.stopGrace+20*time.Second {
		t.Errorf("the apply returned %s after it started", took)
	}
	if _, err := os.Stat(file + ".create-started"); err != nil {
		t.Errorf("the create never started: %v", err)
	}
	r, err := e.store.Get(t.Context(), e.key)
	if err != nil || r.Lock != nil || len(r.Intents) != 1 || r.Intents[0].Address != "testkit_file.x" {
		t.Fatalf("record after the abandoned create: lock %+v, intents %+v, %v; want the intent of testkit_file.x", r.Lock, r.Intents, err)
	}
	if n := e.eng.pool.Warm(); n != 0 {
		t.Errorf("%d provider processes kept warm after their create was abandoned, want 0", n)
	}
	_, err = e.eng.Destroy(t.Context(), engine.DestroyRequest{Target: e.target(doc)})
	wantStepTimeout(t, err, "destroy", timeout)
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	if _, err := e.planApply(doc); err != nil {
		t.Fatalf("plan and apply once the pipe is gone: %v", err)
	}
	if got := readFile(t, file); got != "x" {
		t.Errorf("x.txt = %q", got)
	}
	if n := creates(t, file); n != 1 {
		t.Errorf("x.txt created %d times, want once", n)
	}
}
