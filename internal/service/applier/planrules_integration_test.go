//go:build integration

package applier_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lava-operator/lava/api/v1alpha1"
	"github.com/lava-operator/lava/internal/engine/state"
	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/lang/planpolicy"
	"github.com/lava-operator/lava/internal/lang/policy"
	"github.com/lava-operator/lava/internal/pipeline"
	"github.com/lava-operator/lava/internal/platform/eventid"
	"github.com/lava-operator/lava/internal/readmodel"
)

// TestApplier_planRules, with each engine: the namespace's plan rules judge every plan before
// it is applied. Under approvePlan auto a plan a rule allows applies; one a rule (reading the
// plan's after values) requires an approval of is held, its rule and addresses in Planned and
// in the record `lava plan show` prints, and is applied once approved by its id; a plan a rule
// denies is Failed with reason PlanDenied naming the rule and the address, is not retried, and
// applies nothing (the resource it would delete stays in the state); a rule added to the
// document while the applier runs judges a drift correction (ReapplyRequested) too; a destroy
// of the object is refused while a rule matches it, and deletionPolicy Orphan lets it go.
func TestApplier_planRules(t *testing.T) {
	for _, eng := range []lavav1.Engine{lavav1.Engine_ENGINE_EMBEDDED, lavav1.Engine_ENGINE_TOFU} {
		t.Run(pipeline.EngineName(eng), func(t *testing.T) { testPlanRules(t, eng) })
	}
}

