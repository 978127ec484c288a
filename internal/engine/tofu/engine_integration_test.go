//go:build integration

package tofu_test

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lava-operator/lava/internal/engine"
	"github.com/lava-operator/lava/internal/engine/enginetest"
	"github.com/lava-operator/lava/internal/engine/state"
)

// filesJSON renders terraform_data, a hashicorp/local local_file and an example/testkit
// testkit_file under dir, with outputs (one sensitive).
func filesJSON(dir, input string, delayMS int) string {
	return fmt.Sprintf(`{
  "resource": {
    "terraform_data": {"marker": {"input": %q}},
    "local_file": {"readme": {"filename": %q, "content": "hello from lava\n"}},
    "testkit_file": {"kit": {"filename": %q, "content": "kit\n", "create_delay_ms": %d}}
  },
  "output": {
    "marker": {"value": "${terraform_data.marker.output}"},
    "kit_id": {"value": "${testkit_file.kit.id}", "sensitive": true}
  }
}`, input, filepath.Join(dir, "readme.txt"), filepath.Join(dir, "kit.txt"), delayMS)
}

func TestEngine_createUpdateDestroy(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	ctx := t.Context()
	dir := t.TempDir()

	// Create: plan, then apply exactly that plan.
	p := h.plan(filesJSON(dir, "v1", 0))
	if p.Summary != (engine.Summary{Add: 3}) || !p.HasChanges {
		t.Fatalf("first plan summary %+v (changes %v), want 3 to add", p.Summary, p.HasChanges)
	}
	if p.StateSerial != 0 || p.StateLineage != "" {
		t.Fatalf("first plan against serial %d lineage %q, want no state", p.StateSerial, p.StateLineage)
	}
	if p.Engine != "tofu" || p.EngineVersion != "1.12.6" ||
		p.ProviderVersions["registry.opentofu.org/hashicorp/local"] != "1.4.0" ||
		p.ProviderVersions["registry.opentofu.org/example/testkit"] != "0.1.0" {
		t.Fatalf("plan engine %s %s providers %v", p.Engine, p.EngineVersion, p.ProviderVersions)
	}
	if p.PlanID != p.ComputePlanID() || len(p.PlanID) != 64 {
		t.Fatalf("plan id %q", p.PlanID)
	}
	// The saved plan's configuration snapshot holds the rendered JSON byte for byte, with the
	// terraform block only in the override file.
	rc, err := h.art.Get(ctx, p.PlanDigest)
	if err != nil {
		t.Fatal(err)
	}
	planFile, _ := io.ReadAll(rc)
	rc.Close()
	zr, err := zip.NewReader(bytes.NewReader(planFile), int64(len(planFile)))
	if err != nil {
		t.Fatalf("plan artifact is not a saved plan: %v", err)
	}
	snap := map[string]string{}
	for _, f := range zr.File {
		if r, err := f.Open(); err == nil {
			b, _ := io.ReadAll(r)
			r.Close()
			snap[f.Name] = string(b)
		}
	}
	if snap["tfconfig/m-/main.tf.json"] != filesJSON(dir, "v1", 0) {
		t.Fatalf("main.tf.json in the plan differs from the rendered JSON:\n%s", snap["tfconfig/m-/main.tf.json"])
	}
	if ov := snap["tfconfig/m-/lava_override.tf.json"]; !strings.Contains(ov, `"example/testkit"`) || !strings.Contains(ov, `"http"`) ||
		strings.Contains(ov, "127.0.0.1") || strings.Contains(ov, "backend-pw") {
		t.Fatalf("override file in the plan: %s", ov)
	}
	res := h.apply(p)
	if got := fileContent(t, filepath.Join(dir, "readme.txt")); got != "hello from lava\n" {
		t.Fatalf("readme.txt = %q", got)
	}
	if got := fileContent(t, filepath.Join(dir, "kit.txt")); got != "kit\n" {
		t.Fatalf("kit.txt = %q", got)
	}
	rec := h.record()
	if res.StateSerial == 0 || res.StateSerial != rec.Serial || rec.Lineage == "" || rec.Lock != nil {
		t.Fatalf("after create: result %+v record %+v", res, rec)
	}
	if string(res.Outputs.Values["marker"]) != `"v1"` || len(res.Outputs.Sensitive) != 1 || res.Outputs.Values["kit_id"] != nil {
		t.Fatalf("outputs %+v", res.Outputs)
	}
	out, err := h.eng.Outputs(ctx, h.key)
	if err != nil || string(out.Values["marker"]) != `"v1"` {
		t.Fatalf("Outputs = %+v, %v", out, err)
	}
	kitInfo, err := os.Stat(filepath.Join(dir, "kit.txt"))
	if err != nil {
		t.Fatal(err)
	}

	// Planning the same JSON again changes nothing.
	again := h.plan(filesJSON(dir, "v1", 0))
	if again.HasChanges || again.Summary != (engine.Summary{}) || again.StateSerial != rec.Serial || again.StateLineage != rec.Lineage {
		t.Fatalf("re-plan: changes %v summary %+v against %d/%s", again.HasChanges, again.Summary, again.StateSerial, again.StateLineage)
	}
	if again.PlanID == p.PlanID {
		t.Fatal("a plan against another state kept the plan id")
	}

	// A change updates in place: the state serial grows, nothing is recreated.
	up := h.plan(filesJSON(dir, "v2", 1))
	want := map[string]engine.Action{"terraform_data.marker": engine.ActionUpdate,
		"testkit_file.kit": engine.ActionUpdate, "local_file.readme": engine.ActionNoOp}
	if got := actions(up); fmt.Sprint(got) != fmt.Sprint(want) || up.Summary != (engine.Summary{Change: 2}) {
		t.Fatalf("update plan actions %v summary %+v, want %v and 2 to change", got, up.Summary, want)
	}
	res2 := h.apply(up)
	if res2.StateSerial <= res.StateSerial || res2.StateLineage != res.StateLineage {
		t.Fatalf("update: serial %d -> %d lineage %s -> %s", res.StateSerial, res2.StateSerial, res.StateLineage, res2.StateLineage)
	}
	if string(res2.Outputs.Values["marker"]) != `"v2"` {
		t.Fatalf("outputs after update %+v", res2.Outputs.Values)
	}
	if fi, err := os.Stat(filepath.Join(dir, "kit.txt")); err != nil || !fi.ModTime().Equal(kitInfo.ModTime()) {
		t.Fatalf("kit.txt was rewritten by an in-place update (%v)", err)
	}

	// Destroy removes the files; the record stays until Forget.
	d, err := h.eng.Destroy(ctx, engine.DestroyRequest{Target: h.target(filesJSON(dir, "v2", 1))})
	if err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	if d.Destroyed != 3 || d.StateSerial <= res2.StateSerial {
		t.Fatalf("destroy result %+v", d)
	}
	for _, f := range []string{"readme.txt", "kit.txt"} {
		if _, err := os.Stat(filepath.Join(dir, f)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s still exists after destroy (%v)", f, err)
		}
	}
	if err := h.store.Forget(ctx, h.key); err != nil {
		t.Fatal(err)
	}
	if hist, err := h.store.History(ctx, h.key); err != nil || hist.Record.Serial != d.StateSerial {
		t.Fatalf("history after forget: %+v, %v", hist, err)
	}
}

