package embedded

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/hcl/v2"
	hcljson "github.com/hashicorp/hcl/v2/json"
	"github.com/zclconf/go-cty/cty"
)

func TestProposedNew(t *testing.T) {
	t.Parallel()
	b := &Block{Attributes: map[string]*Attribute{
		"id":      {Type: cty.String, Computed: true},
		"name":    {Type: cty.String, Required: true},
		"opt":     {Type: cty.String, Optional: true, Computed: true},
		"content": {Type: cty.String, Optional: true},
	}, BlockTypes: map[string]*NestedBlock{
		"rule": {Nesting: NestingList, Block: Block{Attributes: map[string]*Attribute{
			"port": {Type: cty.Number, Required: true},
			"arn":  {Type: cty.String, Computed: true},
		}}},
	}}
	rule := func(port int64, arn cty.Value) cty.Value {
		return cty.ObjectVal(map[string]cty.Value{"port": cty.NumberIntVal(port), "arn": arn})
	}
	prior := cty.ObjectVal(map[string]cty.Value{
		"id": cty.StringVal("i-1"), "name": cty.StringVal("a"), "opt": cty.StringVal("default"), "content": cty.StringVal("x"),
		"rule": cty.ListVal([]cty.Value{rule(80, cty.StringVal("arn:80"))}),
	})
	config := cty.ObjectVal(map[string]cty.Value{
		"id": cty.NullVal(cty.String), "name": cty.StringVal("b"), "opt": cty.NullVal(cty.String), "content": cty.NullVal(cty.String),
		"rule": cty.ListVal([]cty.Value{rule(80, cty.NullVal(cty.String)), rule(443, cty.NullVal(cty.String))}),
	})
	got := proposedNew(b, prior, config)
	want := cty.ObjectVal(map[string]cty.Value{
		"id": cty.StringVal("i-1"), "name": cty.StringVal("b"), "opt": cty.StringVal("default"), "content": cty.NullVal(cty.String),
		"rule": cty.ListVal([]cty.Value{rule(80, cty.StringVal("arn:80")), rule(443, cty.NullVal(cty.String))}),
	})
	if !got.RawEquals(want) {
		t.Errorf("proposedNew = %#v, want %#v", got, want)
	}
	create := proposedNew(b, cty.NullVal(b.ImpliedType()), config)
	if !create.GetAttr("id").IsNull() || !create.GetAttr("opt").IsNull() {
		t.Errorf("create: computed attributes should stay null for the provider to fill, got %#v", create)
	}
}

// jsonBody parses src with hcl/v2's JSON syntax.
func jsonBody(t *testing.T, src string) hcl.Body {
	t.Helper()
	f, diags := hcljson.Parse([]byte(src), configFilename)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	return f.Body
}

// memHarness runs plans and applies against in-memory state with the built-in provider only.
type memHarness struct {
	r     *Runner
	mu    sync.Mutex
	state *State
	saves int
}

func newMemHarness(t *testing.T, dir string) *memHarness {
	t.Helper()
	pool := NewPool(Mirror{Dir: dir}, nil, 4)
	t.Cleanup(func() { _ = pool.Close() })
	return &memHarness{r: NewRunner(pool, 4, nil)}
}

func (h *memHarness) persist(_ context.Context, body []byte) error {
	st, err := ParseState(body)
	if err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.state = st
	h.saves++
	return nil
}

// apply plans and applies doc, returning the plan.
func (h *memHarness) apply(t *testing.T, doc string, sources map[string]string) (*Plan, error) {
	t.Helper()
	cfg, err := ParseConfig([]byte(doc))
	if err != nil {
		return nil, err
	}
	p, err := h.r.Plan(t.Context(), cfg, h.state, sources, false, nil)
	if err != nil {
		return nil, err
	}
	_, err = h.r.Apply(t.Context(), cfg, p, h.state, sources, h.persist, nil)
	return p, err
}

func (h *memHarness) destroy(t *testing.T) (*Plan, error) {
	t.Helper()
	cfg, err := ParseConfig([]byte(`{}`))
	if err != nil {
		return nil, err
	}
	p, err := h.r.Plan(t.Context(), cfg, h.state, nil, true, nil)
	if err != nil {
		return nil, err
	}
	_, err = h.r.Apply(t.Context(), cfg, p, h.state, nil, h.persist, nil)
	return p, err
}

