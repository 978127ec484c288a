//go:build integration

package embedded

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/lava-operator/lava/internal/engine"
	"github.com/lava-operator/lava/internal/engine/state"
)

// TestEngine_modulesOracle: bundled modules (count, for_each, nesting, variables, outputs,
// a failing check), then moved blocks of instances, module calls and module instances and a
// removed module, with tofu as the oracle both ways: what one engine applies the other plans
// as unchanged, with the same state addresses.
func TestEngine_modulesOracle(t *testing.T) {
	e := newEnv(t)
	tf := e.tofuEngine()
	for _, order := range []struct {
		name         string
		first, check engine.Engine
	}{{"embedded then tofu", e.eng, tf}, {"tofu then embedded", tf, e.eng}} {
		t.Run(order.name, func(t *testing.T) {
			e.key = state.Key{Namespace: "demo", Name: "modules-" + strings.ReplaceAll(order.name, " ", "-")}
			dir := t.TempDir()
			kept := filepath.Join(dir, "kept.txt")
			file := map[string]any{
				"variable": map[string]any{"path": map[string]any{"type": "string"}, "text": map[string]any{"type": "string", "default": "hello"}},
				"resource": map[string]any{"local_file": map[string]any{"f": map[string]any{"filename": "${var.path}", "content": "${var.text} from ${path.module}"}}},
				"output":   map[string]any{"id": map[string]any{"value": "${local_file.f.id}"}},
				"check": map[string]any{"long": map[string]any{"assert": []any{
					map[string]any{"condition": "${length(var.text) > 10}", "error_message": "the text is short"}}}},
			}
			net := map[string]any{
				"variable": map[string]any{"name": map[string]any{"type": "string"}, "n": map[string]any{"type": "number", "default": 1}},
				"resource": map[string]any{"terraform_data": map[string]any{"x": map[string]any{"count": "${var.n}", "input": "${var.name}-${count.index}"}}},
				"module":   map[string]any{"file": map[string]any{"source": "../file", "path": dir + "/${var.name}.txt", "text": "${terraform_data.x[0].output}"}},
				"output":   map[string]any{"file": map[string]any{"value": "${module.file.id}"}},
			}
			mods := map[string]any{"modules/net": net, "modules/file": file}
			before := bundleDoc(t, map[string]any{
				"module": map[string]any{
					"each": map[string]any{"source": "./modules/net", "for_each": map[string]any{"a": 1, "b": 2}, "name": "${each.key}", "n": "${each.value}"},
					"one":  map[string]any{"source": "./modules/net", "count": 1, "name": "one"},
					"old":  map[string]any{"source": "./modules/net", "name": "old"},
					"gone": map[string]any{"source": "./modules/file", "path": kept},
				},
				"resource": map[string]any{"terraform_data": map[string]any{
					"top": map[string]any{"count": 2, "input": "${module.each[\"b\"].file}"}}},
				"output": map[string]any{"file": map[string]any{"value": "${module.one[0].file}"}},
			}, mods)
			after := bundleDoc(t, map[string]any{
				"moved": []any{
					map[string]any{"from": "terraform_data.top[1]", "to": `terraform_data.top["k"]`},
					map[string]any{"from": "terraform_data.top[0]", "to": "terraform_data.single"},
					map[string]any{"from": "module.old", "to": "module.new"},
					map[string]any{"from": "module.one[0]", "to": `module.one["z"]`},
				},
				"removed": []any{map[string]any{"from": "module.gone", "lifecycle": map[string]any{"destroy": false}}},
				"module": map[string]any{
					"each": map[string]any{"source": "./modules/net", "for_each": map[string]any{"a": 1, "b": 2}, "name": "${each.key}", "n": "${each.value}"},
					"one":  map[string]any{"source": "./modules/net", "for_each": "${toset([\"z\"])}", "name": "one"},
					"new":  map[string]any{"source": "./modules/net", "name": "old"},
				},
				"resource": map[string]any{"terraform_data": map[string]any{
					"top":    map[string]any{"for_each": "${toset([\"k\"])}", "input": "${module.each[\"b\"].file}"},
					"single": map[string]any{"input": "${module.each[\"b\"].file}"}}},
				"output": map[string]any{"file": map[string]any{"value": "${module.one[\"z\"].file}"}},
			}, mods)
			wantBefore := []string{
				`module.each["a"].module.file.local_file.f`, `module.each["a"].terraform_data.x[0]`,
				`module.each["b"].module.file.local_file.f`, `module.each["b"].terraform_data.x[0]`, `module.each["b"].terraform_data.x[1]`,
				`module.gone.local_file.f`,
				`module.old.module.file.local_file.f`, `module.old.terraform_data.x[0]`,
				`module.one[0].module.file.local_file.f`, `module.one[0].terraform_data.x[0]`,
				`terraform_data.top[0]`, `terraform_data.top[1]`,
			}
			wantAfter := []string{
				`module.each["a"].module.file.local_file.f`, `module.each["a"].terraform_data.x[0]`,
				`module.each["b"].module.file.local_file.f`, `module.each["b"].terraform_data.x[0]`, `module.each["b"].terraform_data.x[1]`,
				`module.new.module.file.local_file.f`, `module.new.terraform_data.x[0]`,
				`module.one["z"].module.file.local_file.f`, `module.one["z"].terraform_data.x[0]`,
				`terraform_data.single`, `terraform_data.top["k"]`,
			}
			for i, step := range []struct {
				doc  string
				want []string
			}{{before, wantBefore}, {after, wantAfter}} {
				rec, err := order.first.Plan(t.Context(), engine.PlanRequest{Target: e.target(step.doc)})
				if err != nil {
					t.Fatalf("step %d: %s plan: %v", i, order.first.Name(), err)
				}
				if i == 1 {
					// Moves change no object: every planned action is a no-op (the
					// removed module's resources are forgotten, not planned).
					for addr, act := range actionsOf(rec) {
						if act != engine.ActionNoOp {
							t.Errorf("step %d: %s plans %s %s, want no-op after the moves", i, order.first.Name(), act, addr)
						}
					}
				}
				if _, err := order.first.Apply(t.Context(), engine.ApplyRequest{Plan: rec, Holder: "test"}); err != nil {
					t.Fatalf("step %d: %s apply: %v", i, order.first.Name(), err)
				}
				if d := cmp.Diff(step.want, stateAddrs(e.state())); d != "" {
					t.Errorf("step %d: %s state addresses (-want +got):\n%s", i, order.first.Name(), d)
				}
				rec, err = order.check.Plan(t.Context(), engine.PlanRequest{Target: e.target(step.doc)})
				if err != nil {
					t.Fatalf("step %d: %s plan: %v", i, order.check.Name(), err)
				}
				if rec.HasChanges {
					t.Errorf("step %d: %s plans changes after %s: %+v %v", i, order.check.Name(), order.first.Name(), rec.Summary, actionsOf(rec))
				}
				// The failed check is a warning of the plan, in both engines' words.
				warned := false
				for _, w := range rec.Warnings {
					warned = warned || strings.HasPrefix(w, "Check block assertion failed: the text is short")
				}
				if !warned {
					t.Errorf("step %d: %s plan warnings %q, want the failed check", i, order.check.Name(), rec.Warnings)
				}
				var planned []string
				for addr := range actionsOf(rec) {
					planned = append(planned, addr)
				}
				sort.Strings(planned)
				if d := cmp.Diff(step.want, planned); d != "" {
					t.Errorf("step %d: %s planned addresses (-want +got):\n%s", i, order.check.Name(), d)
				}
			}
			if _, err := os.Stat(kept); err != nil {
				t.Errorf("%s destroyed the removed module's file: %v", order.first.Name(), err)
			}
			if got := readFile(t, filepath.Join(dir, "old.txt")); got != "old-0 from modules/file" {
				t.Errorf("old.txt = %q", got)
			}
			res, err := order.check.Destroy(t.Context(), engine.DestroyRequest{Target: e.target(after)})
			if err != nil {
				t.Fatalf("%s destroy: %v", order.check.Name(), err)
			}
			if res.Destroyed != len(wantAfter) {
				t.Errorf("%s destroyed %d, want %d", order.check.Name(), res.Destroyed, len(wantAfter))
			}
		})
	}
}