func TestEngine_Apply_stalePlan(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	dir := t.TempDir()
	h.apply(h.plan(filesJSON(dir, "v1", 0)))
	old := h.plan(filesJSON(dir, "v2", 0))
	newer := h.plan(filesJSON(dir, "v3", 0))
	if old.PlanID == newer.PlanID {
		t.Fatal("two different plans share an id")
	}
	h.apply(newer)
	serial := h.record().Serial
	_, err := h.eng.Apply(t.Context(), engine.ApplyRequest{Plan: old})
	var se *engine.PlanStaleError
	if !errors.Is(err, engine.ErrPlanStale) || !errors.As(err, &se) || se.CurrentSerial != serial || se.PlannedSerial != old.StateSerial {
		t.Fatalf("apply of a stale plan: %v, want ErrPlanStale naming serials %d and %d", err, old.StateSerial, serial)
	}
	if r := h.record(); r.Serial != serial {
		t.Fatalf("a refused apply changed the state: serial %d -> %d", serial, r.Serial)
	}
	// The recorded plan of a resource that never had state is stale once a state exists.
	h2 := newHarness(t, harnessOpts{})
	first := h2.plan(filesJSON(t.TempDir(), "a", 0))
	h2.apply(h2.plan(filesJSON(t.TempDir(), "b", 0)))
	if _, err := h2.eng.Apply(t.Context(), engine.ApplyRequest{Plan: first}); !errors.Is(err, engine.ErrPlanStale) {
		t.Fatalf("apply of a plan made before the first state: %v, want ErrPlanStale", err)
	}
}

