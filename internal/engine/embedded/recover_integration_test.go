//go:build integration

package embedded

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lava-operator/lava/internal/engine"
	"github.com/lava-operator/lava/internal/engine/state"
	"github.com/lava-operator/lava/internal/platform/testutil/tofutest"
)

// interruptCreate applies doc (one testkit resource whose create waits create_delay_ms) and
// loses the create's result the way a dead applier does (docs/design/0021): once the provider
// has started the create (its "<filename>.create-started" marker), another holder takes the
// state lock over (as `lava state unlock` and a new applier would), so the state save after the
// create fails and nothing records the object the provider made. The takeover is released
// before returning. It fails the test unless the apply failed with the lock error and the
// provider counted exactly one create of filename.
func interruptCreate(t *testing.T, e *env, doc, filename string) {
	t.Helper()
	done := make(chan error, 1)
	go func() { _, err := e.planApply(doc); done <- err }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(filename + ".create-started"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the provider did not start creating %s within 30s", filename)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := e.store.Unlock(t.Context(), e.key, "", true); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.Lock(t.Context(), e.key, state.Lock{ID: "takeover", Holder: "another-applier"}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, state.ErrLocked) {
		t.Fatalf("apply whose state save was taken over: %v, want the state lock error", err)
	}
	if err := e.store.Unlock(t.Context(), e.key, "takeover", false); err != nil {
		t.Fatal(err)
	}
	if n := creates(t, filename); n != 1 {
		t.Fatalf("the interrupted apply created %s %d times, want once", filename, n)
	}
	if rec, err := e.store.Get(t.Context(), e.key); err != nil || rec.HasState() {
		t.Fatalf("record after the interrupted apply: %+v, %v; want no state body (the create's result lost)", rec, err)
	}
}

// creates reads the testkit provider's create counter of filename (0 when it never created it).
func creates(t *testing.T, filename string) int {
	t.Helper()
	b, err := os.ReadFile(filename + ".creates")
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	var n int
	for _, c := range strings.TrimSpace(string(b)) {
		n = n*10 + int(c-'0')
	}
	return n
}

// kitEnv is newEnv with example/testkit tofutest.TestkitVersion (resource identity) as the
// provider mirror.
func kitEnv(t *testing.T) *env {
	t.Helper()
	e := newEnv(t)
	e.eng = New(Options{Store: e.store, Artifacts: e.art, ProviderDir: tofutest.TestkitMirror(t, e.tools), Logger: e.eng.opts.Logger})
	eng := e.eng
	t.Cleanup(func() { _ = eng.Close() })
	return e
}

