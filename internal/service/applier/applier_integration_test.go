//go:build integration

package applier_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lava-operator/lava/internal/engine/state"
	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/eventid"
	"github.com/lava-operator/lava/internal/readmodel"
)

// filesSource makes a terraform_data (input from :marker) and one local_file per person.
const filesSource = `(deflava-architecture files
  :inputs ((:dir "/tmp") (:marker "v1") (:people ("ana")))
  :resources ((terraform-data "marker" :input "{marker}")
              (for-each ((i who) (enumerate people))
                (local-file "f-{who}" :filename "{dir}/{who}.txt" :content "hello {who}\n"))))
`

func filesSpec(dir, marker, approve string, people ...string) *lavav1.ArchitectureSpec {
	return &lavav1.ArchitectureSpec{
		Source:       &lavav1.Source{Kind: &lavav1.Source_Inline{Inline: filesSource}},
		Bindings:     map[string]string{"dir": dir, "marker": marker},
		ListBindings: map[string]*lavav1.StringList{"people": {Values: people}},
		Engine:       lavav1.Engine_ENGINE_TOFU,
		ApprovePlan:  approve,
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return string(b)
}

// TestApplier_lifecycle: create goes Synthesized, Planned, Applied and the files exist; a spec
// change updates in place (state serial grows, lineage kept, nothing recreated); a redelivered
// message changes nothing; delete destroys and forgets the state.
func TestApplier_lifecycle(t *testing.T) {
	h := newHarness(t)
	r := h.startApplier(applierOpts{})
	const ns, name = "demo", "files"
	dir := t.TempDir()

	h.observe(ns, name, 1, filesSpec(dir, "v1", "auto", "ana"))
	syn := await(h, ns, name, time.Minute, gen[*lavav1.Synthesized](1))
	planned := await(h, ns, name, 2*time.Minute, gen[*lavav1.Planned](1))
	applied := await(h, ns, name, 2*time.Minute, gen[*lavav1.Applied](1))
	if planned.GetAwaitingApproval() || planned.GetSummary().GetAdd() != 2 || planned.GetPlanId() != applied.GetPlanId() ||
		planned.GetEngine() != lavav1.Engine_ENGINE_TOFU || !bus.ValidDigest(planned.GetPlanArtifactDigest()) {
		t.Fatalf("Planned = %v, Applied plan %s", planned, applied.GetPlanId())
	}
	if applied.GetArtifactDigest() != syn.GetArtifactDigest() || applied.GetEngine() != lavav1.Engine_ENGINE_TOFU ||
		applied.GetEnvelope().GetCorrelationId() != syn.GetEnvelope().GetCorrelationId() {
		t.Errorf("Applied = %v", applied)
	}
	if got := readFile(t, filepath.Join(dir, "ana.txt")); got != "hello ana\n" {
		t.Fatalf("ana.txt = %q", got)
	}
	before, err := os.Stat(filepath.Join(dir, "ana.txt"))
	if err != nil {
		t.Fatal(err)
	}
	st1 := h.stateOf(r, ns, name)
	if int64(st1.Serial) != applied.GetStateSerial() || st1.Lineage == "" {
		t.Fatalf("state %+v, Applied serial %d", st1, applied.GetStateSerial())
	}

	// A spec change: the marker updates in place and a file is added; nothing is destroyed.
	h.observe(ns, name, 2, filesSpec(dir, "v2", "auto", "ana", "bo"))
	planned2 := await(h, ns, name, 2*time.Minute, gen[*lavav1.Planned](2))
	applied2 := await(h, ns, name, 2*time.Minute, gen[*lavav1.Applied](2))
	if s := planned2.GetSummary(); s.GetAdd() != 1 || s.GetChange() != 1 || s.GetDestroy() != 0 {
		t.Errorf("update plan summary = %v, want 1 add, 1 change, 0 destroy", s)
	}
	actions := map[string]lavav1.ChangeKind{}
	for _, c := range planned2.GetChanges() {
		actions[c.GetAddress()] = c.GetAction()
	}
	if actions["terraform_data.marker"] != lavav1.ChangeKind_CHANGE_KIND_UPDATE || actions["local_file.f-ana"] != lavav1.ChangeKind_CHANGE_KIND_NO_OP ||
		actions["local_file.f-bo"] != lavav1.ChangeKind_CHANGE_KIND_CREATE {
		t.Errorf("update actions = %v", actions)
	}
	st2 := h.stateOf(r, ns, name)
	if st2.Serial <= st1.Serial || st2.Lineage != st1.Lineage || int64(st2.Serial) != applied2.GetStateSerial() {
		t.Errorf("state after update %+v, before %+v: want a larger serial and the same lineage", st2, st1)
	}
	after, err := os.Stat(filepath.Join(dir, "ana.txt"))
	if err != nil || !os.SameFile(before, after) || !after.ModTime().Equal(before.ModTime()) {
		t.Errorf("ana.txt was recreated by an in-place update (%v)", err)
	}
	if got := readFile(t, filepath.Join(dir, "bo.txt")); got != "hello bo\n" {
		t.Errorf("bo.txt = %q", got)
	}

	// A redelivery of the generation-2 Synthesized is acknowledged without acting.
	syn2 := await(h, ns, name, time.Second, gen[*lavav1.Synthesized](2))
	if err := r.svc.Handle(t.Context(), &bus.Message{Subject: bus.PhaseSubject(ns, name, bus.EventSynthesized), Schema: "lava.v1.Synthesized",
		Event: syn2, Envelope: syn2.GetEnvelope(), NumDelivered: 2}); err != nil {
		t.Fatalf("redelivery: %v", err)
	}
	if st := h.stateOf(r, ns, name); st.Serial != st2.Serial {
		t.Errorf("a redelivered Synthesized changed the state: serial %d -> %d", st2.Serial, st.Serial)
	}
	if n := len(events[*lavav1.Applied](h, ns, name)); n != 2 {
		t.Errorf("%d Applied events, want 2", n)
	}
	rec, err := readmodel.Load(t.Context(), h.js, ns, name)
	if err != nil || rec.Last == nil || rec.Last.PlanID != applied2.GetPlanId() || len(rec.Applied) != 2 {
		t.Errorf("applier record = %+v, %v", rec, err)
	}

	// Delete destroys and forgets the state (keeping its history).
	h.deletion(ns, name, 2, lavav1.DeletionPolicy_DELETION_POLICY_DESTROY, lavav1.Engine_ENGINE_TOFU)
	destroyed := await[*lavav1.Destroyed](h, ns, name, 2*time.Minute, nil)
	if destroyed.GetOrphaned() || destroyed.GetDestroyedCount() != 3 {
		t.Errorf("Destroyed = %v, want 3 destroyed", destroyed)
	}
	for _, f := range []string{"ana.txt", "bo.txt"} {
		if _, err := os.Stat(filepath.Join(dir, f)); !os.IsNotExist(err) {
			t.Errorf("%s still exists after destroy (%v)", f, err)
		}
	}
	if _, err := r.store.Get(t.Context(), state.Key{Namespace: ns, Name: name}); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("state after destroy: %v, want forgotten", err)
	}
	if hist, err := r.store.History(t.Context(), state.Key{Namespace: ns, Name: name}); err != nil || hist.Record.Serial < st2.Serial {
		t.Errorf("history after destroy: %+v, %v", hist, err)
	}

	// The object is created again under the same name: generation 1 of the new uid is not
	// stale, and it starts from empty state.
	h.observeUID(ns, name, "uid-files-again", 1, filesSpec(dir, "v1", "auto", "ana"))
	again := await(h, ns, name, 2*time.Minute, func(a *lavav1.Applied) bool {
		return a.GetEnvelope().GetResource().GetUid() == "uid-files-again"
	})
	if again.GetSummary().GetAdd() != 2 || readFile(t, filepath.Join(dir, "ana.txt")) != "hello ana\n" {
		t.Errorf("re-created object: Applied %v", again)
	}
}

