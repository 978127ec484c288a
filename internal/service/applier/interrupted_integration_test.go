//go:build integration

package applier_test

import (
	"strings"
	"testing"
	"time"

	"github.com/lava-operator/lava/api/v1alpha1"
	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/readmodel"
)

// TestApplier_killedApplyHoldsNextPlan: a tenant can have the tofu CLI killed mid-apply on
// purpose (here at its CPU limit, by an expression known only after a first object is made),
// before it saves its state, so the state forgets the object made. The apply fails naming
// that object and saying the state lacks it; the object's next plan, which would make it a
// second time, is held for approval under auto with state_regressed saying why, and gets an
// id of its own; approved, it is applied, and the plan after that is held no more.
func TestApplier_killedApplyHoldsNextPlan(t *testing.T) {
	h := newHarness(t)
	h.startApplier(applierOpts{cliMaxCPU: 3})
	const ns, name = "demo", "killed"
	made := `{"resource":{"terraform_data":{"made":{"input":"x"}`
	h.publishSynthesized(ns, name, 1, made+`,"slow":{"input":"${bcrypt(terraform_data.made.id, 31)}"}}}}`, lavav1.Engine_ENGINE_TOFU)
	f := await(h, ns, name, 2*time.Minute, gen[*lavav1.Failed](1))
	if f.GetStage() != lavav1.Stage_STAGE_APPLY || f.GetReason() != v1alpha1.ReasonApplyFailed || f.GetRetryable() ||
		!strings.Contains(f.GetMessage(), "stopped before it saved its state") || !strings.Contains(f.GetMessage(), "the stored state lacks terraform_data.made") {
		t.Fatalf("Failed %v %s retryable=%v %q; want a final apply failure saying the state lacks terraform_data.made",
			f.GetStage(), f.GetReason(), f.GetRetryable(), f.GetMessage())
	}
	rec := h.record(ns, name, func(r *readmodel.Record) bool { return r.Interrupted != nil })
	if rec.Interrupted.PlanID != f.GetPlanId() {
		t.Fatalf("the applier's record after the killed apply: interrupted %+v, want plan %s", rec.Interrupted, f.GetPlanId())
	}

	h.publishSynthesized(ns, name, 2, made+`}}}`, lavav1.Engine_ENGINE_TOFU)
	p := await(h, ns, name, 2*time.Minute, gen[*lavav1.Planned](2))
	if !p.GetAwaitingApproval() || !strings.Contains(p.GetStateRegressed(), "was stopped") ||
		!strings.Contains(p.GetStateRegressed(), "terraform_data.made") || p.GetSummary().GetAdd() != 1 {
		t.Fatalf("plan after the killed apply: awaiting approval %v, regressed %q, summary %v; want held, naming the object the state forgot",
			p.GetAwaitingApproval(), p.GetStateRegressed(), p.GetSummary())
	}
	if p.GetPlanId() == f.GetPlanId() {
		t.Errorf("the plan after the killed apply reuses the killed plan's id %s", p.GetPlanId())
	}
	h.idle(time.Minute)
	if a := events[*lavav1.Applied](h, ns, name); len(a) != 0 {
		t.Fatalf("applied without approval after the killed apply: %v", a[0].GetPlanId())
	}

	h.publishSynthesizedApproving(ns, name, 3, made+`}}}`, lavav1.Engine_ENGINE_TOFU, p.GetPlanId())
	if a := await(h, ns, name, 2*time.Minute, gen[*lavav1.Applied](3)); a.GetPlanId() != p.GetPlanId() {
		t.Fatalf("applied %s, want the approved %s", a.GetPlanId(), p.GetPlanId())
	}
	h.publishSynthesized(ns, name, 4, made+`,"more":{"input":"y"}}}}`, lavav1.Engine_ENGINE_TOFU)
	await(h, ns, name, 2*time.Minute, gen[*lavav1.Applied](4))
	for _, p := range events[*lavav1.Planned](h, ns, name) {
		if p.GetEnvelope().GetGeneration() == 4 && (p.GetStateRegressed() != "" || p.GetAwaitingApproval()) {
			t.Errorf("plan after the approved apply: regressed %q, awaiting approval %v", p.GetStateRegressed(), p.GetAwaitingApproval())
		}
	}
}
