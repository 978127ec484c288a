package embedded

import (
	"fmt"
	"testing"

	"github.com/hashicorp/hcl/v2"
	hcljson "github.com/hashicorp/hcl/v2/json"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"
)

// TestExprValue_asHCL: exprValue gives what hcl/v2/json's own Value gives, value and
// diagnostics (summary, detail and position), for strings with and without templates,
// escapes, a template that does not parse, a failing call, numbers, arrays and objects; and
// a second evaluation (from the cache) gives the same again.
func TestExprValue_asHCL(t *testing.T) {
	t.Parallel()
	ctx := &hcl.EvalContext{
		Variables: map[string]cty.Value{"var": cty.ObjectVal(map[string]cty.Value{"name": cty.StringVal("ana"), "n": cty.NumberIntVal(3)})},
		Functions: map[string]function.Function{"upper": stdlib.UpperFunc},
	}
	for i, src := range []string{
		`"plain"`,
		`"hello ${var.name}!"`,
		`"${var.n}"`,
		`"$${not a template} and %%{ nor this }"`,
		`"%{ for c in [1, 2] }${c}%{ endfor }"`,
		`"  ${upper(var.name)}\n\tline two \u00e9"`,
		`"${var.name"`,
		`"${upper(var.n, 2)}"`,
		`"${var.missing}"`,
		`12.5`,
		`true`,
		`null`,
		`["a ${var.name}", 2]`,
		`{"k": "${var.n}", "${var.name}": 1}`,
	} {
		doc := fmt.Sprintf("{\n  \"x\": %s\n}", src)
		f, diags := hcljson.Parse([]byte(doc), "main.tf.json")
		if diags.HasErrors() {
			t.Fatalf("%s: %v", src, diags)
		}
		attrs, diags := f.Body.JustAttributes()
		if diags.HasErrors() {
			t.Fatalf("%s: %v", src, diags)
		}
		x := attrs["x"].Expr
		want, wantDiags := x.Value(ctx)
		for round := range 2 {
			got, gotDiags := exprValue(x, ctx)
			if !got.RawEquals(want) {
				t.Errorf("%d %s round %d: got %#v, want %#v", i, src, round, got, want)
			}
			if fmt.Sprint(gotDiags) != fmt.Sprint(wantDiags) {
				t.Errorf("%d %s round %d: diagnostics %v, want %v", i, src, round, gotDiags, wantDiags)
			}
		}
	}
}
