package embedded

import (
	"bytes"
	"encoding/json"
	"errors"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// bundleDoc returns a rendered document: root with the given modules bundled under "//".
func bundleDoc(t *testing.T, root map[string]any, mods map[string]any) string {
	t.Helper()
	doc := map[string]any{}
	for k, v := range root {
		doc[k] = v
	}
	if len(mods) > 0 {
		doc["//"] = map[string]any{"lava_modules": mods}
	}
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// stateAddrs lists the state's instance addresses as tofu names them.
func stateAddrs(st *State) []string {
	var out []string
	for i := range st.Resources {
		r := &st.Resources[i]
		for _, in := range r.Instances {
			out = append(out, resourceKey(r)+keyString(normalizeKey(in.IndexKey)))
		}
	}
	sort.Strings(out)
	return out
}

// instanceAttr reads an attribute of a state instance by its full address.
func instanceAttr(t *testing.T, st *State, addr, name string) string {
	t.Helper()
	for i := range st.Resources {
		r := &st.Resources[i]
		for _, in := range r.Instances {
			if resourceKey(r)+keyString(normalizeKey(in.IndexKey)) != addr {
				continue
			}
			var attrs map[string]json.RawMessage
			if err := json.Unmarshal(in.Attributes, &attrs); err != nil {
				t.Fatal(err)
			}
			return string(attrs[name])
		}
	}
	t.Fatalf("%s not in state %v", addr, stateAddrs(st))
	return ""
}

// netModule is a bundled module with a variable, a resource, an output, a nested module
// and a check.
var netModule = map[string]any{
	"variable": map[string]any{"name": map[string]any{"type": "string"}, "n": map[string]any{"type": "number", "default": 1}},
	"locals":   map[string]any{"full": "${var.name}-${path.module}"},
	"resource": map[string]any{"terraform_data": map[string]any{"x": map[string]any{"count": "${var.n}", "input": "${local.full}-${count.index}"}}},
	"module":   map[string]any{"leaf": map[string]any{"source": "./leaf", "v": "${terraform_data.x[0].output}"}},
	"output":   map[string]any{"out": map[string]any{"value": "${module.leaf.echo}"}},
	"check":    map[string]any{"named": map[string]any{"assert": []any{map[string]any{"condition": "${var.name != \"bad\"}", "error_message": "name is bad"}}}},
}

var leafModule = map[string]any{
	"variable": map[string]any{"v": map[string]any{"type": "string"}},
	"resource": map[string]any{"terraform_data": map[string]any{"l": map[string]any{"input": "${var.v}"}}},
	"output":   map[string]any{"echo": map[string]any{"value": "${terraform_data.l.output}"}},
}

func TestRunner_modules(t *testing.T) {
	t.Parallel()
	h := newMemHarness(t, t.TempDir())
	mods := map[string]any{"modules/net": netModule, "modules/net/leaf": leafModule}
	root := func(keys []string, name string) map[string]any {
		return map[string]any{
			"variable": map[string]any{"keys": map[string]any{"type": "set(string)", "default": keys}},
			"module": map[string]any{
				"each":  map[string]any{"source": "./modules/net", "for_each": "${var.keys}", "name": "${each.key}"},
				"count": map[string]any{"source": "./modules/net", "count": 1, "name": name, "n": 2},
			},
			"resource": map[string]any{"terraform_data": map[string]any{"top": map[string]any{"input": "${module.count[0].out}"}}},
			"output":   map[string]any{"first": map[string]any{"value": "${module.each[\"a\"].out}"}, "top": map[string]any{"value": "${terraform_data.top.output}"}},
		}
	}
	p, err := h.apply(t, bundleDoc(t, root([]string{"a", "b"}, "c"), mods), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`module.count[0].module.leaf.terraform_data.l`,
		`module.count[0].terraform_data.x[0]`, `module.count[0].terraform_data.x[1]`,
		`module.each["a"].module.leaf.terraform_data.l`, `module.each["a"].terraform_data.x[0]`,
		`module.each["b"].module.leaf.terraform_data.l`, `module.each["b"].terraform_data.x[0]`,
		`terraform_data.top`,
	}
	if d := cmp.Diff(want, stateAddrs(h.state)); d != "" {
		t.Errorf("state addresses (-want +got):\n%s", d)
	}
	for _, r := range h.state.Resources {
		if r.Type == "terraform_data" && r.Name == "l" && r.Module != "module.count[0].module.leaf" && !strings.HasPrefix(r.Module, `module.each[`) {
			t.Errorf("module field %q", r.Module)
		}
	}
	if got := instanceAttr(t, h.state, `module.count[0].terraform_data.x[1]`, "input"); !strings.Contains(got, `"c-modules/net-1"`) {
		t.Errorf("input through var, local, path.module, count.index = %s", got)
	}
	if got := instanceAttr(t, h.state, `terraform_data.top`, "input"); !strings.Contains(got, `"c-modules/net-0"`) {
		t.Errorf("a root resource reading a nested module's output through its parent = %s", got)
	}
	if got := string(h.state.Outputs["first"].Value); got != `"a-modules/net-0"` {
		t.Errorf("output first = %s", got)
	}
	// Dependencies are recorded as configuration addresses, as tofu writes them.
	for _, r := range h.state.Resources {
		if r.Type == "terraform_data" && r.Name == "top" {
			if d := cmp.Diff([]string{"module.count.module.leaf.terraform_data.l", "module.count.terraform_data.x"}, r.Instances[0].Dependencies); d != "" {
				t.Errorf("dependencies (-want +got):\n%s", d)
			}
		}
	}
	if len(p.Checks) != 3 {
		t.Errorf("checks = %+v, want one per module instance", p.Checks)
	}
	// Unchanged: a second plan has no changes.
	if p, err = h.apply(t, bundleDoc(t, root([]string{"a", "b"}, "c"), mods), nil); err != nil {
		t.Fatal(err)
	} else if p.HasChanges() {
		t.Errorf("second plan has changes: %v", actions(p))
	}
	// A key leaving for_each deletes that instance's resources; a failing check is a
	// warning in the plan and in the state's check_results, never an error.
	p, err = h.apply(t, bundleDoc(t, root([]string{"a"}, "bad"), mods), nil)
	if err != nil {
		t.Fatal(err)
	}
	acts := actions(p)
	for _, a := range []string{`module.each["b"].terraform_data.x[0]`, `module.each["b"].module.leaf.terraform_data.l`} {
		if acts[a] != Delete {
			t.Errorf("%s: %s, want delete (%v)", a, acts[a], acts)
		}
	}
	if acts[`module.count[0].terraform_data.x[0]`] != Update {
		t.Errorf("module.count[0].terraform_data.x[0]: %s, want update", acts[`module.count[0].terraform_data.x[0]`])
	}
	var failed []string
	for _, c := range p.Checks {
		if c.Status == "fail" {
			failed = append(failed, c.Object+": "+strings.Join(c.Messages, ","))
		}
	}
	if d := cmp.Diff([]string{"module.count[0].check.named: name is bad"}, failed); d != "" {
		t.Errorf("failed checks (-want +got):\n%s", d)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, h.state.CheckResults); err != nil {
		t.Fatal(err)
	}
	if cr := compact.String(); !strings.Contains(cr, `"config_addr":"module.count.check.named","status":"fail"`) ||
		!strings.Contains(cr, `"object_addr":"module.count[0].check.named","status":"fail","failure_messages":["name is bad"]`) {
		t.Errorf("check_results = %s", cr)
	}
	if _, err := h.destroy(t); err != nil {
		t.Fatal(err)
	}
	if n := len(h.state.Resources); n != 0 {
		t.Errorf("destroy left %d resources", n)
	}
}

func TestRunner_moduleErrors(t *testing.T) {
	t.Parallel()
	leaf := map[string]any{"variable": map[string]any{"v": map[string]any{"type": "string"}}}
	for _, c := range []struct {
		name string
		root map[string]any
		mods map[string]any
		want string
	}{
		{"unset variable", map[string]any{"module": map[string]any{"m": map[string]any{"source": "./m"}}}, map[string]any{"m": leaf}, `module.m: the module's variable "v" has no default and is not set`},
		{"unknown argument", map[string]any{"module": map[string]any{"m": map[string]any{"source": "./m", "v": "x", "w": "y"}}}, map[string]any{"m": leaf}, `module m has no variable "w"`},
		{"escaping source", map[string]any{"module": map[string]any{"m": map[string]any{"source": "../m"}}}, nil, `source "../m" leaves the configuration`},
		{"bad bundle directory", map[string]any{}, map[string]any{"../x": leaf}, `module directory "../x"`},
		{"self call", map[string]any{"module": map[string]any{"m": map[string]any{"source": "./m"}}}, map[string]any{"m": map[string]any{"module": map[string]any{"again": map[string]any{"source": "./"}}}}, "module m calls itself"},
		{"provider in module", map[string]any{"module": map[string]any{"m": map[string]any{"source": "./m"}}}, map[string]any{"m": map[string]any{"provider": map[string]any{"local": map[string]any{}}}}, "provider block in module m: configure providers in the root module"},
		{"version", map[string]any{"module": map[string]any{"m": map[string]any{"source": "./m", "version": "1.0"}}}, map[string]any{"m": map[string]any{}}, "version is not supported by the embedded engine"},
		{"scoped data in check", map[string]any{"check": map[string]any{"c": map[string]any{"data": map[string]any{"x": map[string]any{"y": map[string]any{}}}, "assert": []any{map[string]any{"condition": true, "error_message": "m"}}}}}, nil, "a scoped data source in a check block is not supported"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := ParseConfig([]byte(bundleDoc(t, c.root, c.mods))); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error = %v, want %q", err, c.want)
			}
		})
	}
	// Module count from a resource is refused with the reason; an undeclared output is named.
	h := newMemHarness(t, t.TempDir())
	mods := map[string]any{"m": map[string]any{"output": map[string]any{"o": map[string]any{"value": "x"}}}}
	for _, c := range []struct {
		root map[string]any
		want string
	}{
		{map[string]any{"resource": map[string]any{"terraform_data": map[string]any{"a": map[string]any{"input": 1}}}, "module": map[string]any{"m": map[string]any{"source": "./m", "count": "${terraform_data.a.output}"}}}, "the embedded engine expands modules before planning"},
		{map[string]any{"module": map[string]any{"m": map[string]any{"source": "./m"}}, "output": map[string]any{"x": map[string]any{"value": "${module.m.nope}"}}}, `has no output "nope"`},
	} {
		if _, err := h.apply(t, bundleDoc(t, c.root, mods), nil); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("error = %v, want %q", err, c.want)
		}
	}
}

