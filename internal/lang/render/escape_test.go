package render

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"

	"github.com/lava-operator/lava/internal/lang/tlisp"
)

// evalTemplate evaluates s as a Terraform JSON string value is evaluated (an HCL native
// template), with a file function that returns "FILE-CONTENT": a template that calls file()
// yields that text, an escaped one its literal characters.
func evalTemplate(t *testing.T, s string) string {
	t.Helper()
	v, _ := evalMarked(t, s)
	return v
}

// evalMarked evaluates s as evalTemplate does, with OpenTofu's sensitive() (a function that
// marks its argument), and reports whether the result carries the mark.
func evalMarked(t *testing.T, s string) (string, bool) {
	t.Helper()
	expr, diags := hclsyntax.ParseTemplate([]byte(s), "attr", hcl.InitialPos)
	if diags.HasErrors() {
		t.Fatalf("parse template %q: %s", s, diags)
	}
	file := function.New(&function.Spec{
		Params: []function.Parameter{{Name: "path", Type: cty.String}},
		Type:   function.StaticReturnType(cty.String),
		Impl: func([]cty.Value, cty.Type) (cty.Value, error) {
			return cty.StringVal("FILE-CONTENT"), nil
		},
	})
	sensitive := function.New(&function.Spec{
		Params: []function.Parameter{{Name: "value", Type: cty.DynamicPseudoType, AllowMarked: true}},
		Type:   func(args []cty.Value) (cty.Type, error) { return args[0].Type(), nil },
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			return args[0].Mark("sensitive"), nil
		},
	})
	v, diags := expr.Value(&hcl.EvalContext{Functions: map[string]function.Function{"file": file, "sensitive": sensitive}})
	if diags.HasErrors() {
		t.Fatalf("evaluate template %q: %s", s, diags)
	}
	v, marks := v.Unmark()
	return v.AsString(), len(marks) > 0
}

