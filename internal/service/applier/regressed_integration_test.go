//go:build integration

package applier_test

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lava-operator/lava/api/v1alpha1"
	"github.com/lava-operator/lava/internal/engine/state"
	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/pipeline"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/eventid"
	"github.com/lava-operator/lava/internal/readmodel"
	"github.com/lava-operator/lava/internal/service/applier"
	"github.com/lava-operator/lava/internal/service/watcher"
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

// statusOf folds the captured events of ns/name into the status the watcher would write: each
// ResourceObserved as the watcher's own Observed (forced, as a reconcile is), every other event
// through the watcher's mapping (watcher.PhaseEvent) and the phase reducer (pipeline.Reduce),
// in the order they were published. An event the reducer refuses fails the test.
func (h *harness) statusOf(ns, name string) v1alpha1.LavaArchitectureStatus {
	h.t.Helper()
	h.mu.Lock()
	msgs := slices.Clone(h.msgs)
	h.mu.Unlock()
	var st v1alpha1.LavaArchitectureStatus
	for _, c := range msgs {
		if c.event == nil || c.event.GetEnvelope().GetResource().GetNamespace() != ns || c.event.GetEnvelope().GetResource().GetName() != name {
			continue
		}
		env := c.event.GetEnvelope()
		var ev pipeline.Event
		if _, ok := c.event.(*lavav1.ResourceObserved); ok {
			ev = pipeline.Event{Type: pipeline.EventObserved, Generation: env.GetGeneration(), Time: env.GetOccurredAt().AsTime(), Force: true}
		} else {
			var ok bool
			var err error
			ev, _, ok, err = watcher.PhaseEvent(c.event, time.Now())
			if err != nil {
				h.t.Fatalf("%s: %v", c.subject, err)
			}
			if !ok {
				continue
			}
		}
		next, _, err := pipeline.Reduce(st, ev)
		if err != nil {
			h.t.Fatalf("%s/%s: the watcher would refuse %s: %v", ns, name, c.subject, err)
		}
		st = next
	}
	return st
}

