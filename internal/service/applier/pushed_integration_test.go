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
// with no applier record), with either engine; approving the plan applies it, and the plan
// after that is neither regressed nor held.
func TestApplier_pushedStateHeldForApproval(t *testing.T) {
	h := newHarness(t)
	r := h.startApplier(applierOpts{})
	const ns = "demo"
	src := `(deflava-architecture one :inputs ((:v "x")) :resources ((terraform-data "d" :input "{v}")))`
	spec := func(eng lavav1.Engine, approve string) *lavav1.ArchitectureSpec {
		return &lavav1.ArchitectureSpec{Source: &lavav1.Source{Kind: &lavav1.Source_Inline{Inline: src}},
			Bindings: map[string]string{"v": "1"}, Engine: eng, ApprovePlan: approve}
	}
	type object struct {
		name string
		eng  lavav1.Engine
		// applied is the plan applied before the push ("" for an object that never applied).
		applied string
	}
	var objects []object
	for _, eng := range []lavav1.Engine{lavav1.Engine_ENGINE_EMBEDDED, lavav1.Engine_ENGINE_TOFU} {
		short := strings.ToLower(strings.TrimPrefix(eng.String(), "ENGINE_"))
		own := "own-" + short
		h.observe(ns, own, 1, spec(eng, "auto"))
		applied := await(h, ns, own, 3*time.Minute, gen[*lavav1.Applied](1))
		rec, body, err := r.store.Body(t.Context(), state.Key{Namespace: ns, Name: own})
		if err != nil {
			t.Fatal(err)
		}
		// own: a later serial of its own lineage pushed. restored: the state pushed for an
		// object that never applied (a fresh bus).
		later := bytes.Replace(body, fmt.Appendf(nil, `"serial":%d,`, rec.Serial), fmt.Appendf(nil, `"serial":%d,`, rec.Serial+1), 1)
		if bytes.Equal(later, body) {
			later = bytes.Replace(body, fmt.Appendf(nil, `"serial": %d,`, rec.Serial), fmt.Appendf(nil, `"serial": %d,`, rec.Serial+1), 1)
		}
		if bytes.Equal(later, body) {
			t.Fatalf("%s: no serial %d in the state body", own, rec.Serial)
		}
		if _, _, err := r.store.Push(t.Context(), state.Key{Namespace: ns, Name: own}, later, state.PushOptions{}); err != nil {
			t.Fatalf("%s: %v", own, err)
		}
		restored := "restored-" + short
		if _, _, err := r.store.Push(t.Context(), state.Key{Namespace: ns, Name: restored}, body, state.PushOptions{}); err != nil {
			t.Fatal(err)
		}
		objects = append(objects, object{own, eng, applied.GetPlanId()}, object{restored, eng, ""})
	}
	h.idle(time.Minute)
	for _, o := range objects {
		if o.applied != "" {
			h.reconcile(ns, o.name, 1, "2026-12-01T00:00:00Z", spec(o.eng, "auto"))
		} else {
			h.observe(ns, o.name, 1, spec(o.eng, "auto"))
		}
	}

	held := map[string]string{}
	for _, o := range objects {
		p := await(h, ns, o.name, 3*time.Minute, func(p *lavav1.Planned) bool { return p.GetStateRegressed() != "" })
		held[o.name] = p.GetPlanId()
		if !p.GetAwaitingApproval() || !strings.Contains(p.GetStateRegressed(), "was pushed with lava state push") {
			t.Fatalf("%s: plan against the pushed state: awaiting approval %v, regressed %q; want held, saying it was pushed",
				o.name, p.GetAwaitingApproval(), p.GetStateRegressed())
		}
		if p.GetPlanId() == o.applied {
			t.Errorf("%s: the plan against the pushed state has the id of the plan applied before", o.name)
		}
		if s := p.GetSummary(); s.GetAdd()+s.GetChange()+s.GetDestroy() != 0 {
			t.Errorf("%s: the plan against the pushed state changes %v, want nothing", o.name, s)
		}
	}
	h.idle(time.Minute)
	for _, o := range objects {
		for _, a := range events[*lavav1.Applied](h, ns, o.name) {
			if a.GetPlanId() == held[o.name] {
				t.Fatalf("%s: the plan against the pushed state was applied without approval", o.name)
			}
		}
		h.observe(ns, o.name, 2, spec(o.eng, held[o.name]))
	}
	for _, o := range objects {
		if a := await(h, ns, o.name, 3*time.Minute, gen[*lavav1.Applied](2)); a.GetPlanId() != held[o.name] {
			t.Fatalf("%s: applied %s, want the approved %s", o.name, a.GetPlanId(), held[o.name])
		}
		h.observe(ns, o.name, 3, spec(o.eng, "auto"))
	}
	for _, o := range objects {
		await(h, ns, o.name, 3*time.Minute, gen[*lavav1.Applied](3))
		for _, p := range events[*lavav1.Planned](h, ns, o.name) {
			if p.GetEnvelope().GetGeneration() == 3 && (p.GetStateRegressed() != "" || p.GetAwaitingApproval()) {
				t.Errorf("%s: plan after the approved apply: regressed %q, awaiting approval %v", o.name, p.GetStateRegressed(), p.GetAwaitingApproval())
			}
		}
	}
}
