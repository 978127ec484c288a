package embedded

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRunner_preventDestroy(t *testing.T) {
	t.Parallel()
	doc := func(trigger string, count int) string {
		return `{"resource":{"terraform_data":{"keep":{"count":` + string(rune('0'+count)) + `,"triggers_replace":"` + trigger + `",
		  "lifecycle":{"prevent_destroy":true}}}}}`
	}
	h := newMemHarness(t, t.TempDir())
	if _, err := h.apply(t, doc("a", 2), nil); err != nil {
		t.Fatal(err)
	}
	serial := h.state.Serial
	tests := []struct{ name, doc, addr, reason string }{
		{"replace", doc("b", 2), "terraform_data.keep[0]", "changes to triggers_replace force replacement"},
		{"count shrinks", doc("a", 1), "terraform_data.keep[1]", "its count or for_each no longer includes this instance"},
	}
	for _, tt := range tests {
		_, err := h.apply(t, tt.doc, nil)
		var pd *PreventDestroyError
		if !errors.As(err, &pd) {
			t.Fatalf("%s: error = %v, want a PreventDestroyError", tt.name, err)
		}
		if !strings.Contains(err.Error(), tt.addr+": lifecycle.prevent_destroy is set") || !strings.Contains(err.Error(), tt.reason) {
			t.Errorf("%s: error = %v, want %s and %q", tt.name, err, tt.addr, tt.reason)
		}
		if h.state.Serial != serial {
			t.Errorf("%s: state changed (serial %d -> %d): nothing may be applied", tt.name, serial, h.state.Serial)
		}
	}
	// Destroy with the configuration that protects them fails too.
	cfg, err := ParseConfig([]byte(doc("a", 2)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.r.Plan(t.Context(), destroyConfig(cfg), h.state, nil, true, nil); err == nil || !strings.Contains(err.Error(), "destroy of the whole configuration") {
		t.Errorf("destroy: error = %v, want prevent_destroy", err)
	}
	// Without prevent_destroy the same destroy goes through.
	cfg, _ = ParseConfig([]byte(`{"resource":{"terraform_data":{"keep":{"count":2,"triggers_replace":"a"}}}}`))
	if _, err := h.r.Plan(t.Context(), destroyConfig(cfg), h.state, nil, true, nil); err != nil {
		t.Errorf("destroy without prevent_destroy: %v", err)
	}
}

func TestRunner_ignoreChangesPaths(t *testing.T) {
	t.Parallel()
	h := newMemHarness(t, t.TempDir())
	doc := func(a, b, ignore string) string {
		return `{"resource":{"terraform_data":{"x":{"input":{"a":"` + a + `","b":"` + b + `"},"lifecycle":{"ignore_changes":` + ignore + `}}}}}`
	}
	if _, err := h.apply(t, doc("1", "1", `["input.a"]`), nil); err != nil {
		t.Fatal(err)
	}
	p, err := h.apply(t, doc("2", "1", `["input.a"]`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := actions(p)["terraform_data.x"]; got != NoOp {
		t.Errorf("ignored path changed: action %s, want no-op", got)
	}
	p, err = h.apply(t, doc("2", "2", `["input.a"]`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := actions(p)["terraform_data.x"]; got != Update {
		t.Errorf("other path changed: action %s, want update", got)
	}
	if got := h.attr(t, "terraform_data.x", "input"); !strings.Contains(got, `"value":{"a":"1","b":"2"}`) {
		t.Errorf("input = %s, want the ignored a kept at 1", got)
	}
	p, err = h.apply(t, doc("3", "3", `"all"`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := actions(p)["terraform_data.x"]; got != NoOp {
		t.Errorf("ignore_changes all: action %s, want no-op", got)
	}
}

func TestRunner_replaceTriggeredBy(t *testing.T) {
	t.Parallel()
	doc := func(in, trigger string) string {
		return `{"resource":{"terraform_data":{"src":{"input":"` + in + `"},
		  "dst":{"input":"d","lifecycle":{"replace_triggered_by":["` + trigger + `"]}},
		  "other":{"input":"o"}}}}`
	}
	for _, trigger := range []string{"terraform_data.src", "${terraform_data.src.output}"} {
		h := newMemHarness(t, t.TempDir())
		if _, err := h.apply(t, doc("1", trigger), nil); err != nil {
			t.Fatal(err)
		}
		p, err := h.apply(t, doc("1", trigger), nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := actions(p)["terraform_data.dst"]; got != NoOp {
			t.Errorf("%s: nothing changed: dst %s, want no-op", trigger, got)
		}
		p, err = h.apply(t, doc("2", trigger), nil)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]Action{"terraform_data.src": Update, "terraform_data.dst": Replace, "terraform_data.other": NoOp}
		for addr, a := range want {
			if got := actions(p)[addr]; got != a {
				t.Errorf("%s: %s %s, want %s", trigger, addr, got, a)
			}
		}
	}
}

func TestRunner_conditions(t *testing.T) {
	t.Parallel()
	h := newMemHarness(t, t.TempDir())
	doc := `{"resource":{"terraform_data":{"a":{"input":"abc","lifecycle":{"postcondition":[
	  {"condition":"${length(self.output) == 3}","error_message":"output must have 3 characters"},
	  {"condition":"${self.output == \"abc\"}","error_message":"${self.output} is not abc"}]}}}}}`
	if _, err := h.apply(t, doc, nil); err != nil {
		t.Fatal(err)
	}
	bad := strings.ReplaceAll(doc, `"input":"abc"`, `"input":"abd"`)
	_, err := h.apply(t, bad, nil)
	var cf *CheckFailedError
	if !errors.As(err, &cf) || !strings.Contains(err.Error(), "terraform_data.a: postcondition failed: abd is not abc") {
		t.Errorf("error = %v, want the postcondition's message", err)
	}
}

func TestRunner_import(t *testing.T) {
	t.Parallel()
	h := newMemHarness(t, t.TempDir())
	doc := `{"variable":{"id":{"default":"abc-123"}},
	  "import":[{"to":"terraform_data.x","id":"${var.id}"},{"to":"terraform_data.each[\"k\"]","id":"k-1"}],
	  "resource":{"terraform_data":{"x":{},"each":{"for_each":{"k":"v"},"input":"${each.value}"}}}}`
	p, err := h.apply(t, doc, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !p.HasChanges() {
		t.Error("an import-only plan has no changes")
	}
	want := map[string]Action{"terraform_data.x": NoOp, `terraform_data.each["k"]`: Update}
	for addr, a := range want {
		if got := actions(p)[addr]; got != a {
			t.Errorf("%s: %s, want %s", addr, got, a)
		}
	}
	if got := h.attr(t, "terraform_data.x", "id"); got != `"abc-123"` {
		t.Errorf("imported id = %s", got)
	}
	if got := h.attr(t, `terraform_data.each["k"]`, "id"); got != `"k-1"` {
		t.Errorf("imported id = %s", got)
	}
	// Once in state, the import blocks change nothing.
	p, err = h.apply(t, doc, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.HasChanges() {
		t.Errorf("second plan has changes: %v", actions(p))
	}
	bad := []struct{ doc, want string }{
		{`{"import":[{"to":"terraform_data.nope","id":"a"}],"resource":{"terraform_data":{"x":{}}}}`, "import: to names undeclared terraform_data.nope"},
		{`{"import":[{"to":"terraform_data.x[3]","id":"a"}],"resource":{"terraform_data":{"x":{"count":1}}}}`, "import: terraform_data.x[3] is not an instance of the configuration"},
		{`{"import":[{"to":"terraform_data.x","id":"${terraform_data.y.id}"}],"resource":{"terraform_data":{"x":{},"y":{}}}}`, "an import id may refer only to variables and locals"},
	}
	for _, b := range bad {
		h := newMemHarness(t, t.TempDir())
		if _, err := h.apply(t, b.doc, nil); err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("error = %v, want %q", err, b.want)
		}
	}
}

// TestRunner_requiredProviders: terraform.required_providers' source and version constraint
// select the provider: a constraint the mirror cannot meet fails the plan naming it.
func TestRunner_requiredProviders(t *testing.T) {
	t.Parallel()
	h := newMemHarness(t, t.TempDir())
	doc := `{"terraform":{"required_providers":{"local":{"source":"hashicorp/local","version":"~> 9.0"}}},
	  "resource":{"local_file":{"a":{"filename":"/nonexistent/a","content":"x"}}}}`
	_, err := h.apply(t, doc, nil)
	if !errors.Is(err, ErrProviderNotFound) || !strings.Contains(err.Error(), "hashicorp/local version ~> 9.0 (the mirror has none)") {
		t.Errorf("error = %v, want the missing hashicorp/local version ~> 9.0", err)
	}
	cfg, err := ParseConfig([]byte(`{"terraform":{"required_providers":{"kit":{"source":"example/testkit","version":">= 0.1"},"aws":"~> 5.0"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]ProviderRequirement{"kit": {Source: "example/testkit", Version: ">= 0.1"}, "aws": {Version: "~> 5.0"}}
	for k, v := range want {
		if cfg.Requirements[k] != v {
			t.Errorf("%s = %+v, want %+v", k, cfg.Requirements[k], v)
		}
	}
	if _, err := ParseConfig([]byte(`{"terraform":{"required_providers":{"x":{"version":"banana"}}}}`)); err == nil || !strings.Contains(err.Error(), `terraform.required_providers.x.version: "banana"`) {
		t.Errorf("bad constraint: %v", err)
	}
}

func TestRunner_movedAndRemoved(t *testing.T) {
	t.Parallel()
	h := newMemHarness(t, t.TempDir())
	if _, err := h.apply(t, `{"resource":{"terraform_data":{"a":{"input":"x"},"gone":{"input":"g"},"kill":{"input":"k"}}}}`, nil); err != nil {
		t.Fatal(err)
	}
	id := h.attr(t, "terraform_data.a", "id")
	doc := `{"moved":[{"from":"terraform_data.a","to":"terraform_data.b"}],
	  "removed":[{"from":"terraform_data.gone","lifecycle":{"destroy":false}},{"from":"terraform_data.kill","lifecycle":{"destroy":true}}],
	  "resource":{"terraform_data":{"b":{"input":"x"}}}}`
	p, err := h.apply(t, doc, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Action{"terraform_data.b": NoOp, "terraform_data.gone": Forget, "terraform_data.kill": Delete}
	if d := cmp.Diff(want, actions(p)); d != "" {
		t.Errorf("actions (-want +got):\n%s", d)
	}
	if !p.HasChanges() || len(p.Moves) != 1 {
		t.Errorf("plan: changes %v, moves %v", p.HasChanges(), p.Moves)
	}
	if got := h.attr(t, "terraform_data.b", "id"); got != id {
		t.Errorf("moved id = %s, want %s", got, id)
	}
	if n := len(h.state.Resources); n != 1 {
		t.Errorf("state has %d resources, want only terraform_data.b", n)
	}
	p, err = h.apply(t, doc, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.HasChanges() {
		t.Errorf("second plan has changes: %v %v", actions(p), p.Moves)
	}
	bad := []struct{ doc, want string }{
		{`{"moved":[{"from":"terraform_data.a","to":"terraform_data.b"}],"resource":{"terraform_data":{"a":{},"b":{}}}}`, "moved: terraform_data.a is still declared"},
		{`{"moved":[{"from":"terraform_data.a","to":"terraform_data.b"}]}`, "moved: terraform_data.b is not declared"},
		{`{"moved":[{"from":"terraform_data.a","to":"local_file.b"}],"resource":{"local_file":{"b":{}}}}`, "a move keeps the resource type"},
		{`{"removed":[{"from":"terraform_data.a[0]"}]}`, "a removed block names a resource or a module without instance keys (as in tofu)"},
		{`{"moved":[{"from":"module.a","to":"terraform_data.b"}],"resource":{"terraform_data":{"b":{}}}}`, "a move is between two resources or two modules"},
		{`{"removed":[{"from":"terraform_data.a"}],"resource":{"terraform_data":{"a":{}}}}`, "removed: terraform_data.a is still declared"},
	}
	for _, b := range bad {
		if _, err := ParseConfig([]byte(b.doc)); err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("error = %v, want %q", err, b.want)
		}
	}
}