// TestApplier_orphan: deletionPolicy Orphan publishes Destroyed (orphaned) and keeps the
// infrastructure and its state.
func TestApplier_orphan(t *testing.T) {
	h := newHarness(t)
	r := h.startApplier(applierOpts{})
	const ns, name = "demo", "kept"
	dir := t.TempDir()
	h.observe(ns, name, 1, filesSpec(dir, "v1", "", "ana"))
	await(h, ns, name, 2*time.Minute, gen[*lavav1.Applied](1))
	st := h.stateOf(r, ns, name)
	h.deletion(ns, name, 1, lavav1.DeletionPolicy_DELETION_POLICY_ORPHAN, lavav1.Engine_ENGINE_TOFU)
	destroyed := await[*lavav1.Destroyed](h, ns, name, time.Minute, nil)
	if !destroyed.GetOrphaned() || destroyed.GetDestroyedCount() != 0 {
		t.Errorf("Destroyed = %v, want orphaned", destroyed)
	}
	if got := readFile(t, filepath.Join(dir, "ana.txt")); got != "hello ana\n" {
		t.Errorf("orphaned file = %q", got)
	}
	if after := h.stateOf(r, ns, name); after.Serial != st.Serial || after.Digest != st.Digest {
		t.Errorf("orphan changed the state: %+v -> %+v", st, after)
	}
}

