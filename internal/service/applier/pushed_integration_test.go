//go:build integration

package applier_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lava-operator/lava/internal/engine/state"
	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
)

// TestApplier_pushedStateHeldForApproval: a state pushed with `lava state push`
// (state.Store.Push) is one Lava did not write, so the next plan against it is held for
// approval under auto, even when it changes nothing, whether the object has applied before
// (a later serial of its own lineage pushed) or not (its state restored into a fresh bus,
// with no applier record); approving the plan applies it, and the plan after that is
// neither regressed nor held.
func TestApplier_pushedStateHeldForApproval(t *testing.T) {
	h := newHarness(t)
	r := h.startApplier(applierOpts{})
	const ns = "demo"
	src := `(deflava-architecture one :inputs ((:v "x")) :resources ((terraform-data "d" :input "{v}")))`
	spec := func(approve string) *lavav1.ArchitectureSpec {
		return &lavav1.ArchitectureSpec{Source: &lavav1.Source{Kind: &lavav1.Source_Inline{Inline: src}},
			Bindings: map[string]string{"v": "1"}, Engine: lavav1.Engine_ENGINE_EMBEDDED, ApprovePlan: approve}
	}
	h.observe(ns, "own", 1, spec("auto"))
	applied := await(h, ns, "own", time.Minute, gen[*lavav1.Applied](1))
	own := state.Key{Namespace: ns, Name: "own"}
	rec, body, err := r.store.Body(t.Context(), own)
	if err != nil {
		t.Fatal(err)
	}
	h.idle(time.Minute)

	// "own": a later serial of its own lineage pushed. "restored": the state pushed for an
	// object that never applied (a fresh bus).
	later := bytes.Replace(body, fmt.Appendf(nil, `"serial":%d,`, rec.Serial), fmt.Appendf(nil, `"serial":%d,`, rec.Serial+1), 1)
	if _, _, err := r.store.Push(t.Context(), own, later, state.PushOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.store.Push(t.Context(), state.Key{Namespace: ns, Name: "restored"}, body, state.PushOptions{}); err != nil {
		t.Fatal(err)
	}
	h.reconcile(ns, "own", 1, "2026-12-01T00:00:00Z", spec("auto"))
	h.observe(ns, "restored", 1, spec("auto"))

	for _, name := range []string{"own", "restored"} {
		p := await(h, ns, name, time.Minute, func(p *lavav1.Planned) bool { return p.GetStateRegressed() != "" })
		if !p.GetAwaitingApproval() || !strings.Contains(p.GetStateRegressed(), "was pushed with lava state push") {
			t.Fatalf("%s: plan against the pushed state: awaiting approval %v, regressed %q; want held, saying it was pushed",
				name, p.GetAwaitingApproval(), p.GetStateRegressed())
		}
		if p.GetPlanId() == applied.GetPlanId() {
			t.Errorf("%s: the plan against the pushed state has the id of the plan applied before", name)
		}
		if s := p.GetSummary(); s.GetAdd()+s.GetChange()+s.GetDestroy() != 0 {
			t.Errorf("%s: the plan against the pushed state changes %v, want nothing", name, s)
		}
		h.idle(time.Minute)
		for _, a := range events[*lavav1.Applied](h, ns, name) {
			if a.GetPlanId() == p.GetPlanId() {
				t.Fatalf("%s: the plan against the pushed state was applied without approval", name)
			}
		}
		h.observe(ns, name, 2, spec(p.GetPlanId()))
		if a := await(h, ns, name, time.Minute, gen[*lavav1.Applied](2)); a.GetPlanId() != p.GetPlanId() {
			t.Fatalf("%s: applied %s, want the approved %s", name, a.GetPlanId(), p.GetPlanId())
		}
		h.observe(ns, name, 3, spec("auto"))
		await(h, ns, name, time.Minute, gen[*lavav1.Applied](3))
		for _, p := range events[*lavav1.Planned](h, ns, name) {
			if p.GetEnvelope().GetGeneration() == 3 && (p.GetStateRegressed() != "" || p.GetAwaitingApproval()) {
				t.Errorf("%s: plan after the approved apply: regressed %q, awaiting approval %v", name, p.GetStateRegressed(), p.GetAwaitingApproval())
			}
		}
	}
}
