//go:build integration

package applier_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lava-operator/lava/internal/engine/state"
	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/pipeline"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/eventid"
)

// reconcile publishes a ResourceObserved of an existing generation as the watcher does for
// the lava.pleme.io/reconcile-requested-at annotation (a forced reconcile).
func (h *harness) reconcile(ns, name string, gen int64, at string, spec *lavav1.ArchitectureSpec) {
	h.t.Helper()
	ev := &lavav1.ResourceObserved{
		Envelope: envelope(ns, name, "uid-"+name, gen, "lava.v1.ResourceObserved", eventid.ReconcileTrigger(at)),
		Spec:     spec, Remediation: &lavav1.RemediationPolicy{}, Dependencies: &lavav1.DependencyState{Ready: true},
	}
	if _, err := h.pub.PublishEvent(h.t.Context(), ev); err != nil {
		h.t.Fatal(err)
	}
}

// TestApplier_stateRegressed: an applied resource under manual approval whose state record is
// deleted out of band, then reconciled, gets a plan whose id is its own (not the approved and
// applied one), a Planned that says the state regressed and awaits approval, a
// PlanSuperseded failure naming the new id (the way forward), and a critical state_regressed
// anomaly; approving the new id applies it and the next plan is no longer regressed.
func TestApplier_stateRegressed(t *testing.T) {
	h := newHarness(t)
	r := h.startApplier(applierOpts{})
	const ns, name = "demo", "regress"
	src := `(deflava-architecture one :inputs ((:v "x")) :resources ((terraform-data "d" :input "{v}") (terraform-data "e" :input "{v}")))`
	spec := func(approve string) *lavav1.ArchitectureSpec {
		return &lavav1.ArchitectureSpec{Source: &lavav1.Source{Kind: &lavav1.Source_Inline{Inline: src}},
			Bindings: map[string]string{"v": "1"}, Engine: lavav1.Engine_ENGINE_EMBEDDED, ApprovePlan: approve}
	}
	// Generation 1 holds its plan; generation 2 approves it and it is applied.
	h.observe(ns, name, 1, spec("manual"))
	held := await(h, ns, name, time.Minute, func(p *lavav1.Planned) bool { return p.GetAwaitingApproval() })
	first := held.GetPlanId()
	h.observe(ns, name, 2, spec(first))
	applied := await(h, ns, name, time.Minute, gen[*lavav1.Applied](2))
	if applied.GetPlanId() != first || held.GetStateRegressed() != "" {
		t.Fatalf("applied %s, want the approved %s (regressed %q)", applied.GetPlanId(), first, held.GetStateRegressed())
	}

	// The state record is deleted out of band, and the object reconciled.
	kv, err := h.js.KeyValue(t.Context(), bus.BucketState)
	if err != nil {
		t.Fatal(err)
	}
	if err := kv.Purge(t.Context(), "state."+bus.ResourceKey(ns, name)); err != nil {
		t.Fatal(err)
	}
	if _, err := r.store.Get(t.Context(), state.Key{Namespace: ns, Name: name}); err == nil {
		t.Fatal("the state record survived the purge")
	}
	h.reconcile(ns, name, 2, "2026-12-01T00:00:00Z", spec(first))
	regressed := await(h, ns, name, time.Minute, func(p *lavav1.Planned) bool { return p.GetStateRegressed() != "" })
	second := regressed.GetPlanId()
	if second == first || !regressed.GetAwaitingApproval() || !strings.Contains(regressed.GetStateRegressed(), "the state is gone") ||
		!strings.Contains(regressed.GetStateRegressed(), first[:12]) {
		t.Fatalf("plan after the wipe: id %s (applied %s) awaiting %v regressed %q: want a new id held, saying the state is gone since %s",
			second, first, regressed.GetAwaitingApproval(), regressed.GetStateRegressed(), first[:12])
	}
	if regressed.GetSummary().GetAdd() != 2 {
		t.Errorf("plan against the wiped state adds %d, want 2", regressed.GetSummary().GetAdd())
	}
	f := await(h, ns, name, time.Minute, func(f *lavav1.Failed) bool { return f.GetReason() == "PlanSuperseded" })
	if !strings.Contains(f.GetMessage(), "set spec.approvePlan to "+second) {
		t.Errorf("PlanSuperseded message %q does not name the way forward (approve %s)", f.GetMessage(), second)
	}
	if n := len(events[*lavav1.Applied](h, ns, name)); n != 1 {
		t.Fatalf("%d Applied events, want only the first: the regressed plan must wait for its own approval", n)
	}
	an := await(h, ns, name, time.Minute, func(a *lavav1.AnomalyDetected) bool { return a.GetExtensionKind() == pipeline.ExtensionStateRegressed })
	if an.GetSeverity() != lavav1.Severity_SEVERITY_CRITICAL || an.GetMetadata()["plan_id"] != second ||
		an.GetMetadata()["last_applied_plan_id"] != first || !strings.Contains(an.GetMessage(), "the state is gone") {
		t.Errorf("anomaly %v", an)
	}

	// Approving the new id applies it; a later plan compares with that apply.
	h.observe(ns, name, 3, spec(second))
	again := await(h, ns, name, time.Minute, gen[*lavav1.Applied](3))
	if again.GetPlanId() != second {
		t.Fatalf("applied %s, want the newly approved %s", again.GetPlanId(), second)
	}
	if rec, err := r.store.Get(t.Context(), state.Key{Namespace: ns, Name: name}); err != nil || !rec.HasState() {
		t.Fatalf("state after the re-apply: %+v %v", rec, err)
	}
	h.observe(ns, name, 4, spec("auto"))
	p4 := await(h, ns, name, time.Minute, gen[*lavav1.Planned](4))
	if p4.GetStateRegressed() != "" {
		t.Errorf("plan after the re-apply still regressed: %q", p4.GetStateRegressed())
	}
}