// TestApplier_manualApproval: manual holds the plan; approving its id applies exactly it; the
// applied id left in approvePlan through a spec change approves nothing and fails nothing (the
// new plan awaits its own id); an id that never was a plan of the resource is refused as
// PlanSuperseded; nothing is applied until the new id is approved.
func TestApplier_manualApproval(t *testing.T) {
	h := newHarness(t)
	h.startApplier(applierOpts{})
	const ns, name = "demo", "gated"
	dir := t.TempDir()
	ana := filepath.Join(dir, "ana.txt")

	h.observe(ns, name, 1, filesSpec(dir, "v1", "manual", "ana"))
	held := await(h, ns, name, 2*time.Minute, gen[*lavav1.Planned](1))
	if !held.GetAwaitingApproval() || held.GetSummary().GetAdd() != 2 {
		t.Fatalf("Planned = %v, want awaiting approval", held)
	}
	time.Sleep(time.Second)
	if _, err := os.Stat(ana); !os.IsNotExist(err) || len(events[*lavav1.Applied](h, ns, name)) != 0 {
		t.Fatalf("a manual plan was applied (%v)", err)
	}

	// Approve exactly that id (a new generation, same rendering): the held plan is applied.
	h.observe(ns, name, 2, filesSpec(dir, "v1", held.GetPlanId(), "ana"))
	applied := await(h, ns, name, 2*time.Minute, gen[*lavav1.Applied](2))
	if applied.GetPlanId() != held.GetPlanId() {
		t.Fatalf("applied plan %s, approved %s", applied.GetPlanId(), held.GetPlanId())
	}
	if got := readFile(t, ana); got != "hello ana\n" {
		t.Fatalf("ana.txt = %q", got)
	}

	// The spec changes while approvePlan still names the applied id: the new plan waits.
	h.observe(ns, name, 3, filesSpec(dir, "v2", held.GetPlanId(), "ana", "bo"))
	fresh := await(h, ns, name, 2*time.Minute, gen[*lavav1.Planned](3))
	if !fresh.GetAwaitingApproval() || fresh.GetPlanId() == held.GetPlanId() {
		t.Errorf("Planned for the changed spec = %v, want a new id awaiting approval", fresh)
	}
	time.Sleep(time.Second)
	if _, err := os.Stat(filepath.Join(dir, "bo.txt")); !os.IsNotExist(err) {
		t.Fatal("the applied plan's id approved the new plan")
	}
	if fs := events[*lavav1.Failed](h, ns, name); len(fs) != 0 {
		t.Errorf("the applied id left in approvePlan failed the object: %v", fs)
	}

	// An id that never was a plan of this resource is refused.
	unknown := strings.Repeat("0", 64)
	h.observe(ns, name, 4, filesSpec(dir, "v2", unknown, "ana", "bo"))
	refused := await(h, ns, name, time.Minute, gen[*lavav1.Failed](4))
	if refused.GetReason() != "PlanSuperseded" || refused.GetStage() != lavav1.Stage_STAGE_PLAN || refused.GetRetryable() ||
		refused.GetPlanId() != unknown || !strings.Contains(refused.GetMessage(), "set spec.approvePlan to "+fresh.GetPlanId()) {
		t.Errorf("Failed = %v, want PlanSuperseded for %s naming %s", refused, unknown, fresh.GetPlanId())
	}

	// Approving the new id applies it.
	h.observe(ns, name, 5, filesSpec(dir, "v2", fresh.GetPlanId(), "ana", "bo"))
	applied4 := await(h, ns, name, 2*time.Minute, gen[*lavav1.Applied](5))
	if applied4.GetPlanId() != fresh.GetPlanId() || readFile(t, filepath.Join(dir, "bo.txt")) != "hello bo\n" {
		t.Errorf("Applied = %v", applied4)
	}
}