func actions(p *Plan) map[string]Action {
	out := map[string]Action{}
	for _, c := range p.Changes {
		out[c.Addr] = c.Action
	}
	return out
}

// attr reads a top-level attribute of an instance in state as JSON.
func (h *memHarness) attr(t *testing.T, addr, name string) string {
	t.Helper()
	for _, r := range h.state.Resources {
		for _, in := range r.Instances {
			if r.Type+"."+r.Name+keyString(normalizeKey(in.IndexKey)) == addr {
				var m map[string]json.RawMessage
				if err := json.Unmarshal(in.Attributes, &m); err != nil {
					t.Fatal(err)
				}
				var v any
				if err := json.Unmarshal(m[name], &v); err != nil {
					t.Fatal(err)
				}
				b, _ := json.Marshal(v)
				return string(b)
			}
		}
	}
	t.Fatalf("%s not in state", addr)
	return ""
}

func TestRunner_terraformData_lifecycle(t *testing.T) {
	t.Parallel()
	h := newMemHarness(t, t.TempDir())
	v1 := `{"resource":{"terraform_data":{
	  "a":{"input":"one"},
	  "b":{"input":"${terraform_data.a.output}-b","triggers_replace":"${terraform_data.a.id}"},
	  "n":{"count":2,"input":"n-${count.index}"},
	  "m":{"for_each":{"x":"1","y":"2"},"input":"${each.key}=${each.value}"}}},
	  "output":{"b":{"value":"${terraform_data.b.output}"}}}`
	p, err := h.apply(t, v1, nil)
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	want := map[string]Action{"terraform_data.a": Create, "terraform_data.b": Create, "terraform_data.n[0]": Create,
		"terraform_data.n[1]": Create, `terraform_data.m["x"]`: Create, `terraform_data.m["y"]`: Create}
	if d := cmp.Diff(want, actions(p)); d != "" {
		t.Fatalf("create actions (-want +got):\n%s", d)
	}
	// The unknown output of a resolved at apply into b's input.
	if got := h.attr(t, "terraform_data.b", "output"); got != `{"type":"string","value":"one-b"}` {
		t.Errorf("b.output = %s", got)
	}
	if got := h.attr(t, `terraform_data.m["y"]`, "input"); got != `{"type":"string","value":"y=2"}` {
		t.Errorf(`m["y"].input = %s`, got)
	}
	if got := string(h.state.Outputs["b"].Value); got != `"one-b"` {
		t.Errorf("output b = %s", got)
	}
	lineage, serial := h.state.Lineage, h.state.Serial
	idA := h.attr(t, "terraform_data.a", "id")

	// Unchanged: all no-op, nothing written.
	saves := h.saves
	p, err = h.apply(t, v1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.HasChanges() || h.saves != saves || h.state.Serial != serial {
		t.Errorf("second plan has changes: %v (serial %d -> %d)", actions(p), serial, h.state.Serial)
	}

	// Update a in place: b's trigger (a.id) is unchanged, only its input changes -> update.
	v2 := strings.Replace(v1, `"input":"one"`, `"input":"two"`, 1)
	v2 = strings.Replace(v2, `"count":2`, `"count":1`, 1)
	p, err = h.apply(t, v2, nil)
	if err != nil {
		t.Fatal(err)
	}
	want = map[string]Action{"terraform_data.a": Update, "terraform_data.b": Update, "terraform_data.n[0]": NoOp,
		"terraform_data.n[1]": Delete, `terraform_data.m["x"]`: NoOp, `terraform_data.m["y"]`: NoOp}
	if d := cmp.Diff(want, actions(p)); d != "" {
		t.Fatalf("update actions (-want +got):\n%s", d)
	}
	if got := h.attr(t, "terraform_data.a", "id"); got != idA {
		t.Errorf("update in place changed id %s -> %s", idA, got)
	}
	if got := h.attr(t, "terraform_data.b", "output"); got != `{"type":"string","value":"two-b"}` {
		t.Errorf("b.output after update = %s", got)
	}
	if h.state.Lineage != lineage || h.state.Serial <= serial {
		t.Errorf("lineage/serial: %s/%d after %s/%d", h.state.Lineage, h.state.Serial, lineage, serial)
	}

	// Replace: a new trigger on a forces replacement.
	v3 := strings.Replace(v2, `"input":"two"`, `"input":"two","triggers_replace":"r1"`, 1)
	p, err = h.apply(t, v3, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := actions(p)["terraform_data.a"]; got != Replace {
		t.Fatalf("a action = %s, want replace", got)
	}
	// b's trigger references a.id, unknown until a is replaced: b is replaced too.
	if got := actions(p)["terraform_data.b"]; got != Replace {
		t.Errorf("b action = %s, want replace", got)
	}
	if got := h.attr(t, "terraform_data.a", "id"); got == idA {
		t.Errorf("replace kept id %s", got)
	}

	// Destroy everything.
	p, err = h.destroy(t)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.state.Resources) != 0 || len(h.state.Outputs) != 0 {
		t.Errorf("state after destroy: %d resources, %d outputs", len(h.state.Resources), len(h.state.Outputs))
	}
	for addr, a := range actions(p) {
		if a != Delete {
			t.Errorf("destroy: %s action %s", addr, a)
		}
	}
}

func TestRunner_errors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, doc, want string
		sentinel        error
	}{
		{name: "missing provider", doc: `{"resource":{"aws_vpc":{"main":{"cidr_block":"10.42.0.0/16"}}}}`, want: "hashicorp/aws", sentinel: ErrProviderNotFound},
		{name: "undeclared reference", doc: `{"resource":{"terraform_data":{"a":{"input":"${terraform_data.zz.id}"}}}}`, want: "terraform_data.a: terraform_data.zz.id: reference to undeclared resource terraform_data.zz (main.tf.json:1,"},
		{name: "cycle", doc: `{"resource":{"terraform_data":{"a":{"input":"${terraform_data.b.id}"},"b":{"input":"${terraform_data.a.id}"}}}}`, want: "cycle"},
		{name: "unknown argument", doc: `{"resource":{"terraform_data":{"a":{"bogus":1}}}}`, want: `terraform_data.a: Extraneous JSON object property: No argument or block type is named "bogus" (main.tf.json:1,37)`},
		{name: "unknown function", doc: `{"resource":{"terraform_data":{"a":{"input":{"x":"${nosuch(1)}"}}}}}`, want: `terraform_data.a.input: Call to unknown function: There is no function named "nosuch" (main.tf.json:1,`},
		{name: "type error", doc: `{"resource":{"terraform_data":{"a":{"count":1,"triggers_replace":"${upper([1])}"}}}}`, want: `terraform_data.a[0].triggers_replace: Invalid function argument: Invalid value for "str" parameter: string required`},
		{name: "filesystem function", doc: `{"resource":{"terraform_data":{"a":{"input":"${file(\"/etc/passwd\")}"}}}}`, want: `terraform_data.a.input: Error in function call: Call to function "file" failed: file is refused by the embedded engine: it reads the filesystem`},
		{name: "module not bundled", doc: `{"module":{"m":{"source":"./m"}}}`, want: `module.m: source "./m": no module "m" is bundled with the configuration`},
		{name: "remote module", doc: `{"module":{"m":{"source":"hashicorp/consul/aws"}}}`, want: `module.m: the source "hashicorp/consul/aws" is not a bundled module`},
		{name: "variable without default", doc: `{"variable":{"v":{"type":"string"}},"output":{"o":{"value":"${var.v}"}}}`, want: "var.v: no value"},
		{name: "undeclared variable", doc: `{"output":{"o":{"value":"${var.v}"}}}`, want: "reference to undeclared input variable var.v"},
		{name: "validation", doc: `{"variable":{"v":{"default":"ab","validation":{"condition":"${length(var.v) > 3}","error_message":"too short"}}}}`, want: "var.v: validation failed: too short"},
		{name: "precondition", doc: `{"resource":{"terraform_data":{"a":{"lifecycle":{"precondition":{"condition":"${1 == 2}","error_message":"one is not two"}}}}}}`, want: "terraform_data.a: precondition failed: one is not two"},
		{name: "output precondition", doc: `{"output":{"o":{"value":1,"precondition":{"condition":false,"error_message":"no"}}}}`, want: "output o: precondition failed: no"},
		{name: "sensitive output", doc: `{"output":{"o":{"value":"${sensitive(1)}"}}}`, want: "output o: output refers to sensitive values"},
		{name: "dotted name", doc: `{"resource":{"terraform_data":{"a.b":{}}}}`, want: "invalid resource address"},
		{name: "count unknown", doc: `{"resource":{"terraform_data":{"a":{},"b":{"count":"${terraform_data.a.id}"}}}}`, want: "known only after apply"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newMemHarness(t, t.TempDir())
			_, err := h.apply(t, tt.doc, nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want containing %q", err, tt.want)
			}
			if tt.sentinel != nil && !errors.Is(err, tt.sentinel) {
				t.Errorf("error %v does not wrap %v", err, tt.sentinel)
			}
		})
	}
}