// TestRunner_movedInstancesAndModules: moved blocks of single instances, of module calls and
// instances and into a module rename state without replacing anything; removed of a module
// forgets its resources.
func TestRunner_movedInstancesAndModules(t *testing.T) {
	t.Parallel()
	h := newMemHarness(t, t.TempDir())
	m := map[string]any{"resource": map[string]any{"terraform_data": map[string]any{"x": map[string]any{"input": "m"}}}}
	mods := map[string]any{"m": m}
	before := bundleDoc(t, map[string]any{
		"module":   map[string]any{"a": map[string]any{"source": "./m"}, "c": map[string]any{"source": "./m", "count": 1}, "gone": map[string]any{"source": "./m"}},
		"resource": map[string]any{"terraform_data": map[string]any{"i": map[string]any{"count": 2, "input": "i"}, "r": map[string]any{"input": "r"}}},
	}, mods)
	if _, err := h.apply(t, before, nil); err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	for _, a := range stateAddrs(h.state) {
		ids[a] = instanceAttr(t, h.state, a, "id")
	}
	after := bundleDoc(t, map[string]any{
		"moved": []any{
			map[string]any{"from": "terraform_data.i[1]", "to": `terraform_data.i["k"]`},
			map[string]any{"from": "terraform_data.i[0]", "to": "terraform_data.j"},
			map[string]any{"from": "module.a", "to": "module.b"},
			map[string]any{"from": "module.c[0]", "to": `module.c["z"]`},
			map[string]any{"from": "terraform_data.r", "to": "module.b.terraform_data.r"},
		},
		"removed": []any{map[string]any{"from": "module.gone", "lifecycle": map[string]any{"destroy": false}}},
		"module":  map[string]any{"b": map[string]any{"source": "./m2"}, "c": map[string]any{"source": "./m", "for_each": []any{"z"}}},
		"resource": map[string]any{"terraform_data": map[string]any{
			"i": map[string]any{"for_each": []any{"k"}, "input": "i"}, "j": map[string]any{"input": "i"}}},
	}, map[string]any{"m": m, "m2": map[string]any{"resource": map[string]any{"terraform_data": map[string]any{"x": map[string]any{"input": "m"}, "r": map[string]any{"input": "r"}}}}})
	p, err := h.apply(t, after, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Moves) != 5 {
		t.Errorf("moves carried out: %v", p.Moves)
	}
	for addr, a := range actions(p) {
		want := NoOp
		if strings.HasPrefix(addr, "module.gone") {
			want = Forget
		}
		if a != want {
			t.Errorf("%s: %s, want %s", addr, a, want)
		}
	}
	for from, to := range map[string]string{
		"terraform_data.i[1]": `terraform_data.i["k"]`, "terraform_data.i[0]": "terraform_data.j",
		"module.a.terraform_data.x": "module.b.terraform_data.x", "module.c[0].terraform_data.x": `module.c["z"].terraform_data.x`,
		"terraform_data.r": "module.b.terraform_data.r",
	} {
		if got := instanceAttr(t, h.state, to, "id"); got != ids[from] {
			t.Errorf("%s moved to %s with id %s, want %s", from, to, got, ids[from])
		}
	}
	want := []string{`module.b.terraform_data.r`, `module.b.terraform_data.x`, `module.c["z"].terraform_data.x`, `terraform_data.i["k"]`, `terraform_data.j`}
	if d := cmp.Diff(want, stateAddrs(h.state)); d != "" {
		t.Errorf("state (-want +got):\n%s", d)
	}
	if p, err = h.apply(t, after, nil); err != nil {
		t.Fatal(err)
	} else if p.HasChanges() {
		t.Errorf("second plan has changes: %v %v", actions(p), p.Moves)
	}
}