// TestApplier_reapply: ReapplyRequested re-plans the last applied configuration against the
// real world (a file removed out of band is created again); with require_approval the plan is
// held instead.
func TestApplier_reapply(t *testing.T) {
	h := newHarness(t)
	h.startApplier(applierOpts{})
	const ns, name = "demo", "drifty"
	dir := t.TempDir()
	ana := filepath.Join(dir, "ana.txt")
	h.observe(ns, name, 1, filesSpec(dir, "v1", "auto", "ana"))
	await(h, ns, name, 2*time.Minute, gen[*lavav1.Applied](1))
	reapply := func(n int, requireApproval bool) {
		trig := eventid.CauseTrigger(fmt.Sprintf("drift-scan-%d", n))
		ev := &lavav1.ReapplyRequested{Envelope: envelope(ns, name, "uid-"+name, 1, "lava.v1.ReapplyRequested", trig),
			Reason: "DriftAutoCorrect", Severity: lavav1.Severity_SEVERITY_FUNCTIONAL, RequireApproval: requireApproval}
		if _, err := h.pub.PublishEvent(t.Context(), ev); err != nil {
			t.Fatal(err)
		}
	}

	if err := os.Remove(ana); err != nil {
		t.Fatal(err)
	}
	reapply(1, true)
	held := await(h, ns, name, 2*time.Minute, func(p *lavav1.Planned) bool { return p.GetAwaitingApproval() })
	if held.GetSummary().GetAdd() != 1 {
		t.Errorf("re-plan under require_approval = %v, want the missing file planned", held.GetSummary())
	}
	time.Sleep(500 * time.Millisecond)
	if _, err := os.Stat(ana); !os.IsNotExist(err) {
		t.Fatal("a re-apply that requires approval was applied")
	}

	reapply(2, false)
	await(h, ns, name, 2*time.Minute, func(a *lavav1.Applied) bool { return a.GetSummary().GetAdd() == 1 })
	if got := readFile(t, ana); got != "hello ana\n" {
		t.Errorf("ana.txt after the re-apply = %q", got)
	}
}

// TestApplier_reapplyUnderManualApproval: under approvePlan other than auto, a drift
// correction the remediation policy would apply (AutoCorrect, no require_approval) is held for
// approval like any plan; approving its id applies it.
func TestApplier_reapplyUnderManualApproval(t *testing.T) {
	h := newHarness(t)
	h.startApplier(applierOpts{})
	const ns, name = "demo", "manual-drift"
	dir := t.TempDir()
	ana := filepath.Join(dir, "ana.txt")
	h.observe(ns, name, 1, filesSpec(dir, "v1", "manual", "ana"))
	held := await(h, ns, name, 2*time.Minute, func(p *lavav1.Planned) bool { return p.GetAwaitingApproval() })
	h.observe(ns, name, 2, filesSpec(dir, "v1", held.GetPlanId(), "ana"))
	await(h, ns, name, 2*time.Minute, gen[*lavav1.Applied](2))

	if err := os.Remove(ana); err != nil {
		t.Fatal(err)
	}
	ev := &lavav1.ReapplyRequested{Envelope: envelope(ns, name, "uid-"+name, 2, "lava.v1.ReapplyRequested", eventid.CauseTrigger("drift-scan-1")),
		Reason: "DriftAutoCorrect", Severity: lavav1.Severity_SEVERITY_FUNCTIONAL}
	if _, err := h.pub.PublishEvent(t.Context(), ev); err != nil {
		t.Fatal(err)
	}
	correction := await(h, ns, name, 2*time.Minute, func(p *lavav1.Planned) bool {
		return p.GetAwaitingApproval() && p.GetPlanId() != held.GetPlanId()
	})
	if correction.GetSummary().GetAdd() != 1 {
		t.Errorf("drift correction plan %v, want the missing file planned", correction.GetSummary())
	}
	time.Sleep(time.Second)
	if _, err := os.Stat(ana); !os.IsNotExist(err) || len(events[*lavav1.Applied](h, ns, name)) != 1 {
		t.Fatalf("a drift correction was applied without approval (%v)", err)
	}

	h.observe(ns, name, 3, filesSpec(dir, "v1", correction.GetPlanId(), "ana"))
	applied := await(h, ns, name, 2*time.Minute, gen[*lavav1.Applied](3))
	if applied.GetPlanId() != correction.GetPlanId() || readFile(t, ana) != "hello ana\n" {
		t.Errorf("Applied %v, want the approved correction %s", applied, correction.GetPlanId())
	}
}
