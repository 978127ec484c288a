//go:build integration

package applier_test

import (
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/lava-operator/lava/internal/engine"
	"github.com/lava-operator/lava/internal/engine/state"
	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/pipeline"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/readmodel"
)

// TestApplier_reviewThenStateChanges, with each engine: a plan held for approval carries its
// per-address actions in Planned and a review body in the artifact store (the plan in `tofu
// show -json` form, rendered with its attribute diffs); the state body is then rewritten out of
// band at the same serial and lineage (between the review and the approval), and the approval
// of the reviewed id does not apply: the plan is made again, gets another id (the id covers
// the state digest) and awaits approval (the reviewed id approves nothing and fails nothing);
// approving the new id applies it.
func TestApplier_reviewThenStateChanges(t *testing.T) {
	for _, eng := range []lavav1.Engine{lavav1.Engine_ENGINE_EMBEDDED, lavav1.Engine_ENGINE_TOFU} {
		t.Run(pipeline.EngineName(eng), func(t *testing.T) { testReviewThenStateChanges(t, eng) })
	}
}

func testReviewThenStateChanges(t *testing.T, eng lavav1.Engine) {
	h := newHarness(t)
	r := h.startApplier(applierOpts{})
	const ns, name = "demo", "reviewed"
	src := `(deflava-architecture two :inputs ((:v "x")) :resources ((terraform-data "d" :input "{v}") (terraform-data "e" :input "{v}")))`
	spec := func(v, approve string) *lavav1.ArchitectureSpec {
		return &lavav1.ArchitectureSpec{Source: &lavav1.Source{Kind: &lavav1.Source_Inline{Inline: src}},
			Bindings: map[string]string{"v": v}, Engine: eng, ApprovePlan: approve}
	}
	h.observe(ns, name, 1, spec("one", "auto"))
	await(h, ns, name, 2*time.Minute, gen[*lavav1.Applied](1))

	// Generation 2 changes both inputs under manual approval: held, with its actions.
	h.observe(ns, name, 2, spec("two", "manual"))
	held := await(h, ns, name, 2*time.Minute, gen[*lavav1.Planned](2))
	if !held.GetAwaitingApproval() {
		t.Fatalf("Planned %v, want awaiting approval", held)
	}
	actions := map[string]lavav1.ChangeKind{}
	for _, c := range held.GetChanges() {
		actions[c.GetAddress()] = c.GetAction()
	}
	for _, addr := range []string{"terraform_data.d", "terraform_data.e"} {
		if actions[addr] != lavav1.ChangeKind_CHANGE_KIND_UPDATE {
			t.Errorf("Planned action of %s = %v, want UPDATE (changes %v)", addr, actions[addr], held.GetChanges())
		}
	}

	// The review body: what `lava plan show` prints.
	rec := h.record(ns, name, func(r *readmodel.Record) bool { return r.Held != nil })
	if rec.Held.PlanID != held.GetPlanId() || rec.Held.ReviewDigest == "" {
		t.Fatalf("applier record %+v: want the held plan with a review body", rec.Held)
	}
	arts, err := bus.NewArtifacts(t.Context(), h.js)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := arts.Get(t.Context(), rec.Held.ReviewDigest)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(rc)
	_ = rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	review, err := engine.ParseReviewBody(body)
	if err != nil {
		t.Fatal(err)
	}
	var shown strings.Builder
	if err := engine.RenderReview(&shown, review); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"# terraform_data.d will be updated in-place", "# terraform_data.e will be updated in-place",
		`~ input`, `"one" -> "two"`, "Plan: 0 to add, 2 to change, 0 to destroy."} {
		if !strings.Contains(shown.String(), want) {
			t.Errorf("plan show lacks %q:\n%s", want, shown.String())
		}
	}

	// Between the review and the approval the state body is rewritten at the same serial and
	// lineage (an output added out of band).
	key := state.Key{Namespace: ns, Name: name}
	cur, stBody, err := r.store.Body(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	var st map[string]any
	if err := json.Unmarshal(stBody, &st); err != nil {
		t.Fatal(err)
	}
	st["outputs"] = map[string]any{"oob": map[string]any{"value": "x", "type": "string"}}
	tampered, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	after, err := r.store.Put(t.Context(), key, tampered, "")
	if err != nil {
		t.Fatal(err)
	}
	if after.Serial != cur.Serial || after.Lineage != cur.Lineage || after.Digest == cur.Digest {
		t.Fatalf("state rewrite: %+v -> %+v, want the same serial and lineage with another body", cur, after)
	}

	// The reviewed id is approved: it is not applied.
	h.observe(ns, name, 3, spec("two", held.GetPlanId()))
	fresh := await(h, ns, name, 2*time.Minute, gen[*lavav1.Planned](3))
	if fresh.GetPlanId() == held.GetPlanId() || !fresh.GetAwaitingApproval() {
		t.Fatalf("plan after the state changed: id %s (reviewed %s), awaiting %v: want a new id held", fresh.GetPlanId(), held.GetPlanId(), fresh.GetAwaitingApproval())
	}
	time.Sleep(time.Second)
	if fs := events[*lavav1.Failed](h, ns, name); len(fs) != 0 {
		t.Errorf("the reviewed id, superseded, failed the object: %v", fs)
	}
	if n := len(events[*lavav1.Applied](h, ns, name)); n != 1 {
		t.Fatalf("%d Applied events, want only generation 1's: the approval of a plan made against another state applied", n)
	}

	// Approving the new id applies exactly it.
	h.observe(ns, name, 4, spec("two", fresh.GetPlanId()))
	applied := await(h, ns, name, 2*time.Minute, gen[*lavav1.Applied](4))
	if applied.GetPlanId() != fresh.GetPlanId() || applied.GetSummary().GetChange() != 2 {
		t.Errorf("Applied %v, want plan %s with 2 changes", applied, fresh.GetPlanId())
	}
}
