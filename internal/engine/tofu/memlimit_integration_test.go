//go:build integration

package tofu_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lava-operator/lava/internal/engine"
)

// TestEngine_memoryBoundAttack: OpenTofu evaluates a tenant's expressions with no budget, and
// the policy gate only parses them, so `setproduct(range(1024), range(1024), range(1024))`
// under engine tofu asked the CLI for hundreds of gigabytes (a million tuples: 650 MB and
// 12 s), the machine's or the applier pod's memory, on every plan and drift scan. Now every
// CLI process runs under RLIMIT_DATA (Config.MaxMemoryBytes): the plan fails with
// ErrEvaluationLimit (not retried), naming the limit, and an ordinary plan and apply under the
// same limit succeed.
func TestEngine_memoryBoundAttack(t *testing.T) {
	const limit = 384 << 20
	h := newHarness(t, harnessOpts{maxMemory: limit})
	bomb := `{"resource":{"terraform_data":{"a":{"input":"${length(setproduct(range(100), range(100), range(100)))}"}}}}`
	start := time.Now()
	_, err := h.eng.Plan(t.Context(), engine.PlanRequest{Target: h.target(bomb), BindingsDigest: "b0"})
	if !errors.Is(err, engine.ErrEvaluationLimit) || !strings.Contains(err.Error(), "ran out of memory under its limit of 402653184 bytes") {
		t.Fatalf("plan of a million-tuple setproduct under a %d-byte limit: %.400v after %v; want refused at the limit", limit, err, time.Since(start))
	}
	t.Logf("refused after %v: %.200v", time.Since(start), err)
	if r, gerr := h.store.Get(t.Context(), h.key); gerr == nil && r.Lock != nil {
		t.Fatalf("the crashed CLI's state lock is still held: %+v", r.Lock)
	}
	_, err = h.eng.ScanDrift(t.Context(), engine.DriftRequest{Target: h.target(bomb)})
	if !errors.Is(err, engine.ErrEvaluationLimit) {
		t.Fatalf("drift scan of the same: %.400v; want refused at the limit", err)
	}
	p := h.plan(`{"resource":{"terraform_data":{"a":{"input":"${length(setproduct(range(10), range(10), range(10)))}"}}}}`)
	if a := actions(p)["terraform_data.a"]; a != engine.ActionCreate {
		t.Fatalf("ordinary plan under the limit: %v, want create", a)
	}
	h.apply(p)
	if r := h.record(); r.Serial == 0 {
		t.Fatalf("ordinary apply under the limit stored no state: %+v", r)
	}
}

// TestEngine_cpuBoundAttack: OpenTofu's bcrypt takes any cost up to 31 and is evaluated at
// apply (it is impure), so `bcrypt("x", 31)` under engine tofu ran for days: each apply held
// an applier handler for the whole apply timeout (30 minutes), then was retried, and four such
// objects held every handler. Now every CLI process runs under RLIMIT_CPU
// (Config.MaxCPUSeconds): the apply is killed at the limit and fails with
// ErrEvaluationLimit, its state lock released, and the object plans again at once.
func TestEngine_cpuBoundAttack(t *testing.T) {
	const limit = 5
	h := newHarness(t, harnessOpts{maxCPU: limit})
	p := h.plan(`{"resource":{"terraform_data":{"a":{"input":"${bcrypt(\"x\", 31)}"}}}}`)
	start := time.Now()
	_, err := h.eng.Apply(t.Context(), engine.ApplyRequest{Plan: p, Holder: "test-replica"})
	took := time.Since(start)
	if !errors.Is(err, engine.ErrEvaluationLimit) || !strings.Contains(err.Error(), "killed at its CPU limit of 5 s") {
		t.Fatalf("apply of bcrypt cost 31 under a %d s CPU limit: %.400v after %v; want killed at the limit", limit, err, took)
	}
	t.Logf("refused after %v: %.200v", took, err)
	if r, gerr := h.store.Get(t.Context(), h.key); gerr == nil && r.Lock != nil {
		t.Fatalf("the killed CLI's state lock is still held: %+v", r.Lock)
	}
	p = h.plan(`{"resource":{"terraform_data":{"a":{"input":"${bcrypt(\"x\", 4)}"}}}}`)
	h.apply(p)
	if r := h.record(); r.Serial == 0 {
		t.Fatalf("ordinary apply under the limit stored no state: %+v", r)
	}
}

// TestEngine_killedApplyNamesWhatItMade: an apply killed at its CPU limit after it made an
// object, by an expression known only once that object exists, dies before it saves its state
// (the CLI saves at the end, or every 20 s of a long apply): the object exists and the state
// does not have it. The error wraps ErrApplyInterrupted besides ErrEvaluationLimit and names
// the object made, with its id, as one the stored state lacks, so the applier can hold the
// next plan (which would make it again) for approval.
func TestEngine_killedApplyNamesWhatItMade(t *testing.T) {
	h := newHarness(t, harnessOpts{maxCPU: 3})
	p := h.plan(`{"resource":{"terraform_data":{"made":{"input":"x"},"slow":{"input":"${bcrypt(terraform_data.made.id, 31)}"}}}}`)
	_, err := h.eng.Apply(t.Context(), engine.ApplyRequest{Plan: p, Holder: "test-replica"})
	if !errors.Is(err, engine.ErrApplyInterrupted) || !errors.Is(err, engine.ErrEvaluationLimit) ||
		!strings.Contains(err.Error(), "it made terraform_data.made (id=") || !strings.Contains(err.Error(), "the stored state lacks terraform_data.made") {
		t.Fatalf("apply killed after making terraform_data.made: %.600v; want ErrApplyInterrupted naming the object the state lacks", err)
	}
	if r := h.record(); r.Serial != 0 {
		t.Fatalf("the killed apply stored state serial %d; the test needs one that saved none", r.Serial)
	}
	// An apply that fails on its own, with no kill, saves its state and is no interruption.
	p = h.plan(`{"resource":{"terraform_data":{"made":{"input":"x"},"bad":{"input":"${file(\"/nonexistent/${terraform_data.made.id}\")}"}}}}`)
	_, err = h.eng.Apply(t.Context(), engine.ApplyRequest{Plan: p, Holder: "test-replica"})
	if err == nil || errors.Is(err, engine.ErrApplyInterrupted) {
		t.Fatalf("apply failing on a missing file: %.400v; want an ordinary failure", err)
	}
}