// TestRunner_modulePreventDestroy: prevent_destroy inside a module protects every instance
// of the module: a key leaving the call's for_each fails the plan naming the instance, and a
// destroy honours it too.
func TestRunner_modulePreventDestroy(t *testing.T) {
	t.Parallel()
	h := newMemHarness(t, t.TempDir())
	mods := map[string]any{"m": map[string]any{"resource": map[string]any{"terraform_data": map[string]any{
		"p": map[string]any{"input": "x", "lifecycle": map[string]any{"prevent_destroy": true}}}}}}
	doc := func(keys ...string) string {
		return bundleDoc(t, map[string]any{"module": map[string]any{"m": map[string]any{"source": "./m", "for_each": keys}}}, mods)
	}
	if _, err := h.apply(t, doc("a", "b"), nil); err != nil {
		t.Fatal(err)
	}
	_, err := h.apply(t, doc("a"), nil)
	var pd *PreventDestroyError
	if !errors.As(err, &pd) || pd.Address != `module.m["b"].terraform_data.p` {
		t.Fatalf("error = %v, want prevent_destroy for module.m[\"b\"].terraform_data.p", err)
	}
	if n := len(stateAddrs(h.state)); n != 2 {
		t.Errorf("state has %d instances after the refused plan, want 2", n)
	}
	cfg, err := ParseConfig([]byte(doc("a", "b")))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.r.Plan(t.Context(), destroyConfig(cfg), h.state, nil, true, nil); !errors.As(err, &pd) {
		t.Errorf("destroy: error = %v, want prevent_destroy", err)
	}
}