// TestSynthesize_bindingsAreData is the attack of docs/security.md "Rendering": a binding (scalar,
// list element, record field, secret or not) holding ${file(...)} or a %{ directive reaches the
// rendered JSON escaped, so a template evaluation yields the literal text and never calls the
// function. The author's own template in the source stays an expression.
func TestSynthesize_bindingsAreData(t *testing.T) {
	const attack = `${file("/etc/hostname")}`
	const breakout = "\")}${file(\"/etc/hostname\")}${(\"\\\n%{ if true }x%{ endif }$"
	const directive = `%{ if true }x%{ endif }`
	src := `(deflava-architecture data
  :inputs ((:v "") (:s "") (:d "") (:l ()) (:recs ()) (:a "") (:b "") (:q "") (:c "") (:t "") (:dollar "$"))
  :resources ((terraform-data "scalar" :input "pre-{v}-post")
              (terraform-data "joined" :input "{a}{b}")
              (terraform-data "default-joined" :input "{dollar}{b}")
              (terraform-data "dollar" :input "$${c}")
              (terraform-data "percent" :input "%%{c} and $${c}")
              (terraform-data "dollar-secret" :input "$${t}")
              (terraform-data "secret" :input "{s}")
              (terraform-data "directive" :input "{d}")
              (terraform-data "breakout" :input "<{q}>")
              (terraform-data "list" :input "{l}")
              (for-each ((i r) (enumerate recs))
                (terraform-data "rec-{r_name}" :input "{r_value}"))
              (terraform-data "author" :input "${terraform_data.scalar.id}")))
`
	b := tlisp.Bindings{
		// a and b are harmless alone and form a template sequence side by side ("${path.cwd}",
		// which must stay literal).
		// q is a Secret whose value tries to close the quoted literal of sensitive("...").
		// c starts with "{" after a run of "$" or "%" in the source's text, and b after the
		// default "$" of another input; t is a Secret after "$$", which must not turn its
		// sensitive("...") into the literal text "${sensitive(...)}", unmarked. "${c}" itself is
		// refused: TestSynthesize_valueInsideASequence.
		Scalars: map[string]string{"v": attack, "s": attack, "d": directive, "a": "$", "b": "{path.cwd}", "q": breakout,
			"c": "{path.cwd}", "t": "hunter2"},
		Lists:   map[string][]string{"l": {attack, "$${kept}"}},
		Records: map[string][]map[string]string{"recs": {{"name": "one", "value": attack}}},
	}
	out, ds := Synthesize(Input{SourceKind: SourceInline, SourceText: []byte(src), File: "data.tlisp",
		Bindings: b, SecretKeys: []string{"s", "q", "t"}, BindingsKey: make([]byte, 32)})
	if out == nil {
		t.Fatalf("synthesize: %v", errorsOf(ds))
	}
	var doc struct {
		Resource struct {
			TerraformData map[string]struct {
				Input json.RawMessage `json:"input"`
			} `json:"terraform_data"`
		} `json:"resource"`
	}
	if err := json.Unmarshal(out.JSON, &doc); err != nil {
		t.Fatal(err)
	}
	str := func(name string) string {
		t.Helper()
		var s string
		if err := json.Unmarshal(doc.Resource.TerraformData[name].Input, &s); err != nil {
			t.Fatalf("%s: %v (%s)", name, err, doc.Resource.TerraformData[name].Input)
		}
		return s
	}
	for name, want := range map[string]string{
		"scalar":         "pre-" + attack + "-post",
		"secret":         attack,
		"breakout":       "<" + breakout + ">",
		"directive":      directive,
		"rec-one":        attack,
		"joined":         "${path.cwd}",
		"default-joined": "${path.cwd}",
		"dollar":         "$${path.cwd}",
		"percent":        "%%{path.cwd} and $${path.cwd}",
		"dollar-secret":  "$$hunter2",
	} {
		got, marked := evalMarked(t, str(name))
		if got != want {
			t.Errorf("%s evaluates to %q, want the literal binding %q (rendered %q)", name, got, want, str(name))
		}
		// A Secret's value reaches the engine marked sensitive, so what a source derives from
		// it is too; nothing else is marked.
		if isSecret := name == "secret" || name == "breakout" || name == "dollar-secret"; marked != isSecret {
			t.Errorf("%s: sensitive mark %v, want %v (rendered %q)", name, marked, isSecret, str(name))
		}
	}
	var list []string
	if err := json.Unmarshal(doc.Resource.TerraformData["list"].Input, &list); err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || evalTemplate(t, list[0]) != attack || evalTemplate(t, list[1]) != "$${kept}" {
		t.Errorf("list elements %q do not evaluate to the literal bindings", list)
	}
	if got := str("author"); got != "${terraform_data.scalar.id}" {
		t.Errorf("the source's own template became %q, want it unescaped", got)
	}
	// The bindingsDigest is over the values as given, not the escaped ones.
	plain, _ := Synthesize(Input{SourceKind: SourceInline, SourceText: []byte(src), File: "data.tlisp",
		Bindings: b, SecretKeys: []string{"s"}, BindingsKey: make([]byte, 32)})
	want, err := BindingsDigest(b, map[string]bool{"s": true}, make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	if plain.Record.BindingsDigest != want {
		t.Errorf("bindingsDigest %s, want the digest of the given values %s", plain.Record.BindingsDigest, want)
	}
}

func TestEscapeTemplate(t *testing.T) {
	for in, want := range map[string]string{
		"":                     "",
		"plain $ and %":        `plain $ and ${"%"}`,
		"plain $ and % inside": "plain $ and % inside",
		"${x}":                 "$${x}",
		"$${x}":                "$$${x}",
		"%{ if x }":            "%%{ if x }",
		"a${b}%{c}${":          "a$${b}%%{c}$${",
		"{name}":               "{name}",
		"$":                    `${"$"}`,
		"100%":                 `100${"%"}`,
		"a$$%":                 `a${"$$%"}`,
		"x${":                  "x$${",
		"${$":                  `$${${"$"}`,
	} {
		if got := EscapeTemplate(in); got != want {
			t.Errorf("EscapeTemplate(%q) = %q, want %q", in, got, want)
		}
		// What an HCL template evaluation of the escaped text yields is the input.
		if got := evalTemplate(t, EscapeTemplate(in)); got != in {
			t.Errorf("template of EscapeTemplate(%q) evaluates to %q", in, got)
		}
	}
}

// TestTemplateSequences: the ranges of a string that hcl's template lexer reads as a template
// sequence, so the dialect can refuse a value interpolated there.
func TestTemplateSequences(t *testing.T) {
	for s, want := range map[string][][2]int{
		"plain {x} text":                    nil,
		"$${not} and %%{ nor }":             nil,
		"a ${b} c":                          {{2, 6}},
		`${lookup({a=1}, "{key}", 0)} tail`: {{0, 28}},
		`%{ if x }{y}%{ endif }`:            {{0, 9}, {12, 22}},
		`${"${inner}"}{z}`:                  {{0, 13}},
		"open ${ {x}":                       {{5, 11}},
	} {
		if got := TemplateSequences(s); !slices.Equal(got, want) {
			t.Errorf("TemplateSequences(%q) = %v, want %v", s, got, want)
		}
	}
}

// TestSynthesize_valueInsideASequence: a "{NAME}" inside the source's own "${...}" or "%{...}" is
// refused at its line:col, whatever its value: there a binding's quote would end the source's
// HCL string and the rest be evaluated (path.cwd, through "${lookup({a=1}, \"{key}\", 0)}"), and
// a "$" before "{NAME}" would make the value an
// expression.
func TestSynthesize_valueInsideASequence(t *testing.T) {
	for name, attr := range map[string]string{
		"quoted string in an expression": `"${lookup({a=1}, \"{key}\", 0)}"`,
		"the whole interpolation":        `"${key}"`,
		"a directive":                    `"%{key}"`,
	} {
		t.Run(name, func(t *testing.T) {
			src := "(deflava-architecture seq\n  :inputs ((:key \"\"))\n  :resources ((terraform-data \"t\" :input " + attr + ")))\n"
			out, ds := Synthesize(Input{SourceKind: SourceInline, SourceText: []byte(src), File: "seq.tlisp",
				Bindings: tlisp.Bindings{Scalars: map[string]string{"key": `a", 0) == 1 ? path.cwd : lookup({a=1}, "a`}}})
			if out != nil {
				t.Fatalf("synthesized %s", out.JSON)
			}
			msg := strings.Join(errorsOf(ds), "\n")
			if !strings.Contains(msg, "seq.tlisp:3:") || !strings.Contains(msg, "{key} is inside a Terraform template sequence") {
				t.Errorf("diagnostics %q, want seq.tlisp:3:COL and {key} is inside a Terraform template sequence", msg)
			}
		})
	}
}
