package hclnest

import (
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"
)

// TestCheck_refusesDeepTrees: each shape that makes hclsyntax recurse once per level, at
// a depth that overflows Go's stack when parsed (so the test process would die without
// Check), is refused with a diagnostic at its line and column.
func TestCheck_refusesDeepTrees(t *testing.T) {
	const n = 100_000
	cases := []struct {
		name     string
		src      string
		template bool
	}{
		{"tuples in an interpolation", "${" + strings.Repeat("[", n) + strings.Repeat("]", n) + "}", true},
		{"parentheses", strings.Repeat("(", n) + "1" + strings.Repeat(")", n), false},
		{"nested quotes", strings.Repeat(`"${`, n) + "x" + strings.Repeat(`}"`, n), false},
		{"unary minus", strings.Repeat("-", n) + "1", false},
		{"unary not", strings.Repeat("!", n) + "true", false},
		{"conditionals", strings.Repeat("true ? 1 : ", n) + "2", false},
		{"binary operators", "1" + strings.Repeat(" + 1", n), false},
		{"indexes", "a" + strings.Repeat("[b]", n), false},
		{"function calls", strings.Repeat("f(", n) + strings.Repeat(")", n), false},
		{"if directives", strings.Repeat("%{ if true }", n) + strings.Repeat("%{ endif }", n), true},
		{"splats", "a" + strings.Repeat("[*]", n), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			start := hcl.Pos{Line: 3, Column: 7, Byte: 40}
			diags := Check([]byte(c.src), c.template, "main.tf.json", start)
			if !diags.HasErrors() {
				t.Fatalf("a %d-level tree was accepted", n)
			}
			d := diags[0]
			if d.Summary != Summary || d.Subject == nil || d.Subject.Filename != "main.tf.json" || d.Subject.Start.Line != 3 || d.Subject.Start.Column <= 7 {
				t.Fatalf("diagnostic %q at %v, want %q at a column of line 3 past 7", d.Summary, d.Subject, Summary)
			}
			if !strings.Contains(d.Detail, "256") {
				t.Errorf("detail %q does not name the limit", d.Detail)
			}
			var x hcl.Expression
			if c.template {
				x, diags = ParseTemplate([]byte(c.src), "main.tf.json", start)
			} else {
				x, diags = ParseExpression([]byte(c.src), "main.tf.json", start)
			}
			if x != nil || !diags.HasErrors() || diags[0].Summary != Summary {
				t.Fatalf("Parse returned %v, %v; want nil and the nesting diagnostic", x, diags)
			}
		})
	}
}

// TestCheck_boundary: Max levels parse and evaluate; one more is refused.
func TestCheck_boundary(t *testing.T) {
	at := func(n int) string { return "${" + strings.Repeat("[", n-1) + "1" + strings.Repeat("]", n-1) + "}" }
	x, diags := ParseTemplate([]byte(at(Max)), "t", hcl.InitialPos)
	if diags.HasErrors() {
		t.Fatalf("%d levels refused: %v", Max, diags)
	}
	if v, diags := x.Value(nil); diags.HasErrors() || !v.Type().IsTupleType() {
		t.Fatalf("%d levels evaluated to %#v, %v", Max, v, diags)
	}
	if diags := Check([]byte(at(Max+1)), true, "t", hcl.InitialPos); !diags.HasErrors() {
		t.Fatalf("%d levels accepted", Max+1)
	}
}

// TestCheck_acceptsConfigurationExpressions: expressions as configurations write them,
// flat or long, parse and evaluate as hclsyntax alone does.
func TestCheck_acceptsConfigurationExpressions(t *testing.T) {
	ctx := &hcl.EvalContext{Functions: map[string]function.Function{"upper": stdlib.UpperFunc}, Variables: map[string]cty.Value{
		"var": cty.ObjectVal(map[string]cty.Value{"n": cty.NumberIntVal(3), "names": cty.ListVal([]cty.Value{cty.StringVal("a"), cty.StringVal("b")})}),
	}}
	for _, c := range []struct {
		src      string
		template bool
		want     cty.Value
	}{
		{"${var.n * 2 + 1}", true, cty.NumberIntVal(7)},
		{`%{ for n in var.names }%{ if n != "b" }${upper(n)}%{ else }-%{ endif }%{ endfor }`, true, cty.StringVal("A-")},
		{strings.Repeat("${var.n}-", 5000), true, cty.StringVal(strings.Repeat("3-", 5000))},
		{`[for i, n in var.names : "${i}:${n}" if !(i > 5)]`, false, cty.TupleVal([]cty.Value{cty.StringVal("0:a"), cty.StringVal("1:b")})},
		{`var.n > 2 ? (var.n < 10 ? "mid" : "high") : "low"`, false, cty.StringVal("mid")},
		{"{ a = [1, [2, [3]]], b = var.names[0] }", false, cty.ObjectVal(map[string]cty.Value{
			"a": cty.TupleVal([]cty.Value{cty.NumberIntVal(1), cty.TupleVal([]cty.Value{cty.NumberIntVal(2), cty.TupleVal([]cty.Value{cty.NumberIntVal(3)})})}),
			"b": cty.StringVal("a")})},
	} {
		var x hcl.Expression
		var diags hcl.Diagnostics
		if c.template {
			x, diags = ParseTemplate([]byte(c.src), "t", hcl.InitialPos)
		} else {
			x, diags = ParseExpression([]byte(c.src), "t", hcl.InitialPos)
		}
		if diags.HasErrors() {
			t.Fatalf("%.60q refused: %v", c.src, diags)
		}
		v, diags := x.Value(ctx)
		if diags.HasErrors() || !v.RawEquals(c.want) {
			t.Errorf("%.60q = %#v, %v; want %#v", c.src, v, diags, c.want)
		}
	}
}