// TestRunner_moduleVariablesEachOnTheirOwn: a root resource reads a module output that
// depends on one module variable while another variable of the same module depends on that
// root resource; as in tofu this is no cycle, because each variable is evaluated on its own.
func TestRunner_moduleVariablesEachOnTheirOwn(t *testing.T) {
	t.Parallel()
	h := newMemHarness(t, t.TempDir())
	mods := map[string]any{"m": map[string]any{
		"variable": map[string]any{"a": map[string]any{"type": "string"}, "b": map[string]any{"type": "string"}},
		"resource": map[string]any{"terraform_data": map[string]any{"late": map[string]any{"input": "${var.a}"}}},
		"output":   map[string]any{"b": map[string]any{"value": "${var.b}"}, "late": map[string]any{"value": "${terraform_data.late.output}"}},
	}}
	doc := bundleDoc(t, map[string]any{
		"module":   map[string]any{"m": map[string]any{"source": "./m", "a": "${terraform_data.x.output}", "b": "static"}},
		"resource": map[string]any{"terraform_data": map[string]any{"x": map[string]any{"input": "${module.m.b}-x"}}},
		"output":   map[string]any{"late": map[string]any{"value": "${module.m.late}"}},
	}, mods)
	if _, err := h.apply(t, doc, nil); err != nil {
		t.Fatal(err)
	}
	if got := string(h.state.Outputs["late"].Value); got != `"static-x"` {
		t.Errorf("output late = %s, want \"static-x\"", got)
	}
}

