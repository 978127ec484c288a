package embedded

import (
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	hcljson "github.com/hashicorp/hcl/v2/json"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"
	ctyjson "github.com/zclconf/go-cty/cty/json"
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

// TestSchemaDecodeState: DecodeState gives what go-cty's JSON decoding gives, fails on
// attributes of another type, keeps each distinct document once, does not keep one over
// maxCachedState bytes, and empties itself rather than grow past maxStateCache bytes.
func TestSchemaDecodeState(t *testing.T) {
	t.Parallel()
	s := &Schema{Block: &Block{Attributes: map[string]*Attribute{
		"id":      {Type: cty.String, Computed: true},
		"content": {Type: cty.String, Optional: true},
	}}}
	doc := func(content string) []byte {
		return []byte(fmt.Sprintf(`{"id":"x","content":%q}`, content))
	}
	for range 2 {
		v, err := s.DecodeState(doc("hello"))
		if err != nil {
			t.Fatal(err)
		}
		want := cty.ObjectVal(map[string]cty.Value{"id": cty.StringVal("x"), "content": cty.StringVal("hello")})
		if !v.RawEquals(want) {
			t.Fatalf("decoded %#v, want %#v", v, want)
		}
	}
	if n := s.states.Len(); n != 1 {
		t.Errorf("cache holds %d documents after decoding one twice, want 1", n)
	}
	if _, err := s.DecodeState([]byte(`{"id":"x","content":"a","extra":1}`)); err == nil {
		t.Error("attributes the schema lacks decoded without an error")
	}
	big := strings.Repeat("b", maxCachedState)
	if _, err := s.DecodeState(doc(big)); err != nil {
		t.Fatal(err)
	}
	if n := s.states.Len(); n != 1 {
		t.Errorf("cache holds %d documents after one over maxCachedState, want 1", n)
	}
	filler := func(i int) []byte { return doc(fmt.Sprintf("%04d %s", i, strings.Repeat("c", maxCachedState/2))) }
	for i := 0; s.states.Bytes()+len(filler(i)) <= maxStateCache; i++ {
		if _, err := s.DecodeState(filler(i)); err != nil {
			t.Fatal(err)
		}
	}
	if s.states.Bytes() > maxStateCache {
		t.Errorf("cache grew to %d bytes, bound %d", s.states.Bytes(), maxStateCache)
	}
	before := s.states.Len()
	if _, err := s.DecodeState(doc("after " + strings.Repeat("d", maxCachedState/2))); err != nil {
		t.Fatal(err)
	}
	if n := s.states.Len(); n != 1 || n >= before {
		t.Errorf("a full cache took one more document without emptying itself: %d documents (before %d)", n, before)
	}
	if s.states.Bytes() > maxStateCache {
		t.Errorf("cache grew to %d bytes, bound %d", s.states.Bytes(), maxStateCache)
	}
}

// TestTemplateOf_sameSourceNewExpression: hcl/v2/json returns a new expression for the same
// source on every Body.Content call; the template parsed for the first is used for the second
// (the cache is keyed by the string and its position, not by the expression's identity), and
// the same string at another position gets its own template (its diagnostics point there).
func TestTemplateOf_sameSourceNewExpression(t *testing.T) {
	t.Parallel()
	doc := "{\n  \"x\": \"cached ${var.name} by source\",\n  \"y\": \"cached ${var.name} by source\"\n}"
	f, diags := hcljson.Parse([]byte(doc), "same-source.tf.json")
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	schema := &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "x"}, {Name: "y"}}}
	first, diags := f.Body.Content(schema)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	second, diags := f.Body.Content(schema)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	x1, x2 := first.Attributes["x"].Expr, second.Attributes["x"].Expr
	if x1 == x2 {
		t.Fatal("hcl/v2/json returned the same expression twice: the test exercises nothing")
	}
	t1, t2 := templateOf(x1), templateOf(x2)
	if t1 == noTemplate || t1 != t2 {
		t.Errorf("templates %p and %p for one source, want the same parsed template", t1, t2)
	}
	ty := templateOf(first.Attributes["y"].Expr)
	if ty == t1 {
		t.Error("the same string at another position got the first one's template")
	}
	if ty.Range().Start.Line != 3 || t1.Range().Start.Line != 2 {
		t.Errorf("template ranges %v and %v, want lines 2 and 3", t1.Range(), ty.Range())
	}
}