func TestCountSequences(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		doc  string
		want int
	}{
		{``, 0}, {`"${a}"`, 1}, {`"%{ if a }x%{ endif }${b}$${c}"`, 4}, {`"$ {a} % {b} ${"`, 1}, {`"{$}{%}"`, 0},
	} {
		if got := CountSequences([]byte(tt.doc)); got != tt.want {
			t.Errorf("CountSequences(%q) = %d, want %d", tt.doc, got, tt.want)
		}
	}
	at := []byte(strings.Repeat("${1}", MaxSequences))
	if err := SequencesError(at); err != nil {
		t.Errorf("at the limit: %v", err)
	}
	over := append(at, "%{"...)
	if err := SequencesError(over); err == nil || !strings.Contains(err.Error(), "more than 100000 template sequences") {
		t.Errorf("over the limit: %v", err)
	}
	if n := CountSequences([]byte(strings.Repeat("${", 10*MaxSequences))); n != MaxSequences+1 {
		t.Errorf("counted %d, want to stop at %d", n, MaxSequences+1)
	}
}

// TestTypeExpressionProblem: a type constraint holds type names, constructors and literal
// defaults; anything an engine would evaluate in it (hcl evaluates optional()'s defaults
// outside every evaluation limit) is named.
func TestTypeExpressionProblem(t *testing.T) {
	t.Parallel()
	const withDefault = "optional() with a default"
	for _, tt := range []struct{ src, want string }{
		{`string`, ""},
		{`list(object({a = optional(number), b = optional(list(string)), c = string}))`, ""},
		{`map(tuple([bool, object({})]))`, ""},
		{`object({a = optional(number, -1)})`, withDefault},
		{`list(object({a = optional(any, [for v in [1, 2] : [for w in [1, 2] : 0]])}))`, withDefault},
		{`object({a = optional(list(object({})), [{}, {}])})`, withDefault},
		{`object({a = [1, 2][*]})`, "Splat"},
		{`object({a = true ? number : string})`, "ConditionalExpr"},
		{`object({a = upper("x")})`, "upper(...) is not a type constructor"},
		{`object({a = "${1}"})`, "TemplateWrapExpr"},
		{`object({a = "a${1}"})`, "a string with an interpolation"},
		{`object({a = -local.x})`, "an operator on something other than a number"},
		{`object({` + strings.Repeat("a = string, ", MaxTypeParts) + `})`, "more than 256 parts"},
	} {
		checkProblem(t, "TypeExpressionProblem", TypeExpressionProblem, tt.src, tt.want)
	}
}

// TestTypeExpressionProblemDefaults: as an engine reads a configuration, literal optional()
// defaults are allowed, but not an object inside a default's collection or object (nested
// defaults multiply) nor anything an engine would evaluate.
func TestTypeExpressionProblemDefaults(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ src, want string }{
		{`object({size = optional(number, 2), tags = optional(map(string), {}), names = optional(list(string), ["a"])})`, ""},
		{`object({a = optional(object({b = optional(string, "x")}), {})})`, ""},
		{`object({a = optional(list(object({})), [{}, {}])})`, "holds an object inside a collection"},
		{`object({a = optional(map(object({})), {x = {}})})`, "holds an object inside a collection"},
		{`object({a = optional(any, [for v in [1] : v])})`, "ForExpr"},
	} {
		checkProblem(t, "TypeExpressionProblemDefaults", TypeExpressionProblemDefaults, tt.src, tt.want)
	}
}

func TestReferenceProblem(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ src, want string }{
		{`terraform_data.a`, ""}, {`terraform_data.v[each.key]`, ""}, {`terraform_data.a[0].output`, ""},
		{`[for a in terraform_data.b.input : a]`, "ForExpr"}, {`terraform_data.a[*].id`, "Splat"},
		{`upper(terraform_data.a.id)`, "FunctionCallExpr"},
	} {
		checkProblem(t, "ReferenceProblem", ReferenceProblem, tt.src, tt.want)
	}
}

// checkProblem parses src and checks what problem reports of it: none when want is "", else a
// text containing want.
func checkProblem(t *testing.T, name string, problem func(hclsyntax.Expression) string, src, want string) {
	t.Helper()
	e, diags := ParseExpression([]byte(src), "expr", hcl.InitialPos)
	if diags.HasErrors() {
		t.Fatalf("%s: %v", src, diags)
	}
	if got := problem(e); (want == "") != (got == "") || !strings.Contains(got, want) {
		t.Errorf("%s(%s) = %q, want %q", name, src, got, want)
	}
}
