package enginetest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lava-operator/lava/internal/engine"
	"github.com/lava-operator/lava/internal/lang/render"
)

// BlockEngine is an engine under test for [RunBlockCases], on a state of its own made for one
// case: Plan plans a rendered document, Apply applies a plan Plan returned.
type BlockEngine struct {
	Plan  func(doc string) (*engine.PlanRecord, error)
	Apply func(p *engine.PlanRecord) (*engine.ApplyResult, error)
}

// BlockCase is a sequence of dialect sources, each synthesized ([Synthesize]) and planned in
// turn on one state; Check looks at each [BlockStep] and fails t on what an engine got wrong.
type BlockCase struct {
	Name string
	// Sources are the steps' deflava-architecture sources; dir is the case's directory.
	Sources func(dir string) []string
	Check   func(t *testing.T, s BlockStep)
}

// BlockStep is one step of a [BlockCase]: its index, the case's directory, the plan (nil
// with the plan's error PlanErr), the apply (nil when the plan failed) and the previous
// step's apply (nil for the first).
type BlockStep struct {
	Index       int
	Dir         string
	Plan        *engine.PlanRecord
	PlanErr     error
	Apply, Prev *engine.ApplyResult
}

// BlockCases are the dialect's :moved, :removed, :checks and :variables clauses applied
// (docs/dialect.md section 1.7), which both engine families must run alike:
//   - moved: terraform_data.old renamed terraform_data.new keeps its object (same id), nothing
//     created or destroyed;
//   - removed: testkit_file.a forgotten, its file kept, and a later plan without the removed
//     block destroys nothing;
//   - check: a failed assertion is a plan warning with its message, and the apply succeeds;
//   - variable: the default is the value, and a default its validation refuses fails the plan
//     with the validation's message.
func BlockCases() []BlockCase {
	return []BlockCase{
		{Name: "moved", Sources: func(string) []string {
			return []string{
				`(deflava-architecture m :resources ((terraform-data "old" :input "x")) :outputs (:id (ref terraform-data "old" id)))`,
				`(deflava-architecture m :resources ((terraform-data "new" :input "x")) :outputs (:id (ref terraform-data "new" id))
  :moved ((:from "terraform-data.old" :to "terraform-data.new")))`,
			}
		}, Check: checkMoved},
		{Name: "removed", Sources: func(dir string) []string {
			file := filepath.Join(dir, "kept.txt")
			return []string{
				fmt.Sprintf(`(deflava-architecture r :resources ((terraform-data "marker" :input "x") (testkit-file "a" :filename %q :content "kept")))`, file),
				`(deflava-architecture r :resources ((terraform-data "marker" :input "x")) :removed ((:from "testkit-file.a")))`,
				`(deflava-architecture r :resources ((terraform-data "marker" :input "x")))`,
			}
		}, Check: checkRemoved},
		{Name: "check", Sources: func(string) []string {
			return []string{`(deflava-architecture c :resources ((terraform-data "a" :input "x"))
  :checks ((marker-is-y :assert ((:condition "${terraform_data.a.input == \"y\"}" :error-message "the marker is not y")))))`}
		}, Check: checkCheck},
		{Name: "variable", Sources: func(string) []string {
			v := func(def string) string {
				return fmt.Sprintf(`(deflava-architecture v
  :variables ((greeting :type string :default %q
                :validation ((:condition "${length(var.greeting) > 1}" :error-message "the greeting is too short"))))
  :resources ((terraform-data "a" :input "${var.greeting}"))
  :outputs (:greeting (ref terraform-data "a" output)))`, def)
			}
			return []string{v("hi"), v("h")}
		}, Check: checkVariable},
	}
}

func checkMoved(t *testing.T, s BlockStep) {
	t.Helper()
	if s.PlanErr != nil {
		t.Fatalf("step %d: plan: %v", s.Index, s.PlanErr)
	}
	if s.Index == 0 {
		return
	}
	if s.Plan.Summary.Add != 0 || s.Plan.Summary.Destroy != 0 {
		t.Errorf("the move plans %+v, want nothing created or destroyed", s.Plan.Summary)
	}
	if id, was := string(s.Apply.Outputs.Values["id"]), string(s.Prev.Outputs.Values["id"]); id == "" || id != was {
		t.Errorf("terraform_data.new has id %s, want the moved object's %s", id, was)
	}
}

func checkRemoved(t *testing.T, s BlockStep) {
	t.Helper()
	if s.PlanErr != nil {
		t.Fatalf("step %d: plan: %v", s.Index, s.PlanErr)
	}
	if s.Index > 0 && s.Plan.Summary.Destroy != 0 {
		t.Errorf("step %d plans %+v, want nothing destroyed", s.Index, s.Plan.Summary)
	}
	if b, err := os.ReadFile(filepath.Join(s.Dir, "kept.txt")); err != nil || string(b) != "kept" {
		t.Errorf("step %d: kept.txt = %q, %v; want it kept", s.Index, b, err)
	}
}

func checkCheck(t *testing.T, s BlockStep) {
	t.Helper()
	if s.PlanErr != nil {
		t.Fatalf("a failed check fails the plan: %v", s.PlanErr)
	}
	if !strings.Contains(strings.Join(s.Plan.Warnings, "\n"), "the marker is not y") {
		t.Errorf("plan warnings %q, want the failed assertion's message", s.Plan.Warnings)
	}
}

func checkVariable(t *testing.T, s BlockStep) {
	t.Helper()
	if s.Index == 0 {
		if s.PlanErr != nil {
			t.Fatalf("plan with the default: %v", s.PlanErr)
		}
		if got := string(s.Apply.Outputs.Values["greeting"]); got != `"hi"` {
			t.Errorf("output greeting = %s, want the variable's default \"hi\"", got)
		}
		return
	}
	if s.PlanErr == nil || !strings.Contains(s.PlanErr.Error(), "the greeting is too short") {
		t.Errorf("plan with a default the validation refuses: %v, want the validation's message", s.PlanErr)
	}
}

// Synthesize renders the dialect source src (inline, no bindings) to compact Terraform JSON.
func Synthesize(t testing.TB, src string) string {
	t.Helper()
	out, ds := render.Synthesize(render.Input{SourceKind: render.SourceInline, SourceText: []byte(src), File: "case.tlisp"})
	if ds.HasErrors() {
		t.Fatalf("synthesize: %v", ds.Errors())
	}
	return string(out.Compact)
}

// RunBlockCases runs every [BlockCases] case as a subtest on an engine newEngine makes for it:
// each step synthesized, planned and (when the plan succeeds) applied, then checked.
func RunBlockCases(t *testing.T, newEngine func(t *testing.T) BlockEngine) {
	for _, c := range BlockCases() {
		t.Run(c.Name, func(t *testing.T) {
			e := newEngine(t)
			dir := t.TempDir()
			var prev *engine.ApplyResult
			for i, src := range c.Sources(dir) {
				s := BlockStep{Index: i, Dir: dir, Prev: prev}
				s.Plan, s.PlanErr = e.Plan(Synthesize(t, src))
				if s.PlanErr == nil {
					r, err := e.Apply(s.Plan)
					if err != nil {
						t.Fatalf("step %d: apply: %v", i, err)
					}
					s.Apply = r
				}
				c.Check(t, s)
				prev = s.Apply
			}
		})
	}
}