func testPlanRules(t *testing.T, eng lavav1.Engine) {
	doc := filepath.Join(t.TempDir(), "policy.yaml")
	const rules = `cluster:
  planRules:
  - name: keep-stays
    change: 'change.address == "terraform_data.keep" && "delete" in change.actions'
    verdict: deny
    message: keep is never destroyed
  - name: human-input
    change: 'has(change.after.input) && change.after.input == "needs-human"'
    verdict: requireApproval
`
	writePolicy(t, doc, rules)
	h := newHarness(t)
	r := h.startApplier(applierOpts{policy: &policy.File{Path: doc}})
	const ns, name = "demo", "ruled"
	both := `(deflava-architecture two :inputs ((:v "x")) :resources ((terraform-data "keep" :input "{v}") (terraform-data "other" :input "{v}")))`
	one := `(deflava-architecture one :inputs ((:v "x")) :resources ((terraform-data "other" :input "{v}")))`
	spec := func(src, v, approve string) *lavav1.ArchitectureSpec {
		return &lavav1.ArchitectureSpec{Source: &lavav1.Source{Kind: &lavav1.Source_Inline{Inline: src}},
			Bindings: map[string]string{"v": v}, Engine: eng, ApprovePlan: approve}
	}

	// Allowed: applied at once, no verdict.
	h.observe(ns, name, 1, spec(both, "one", "auto"))
	first := await(h, ns, name, 2*time.Minute, gen[*lavav1.Planned](1))
	if first.GetAwaitingApproval() || first.GetPlanPolicy() != "" {
		t.Errorf("an allowed plan: awaiting %v, plan_policy %q", first.GetAwaitingApproval(), first.GetPlanPolicy())
	}
	await(h, ns, name, 2*time.Minute, gen[*lavav1.Applied](1))

	// Required approval by a rule that reads the plan's values: held under auto.
	h.observe(ns, name, 2, spec(both, "needs-human", "auto"))
	held := await(h, ns, name, 2*time.Minute, gen[*lavav1.Planned](2))
	want := "requireApproval: rule human-input (terraform_data.keep, terraform_data.other)"
	if !held.GetAwaitingApproval() || !strings.HasPrefix(held.GetPlanPolicy(), want) {
		t.Fatalf("Planned awaiting %v, plan_policy %q; want awaiting, %q", held.GetAwaitingApproval(), held.GetPlanPolicy(), want)
	}
	rec := h.record(ns, name, func(r *readmodel.Record) bool { return r.Held != nil })
	if rec.Held.PlanID != held.GetPlanId() || rec.Held.ReviewDigest == "" ||
		rec.Held.Policy == nil || rec.Held.Policy.Verdict != planpolicy.RequireApproval {
		t.Fatalf("applier record held %+v: want the plan with its review body and verdict", rec.Held)
	}
	time.Sleep(time.Second)
	if n := len(events[*lavav1.Applied](h, ns, name)); n != 1 {
		t.Fatalf("%d Applied: a plan a rule requires an approval of was applied under auto", n)
	}
	h.observe(ns, name, 3, spec(both, "needs-human", held.GetPlanId()))
	if ap := await(h, ns, name, 2*time.Minute, gen[*lavav1.Applied](3)); ap.GetPlanId() != held.GetPlanId() {
		t.Errorf("applied plan %s, want the approved %s", ap.GetPlanId(), held.GetPlanId())
	}

	// Denied: keep would be destroyed.
	h.observe(ns, name, 4, spec(one, "needs-human", "auto"))
	failed := await(h, ns, name, 2*time.Minute, gen[*lavav1.Failed](4))
	if failed.GetReason() != v1alpha1.ReasonPlanDenied || failed.GetRetryable() || failed.GetStage() != lavav1.Stage_STAGE_PLAN ||
		!strings.Contains(failed.GetMessage(), "deny: rule keep-stays (terraform_data.keep): keep is never destroyed") {
		t.Fatalf("Failed %v, want a terminal PlanDenied naming keep-stays and terraform_data.keep", failed)
	}
	time.Sleep(time.Second)
	if n := len(events[*lavav1.Applied](h, ns, name)); n != 2 {
		t.Fatalf("%d Applied after a denied plan, want 2", n)
	}
	for _, p := range events[*lavav1.Planned](h, ns, name) {
		if p.GetEnvelope().GetGeneration() == 4 {
			t.Errorf("a denied plan was announced as planned: %v", p)
		}
	}
	if _, body, err := r.store.Body(t.Context(), state.Key{Namespace: ns, Name: name}); err != nil || !strings.Contains(string(body), `"keep"`) {
		t.Errorf("terraform_data.keep left the state after a denied plan (%v):\n%s", err, body)
	}

	// A rule added while the applier runs judges a drift correction of the last applied plan.
	writePolicy(t, doc, rules+`  - name: freeze
    plan: 'object.name == "ruled"'
    verdict: requireApproval
    message: ruled is frozen
`)
	ev := &lavav1.ReapplyRequested{Envelope: envelope(ns, name, "uid-"+name, 4, "lava.v1.ReapplyRequested", eventid.CauseTrigger("drift-scan-1")),
		Reason: "DriftAutoCorrect", Severity: lavav1.Severity_SEVERITY_FUNCTIONAL}
	if _, err := h.pub.PublishEvent(t.Context(), ev); err != nil {
		t.Fatal(err)
	}
	fix := await(h, ns, name, 2*time.Minute, func(p *lavav1.Planned) bool { return p.GetEnvelope().GetGeneration() == 4 })
	if !fix.GetAwaitingApproval() || !strings.Contains(fix.GetPlanPolicy(), "requireApproval: rule freeze: ruled is frozen") {
		t.Errorf("drift correction: awaiting %v, plan_policy %q; want held by rule freeze", fix.GetAwaitingApproval(), fix.GetPlanPolicy())
	}

	// Deleting the object destroys nothing a rule protects: the destroy is refused, the state
	// and its objects stay; deletionPolicy Orphan lets the object go and keeps them.
	h.deletion(ns, name, 4, lavav1.DeletionPolicy_DELETION_POLICY_DESTROY, eng)
	refused := await(h, ns, name, 2*time.Minute, func(f *lavav1.Failed) bool { return f.GetStage() == lavav1.Stage_STAGE_DESTROY })
	if refused.GetReason() != v1alpha1.ReasonPlanDenied || refused.GetRetryable() ||
		!strings.Contains(refused.GetMessage(), "deny: rule keep-stays (terraform_data.keep): keep is never destroyed") {
		t.Fatalf("destroy: Failed %v, want a terminal PlanDenied naming keep-stays and terraform_data.keep", refused)
	}
	if n := len(events[*lavav1.Destroyed](h, ns, name)); n != 0 {
		t.Fatalf("%d Destroyed after a refused destroy", n)
	}
	if _, body, err := r.store.Body(t.Context(), state.Key{Namespace: ns, Name: name}); err != nil || !strings.Contains(string(body), `"keep"`) {
		t.Errorf("terraform_data.keep left the state after a refused destroy (%v)", err)
	}
	h.deletion(ns, name, 5, lavav1.DeletionPolicy_DELETION_POLICY_ORPHAN, eng)
	if d := await(h, ns, name, 2*time.Minute, func(d *lavav1.Destroyed) bool { return true }); !d.GetOrphaned() {
		t.Errorf("Destroyed %v, want orphaned", d)
	}
}