// TestApplier_stateRegressedFewerResources: a state body replaced out of band by one with the
// same serial and lineage but fewer resources is a regression too; under auto approval the
// plan (with an id of its own) applies and rebuilds the state.
func TestApplier_stateRegressedFewerResources(t *testing.T) {
	h := newHarness(t)
	r := h.startApplier(applierOpts{})
	const ns, name = "demo", "shrunk"
	src := `(deflava-architecture two :inputs ((:v "x")) :resources ((terraform-data "d" :input "{v}") (terraform-data "e" :input "{v}")))`
	spec := &lavav1.ArchitectureSpec{Source: &lavav1.Source{Kind: &lavav1.Source_Inline{Inline: src}},
		Bindings: map[string]string{"v": "1"}, Engine: lavav1.Engine_ENGINE_EMBEDDED}
	h.observe(ns, name, 1, spec)
	first := await(h, ns, name, time.Minute, gen[*lavav1.Applied](1))
	key := state.Key{Namespace: ns, Name: name}
	rec, err := r.store.Get(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	body := fmt.Appendf(nil, `{"version":4,"terraform_version":"1.12.6","serial":%d,"lineage":%q,"outputs":{},"resources":[]}`, rec.Serial, rec.Lineage)
	if _, err := r.store.Put(t.Context(), key, body, ""); err != nil {
		t.Fatal(err)
	}
	h.reconcile(ns, name, 1, "2026-12-01T00:00:00Z", spec)
	p := await(h, ns, name, time.Minute, func(p *lavav1.Planned) bool { return p.GetStateRegressed() != "" })
	if !strings.Contains(p.GetStateRegressed(), "holds 0 resources") || p.GetPlanId() == first.GetPlanId() || p.GetAwaitingApproval() {
		t.Fatalf("plan after the shrink: %q id %s awaiting %v", p.GetStateRegressed(), p.GetPlanId(), p.GetAwaitingApproval())
	}
	again := await(h, ns, name, time.Minute, func(a *lavav1.Applied) bool { return a.GetPlanId() == p.GetPlanId() })
	if again.GetSummary().GetAdd() != 2 {
		t.Errorf("the re-apply added %d, want 2", again.GetSummary().GetAdd())
	}
}