// TestEngine_Apply_killedLeavesLockThatExpires kills tofu (SIGKILL, as an OOM kill or a lost
// node would) in the middle of an apply. The CLI persists state to a remote backend at most
// every 20 seconds, on a resource's completion (TF_STATE_PERSIST_INTERVAL cannot go lower), so
// the chain is: fast (immediate), mid (21 s: its completion persists fast and mid), slow
// (killed). The lock stays, refuses a plan while young, is taken over once older than its TTL,
// and the recovery plan creates only slow: nothing is created twice.
func TestEngine_Apply_killedLeavesLockThatExpires(t *testing.T) {
	const ttl = 4 * time.Second
	// The dying replica's work lease outlives the kill until the test declares it gone.
	var leaseGone atomic.Bool
	h := newHarness(t, harnessOpts{lockTTL: ttl, holderAlive: func(_ context.Context, holder string) (bool, error) {
		return holder != "replica-that-dies" || !leaseGone.Load(), nil
	}})
	dir := t.TempDir()
	chain := func(slowDelay int) string {
		return fmt.Sprintf(`{"resource":{
	  "local_file":{"fast":{"filename":%q,"content":"fast\n"}},
	  "testkit_file":{
	    "mid":{"filename":%q,"content":"mid\n","create_delay_ms":21000,"depends_on":["local_file.fast"]},
	    "slow":{"filename":%q,"content":"slow\n","create_delay_ms":%d,"depends_on":["testkit_file.mid"]}}}}`,
			filepath.Join(dir, "fast.txt"), filepath.Join(dir, "mid.txt"), filepath.Join(dir, "slow.txt"), slowDelay)
	}
	p := h.plan(chain(120000))

	errc := make(chan error, 1)
	go func() {
		_, err := h.eng.Apply(t.Context(), engine.ApplyRequest{Plan: p, Holder: "replica-that-dies"})
		errc <- err
	}()
	waitFor(t, time.Minute, "the apply to persist fast and mid while holding the lock", func() bool {
		r, err := h.store.Get(t.Context(), h.key)
		return err == nil && r.Lock != nil && r.HasState()
	})
	pids := childProcesses("tofu")
	if len(pids) == 0 {
		t.Fatal("no tofu child process to kill")
	}
	kill(pids)
	if err := <-errc; err == nil {
		t.Fatal("a killed apply reported success")
	}
	lock := h.record().Lock
	if lock == nil || lock.Holder != "replica-that-dies" {
		t.Fatalf("after the kill the lock is %+v, want it left by replica-that-dies", lock)
	}
	if _, err := os.Stat(filepath.Join(dir, "slow.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("slow.txt exists after the kill (%v)", err)
	}
	midInfo, err := os.Stat(filepath.Join(dir, "mid.txt"))
	if err != nil {
		t.Fatal(err)
	}

	// While the lock's holder is alive, planning is refused with ErrLocked naming the holder.
	_, err = h.eng.Plan(t.Context(), engine.PlanRequest{Target: h.target(chain(0))})
	var le *state.LockedError
	if !errors.Is(err, engine.ErrLocked) || !errors.As(err, &le) || le.Lock.Holder != "replica-that-dies" {
		t.Fatalf("plan under a live lock: %v, want ErrLocked naming the holder", err)
	}

	// Once the lock outlived its TTL and its holder is gone, another replica takes it over.
	waitFor(t, 2*ttl, "the lock to expire", func() bool { return time.Since(lock.Created) > ttl })
	leaseGone.Store(true)
	other := h.replica()
	p2, err := other.Plan(t.Context(), engine.PlanRequest{Target: h.target(chain(0))})
	if err != nil {
		t.Fatalf("plan after the lock expired: %v", err)
	}
	want := map[string]engine.Action{"local_file.fast": engine.ActionNoOp, "testkit_file.mid": engine.ActionNoOp,
		"testkit_file.slow": engine.ActionCreate}
	if got := actions(p2); fmt.Sprint(got) != fmt.Sprint(want) || p2.Summary != (engine.Summary{Add: 1}) {
		t.Fatalf("recovery plan %v %+v, want only slow created: %v", got, p2.Summary, want)
	}
	if _, err := other.Apply(t.Context(), engine.ApplyRequest{Plan: p2, Holder: "replica-2"}); err != nil {
		t.Fatalf("recovery apply: %v", err)
	}
	if got := fileContent(t, filepath.Join(dir, "slow.txt")); got != "slow\n" {
		t.Fatalf("slow.txt = %q", got)
	}
	if fi, err := os.Stat(filepath.Join(dir, "mid.txt")); err != nil || !fi.ModTime().Equal(midInfo.ModTime()) {
		t.Fatalf("mid.txt was written again (%v)", err)
	}
	if final := h.plan(chain(0)); final.HasChanges || len(final.Resources) != 3 {
		t.Fatalf("after recovery: changes %v resources %+v", final.HasChanges, final.Resources)
	}
	if r := h.record(); r.Lock != nil {
		t.Fatalf("lock left after a successful apply: %+v", r.Lock)
	}
}

// TestEngine_Apply_onAnotherReplica plans on one replica and applies the recorded plan on
// another with its own backend address: the saved plan names no replica.
func TestEngine_Apply_onAnotherReplica(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	dir := t.TempDir()
	p := h.plan(filesJSON(dir, "v1", 0))
	// The planning replica goes away; a new one with another address applies.
	other := h.replica()
	res, err := other.Apply(t.Context(), engine.ApplyRequest{Plan: p, Holder: "replica-2"})
	if err != nil {
		t.Fatalf("apply on another replica: %v", err)
	}
	if res.StateSerial == 0 || fileContent(t, filepath.Join(dir, "kit.txt")) != "kit\n" {
		t.Fatalf("apply on another replica: %+v", res)
	}
}

func TestEngine_ScanDrift(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	dir := t.TempDir()
	js := filesJSON(dir, "v1", 0)
	h.apply(h.plan(js))
	target := h.target(js)

	rep, err := h.eng.ScanDrift(t.Context(), engine.DriftRequest{Target: target})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Clean() || rep.MaxSeverity != "" {
		t.Fatalf("scan right after apply: %+v, want clean", rep.Findings)
	}
	serial := h.record().Serial

	// Out of band: the file's content changes.
	if err := os.WriteFile(filepath.Join(dir, "readme.txt"), []byte("edited by hand\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rep, err = h.eng.ScanDrift(t.Context(), engine.DriftRequest{Target: target})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(rep)
	t.Logf("drift report: %s", b)
	found := false
	for _, f := range rep.Findings {
		if f.Address == "local_file.readme" {
			found = true
			if f.Change != engine.ActionReplace || f.Severity != engine.SeverityCritical {
				t.Fatalf("finding %+v, want replace/critical", f)
			}
		}
	}
	if !found || rep.MaxSeverity != engine.SeverityCritical {
		t.Fatalf("no critical finding for local_file.readme: %+v", rep)
	}
	if r := h.record(); r.Serial != serial || r.Lock != nil {
		t.Fatalf("a drift scan changed the state: serial %d -> %d, lock %+v", serial, r.Serial, r.Lock)
	}
}

func TestEngine_providerUnavailable(t *testing.T) {
	seed := `{"resource":{"aws_vpc":{"main":{"cidr_block":"10.42.0.0/16"}}}}`
	for _, tt := range []struct {
		name     string
		noMirror bool
	}{{"mirror pre-check", false}, {"init failure", true}} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, harnessOpts{noMirror: tt.noMirror})
			start := time.Now()
			_, err := h.eng.Plan(t.Context(), engine.PlanRequest{Target: h.target(seed)})
			var pe *engine.ProviderUnavailableError
			if !errors.Is(err, engine.ErrProviderUnavailable) || !errors.As(err, &pe) || !strings.Contains(err.Error(), "hashicorp/aws") {
				t.Fatalf("plan of aws_vpc: %v, want ErrProviderUnavailable naming hashicorp/aws", err)
			}
			if d := time.Since(start); d > 30*time.Second {
				t.Fatalf("provider failure took %s", d)
			}
			t.Logf("%s in %s: %v", tt.name, time.Since(start).Round(time.Millisecond), err)
			if _, err := h.store.Get(t.Context(), h.key); !errors.Is(err, state.ErrNotFound) {
				t.Fatalf("a failed plan left a state record: %v", err)
			}
		})
	}
}