// TestRunner_moduleSensitiveAndDependsOn: a sensitive module variable makes an output that
// shows it fail unless it is sensitive, a sensitive module output stays sensitive in the
// root, and depends_on on a module call orders every resource in it.
func TestRunner_moduleSensitiveAndDependsOn(t *testing.T) {
	t.Parallel()
	mod := func(sensitiveOut bool) map[string]any {
		return map[string]any{"m": map[string]any{
			"variable": map[string]any{"pw": map[string]any{"type": "string", "sensitive": true}},
			"resource": map[string]any{"terraform_data": map[string]any{"a": map[string]any{"input": "x"}}},
			"output":   map[string]any{"pw": map[string]any{"value": "${var.pw}", "sensitive": sensitiveOut}},
		}}
	}
	root := func(rootSensitive bool) map[string]any {
		return map[string]any{
			"module":   map[string]any{"m": map[string]any{"source": "./m", "pw": "hunter22", "depends_on": []any{"terraform_data.first"}}},
			"resource": map[string]any{"terraform_data": map[string]any{"first": map[string]any{"input": "f"}, "after": map[string]any{"input": "y", "depends_on": []any{"module.m"}}}},
			"output":   map[string]any{"pw": map[string]any{"value": "${module.m.pw}", "sensitive": rootSensitive}},
		}
	}
	h := newMemHarness(t, t.TempDir())
	if _, err := h.apply(t, bundleDoc(t, root(true), mod(false)), nil); err == nil || !strings.Contains(err.Error(), "module.m: output pw: output refers to sensitive values") {
		t.Errorf("error = %v, want the module output refused", err)
	}
	if _, err := h.apply(t, bundleDoc(t, root(false), mod(true)), nil); err == nil || !strings.Contains(err.Error(), "output pw: output refers to sensitive values") {
		t.Errorf("error = %v, want the root output refused", err)
	}
	p, err := h.apply(t, bundleDoc(t, root(true), mod(true)), nil)
	if err != nil {
		t.Fatal(err)
	}
	if o := h.state.Outputs["pw"]; !o.Sensitive {
		t.Errorf("output pw not sensitive: %+v", o)
	}
	if d := cmp.Diff([]string{"terraform_data.first"}, p.Deps["module.m.terraform_data.a"]); d != "" {
		t.Errorf("module.m.terraform_data.a deps (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"module.m.terraform_data.a"}, p.Deps["terraform_data.after"]); d != "" {
		t.Errorf("terraform_data.after deps (-want +got):\n%s", d)
	}
}
