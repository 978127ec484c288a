//go:build integration

package applier_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lava-operator/lava/api/v1alpha1"
	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/testutil/natstest"
)

// outputJSON is a rendered architecture whose only output "o" is the expression expr.
func outputJSON(t *testing.T, expr string) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{"output": map[string]any{"o": map[string]any{"value": "${" + expr + "}"}}})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestApplier_evaluationLimits: expressions that, evaluated without bounds, end the applier
// (setproduct of three range(1024) asks for 25.7 GB: "fatal error: out of memory", on every
// redelivery) or hold its handlers (bcrypt at cost 31 takes days, and four of them take every
// handler) end as a Failed plan, not retried, naming the function, the limit and the
// position, within seconds; the applier keeps serving: an ordinary object behind them is
// applied.
func TestApplier_evaluationLimits(t *testing.T) {
	h := newHarness(t)
	h.startApplier(applierOpts{concurrency: 4})
	attacks := map[string]struct{ expr, want string }{
		"setproduct": {`setproduct(range(1024), range(1024), range(1024))`, "setproduct: the result would have 4294967296 elements"},
		"indent":     {`indent(1e9, "x")`, "indent: the result would have 1000000001 bytes"},
	}
	for i := range 4 {
		attacks[fmt.Sprintf("bcrypt-%d", i)] = struct{ expr, want string }{`bcrypt("x", 31)`, "bcrypt: cost 31 is above the highest cost accepted, 12"}
	}
	start := time.Now()
	for name, a := range attacks {
		h.publishSynthesized("demo", name, 1, outputJSON(t, a.expr), lavav1.Engine_ENGINE_EMBEDDED)
	}
	h.publishSynthesized("demo", "ordinary", 1, outputJSON(t, `upper("ok")`), lavav1.Engine_ENGINE_EMBEDDED)
	for name, a := range attacks {
		f := await(h, "demo", name, time.Minute, gen[*lavav1.Failed](1))
		if f.GetStage() != lavav1.Stage_STAGE_PLAN || f.GetReason() != v1alpha1.ReasonPlanFailed || f.GetRetryable() ||
			!strings.Contains(f.GetMessage(), a.want) || !strings.Contains(f.GetMessage(), "main.tf.json:1,") {
			t.Errorf("%s: Failed %v %s retryable=%v %q; want a final plan failure naming %q and the position",
				name, f.GetStage(), f.GetReason(), f.GetRetryable(), f.GetMessage(), a.want)
		}
	}
	applied := await(h, "demo", "ordinary", time.Minute, gen[*lavav1.Applied](1))
	if got := applied.GetOutputs()["o"]; got != `"OK"` {
		t.Errorf("ordinary output = %s", got)
	}
	if took := time.Since(start); took > 45*time.Second {
		t.Errorf("the refusals and the ordinary object took %v", took)
	}
}

// TestApplier_outputsOverMaxPayload: an apply whose non-sensitive outputs make the Applied
// event larger than the server's max_payload (1 MiB, nats-server's default) fails the object
// with a message naming the sizes and the largest output, instead of leaving it Planned with
// no event; the state of the apply is kept.
func TestApplier_outputsOverMaxPayload(t *testing.T) {
	h := newHarness(t)
	r := h.startApplier(applierOpts{})
	h.publishSynthesized("demo", "big-output", 1, outputJSON(t, `format("%2000000s", "")`), lavav1.Engine_ENGINE_EMBEDDED)
	f := await(h, "demo", "big-output", 2*time.Minute, gen[*lavav1.Failed](1))
	if f.GetStage() != lavav1.Stage_STAGE_APPLY || f.GetReason() != v1alpha1.ReasonApplyFailed || f.GetRetryable() ||
		!strings.Contains(f.GetMessage(), `the largest output is "o" (2000002 bytes of JSON)`) ||
		!strings.Contains(f.GetMessage(), "more than the bus's maximum message size of 1048576 bytes") {
		t.Fatalf("Failed %v %s retryable=%v %q; want a final apply failure naming the output and the limit",
			f.GetStage(), f.GetReason(), f.GetRetryable(), f.GetMessage())
	}
	if a := events[*lavav1.Applied](h, "demo", "big-output"); len(a) != 0 {
		t.Fatalf("%d Applied events", len(a))
	}
	if rec := h.stateOf(r, "demo", "big-output"); rec.Digest == "" {
		t.Errorf("no state recorded for the applied plan: %+v", rec)
	}
}

// TestApplier_artifactQuotaAttack is the spec churn of the twentieth trial: a render of a few
// hundred bytes whose plan and state hold a 4 MB value, changed generation after generation;
// synth's quota counts 125 bytes a render while each plan and apply stored about 12 MB, and
// the artifact store grew by 14 MB a second. The applier charges each plan artifact and review
// body and counts each state body against the namespace: past its quota a plan fails
// ArtifactQuotaExceeded (retryable), nothing more is stored for it, and another namespace still
// plans and applies. Checked to fail without the quota: every generation was applied.
func TestApplier_artifactQuotaAttack(t *testing.T) {
	const quota, generations = 24 << 20, 6
	h := newHarness(t)
	h.startApplier(applierOpts{artifactQuota: quota})
	before := natstest.ObjectStoreBytes(t, h.js, bus.ObjectStoreArtifacts)
	big := func(g int) string {
		return fmt.Sprintf(`{"resource":{"terraform_data":{"a":{"input":"${format(\"%%04000000d\", 0)}-%d"}}}}`, g)
	}
	applied, refused := 0, 0
	for g := int64(1); g <= generations; g++ {
		h.publishSynthesized("attacker", "big", g, big(int(g)), lavav1.Engine_ENGINE_EMBEDDED)
		deadline := time.Now().Add(2 * time.Minute)
		for done := false; !done; {
			if time.Now().After(deadline) {
				t.Fatalf("generation %d: no outcome\n%s", g, h.describe("attacker", "big"))
			}
			for _, a := range events[*lavav1.Applied](h, "attacker", "big") {
				if a.GetEnvelope().GetGeneration() == g {
					applied, done = applied+1, true
				}
			}
			for _, f := range events[*lavav1.Failed](h, "attacker", "big") {
				if f.GetEnvelope().GetGeneration() != g || done {
					continue
				}
				if f.GetReason() != v1alpha1.ReasonArtifactQuotaExceeded || !f.GetRetryable() || !strings.Contains(f.GetMessage(), "past its artifact quota") {
					t.Errorf("generation %d: Failed %s retryable=%v %q", g, f.GetReason(), f.GetRetryable(), f.GetMessage())
				}
				refused, done = refused+1, true
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	grew := natstest.ObjectStoreBytes(t, h.js, bus.ObjectStoreArtifacts) - before
	t.Logf("%d generations applied, %d refused; lava-artifacts grew by %d bytes", applied, refused, grew)
	// The quota plus the last state body counted past it (4 MB) and the renders.
	if refused == 0 || grew > quota+6<<20 {
		t.Errorf("%d of %d generations refused, the store grew by %d bytes: want refusals and at most %d", refused, generations, grew, quota+6<<20)
	}
	h.publishSynthesized("victim", "web", 1, outputJSON(t, `upper("ok")`), lavav1.Engine_ENGINE_EMBEDDED)
	await(h, "victim", "web", time.Minute, gen[*lavav1.Applied](1))
}