// An apply that dies between the provider's create and the state save leaves a create intent;
// testkit_file plans its identity (the filename), so the next plan imports the object by that
// identity, saves it into the state and plans against it: the provider's create counter stays
// at one (without intents the plan would create the file a second time).
func TestEngine_interruptedCreateRecoveredByIdentity(t *testing.T) {
	e := kitEnv(t)
	filename := filepath.Join(t.TempDir(), "a.txt")
	doc := jsonDoc(t, map[string]any{"resource": map[string]any{"testkit_file": map[string]any{"a": map[string]any{
		"filename": filename, "content": "kit", "create_delay_ms": 1500}}}})
	interruptCreate(t, e, doc, filename)
	rec, err := e.store.Get(t.Context(), e.key)
	if err != nil || len(rec.Intents) != 1 || rec.Intents[0].Address != "testkit_file.a" || string(rec.Intents[0].Identity) != `{"filename":`+jsonString(filename)+`}` {
		t.Errorf("record %+v, %v; want one intent for testkit_file.a with its planned identity", rec, err)
	} else if rec.Intents[0].IdentitySensitive {
		t.Errorf("intent %+v: marked sensitive, but nothing in its identity is", rec.Intents[0])
	}

	plan, err := e.eng.Plan(t.Context(), engine.PlanRequest{Target: e.target(doc)})
	if err != nil {
		t.Fatalf("plan after the interrupted create: %v", err)
	}
	if a := actionsOf(plan)["testkit_file.a"]; a == engine.ActionCreate {
		t.Fatalf("plan after the interrupted create creates testkit_file.a again (%v)", actionsOf(plan))
	}
	if got := addresses(e.state()); len(got) != 1 || got[0] != "testkit_file.a" {
		t.Fatalf("state after recovery holds %v, want testkit_file.a", got)
	}
	if rec, err := e.store.Get(t.Context(), e.key); err != nil || len(rec.Intents) != 0 {
		t.Fatalf("record after recovery %+v, %v; want the intent gone", rec, err)
	}
	if !strings.Contains(e.logs.String(), "recovered the object of an interrupted create") {
		t.Errorf("no WARN about the recovered object in the log")
	}
	if _, err := e.eng.Apply(t.Context(), engine.ApplyRequest{Plan: plan, Holder: "test"}); err != nil {
		t.Fatalf("apply after recovery: %v", err)
	}
	if n := creates(t, filename); n != 1 {
		t.Fatalf("%s created %d times, want once", filename, n)
	}
	// A later apply of the same configuration has nothing to create either.
	if _, err := e.planApply(doc); err != nil || creates(t, filename) != 1 {
		t.Fatalf("second apply: %v, creates %d; want no error and one create", err, creates(t, filename))
	}
}

// The provider reports the object of an intent gone (the create made nothing, or it was deleted
// since): the intent is dropped and the plan creates it.
func TestEngine_interruptedCreateGoneIsCreated(t *testing.T) {
	e := kitEnv(t)
	filename := filepath.Join(t.TempDir(), "b.txt")
	doc := jsonDoc(t, map[string]any{"resource": map[string]any{"testkit_file": map[string]any{"b": map[string]any{
		"filename": filename, "content": "kit", "create_delay_ms": 1500}}}})
	interruptCreate(t, e, doc, filename)
	if err := os.Remove(filename); err != nil {
		t.Fatal(err)
	}
	plan, err := e.eng.Plan(t.Context(), engine.PlanRequest{Target: e.target(doc)})
	if err != nil {
		t.Fatal(err)
	}
	if a := actionsOf(plan)["testkit_file.b"]; a != engine.ActionCreate {
		t.Fatalf("plan %v, want testkit_file.b created (its object is gone)", actionsOf(plan))
	}
	if rec, err := e.store.Get(t.Context(), e.key); err != nil || len(rec.Intents) != 0 {
		t.Fatalf("record %+v, %v; want the intent dropped", rec, err)
	}
	if _, err := e.eng.Apply(t.Context(), engine.ApplyRequest{Plan: plan, Holder: "test"}); err != nil || creates(t, filename) != 2 {
		t.Fatalf("apply: %v, creates %d; want the file created again", err, creates(t, filename))
	}
}