func TestEngine_failureTailIsRedacted(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	secret := "s3cr3t-binding-value"
	js := fmt.Sprintf(`{"resource":{"testkit_file":{"boom":{"filename":%q,"content":"x","fail_on_create":true}}}}`,
		filepath.Join(t.TempDir(), secret+".txt"))
	tgt := h.target(js)
	tgt.Redact = []string{secret}
	p, err := h.eng.Plan(t.Context(), engine.PlanRequest{Target: tgt})
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.eng.Apply(t.Context(), engine.ApplyRequest{Plan: p, Redact: []string{secret}})
	var se *engine.StepError
	if !errors.As(err, &se) || se.Step != "apply" {
		t.Fatalf("apply of a failing resource: %v, want a StepError of apply", err)
	}
	if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "backend-pw") {
		t.Fatalf("secret in the error: %v", err)
	}
	if !strings.Contains(se.Tail, "fail_on_create") || !strings.Contains(se.Tail, engine.RedactedText) {
		t.Fatalf("tail %q should show the provider's error with the secret redacted", se.Tail)
	}
	if r := h.record(); r.Lock != nil {
		t.Fatalf("a failed apply left the lock %+v", r.Lock)
	}
}

// TestEngine_applyFailureMessage: a failed apply's error is the CLI's error summary, its tail
// the CLI's diagnostics with the failing address, and none of the CLI's progress messages (apply
// and destroy run with -json and only the diagnostics are kept).
func TestEngine_applyFailureMessage(t *testing.T) {
	checkApplyFailureMessage(t, newHarness(t, harnessOpts{}))
}

