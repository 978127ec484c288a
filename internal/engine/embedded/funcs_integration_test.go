//go:build integration

package embedded

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/lava-operator/lava/internal/lang/functions"
	"github.com/lava-operator/lava/internal/platform/testutil/tofutest"
)

// TestFunctions_tofuOracle evaluates every function and expression case through real tofu
// (apply of the same outputs-only configuration, then `tofu output -json`) and through the
// embedded engine, and compares them value by value; tofu's value must also be the case's
// recorded want, so TestFunctions (no tofu) checks the same thing.
func TestFunctions_tofuOracle(t *testing.T) {
	tools := tofutest.Tofu(t)
	cases := allCases()
	doc := functionDoc(cases)

	ws := tools.Workspace(t, "", tools.Mirror, "")
	ws.WriteFile(t, "main.tf.json", []byte(doc))
	run := func(args ...string) []byte {
		t.Helper()
		out, _ := ws.Run(t, nil, args...)
		return out
	}
	run("init", "-input=false", "-no-color")
	run("apply", "-auto-approve", "-input=false", "-no-color")
	var tofuOut map[string]struct {
		Value json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal(run("output", "-json"), &tofuOut); err != nil {
		t.Fatal(err)
	}

	h := newMemHarness(t, t.TempDir())
	if _, err := h.apply(t, doc, nil); err != nil {
		t.Fatalf("embedded: %v", err)
	}
	check := func(name, what, want string) {
		t.Helper()
		tv, ok := tofuOut[name]
		if !ok {
			t.Errorf("%s: tofu has no output %s", what, name)
			return
		}
		ev := h.state.Outputs[name].Value
		if !jsonEqual(tv.Value, ev) {
			t.Errorf("%s: embedded %s, tofu %s", what, ev, tv.Value)
		}
		if !jsonEqual(tv.Value, []byte(want)) {
			t.Errorf("%s: tofu %s, the case records %s", what, tv.Value, want)
		}
	}
	for i, c := range cases {
		check(fmt.Sprintf("o%03d", i), c.fn+": "+c.expr, c.want)
	}
	for name, want := range templateWants {
		check(name, name, want)
	}

	// Every function tofu knows is offered or refused by the embedded engine, and declared in
	// the language layer's table with tofu's signature; the table declares nothing more.
	var meta struct {
		Signatures map[string]struct {
			Params   []json.RawMessage `json:"parameters"`
			Variadic json.RawMessage   `json:"variadic_parameter"`
		} `json:"function_signatures"`
	}
	if err := json.Unmarshal(run("metadata", "functions", "-json"), &meta); err != nil {
		t.Fatal(err)
	}
	if len(meta.Signatures) < 100 {
		t.Fatalf("tofu lists only %d functions", len(meta.Signatures))
	}
	fs := Functions()
	for name, ts := range meta.Signatures {
		if _, ok := fs[name]; !ok {
			t.Errorf("tofu function %s is neither offered nor refused by the embedded engine", name)
		}
		want := functions.Signature{Params: len(ts.Params), Variadic: ts.Variadic != nil}
		if sig, ok := functions.Lookup(name); !ok || sig != want {
			t.Errorf("tofu function %s takes %s argument(s); the declared table has %s (declared: %t)", name, want, sig, ok)
		}
	}
	for name := range functions.Builtin() {
		for _, n := range []string{name, functions.CorePrefix + name} {
			if _, ok := meta.Signatures[n]; !ok {
				t.Errorf("the declared table has %s, which tofu does not know", n)
			}
		}
	}
}