// writePolicy writes a policy document with a modification time after any earlier one (the
// applier re-reads a document whose size or time changed).
func writePolicy(t *testing.T, path, doc string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	at := time.Now().Add(time.Duration(len(doc)) * time.Millisecond)
	if err := os.Chtimes(path, at, at); err != nil {
		t.Fatal(err)
	}
}

// TestApplier_planRulesUndecidableValues: a deny rule guarded as the documentation advises
// (`change.after != null && has(change.after.input) && ...`) never saw a value known only
// after apply (it is left out of the plan's after) nor a sensitive one (null): the plan's
// author fed the denied value through another resource's output, or wrapped it in
// sensitive(), the plan was allowed under auto, and the denied value was applied, on both
// engines. Now such values make the rule undecided, and so matching: Failed PlanDenied,
// nothing applied.
func TestApplier_planRulesUndecidableValues(t *testing.T) {
	for _, eng := range []lavav1.Engine{lavav1.Engine_ENGINE_EMBEDDED, lavav1.Engine_ENGINE_TOFU} {
		t.Run(pipeline.EngineName(eng), func(t *testing.T) {
			doc := filepath.Join(t.TempDir(), "policy.yaml")
			writePolicy(t, doc, `cluster:
  planRules:
  - name: no-forbidden
    change: 'change.address == "terraform_data.dst" && change.after != null && has(change.after.input) && change.after.input == "forbidden"'
    verdict: deny
`)
			h := newHarness(t)
			h.startApplier(applierOpts{policy: &policy.File{Path: doc}})
			const ns = "demo"
			for i, src := range []string{
				`(deflava-architecture late :resources ((terraform-data "src" :input "forbidden") (terraform-data "dst" :input (ref terraform-data "src" output))))`,
				`(deflava-architecture hidden :resources ((terraform-data "dst" :input "${sensitive(\"forbidden\")}")))`,
			} {
				name := fmt.Sprintf("evade%d", i)
				h.observe(ns, name, 1, &lavav1.ArchitectureSpec{Source: &lavav1.Source{Kind: &lavav1.Source_Inline{Inline: src}}, Engine: eng, ApprovePlan: "auto"})
				failed := await(h, ns, name, 2*time.Minute, gen[*lavav1.Failed](1))
				if failed.GetReason() != v1alpha1.ReasonPlanDenied || !strings.Contains(failed.GetMessage(), "rule no-forbidden (terraform_data.dst)") {
					t.Fatalf("%s: Failed %v, want PlanDenied by no-forbidden", name, failed)
				}
				if n := len(events[*lavav1.Applied](h, ns, name)); n != 0 {
					t.Fatalf("%s: %d Applied: the denied value was applied", name, n)
				}
			}
		})
	}
}
