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