// Without an identity (testkit_legacy_file, like a provider before protocol 5.9/6.9) the next
// plan, apply and destroy fail with engine.ErrCreateInterrupted naming the address, and create
// nothing; once an operator settles the intent (`lava state forget-intent`, here
// Store.ResolveIntents) after deleting the object, the plan creates it.
func TestEngine_interruptedCreateWithoutIdentityFails(t *testing.T) {
	e := kitEnv(t)
	filename := filepath.Join(t.TempDir(), "c.txt")
	doc := jsonDoc(t, map[string]any{"resource": map[string]any{"testkit_legacy_file": map[string]any{"c": map[string]any{
		"filename": filename, "content": "kit", "create_delay_ms": 1500}}}})
	interruptCreate(t, e, doc, filename)
	rec, err := e.store.Get(t.Context(), e.key)
	if err != nil || len(rec.Intents) != 1 || len(rec.Intents[0].Identity) != 0 {
		t.Errorf("record %+v, %v; want one intent without identity", rec, err)
	}

	_, err = e.eng.Plan(t.Context(), engine.PlanRequest{Target: e.target(doc)})
	var ci *engine.CreateInterruptedError
	if !errors.As(err, &ci) || !errors.Is(err, engine.ErrCreateInterrupted) || len(ci.Addresses) != 1 || ci.Addresses[0] != "testkit_legacy_file.c" ||
		!strings.Contains(err.Error(), "lava state forget-intent demo/files testkit_legacy_file.c") {
		t.Fatalf("plan: %v; want a CreateInterruptedError naming testkit_legacy_file.c and the command", err)
	}
	if _, err := e.eng.Destroy(t.Context(), engine.DestroyRequest{Target: e.target(doc)}); !errors.Is(err, engine.ErrCreateInterrupted) {
		t.Fatalf("destroy: %v; want ErrCreateInterrupted", err)
	}
	if n := creates(t, filename); n != 1 {
		t.Fatalf("%s created %d times, want once", filename, n)
	}

	if err := os.Remove(filename); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.ResolveIntents(t.Context(), e.key, "", []string{"testkit_legacy_file.c"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.planApply(doc); err != nil {
		t.Fatalf("apply after the intent was settled: %v", err)
	}
	if n := creates(t, filename); n != 2 {
		t.Fatalf("%s created %d times, want twice (once interrupted, once after the operator settled it)", filename, n)
	}
}

// An apply whose plan was made before another apply died (a redelivered apply message) settles
// the intents first: a recovered object makes its plan stale instead of creating it again.
func TestEngine_interruptedCreateMakesOlderPlanStale(t *testing.T) {
	e := kitEnv(t)
	filename := filepath.Join(t.TempDir(), "d.txt")
	doc := jsonDoc(t, map[string]any{"resource": map[string]any{"testkit_file": map[string]any{"d": map[string]any{
		"filename": filename, "content": "kit", "create_delay_ms": 1500}}}})
	old, err := e.eng.Plan(t.Context(), engine.PlanRequest{Target: e.target(doc)})
	if err != nil {
		t.Fatal(err)
	}
	interruptCreate(t, e, doc, filename)
	if _, err := e.eng.Apply(t.Context(), engine.ApplyRequest{Plan: old, Holder: "test"}); !errors.Is(err, engine.ErrPlanStale) {
		t.Fatalf("apply of the plan made before the interruption: %v, want ErrPlanStale", err)
	}
	if n := creates(t, filename); n != 1 {
		t.Fatalf("%s created %d times, want once", filename, n)
	}
	if got := addresses(e.state()); len(got) != 1 {
		t.Fatalf("state holds %v, want the recovered object", got)
	}
}

func jsonString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"', '\\':
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	b.WriteByte('"')
	return b.String()
}

// An intent whose planned identity holds a sensitive value (here the filename, built from a
// sensitive variable) is marked IdentitySensitive, so `lava state show` masks it; the identity
// itself is kept for the recovery.
func TestEngine_interruptedCreateSensitiveIdentityMarked(t *testing.T) {
	e := kitEnv(t)
	dir := filepath.Join(t.TempDir(), "secret-dir")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	filename := filepath.Join(dir, "s.txt")
	doc := jsonDoc(t, map[string]any{
		"variable": map[string]any{"dir": map[string]any{"type": "string", "default": dir, "sensitive": true}},
		"resource": map[string]any{"testkit_file": map[string]any{"s": map[string]any{
			"filename": "${var.dir}/s.txt", "content": "kit", "create_delay_ms": 1500}}}})
	interruptCreate(t, e, doc, filename)
	rec, err := e.store.Get(t.Context(), e.key)
	if err != nil || len(rec.Intents) != 1 {
		t.Fatalf("record %+v, %v; want one intent", rec, err)
	}
	if in := rec.Intents[0]; !in.IdentitySensitive || string(in.Identity) != `{"filename":`+jsonString(filename)+`}` {
		t.Errorf("intent %+v: want its identity kept and marked sensitive", in)
	}
}