// TestEngine_driftCases: the out-of-band changes every engine family reports alike
// (enginetest.DriftCases; the embedded engine's TestEngine_driftCases runs the same).
func TestEngine_driftCases(t *testing.T) {
	enginetest.RunDriftCases(t, func(t *testing.T) enginetest.DriftEngine {
		h := newHarness(t, harnessOpts{})
		return enginetest.DriftEngine{
			Apply: func(doc string) error {
				_, err := h.eng.Apply(t.Context(), engine.ApplyRequest{Plan: h.plan(doc)})
				return err
			},
			Scan: func(doc string) (*engine.DriftReport, error) {
				return h.eng.ScanDrift(t.Context(), engine.DriftRequest{Target: h.target(doc)})
			},
		}
	})
}

// TestEngine_blockCases: the dialect's moved, removed, check and variable blocks applied
// (enginetest.BlockCases; the embedded engine's TestEngine_blockCases runs the same).
func TestEngine_blockCases(t *testing.T) {
	enginetest.RunBlockCases(t, func(t *testing.T) enginetest.BlockEngine {
		h := newHarness(t, harnessOpts{})
		return enginetest.BlockEngine{
			Plan: func(doc string) (*engine.PlanRecord, error) {
				return h.eng.Plan(t.Context(), engine.PlanRequest{Target: h.target(doc), BindingsDigest: "b0"})
			},
			Apply: func(p *engine.PlanRecord) (*engine.ApplyResult, error) {
				return h.eng.Apply(t.Context(), engine.ApplyRequest{Plan: p, Holder: "test-replica"})
			},
		}
	})
}