// TestDriftFindings: the embedded plan's drift findings are the tofu engine's classification
// (engine.PlanFindings) of the same changes: per leaf path through maps, objects and nested
// blocks (a list of one object: a label under metadata.0.labels. is cosmetic), sensitive
// values redacted, an object deleted out of band a replacement of "*".
func TestDriftFindings(t *testing.T) {
	t.Parallel()
	obj := func(m map[string]cty.Value) cty.Value { return cty.ObjectVal(m) }
	observed := obj(map[string]cty.Value{
		"name":     cty.StringVal("web"),
		"password": cty.StringVal("old-secret"),
		"size":     cty.NumberIntVal(2),
		"tags":     cty.MapVal(map[string]cty.Value{"Owner": cty.StringVal("ops"), "Env": cty.StringVal("prod")}),
	})
	declared := obj(map[string]cty.Value{
		"name":     cty.StringVal("web"),
		"password": cty.StringVal("new-secret"),
		"size":     cty.NumberIntVal(3),
		"tags":     cty.MapVal(map[string]cty.Value{"Owner": cty.StringVal("dev"), "Env": cty.StringVal("prod")}),
	})
	meta := func(labels map[string]cty.Value, data string) cty.Value {
		return obj(map[string]cty.Value{
			"metadata": cty.ListVal([]cty.Value{obj(map[string]cty.Value{"name": cty.StringVal("c"), "labels": cty.MapVal(labels)})}),
			"data":     cty.MapVal(map[string]cty.Value{"k": cty.StringVal(data)}),
		})
	}
	p := &Plan{Changes: []*Change{
		{Addr: "x.a", Mode: "managed", Action: Update, Prior: observed, Planned: declared, Sensitive: []cty.Path{cty.GetAttrPath("password")}},
		{Addr: "x.block", Mode: "managed", Action: Update,
			Prior:   meta(map[string]cty.Value{"app": cty.StringVal("web"), "tier": cty.StringVal("x")}, "v"),
			Planned: meta(map[string]cty.Value{"app": cty.StringVal("web")}, "w")},
		{Addr: "x.deleted", Mode: "managed", Action: Create, Gone: true, Planned: obj(map[string]cty.Value{"name": cty.StringVal("d")})},
		{Addr: "x.gone", Mode: "managed", Action: Create},
		{Addr: "x.same", Mode: "managed", Action: NoOp},
		// A sensitive map is one finding at its own path: its keys (here derived from a
		// Secret) name no path; not seeing inside it, the
		// finding is functional even under a cosmetic prefix.
		{Addr: "x.keyed", Mode: "managed", Action: Update, Sensitive: []cty.Path{cty.GetAttrPath("tags")},
			Prior:   obj(map[string]cty.Value{"tags": cty.MapVal(map[string]cty.Value{"HUNTER2-DERIVED": cty.StringVal("changed")})}),
			Planned: obj(map[string]cty.Value{"tags": cty.MapVal(map[string]cty.Value{"HUNTER2-DERIVED": cty.StringVal("v")})})},
	}}
	str := func(s string) *string { return &s }
	got, err := driftFindings(p, []string{"tags.", "metadata.0.labels."})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		addr, attr, sev    string
		observed, declared *string
	}{
		{"x.a", "password", "functional", str("(sensitive)"), str("(sensitive)")},
		{"x.a", "size", "functional", str("2"), str("3")},
		{"x.a", "tags.Owner", "cosmetic", str("ops"), str("dev")},
		{"x.block", "data.k", "functional", str("v"), str("w")},
		{"x.block", "metadata.0.labels.tier", "cosmetic", str("x"), nil},
		{"x.deleted", "*", "critical", nil, nil},
		{"x.gone", "*", "functional", nil, nil},
		{"x.keyed", "tags", "functional", str("(sensitive)"), str("(sensitive)")},
	}
	if len(got) != len(want) {
		t.Fatalf("findings = %+v", got)
	}
	for i, w := range want {
		g := got[i]
		if g.Address != w.addr || g.Attribute != w.attr || string(g.Severity) != w.sev ||
			!cmp.Equal(g.Observed, w.observed) || !cmp.Equal(g.Declared, w.declared) {
			t.Errorf("finding %d = %+v (observed %v declared %v), want %+v", i, g, deref(g.Observed), deref(g.Declared), w)
		}
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

func TestMirror_Find(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mk := func(host, ver string) {
		d := filepath.Join(dir, host, "hashicorp", "local", ver, runtime.GOOS+"_"+runtime.GOARCH)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "terraform-provider-local_v"+ver), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mk("registry.terraform.io", "1.4.0")
	mk("registry.terraform.io", "1.10.0")
	m := Mirror{Dir: dir}
	addr, err := ParseProviderSource("hashicorp/local")
	if err != nil {
		t.Fatal(err)
	}
	if _, v, err := m.Find(addr, ""); err != nil || v != "1.10.0" {
		t.Errorf("newest = %q, %v; want 1.10.0 (found under the other registry host)", v, err)
	}
	mk("registry.terraform.io", "1.5.2")
	mk("registry.terraform.io", "2.0.0-beta1")
	for constraint, want := range map[string]string{"=1.4.0": "1.4.0", "1.4.0": "1.4.0", "v1.4.0": "1.4.0",
		"~> 1.4": "1.10.0", "~> 1.4.0": "1.4.0", ">= 1.5, < 1.10": "1.5.2", "< 1.5": "1.4.0", "2.0.0-beta1": "2.0.0-beta1"} {
		if _, v, err := m.Find(addr, constraint); err != nil || v != want {
			t.Errorf("%q = %q, %v; want %s", constraint, v, err, want)
		}
	}
	if _, _, err := m.Find(addr, ">= 3.0"); !errors.Is(err, ErrProviderNotFound) || !strings.Contains(err.Error(), "version >= 3.0") {
		t.Errorf(">= 3.0: %v, want ErrProviderNotFound naming the constraint", err)
	}
	if _, _, err := m.Find(addr, "not a version"); err == nil || errors.Is(err, ErrProviderNotFound) {
		t.Errorf("bad constraint: %v", err)
	}
	aws, _ := ParseProviderSource("aws")
	if _, _, err := m.Find(aws, ""); !errors.Is(err, ErrProviderNotFound) {
		t.Errorf("aws: %v, want ErrProviderNotFound", err)
	}
}

func TestRunner_createBeforeDestroy(t *testing.T) {
	t.Parallel()
	h := newMemHarness(t, t.TempDir())
	doc := func(trigger string) string {
		return `{"resource":{"terraform_data":{"a":{"input":"x","triggers_replace":"` + trigger + `","lifecycle":{"create_before_destroy":true}},
		  "b":{"input":"${terraform_data.a.id}"}}}}`
	}
	if _, err := h.apply(t, doc("1"), nil); err != nil {
		t.Fatal(err)
	}
	oldID := h.attr(t, "terraform_data.a", "id")
	p, err := h.apply(t, doc("2"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := actions(p); got["terraform_data.a"] != Replace || got["terraform_data.b"] != Update {
		t.Errorf("actions = %v", got)
	}
	newID := h.attr(t, "terraform_data.a", "id")
	if newID == oldID {
		t.Errorf("id unchanged after replacement")
	}
	if got := h.attr(t, "terraform_data.b", "input"); !strings.Contains(got, strings.Trim(newID, `"`)) {
		t.Errorf("b.input = %s, want the new id %s", got, newID)
	}
	for _, r := range h.state.Resources {
		for _, in := range r.Instances {
			if in.Deposed != "" {
				t.Errorf("deposed object left in state: %s.%s %s", r.Type, r.Name, in.Deposed)
			}
			if r.Name == "a" && !in.CreateBeforeDestroy {
				t.Errorf("create_before_destroy not recorded")
			}
		}
	}
}

func TestDecodeBlock_nesting(t *testing.T) {
	t.Parallel()
	inner := Block{Attributes: map[string]*Attribute{"port": {Type: cty.Number, Required: true}}}
	b := &Block{
		Attributes: map[string]*Attribute{
			"name": {Type: cty.String, Required: true},
			"tags": {Type: cty.Map(cty.String), Optional: true},
			"ports": {NestedType: &Object{Nesting: NestingList, Attributes: map[string]*Attribute{
				"n": {Type: cty.Number, Optional: true}}}, Optional: true},
		},
		BlockTypes: map[string]*NestedBlock{
			"single": {Nesting: NestingSingle, Block: inner},
			"group":  {Nesting: NestingGroup, Block: inner},
			"list":   {Nesting: NestingList, Block: inner},
			"set":    {Nesting: NestingSet, Block: inner},
			"map":    {Nesting: NestingMap, Block: inner},
		},
	}
	body := jsonBody(t, `{"name":"n","tags":{"a":"1"},"ports":[{"n":1},{}],
	  "list":[{"port":1},{"port":"2"}],"set":{"port":3},"map":{"k":{"port":4}}}`)
	v, err := decodeBlock(b, body, staticContext(Functions()), "r")
	if err != nil {
		t.Fatal(err)
	}
	if !v.Type().Equals(b.ImpliedType()) {
		t.Fatalf("type %#v, want %#v", v.Type(), b.ImpliedType())
	}
	port := func(n int64) cty.Value { return cty.ObjectVal(map[string]cty.Value{"port": cty.NumberIntVal(n)}) }
	checks := map[string]cty.Value{
		"single": cty.NullVal(inner.ImpliedType()),
		"group":  cty.ObjectVal(map[string]cty.Value{"port": cty.NullVal(cty.Number)}),
		"list":   cty.ListVal([]cty.Value{port(1), port(2)}),
		"set":    cty.SetVal([]cty.Value{port(3)}),
		"map":    cty.MapVal(map[string]cty.Value{"k": port(4)}),
		"tags":   cty.MapVal(map[string]cty.Value{"a": cty.StringVal("1")}),
		"ports": cty.ListVal([]cty.Value{
			cty.ObjectVal(map[string]cty.Value{"n": cty.NumberIntVal(1)}),
			cty.ObjectVal(map[string]cty.Value{"n": cty.NullVal(cty.Number)}),
		}),
	}
	for name, want := range checks {
		if got := v.GetAttr(name); !got.RawEquals(want) {
			t.Errorf("%s = %#v, want %#v", name, got, want)
		}
	}
	if _, err := decodeBlock(b, jsonBody(t, `{"name":"n","single":[{},{}]}`), staticContext(Functions()), "r"); err == nil {
		t.Error("two single blocks accepted")
	}
	if _, err := decodeBlock(b, jsonBody(t, `{"name":["not","a","string"]}`), staticContext(Functions()), "r"); err == nil {
		t.Error("a list accepted for a string attribute")
	}
}

func TestSameProviderOtherHost(t *testing.T) {
	t.Parallel()
	tests := []struct {
		a, b string
		want bool
	}{
		{`provider["registry.terraform.io/hashicorp/local"]`, `provider["registry.opentofu.org/hashicorp/local"]`, true},
		{`provider["registry.terraform.io/hashicorp/local"].west`, `provider["registry.opentofu.org/hashicorp/local"].west`, true},
		{`provider["registry.terraform.io/hashicorp/local"]`, `provider["registry.opentofu.org/example/local"]`, false},
		{`provider["registry.terraform.io/hashicorp/local"].a`, `provider["registry.opentofu.org/hashicorp/local"]`, false},
	}
	for _, tt := range tests {
		if got := sameProviderOtherHost(tt.a, tt.b); got != tt.want {
			t.Errorf("sameProviderOtherHost(%s, %s) = %v", tt.a, tt.b, got)
		}
	}
}

// BenchmarkRunner_terraformData20 plans and applies 20 chained terraform_data resources
// in memory (no provider process): the engine's own overhead per operation.
func BenchmarkRunner_terraformData20(b *testing.B) {
	pool := NewPool(Mirror{Dir: b.TempDir()}, nil, 1)
	b.Cleanup(func() { _ = pool.Close() })
	r := NewRunner(pool, 10, nil)
	res := map[string]any{"d0": map[string]any{"input": "x"}}
	for i := 1; i < 20; i++ {
		res[fmt.Sprintf("d%d", i)] = map[string]any{"input": fmt.Sprintf("${terraform_data.d%d.output}-%d", i-1, i)}
	}
	doc, _ := json.Marshal(map[string]any{"resource": map[string]any{"terraform_data": res}})
	cfg, err := ParseConfig(doc)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		var st *State
		p, err := r.Plan(b.Context(), cfg, nil, nil, false, nil)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := r.Apply(b.Context(), cfg, p, nil, nil, func(_ context.Context, b []byte) error { var err error; st, err = ParseState(b); return err }, nil); err != nil {
			b.Fatal(err)
		}
		if len(st.Resources) != 20 {
			b.Fatalf("%d resources", len(st.Resources))
		}
	}
}

func TestRunner_orphanDeleted(t *testing.T) {
	t.Parallel()
	h := newMemHarness(t, t.TempDir())
	if _, err := h.apply(t, `{"resource":{"terraform_data":{"keep":{"input":"k"},"gone":{"input":"${terraform_data.keep.id}"}}}}`, nil); err != nil {
		t.Fatal(err)
	}
	p, err := h.apply(t, `{"resource":{"terraform_data":{"keep":{"input":"k"}}}}`, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(map[string]Action{"terraform_data.keep": NoOp, "terraform_data.gone": Delete}, actions(p)); d != "" {
		t.Errorf("actions (-want +got):\n%s", d)
	}
	if len(h.state.Resources) != 1 || h.state.Resources[0].Name != "keep" {
		t.Errorf("state resources = %+v", h.state.Resources)
	}
}

func TestWalk(t *testing.T) {
	t.Parallel()
	deps := map[string][]string{"b": {"a"}, "c": {"b"}, "x": nil, "y": {"x"}}
	nodes := []string{"a", "b", "c", "x", "y"}
	run := func(keepGoing bool, fail string) ([]string, error) {
		var mu sync.Mutex
		var ran []string
		err := walk(t.Context(), nodes, deps, 1, keepGoing, func(_ context.Context, n string) error {
			mu.Lock()
			ran = append(ran, n)
			mu.Unlock()
			if n == fail {
				return errors.New("boom " + n)
			}
			return nil
		})
		return ran, err
	}
	ran, err := run(false, "")
	if err != nil || strings.Join(ran, "") != "abcxy" && strings.Join(ran, "") != "axbyc" && len(ran) != 5 {
		t.Errorf("ran %v, %v", ran, err)
	}
	pos := map[string]int{}
	for i, n := range ran {
		pos[n] = i
	}
	if pos["a"] > pos["b"] || pos["b"] > pos["c"] || pos["x"] > pos["y"] {
		t.Errorf("order %v breaks dependencies", ran)
	}
	ran, err = run(true, "a")
	if err == nil || strings.Contains(strings.Join(ran, ""), "b") || !strings.Contains(strings.Join(ran, ""), "y") {
		t.Errorf("keepGoing after a fails: ran %v, %v; want x and y, not b or c", ran, err)
	}
	if err := walk(t.Context(), []string{"p", "q"}, map[string][]string{"p": {"q"}, "q": {"p"}}, 2, false,
		func(context.Context, string) error { return nil }); err == nil || !strings.Contains(err.Error(), "cycle") {
		t.Errorf("cycle: %v", err)
	}
}

func TestRunner_localsAndDependsOn(t *testing.T) {
	t.Parallel()
	h := newMemHarness(t, t.TempDir())
	doc := `{"locals":{"prefix":"p-${terraform_data.base.output}","both":"${local.prefix}/${terraform_data.base.id}"},
	  "resource":{"terraform_data":{
	    "base":{"input":"b"},
	    "uses":{"input":"${local.both}"},
	    "after":{"input":"z","depends_on":["terraform_data.uses"]}}},
	  "output":{"prefix":{"value":"${local.prefix}"}}}`
	cfg, err := ParseConfig([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	deps, err := cfg.dependencies()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{"terraform_data.base": {}, "terraform_data.uses": {"terraform_data.base"}, "terraform_data.after": {"terraform_data.uses"}}
	if d := cmp.Diff(want, deps); d != "" {
		t.Errorf("dependencies (-want +got):\n%s", d)
	}
	if _, err := h.apply(t, doc, nil); err != nil {
		t.Fatal(err)
	}
	id := strings.Trim(h.attr(t, "terraform_data.base", "id"), `"`)
	if got := h.attr(t, "terraform_data.uses", "input"); !strings.Contains(got, "p-b/"+id) {
		t.Errorf("uses.input = %s, want p-b/%s", got, id)
	}
	if got := string(h.state.Outputs["prefix"].Value); got != `"p-b"` {
		t.Errorf("output prefix = %s", got)
	}
}

func TestDecodeBlock_optionalObjectAttributes(t *testing.T) {
	t.Parallel()
	ty := cty.ObjectWithOptionalAttrs(map[string]cty.Type{"a": cty.String, "b": cty.String}, []string{"b"})
	blk := &Block{Attributes: map[string]*Attribute{"o": {Type: ty, Optional: true}}}
	v, err := decodeBlock(blk, jsonBody(t, `{"o":{"a":"x"}}`), staticContext(Functions()), "r")
	if err != nil {
		t.Fatal(err)
	}
	want := cty.ObjectVal(map[string]cty.Value{"a": cty.StringVal("x"), "b": cty.NullVal(cty.String)})
	if got := v.GetAttr("o"); !got.RawEquals(want) {
		t.Errorf("o = %#v, want %#v", got, want)
	}
	if _, err := encode(v, blk.ImpliedType()); err != nil {
		t.Errorf("encode: %v", err)
	}
}

func TestRunner_deposedObjectDeleted(t *testing.T) {
	t.Parallel()
	h := newMemHarness(t, t.TempDir())
	doc := `{"resource":{"terraform_data":{"a":{"input":"x"}}}}`
	if _, err := h.apply(t, doc, nil); err != nil {
		t.Fatal(err)
	}
	// As an interrupted create-before-destroy replacement leaves it: the old object deposed.
	old := h.state.Resources[0].Instances[0]
	old.Deposed = "0badc0de"
	h.state.Resources[0].Instances = append(h.state.Resources[0].Instances, old)
	p, err := h.apply(t, doc, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Action{"terraform_data.a": NoOp, "terraform_data.a (deposed 0badc0de)": Delete}
	if d := cmp.Diff(want, actions(p)); d != "" {
		t.Errorf("actions (-want +got):\n%s", d)
	}
	if n := len(h.state.Resources[0].Instances); n != 1 || h.state.Resources[0].Instances[0].Deposed != "" {
		t.Errorf("instances after apply = %+v", h.state.Resources[0].Instances)
	}
}

// TestMirror_dotDotSource is the attack of docs/security.md "Engines": a provider source with
// ".." would name a directory outside the mirror, where a tenant-planted binary waits. The
// address is refused by the registry grammar before any lookup, parsed or built in code.
func TestMirror_dotDotSource(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	mirror := filepath.Join(root, "mirror")
	planted := filepath.Join(root, "evil", "x", "1.0.0", runtime.GOOS+"_"+runtime.GOARCH)
	for _, d := range []string{mirror, planted} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(planted, "terraform-provider-x"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, src := range []string{"../evil/x", "mirror/../evil/x", "evil/x/../x"} {
		if a, err := ParseProviderSource(src); err == nil {
			t.Errorf("ParseProviderSource(%q) = %+v, want a registry address error", src, a)
		}
	}
	m := Mirror{Dir: mirror}
	if p, _, err := m.Find(ProviderAddr{Host: "..", Namespace: "evil", Type: "x"}, ""); err == nil || !errors.Is(err, ErrProviderNotFound) {
		t.Errorf("Find(../evil/x) = %q, %v; want a refusal", p, err)
	}
}
