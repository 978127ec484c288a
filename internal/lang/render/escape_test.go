package render

import (
	"encoding/json"
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
	v, diags := expr.Value(&hcl.EvalContext{Functions: map[string]function.Function{"file": file}})
	if diags.HasErrors() {
		t.Fatalf("evaluate template %q: %s", s, diags)
	}
	return v.AsString()
}

// TestSynthesize_bindingsAreData is the attack of docs/security.md "Rendering": a binding (scalar,
// list element, record field, secret or not) holding ${file(...)} or a %{ directive reaches the
// rendered JSON escaped, so a template evaluation yields the literal text and never calls the
// function. The author's own template in the source stays an expression.
func TestSynthesize_bindingsAreData(t *testing.T) {
	const attack = `${file("/etc/hostname")}`
	const directive = `%{ if true }x%{ endif }`
	src := `(deflava-architecture data
  :inputs ((:v "") (:s "") (:d "") (:l ()) (:recs ()) (:a "") (:b ""))
  :resources ((terraform-data "scalar" :input "pre-{v}-post")
              (terraform-data "joined" :input "{a}{b}")
              (terraform-data "secret" :input "{s}")
              (terraform-data "directive" :input "{d}")
              (terraform-data "list" :input "{l}")
              (for-each ((i r) (enumerate recs))
                (terraform-data "rec-{r_name}" :input "{r_value}"))
              (terraform-data "author" :input "${terraform_data.scalar.id}")))
`
	b := tlisp.Bindings{
		// a and b are harmless alone and form a template sequence side by side (the attack trial
		// applied "${path.cwd}" this way).
		Scalars: map[string]string{"v": attack, "s": attack, "d": directive, "a": "$", "b": "{path.cwd}"},
		Lists:   map[string][]string{"l": {attack, "$${kept}"}},
		Records: map[string][]map[string]string{"recs": {{"name": "one", "value": attack}}},
	}
	out, ds := Synthesize(Input{SourceKind: SourceInline, SourceText: []byte(src), File: "data.tlisp",
		Bindings: b, SecretKeys: []string{"s"}, BindingsKey: make([]byte, 32)})
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
		"scalar":    "pre-" + attack + "-post",
		"secret":    attack,
		"directive": directive,
		"rec-one":   attack,
		"joined":    "${path.cwd}",
	} {
		if got := evalTemplate(t, str(name)); got != want {
			t.Errorf("%s evaluates to %q, want the literal binding %q (rendered %q)", name, got, want, str(name))
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