// TestEngine_Apply_timeout bounds a wedged apply: the step times out with a StepError wrapping
// the *engine.StepTimeoutError the embedded engine returns too (engine.ErrStepTimeout, which the
// applier reports as StepTimeout, and context.DeadlineExceeded), the CLI is interrupted
// gracefully and releases the lock.
func TestEngine_Apply_timeout(t *testing.T) {
	h := newHarness(t, harnessOpts{applyTimeout: 3 * time.Second})
	dir := t.TempDir()
	p := h.plan(fmt.Sprintf(`{"resource":{"testkit_file":{"wedged":{"filename":%q,"content":"x","create_delay_ms":600000}}}}`,
		filepath.Join(dir, "wedged.txt")))
	start := time.Now()
	_, err := h.eng.Apply(t.Context(), engine.ApplyRequest{Plan: p})
	var se *engine.StepError
	var te *engine.StepTimeoutError
	if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &se) || se.Step != "apply" || !errors.Is(err, engine.ErrStepTimeout) ||
		!errors.As(err, &te) || te.Engine != "tofu" || te.Step != "apply" || te.After != 3*time.Second ||
		!strings.HasPrefix(err.Error(), "apply: tofu apply timed out after 3s") {
		t.Fatalf("wedged apply: %v, want a StepError of apply wrapping the tofu apply's StepTimeoutError after 3s", err)
	}
	if d := time.Since(start); d > time.Minute {
		t.Fatalf("a 3s apply timeout returned after %s", d)
	}
	if r, err := h.store.Get(t.Context(), h.key); err == nil && r.Lock != nil {
		t.Fatalf("an interrupted apply left the lock %+v", r.Lock)
	}
	if _, err := os.Stat(filepath.Join(dir, "wedged.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("wedged.txt exists (%v)", err)
	}
}

// TestEngine_concurrentResources runs plans and applies of several resources at once on one
// fresh engine: providers linked from the mirror, or installed through the plugin cache.
func TestEngine_concurrentResources(t *testing.T) {
	for _, tt := range []struct {
		name     string
		noMirror bool
	}{{"mirror", false}, {"plugin cache", true}} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, harnessOpts{noMirror: tt.noMirror})
			const n = 4
			dirs := make([]string, n)
			errs := make(chan error, n)
			for i := range n {
				dirs[i] = t.TempDir()
				tgt := h.target(filesJSON(dirs[i], fmt.Sprint("v", i), 0))
				tgt.Key = state.Key{Namespace: "default", Name: fmt.Sprintf("r%d", i)}
				go func() {
					p, err := h.eng.Plan(t.Context(), engine.PlanRequest{Target: tgt})
					if err == nil {
						_, err = h.eng.Apply(t.Context(), engine.ApplyRequest{Plan: p})
					}
					errs <- err
				}()
			}
			for range n {
				if err := <-errs; err != nil {
					t.Error(err)
				}
			}
			for i := range n {
				if got := fileContent(t, filepath.Join(dirs[i], "kit.txt")); got != "kit\n" {
					t.Fatalf("resource %d: kit.txt = %q", i, got)
				}
				r, err := h.store.Get(t.Context(), state.Key{Namespace: "default", Name: fmt.Sprintf("r%d", i)})
				if err != nil || r.Serial == 0 || r.Lock != nil {
					t.Fatalf("resource %d: record %+v, %v", i, r, err)
				}
			}
		})
	}
}

// TestEngine_deepWorkDir: a WorkDir deep enough that a provider's unix socket in the
// workspace would pass the 107-byte limit of a socket path (here over 100 bytes, so the
// workspace plus go-plugin's "/plugin<digits>" does) still plans and applies with real
// providers (hashicorp/local and example/testkit): TMPDIR, where go-plugin puts the socket, is a
// private directory of its own; otherwise tofu fails every plan with "Failed to read any lines
// from plugin's stdout" (as under TestChaos_killEveryServiceTwiceAndRestartNATS in test/e2e,
// whose temporary directories carry the test's long name).
func TestEngine_deepWorkDir(t *testing.T) {
	deep := t.TempDir()
	for len(deep) <= 100 {
		deep = filepath.Join(deep, "a-deep-work-directory")
	}
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", t.TempDir()) // where the private temporary directories go
	h := newHarness(t, harnessOpts{workDir: deep})
	dir := t.TempDir()
	h.apply(h.plan(filesJSON(dir, "v1", 0)))
	if got := fileContent(t, filepath.Join(dir, "readme.txt")); got != "hello from lava\n" {
		t.Errorf("readme.txt holds %q", got)
	}
	if left, _ := filepath.Glob(filepath.Join(os.TempDir(), "lava-tmp-*")); len(left) != 0 {
		t.Errorf("temporary directories left after the operations: %v", left)
	}
}