// idle waits until the applier's consumers hold no message of any object: everything
// published was handled and acknowledged (a handler that cannot finish keeps its message
// unacknowledged and redelivered).
func (h *harness) idle(d time.Duration) {
	h.t.Helper()
	deadline := time.Now().Add(d)
	for {
		busy := ""
		for _, stream := range []string{bus.StreamPhases, bus.StreamResources, bus.StreamCommands} {
			c, err := h.js.Consumer(h.t.Context(), stream, bus.ServiceApplier)
			if err != nil {
				h.t.Fatal(err)
			}
			info, err := c.Info(h.t.Context())
			if err != nil {
				h.t.Fatal(err)
			}
			if info.NumPending > 0 || info.NumAckPending > 0 || info.NumRedelivered > 0 {
				busy += fmt.Sprintf(" %s: %d pending, %d unacknowledged, %d redelivered;", stream, info.NumPending, info.NumAckPending, info.NumRedelivered)
			}
		}
		if busy == "" {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("the applier did not finish its messages within %s:%s", d, busy)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestApplier_lostOrRegressedStateHeldForApproval is an attack of the attack trial (docs/security.md): an Applied object
// whose state is lost or regressed out of band and then reconciled, under approvePlan auto, on
// a NATS server that enforces every identity's permissions (the harness's, as the chart's
// NATS, lava up and the end-to-end harness do). For each way a state regresses (the record deleted, an older
// serial of the same lineage put back, another lineage) and each engine (embedded, tofu), the
// applier plans against it with a plan id of its own and holds that plan for approval
// (never auto-applied, even when it changes nothing), says what regressed (Planned
// state_regressed), raises the critical state_regressed anomaly naming the object and the plan,
// and finishes its message: the status the watcher folds from these events is Planned with
// StateRegressed and AwaitingApproval True naming the plan id, not Synthesized. Approving the id
// applies it, and the next plan is neither regressed nor held. A lost state put back with
// Store.Restore (`lava state restore`: the body the last apply left) plans as if nothing had
// happened, even after a collection of unreferenced artifacts: no regression, no approval,
// nothing recreated.
//
// Before the fix the applier's identity could not publish the anomaly: the handler failed
// before publishing Planned, the message was redelivered with nothing else to show for it, and
// the object stayed Synthesized (the attack's "wedged" object).
func TestApplier_lostOrRegressedStateHeldForApproval(t *testing.T) {
	h := newHarness(t)
	r := h.startApplier(applierOpts{})
	kv, err := h.js.KeyValue(t.Context(), bus.BucketState)
	if err != nil {
		t.Fatal(err)
	}
	const ns = "demo"
	src := `(deflava-architecture two :inputs ((:v "x")) :resources ((terraform-data "d" :input "{v}") (terraform-data "e" :input "{v}")))`
	spec := func(eng lavav1.Engine, v, approve string) *lavav1.ArchitectureSpec {
		return &lavav1.ArchitectureSpec{Source: &lavav1.Source{Kind: &lavav1.Source_Inline{Inline: src}},
			Bindings: map[string]string{"v": v}, Engine: eng, ApprovePlan: approve}
	}
	stateKey := func(name string) string { return "state." + bus.ResourceKey(ns, name) }

	type regression struct {
		name string
		eng  lavav1.Engine
		// kind is how the state regresses: "gone", "older", "lineage", or "restored" (gone,
		// then restored).
		kind string
		// want is in Planned.state_regressed and the anomaly's message ("" for restored).
		want string
	}
	var cases []regression
	for _, eng := range []lavav1.Engine{lavav1.Engine_ENGINE_EMBEDDED, lavav1.Engine_ENGINE_TOFU} {
		short := strings.ToLower(strings.TrimPrefix(eng.String(), "ENGINE_"))
		cases = append(cases,
			regression{"gone-" + short, eng, "gone", "the state is gone"},
			regression{"older-" + short, eng, "older", "older than the"},
			regression{"lineage-" + short, eng, "lineage", "the state has lineage"},
		)
	}
	cases = append(cases, regression{"restored-embedded", lavav1.Engine_ENGINE_EMBEDDED, "restored", ""})

	// Every object applies generation 1 (v=1), then generation 2 (v=2), under auto.
	for _, c := range cases {
		h.observe(ns, c.name, 1, spec(c.eng, "1", "auto"))
	}
	first := map[string][]byte{} // the state record generation 1 left (its KV value)
	for _, c := range cases {
		await(h, ns, c.name, 3*time.Minute, gen[*lavav1.Applied](1))
		e, err := kv.Get(t.Context(), stateKey(c.name))
		if err != nil {
			t.Fatal(err)
		}
		first[c.name] = e.Value()
		h.observe(ns, c.name, 2, spec(c.eng, "2", "auto"))
	}
	applied := map[string]*lavav1.Applied{}
	for _, c := range cases {
		applied[c.name] = await(h, ns, c.name, 3*time.Minute, gen[*lavav1.Applied](2))
	}
	h.idle(time.Minute)

	// The plan ids so far: every plan after the regression must have an id of its own.
	prior := map[string][]string{}
	for _, c := range cases {
		prior[c.name] = []string{applied[c.name].GetPlanId()}
		for _, p := range events[*lavav1.Planned](h, ns, c.name) {
			prior[c.name] = append(prior[c.name], p.GetPlanId())
		}
	}
	// The state regresses out of band, the way `nats kv del` and `nats kv put` on lava-state do.
	for _, c := range cases {
		key := state.Key{Namespace: ns, Name: c.name}
		switch c.kind {
		case "gone", "restored":
			if err := kv.Delete(t.Context(), stateKey(c.name)); err != nil {
				t.Fatal(err)
			}
		case "older":
			if _, err := kv.Put(t.Context(), stateKey(c.name), first[c.name]); err != nil {
				t.Fatal(err)
			}
		case "lineage":
			_, body, err := r.store.Body(t.Context(), key)
			if err != nil {
				t.Fatal(err)
			}
			cur := h.stateOf(r, ns, c.name)
			body = bytes.Replace(body, []byte(cur.Lineage), []byte("00000000-0000-4000-8000-000000000001"), 1)
			if err := kv.Delete(t.Context(), stateKey(c.name)); err != nil {
				t.Fatal(err)
			}
			if _, err := r.store.Put(t.Context(), key, body, ""); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The lost state's body outlives a collection of unreferenced artifacts (the applier's
	// record names it), so `lava state restore` can put it back.
	if _, err := applier.CollectArtifacts(t.Context(), h.js, 0, h.log); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		if c.kind != "restored" {
			continue
		}
		rec, err := readmodel.Load(t.Context(), h.js, ns, c.name)
		if err != nil || rec.Last == nil || rec.Last.StateDigest == "" {
			t.Fatalf("%s: the applier's record names no state body to restore: %+v %v", c.name, rec.Last, err)
		}
		if _, _, err := r.store.Restore(t.Context(), state.Key{Namespace: ns, Name: c.name}, rec.Last.StateDigest); err != nil {
			t.Fatalf("%s: restore after a collection: %v", c.name, err)
		}
	}
	for _, c := range cases {
		h.reconcile(ns, c.name, 2, "2026-12-01T00:00:00Z", spec(c.eng, "2", "auto"))
	}

	held := map[string]*lavav1.Planned{}
	for _, c := range cases {
		prior := prior[c.name]
		if c.kind == "restored" {
			// Put back as the last apply left it: planned and applied as usual, nothing recreated.
			a := await(h, ns, c.name, 3*time.Minute, func(a *lavav1.Applied) bool { return !slices.Contains(prior, a.GetPlanId()) })
			if s := a.GetSummary(); s.GetAdd()+s.GetChange()+s.GetDestroy() != 0 {
				t.Errorf("%s: the apply after the restore changed something: %v", c.name, s)
			}
			for _, p := range events[*lavav1.Planned](h, ns, c.name) {
				if p.GetStateRegressed() != "" || p.GetAwaitingApproval() {
					t.Errorf("%s: after the restore a plan was regressed (%q) or held (%v)", c.name, p.GetStateRegressed(), p.GetAwaitingApproval())
				}
			}
			continue
		}
		p := await(h, ns, c.name, 3*time.Minute, func(p *lavav1.Planned) bool { return p.GetStateRegressed() != "" })
		held[c.name] = p
		if slices.Contains(prior, p.GetPlanId()) || !p.GetAwaitingApproval() || !strings.Contains(p.GetStateRegressed(), c.want) ||
			!strings.Contains(p.GetStateRegressed(), applied[c.name].GetPlanId()[:12]) {
			t.Errorf("%s: plan after the regression: id %s (earlier %v) awaiting approval %v, regressed %q: want a new id held for approval under auto, saying %q since plan %s",
				c.name, p.GetPlanId(), prior, p.GetAwaitingApproval(), p.GetStateRegressed(), c.want, applied[c.name].GetPlanId()[:12])
		}
		s := p.GetSummary()
		switch c.kind {
		case "gone":
			if s.GetAdd() != 2 {
				t.Errorf("%s: the plan against the lost state adds %d, want 2", c.name, s.GetAdd())
			}
		case "older":
			if s.GetAdd()+s.GetChange()+s.GetDestroy() == 0 {
				t.Errorf("%s: the plan against generation 1's state changes nothing", c.name)
			}
		case "lineage":
			if s.GetAdd()+s.GetChange()+s.GetDestroy() != 0 {
				t.Errorf("%s: the plan against the same objects under another lineage changes %v; want nothing, and still held", c.name, s)
			}
		}
		an := await(h, ns, c.name, time.Minute, func(a *lavav1.AnomalyDetected) bool {
			return a.GetExtensionKind() == pipeline.ExtensionStateRegressed && a.GetMetadata()["plan_id"] == p.GetPlanId()
		})
		if an.GetSeverity() != lavav1.Severity_SEVERITY_CRITICAL || an.GetSource().GetName() != c.name ||
			an.GetMetadata()["last_applied_plan_id"] != applied[c.name].GetPlanId() || !strings.Contains(an.GetMessage(), c.want) ||
			!strings.Contains(an.GetMessage(), "spec.approvePlan: "+p.GetPlanId()) {
			t.Errorf("%s: anomaly %v", c.name, an)
		}
	}
	// Not wedged: every message was handled and acknowledged, nothing was applied against the
	// regressed states, and the status says what happened and how to go on.
	h.idle(time.Minute)
	for _, c := range cases {
		p := held[c.name]
		if p == nil {
			continue
		}
		for _, a := range events[*lavav1.Applied](h, ns, c.name) {
			if a.GetPlanId() == p.GetPlanId() {
				t.Errorf("%s: the plan against the regressed state was applied without approval", c.name)
			}
		}
		// `lava plan show` can show it: the held plan has its review body, under auto too.
		if rec := h.record(ns, c.name, func(r *readmodel.Record) bool { return r.Held != nil }); rec.Held.PlanID != p.GetPlanId() || rec.Held.ReviewDigest == "" {
			t.Errorf("%s: the applier's record holds %+v, want plan %s with a review body", c.name, rec.Held, p.GetPlanId())
		}
		st := h.statusOf(ns, c.name)
		sr := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionStateRegressed)
		aa := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionAwaitingApproval)
		if st.Phase != v1alpha1.PhasePlanned || sr == nil || sr.Status != metav1.ConditionTrue || !strings.Contains(sr.Message, c.want) ||
			aa == nil || aa.Status != metav1.ConditionTrue || !strings.Contains(aa.Message, p.GetPlanId()) {
			t.Errorf("%s: status phase %s, StateRegressed %+v, AwaitingApproval %+v: want Planned, StateRegressed True saying %q, AwaitingApproval True naming %s",
				c.name, st.Phase, sr, aa, c.want, p.GetPlanId())
		}
	}

	// Approving the plan by its id applies it; the next plan (auto) is neither regressed nor held.
	for name, p := range held {
		eng := p.GetEngine()
		h.observe(ns, name, 3, spec(eng, "2", p.GetPlanId()))
	}
	for name, p := range held {
		if a := await(h, ns, name, 3*time.Minute, gen[*lavav1.Applied](3)); a.GetPlanId() != p.GetPlanId() {
			t.Errorf("%s: applied %s, want the approved %s", name, a.GetPlanId(), p.GetPlanId())
		}
		h.observe(ns, name, 4, spec(p.GetEngine(), "2", "auto"))
	}
	for name := range held {
		await(h, ns, name, 3*time.Minute, gen[*lavav1.Applied](4))
		for _, p := range events[*lavav1.Planned](h, ns, name) {
			if p.GetEnvelope().GetGeneration() == 4 && (p.GetStateRegressed() != "" || p.GetAwaitingApproval()) {
				t.Errorf("%s: plan after the approved re-apply: regressed %q, awaiting approval %v", name, p.GetStateRegressed(), p.GetAwaitingApproval())
			}
		}
		st := h.statusOf(ns, name)
		if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionStateRegressed); st.Phase != v1alpha1.PhaseApplied || c == nil || c.Status != metav1.ConditionFalse {
			t.Errorf("%s: status after the approved apply: phase %s, StateRegressed %+v; want Applied and False", name, st.Phase, c)
		}
	}
}

// TestApplier_stateRegressed: an applied resource under manual approval whose state record is
// deleted out of band, then reconciled, gets a plan whose id is its own (not the approved and
// applied one), a Planned that says the state regressed and awaits approval (the applied id
// left in approvePlan approves nothing and fails nothing), and a critical state_regressed
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
	if n := len(events[*lavav1.Applied](h, ns, name)); n != 1 {
		t.Fatalf("%d Applied events, want only the first: the regressed plan must wait for its own approval", n)
	}
	if fs := events[*lavav1.Failed](h, ns, name); len(fs) != 0 {
		t.Errorf("the applied id left in approvePlan failed the object: %v", fs)
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
	if n := len(events[*lavav1.AnomalyDetected](h, ns, name)); n != 1 {
		t.Errorf("%d state_regressed anomalies, want 1: applying the approved plan reports nothing new", n)
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
// plan (with an id of its own) is held for approval, and approving it rebuilds the state.
func TestApplier_stateRegressedFewerResources(t *testing.T) {
	h := newHarness(t)
	r := h.startApplier(applierOpts{})
	const ns, name = "demo", "shrunk"
	src := `(deflava-architecture two :inputs ((:v "x")) :resources ((terraform-data "d" :input "{v}") (terraform-data "e" :input "{v}")))`
	spec := func(approve string) *lavav1.ArchitectureSpec {
		return &lavav1.ArchitectureSpec{Source: &lavav1.Source{Kind: &lavav1.Source_Inline{Inline: src}},
			Bindings: map[string]string{"v": "1"}, Engine: lavav1.Engine_ENGINE_EMBEDDED, ApprovePlan: approve}
	}
	h.observe(ns, name, 1, spec("auto"))
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
	h.reconcile(ns, name, 1, "2026-12-01T00:00:00Z", spec("auto"))
	p := await(h, ns, name, time.Minute, func(p *lavav1.Planned) bool { return p.GetStateRegressed() != "" })
	if !strings.Contains(p.GetStateRegressed(), "holds 0 resources") || p.GetPlanId() == first.GetPlanId() || !p.GetAwaitingApproval() {
		t.Fatalf("plan after the shrink: %q id %s awaiting %v: want a new id held for approval", p.GetStateRegressed(), p.GetPlanId(), p.GetAwaitingApproval())
	}
	h.idle(time.Minute)
	if n := len(events[*lavav1.Applied](h, ns, name)); n != 1 {
		t.Fatalf("%d Applied events, want only the first: the plan against the shrunk state waits for approval", n)
	}
	h.observe(ns, name, 2, spec(p.GetPlanId()))
	again := await(h, ns, name, time.Minute, gen[*lavav1.Applied](2))
	if again.GetPlanId() != p.GetPlanId() || again.GetSummary().GetAdd() != 2 {
		t.Errorf("the approved re-apply: plan %s (want %s), added %d (want 2)", again.GetPlanId(), p.GetPlanId(), again.GetSummary().GetAdd())
	}
}