// TestSchemaKeepState: the value the applier keeps for the attributes it writes is the value
// DecodeState would decode from them, for every kind of attribute and nested block; a value
// that would decode otherwise (a typed null in a dynamically typed attribute, a number of
// another precision than decoding gives) is not kept, though DecodeState still remembers what
// it decodes.
func TestSchemaKeepState(t *testing.T) {
	t.Parallel()
	// keep writes v as the applier does (its attributes JSON, then keepState) and returns the JSON.
	keep := func(s *Schema, v cty.Value) []byte {
		t.Helper()
		attrs, err := marshalAttributes(v, s.Type())
		if err != nil {
			t.Fatal(err)
		}
		s.keepState(attrs, v)
		return attrs
	}
	s := &Schema{Block: &Block{
		Attributes: map[string]*Attribute{
			"id":    {Type: cty.String, Computed: true},
			"n":     {Type: cty.Number, Optional: true},
			"flag":  {Type: cty.Bool, Optional: true},
			"tags":  {Type: cty.Map(cty.String), Optional: true},
			"ports": {Type: cty.List(cty.Number), Optional: true},
			"names": {Type: cty.Set(cty.String), Optional: true},
			"pair":  {Type: cty.Tuple([]cty.Type{cty.String, cty.Number}), Optional: true},
			"none":  {Type: cty.String, Optional: true},
		},
		BlockTypes: map[string]*NestedBlock{
			"rule": {Nesting: NestingList, Block: Block{Attributes: map[string]*Attribute{"to": {Type: cty.String, Optional: true}}}},
		},
	}}
	v := cty.ObjectVal(map[string]cty.Value{
		"id":    cty.StringVal("x"),
		"n":     cty.MustParseNumberVal("0.1"),
		"flag":  cty.True,
		"tags":  cty.MapVal(map[string]cty.Value{"a": cty.StringVal("b")}),
		"ports": cty.ListVal([]cty.Value{cty.MustParseNumberVal("80"), cty.MustParseNumberVal("443")}),
		"names": cty.SetVal([]cty.Value{cty.StringVal("q"), cty.StringVal("p")}),
		"pair":  cty.TupleVal([]cty.Value{cty.StringVal("s"), cty.MustParseNumberVal("1")}),
		"none":  cty.NullVal(cty.String),
		"rule":  cty.ListVal([]cty.Value{cty.ObjectVal(map[string]cty.Value{"to": cty.StringVal("y")})}),
	})
	attrs := keep(s, v)
	if n := s.states.Len(); n != 1 {
		t.Fatalf("cache holds %d documents after keeping one, want 1", n)
	}
	decoded, err := ctyjson.Unmarshal(attrs, s.Type())
	if err != nil {
		t.Fatal(err)
	}
	kept, err := s.DecodeState(attrs)
	if err != nil {
		t.Fatal(err)
	}
	if !kept.RawEquals(decoded) {
		t.Errorf("kept %#v, decoding gives %#v", kept, decoded)
	}

	// A number as a provider sends it over msgpack (a float64, 53 bits of precision) encodes to
	// the same text as the decoded number (512 bits) but computes differently: not kept.
	floaty := &Schema{Block: &Block{Attributes: map[string]*Attribute{"n": {Type: cty.Number, Optional: true}}}}
	fv := cty.ObjectVal(map[string]cty.Value{"n": cty.NumberFloatVal(0.1)})
	keep(floaty, fv)
	if n := floaty.states.Len(); n != 0 {
		t.Errorf("a value with a float64 number was kept (%d documents)", n)
	}

	// A dynamically typed attribute (terraform_data's input and output) holding a value is
	// written with its type and decodes as it was: kept. A typed null there decodes as a null
	// of the dynamic pseudo-type: not kept.
	dyn := &Schema{Block: &Block{Attributes: map[string]*Attribute{
		"id":     {Type: cty.String, Computed: true},
		"output": {Type: cty.DynamicPseudoType, Computed: true},
		"input":  {Type: cty.DynamicPseudoType, Optional: true},
	}}}
	for _, out := range []cty.Value{
		cty.StringVal("z"),
		cty.ObjectVal(map[string]cty.Value{"a": cty.ListVal([]cty.Value{cty.StringVal("b")}), "n": cty.NullVal(cty.DynamicPseudoType)}),
		cty.TupleVal([]cty.Value{cty.True, cty.MustParseNumberVal("2")}),
	} {
		dv := cty.ObjectVal(map[string]cty.Value{"id": cty.StringVal("i"), "output": out, "input": cty.NullVal(cty.DynamicPseudoType)})
		before := dyn.states.Len()
		dattrs := keep(dyn, dv)
		if dyn.states.Len() != before+1 {
			t.Errorf("output %#v: not kept", out)
			continue
		}
		want, err := ctyjson.Unmarshal(dattrs, dyn.Type())
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := dyn.DecodeState(dattrs); !got.RawEquals(want) {
			t.Errorf("output %#v: kept %#v, decoding gives %#v", out, got, want)
		}
	}
	dv := cty.ObjectVal(map[string]cty.Value{"id": cty.StringVal("j"), "output": cty.NullVal(cty.String), "input": cty.NullVal(cty.DynamicPseudoType)})
	before := dyn.states.Len()
	dattrs := keep(dyn, dv)
	if n := dyn.states.Len(); n != before {
		t.Errorf("a typed null in a dynamically typed attribute was kept (%d documents, %d before)", n, before)
	}
	// Decoding such a document is still remembered.
	if _, err := dyn.DecodeState(dattrs); err != nil {
		t.Fatal(err)
	}
	if n := dyn.states.Len(); n != before+1 {
		t.Errorf("cache holds %d documents after decoding one more, want %d", n, before+1)
	}
}
