package embedded

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lava-operator/lava/internal/platform/testutil/proctest"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"

	"github.com/lava-operator/lava/internal/engine"
	"github.com/lava-operator/lava/internal/lang/hclnest"
)

// yamlBomb is a "billion laughs" document: nine levels of nine aliases of the level below,
// 9^9 strings once expanded, a few hundred bytes as written.
// yamlChain is a YAML mapping whose entry cN is a one-element sequence of c(N-1): each anchor
// one level deeper than the one it names, n levels with n short lines.
func yamlChain(n int) string {
	var b strings.Builder
	b.WriteString("c0: &c0 x\n")
	for i := 1; i < n; i++ {
		fmt.Fprintf(&b, "c%d: &c%d [*c%d]\n", i, i, i-1)
	}
	return b.String()
}

func yamlBomb() string {
	var b strings.Builder
	b.WriteString(`{l0: &l0 lol`)
	for i := 1; i <= 9; i++ {
		fmt.Fprintf(&b, `, l%d: &l%d [`, i, i)
		for j := range 9 {
			if j > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, "*l%d", i-1)
		}
		b.WriteString("]")
	}
	b.WriteString("}")
	return b.String()
}

// outputDoc is a configuration whose output "o" is expr, with the given locals.
func outputDoc(t *testing.T, expr string, locals map[string]string) string {
	t.Helper()
	doc := map[string]any{"output": map[string]any{"o": map[string]any{"value": "${" + expr + "}"}}}
	if len(locals) > 0 {
		doc["locals"] = locals
	}
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// mixedTuple is a local holding a tuple of 100,001 elements, numbers and strings in turn.
// hugePEM is an RSA PRIVATE KEY block of 40,000 bytes, the size of a key of about 71,000 bits
// (its content is no key: it is refused before it is parsed).
var hugePEM = string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: bytes.Repeat([]byte{0x30}, 40000)}))

// gzipBomb is base64 of a gzip stream of 16 MiB less 16 bytes of 0xff (not UTF-8), about 22 KB.
func gzipBomb(t *testing.T) string {
	t.Helper()
	var buf bytes.Buffer
	w, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(bytes.Repeat([]byte{0xff}, 16<<20-16)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(buf.Bytes())
}

const mixedTuple = `${jsondecode("[${replace(format("%050000d", 0), "0", "1,\"a\",")}0]")}`

// TestEvaluationLimits_attacks: expressions that, evaluated as OpenTofu evaluates them, ask
// the process for gigabytes of memory or days of one CPU (setproduct of three range(1024), a
// YAML alias bomb through jsonencode(yamldecode(...)), indent(1e9, ...), bcrypt at cost 31,
// and their kin: widths, separators, replacements, nested for expressions, a value repeated
// through locals, a template doubling) fail the plan quickly with an error that names the
// function, the limit and the position, and match engine.ErrEvaluationLimit. try() does not
// hide a refusal.
func TestEvaluationLimits_attacks(t *testing.T) {
	t.Parallel()
	big := func(n int) string { return fmt.Sprintf(`format("%%%ds", "")`, n) }
	tests := []struct {
		name, expr string
		locals     map[string]string
		want       string
	}{
		{"setproduct", `setproduct(range(1024), range(1024), range(1024))`, nil,
			"setproduct: the result would have 4294967296 elements, more than 262144, the limit of one value"},
		{"yaml alias bomb", `jsonencode(yamldecode(` + jsonQuote(yamlBomb()) + `))`, nil,
			"yamldecode: the result would have "},
		{"indent", `indent(1e9, "x")`, nil, "indent: the result would have 1000000001 bytes of text, more than 16777216, the limit of one value"},
		{"negative indent", `indent(-1, "a\nb")`, nil, "indent: the number of spaces must not be negative"},
		{"bcrypt cost 31", `bcrypt("x", 31)`, nil, "bcrypt: cost 31 is above the highest cost accepted, 12"},
		{"format width", `format("%1000000000d", 1)`, nil, "format: the result would have "},
		{"format precision", `format("%.999999999f", 1)`, nil, "format: the result would have "},
		{"formatlist", `formatlist("%20000s", range(1024))`, nil, "formatlist: the result would have "},
		{"join separator", `join(local.sep, [for i in range(1024) : tostring(i)])`, map[string]string{"sep": "${" + big(1<<20) + "}"},
			"join: the result would have "},
		{"replace every position", `replace(local.s, "", local.s)`, map[string]string{"s": "${" + big(1<<16) + "}"},
			"replace: the result would have "},
		{"nested for", `[for a in range(1024) : [for b in range(1024) : [for c in range(1024) : c]]]`, nil,
			"this plan or apply would build or visit more than 1048576 elements"},
		{"shared value repeated", `jsonencode(local.l2)`, map[string]string{
			"l1": "${[for i in range(128) : range(128)]}",
			"l2": "${[for i in range(32) : local.l1]}"},
			"for expression: the value has more than 262144 elements, the limit of one value"},
		{"tuple of a shared value", "jsonencode([" + strings.Repeat("local.l1, ", 64) + "])",
			map[string]string{"l1": "${[for i in range(128) : range(128)]}"},
			"argument of jsonencode: the value has more than 262144 elements, the limit of one value"},
		{"template doubling", `local.s3`, map[string]string{
			"s0": "${" + big(4<<20) + "}", "s1": "${local.s0}${local.s0}", "s2": "${local.s1}${local.s1}",
			"s3": "${local.s2}${local.s2}"},
			"template: the value has more than 16777216 bytes of text, the limit of one value"},
		{"try hides nothing", `try(setproduct(range(1024), range(1024), range(1024)), "fallback")`, nil,
			"setproduct: the result would have 4294967296 elements"},
		{"templatestring", `templatestring("$${setproduct(range(1024), range(1024), range(1024))}", {})`, nil,
			"setproduct: the result would have 4294967296 elements"},
		{"templatestring of many sequences", `length(templatestring(replace(format("%0200000d", 0), "0", "$${x}"), {x = "a"}))`, nil,
			"templatestring: the document holds more than 100000 template sequences"},
		{"huge number", `1e600000000`, nil, "expression: the value has more than 16777216 bytes of text, the limit of one value"},
		// Refused as the local's value, before any product is computed (once refused only as
		// an operand of arithmetic; before that, once built).
		{"huge number in a template", `"n=${local.a * local.a}"`, map[string]string{"a": "${1e10000000}"},
			"expression: the value holds a number of about 9999960 digits, more than 4096"},
		{"huge number written out", `tostring(local.a * local.a)`, map[string]string{"a": "${1e10000000}"},
			"expression: the value holds a number of about 9999960 digits, more than 4096"},
		// The operand check still holds where a number is no value of its own: a literal.
		{"huge literal in arithmetic", `tostring(1e10000000 * 2)`, nil,
			"operand: a number of about 10000000 digits in arithmetic, more than 4096"},
		// go-cty builds a type per level: 10,000 levels of JSON took 1.6 GB and 9 s; 400,000
		// YAML brackets, minutes that could not be interrupted.
		{"json nesting", `jsondecode("` + strings.Repeat("[", 9999) + strings.Repeat("]", 9999) + `")`, nil,
			"jsondecode: the document nests more than 256 levels deep, the limit of a decoded document"},
		{"json nesting in try", `try(jsondecode("` + strings.Repeat("[", 257) + strings.Repeat("]", 257) + `"), "e")`, nil,
			"jsondecode: the document nests more than 256 levels deep"},
		{"yaml nesting unclosed", `try(yamldecode(replace(format("%0400000d", 0), "0", "[")), "e")`, nil,
			"yamldecode: the document cannot be read, so its size cannot be bounded"},
		{"yaml nesting", `yamldecode("` + strings.Repeat("[", 257) + strings.Repeat("]", 257) + `")`, nil,
			"yamldecode: the document nests more than 256 levels deep"},
		{"yaml alias chain", `yamldecode(` + jsonQuote(yamlChain(300)) + `)`, nil,
			"yamldecode: the document nests more than 256 levels deep"},
		// Go's regexp takes time in the program's size times the input's: a 15,000-instruction
		// pattern built at run time over a megabyte took minutes that could not be interrupted.
		{"regexall pattern times input", `length(regexall(local.p, local.s))`,
			map[string]string{"p": `${replace(format("%05000d", 0), "0", "(?:a|b)")}`, "s": "${" + big(1<<20) + "}"},
			"regexall: matching a pattern of "},
		{"replace pattern times input", `replace(local.s, "/${local.p}/", "")`,
			map[string]string{"p": `${replace(format("%05000d", 0), "0", "(?:a|b)")}`, "s": "${" + big(1<<20) + "}"},
			"replace: matching a pattern of "},
		{"regex pattern times input", `can(regex(local.p, local.s))`,
			map[string]string{"p": `${replace(format("%05000d", 0), "0", "(?:a|b)")}`, "s": "${" + big(1<<20) + "}"},
			"regex: matching a pattern of "},
		{"regular expressions add up", `[for i in range(1000) : length(regexall("[ab]{1,10}x", local.s))]`,
			map[string]string{"s": "${" + big(1<<16) + "}"},
			"the limit of its regular expressions"},
		// go-cty unifies a tuple's element types comparing every pair, and math/big parses a
		// decimal number in the square of its digits: minutes of CPU no context interrupts,
		// in every applier handler.
		{"toset of mixed types", `length(toset(local.mixed))`, map[string]string{"mixed": mixedTuple},
			"toset: converting 100001 elements of different types compares every pair of them"},
		{"setunion of mixed types", `length(setunion(local.mixed, []))`, map[string]string{"mixed": mixedTuple},
			"setunion: converting 100001 elements of different types compares every pair of them"},
		// go-cty hashes a number in a set by its first 10 significant digits: 20,000
		// numbers 1e15+i share one bucket, each compared with every other (40 s).
		{"toset of numbers that hash alike", `length(toset(flatten([for i in range(50) : [for j in range(50) : 1e15 + i * 50 + j]])))`,
			nil, "toset: putting 2500 elements into a set compares 3123750 pairs of them that hash alike"},
		// The same digits through every other path that reads a string as a number.
		{"a long string as a list index", `[1, 2][local.s]`, map[string]string{"s": `1${format("%04000000d", 0)}`},
			"index: a string of 4000001 bytes converted to a number"},
		{"sum of a long string", `sum([1, local.s])`, map[string]string{"s": `1${format("%04000000d", 0)}`},
			"sum: a string of 4000001 bytes converted to a number"},
		{"jsondecode of a long number", `jsondecode(local.s)`, map[string]string{"s": `1${format("%04000000d", 0)}`},
			"jsondecode: a number of 4000001 characters, more than 4096"},
		{"yamldecode of a long number", `yamldecode(local.s)`, map[string]string{"s": `1${format("%01000000d", 0)}`},
			"yamldecode: a number of 1000001 characters, more than 4096"},
		{"modulo of a huge exponent", `[1e600000000 % 3, 1e600000000 % 3, 1e600000000 % 3]`, nil,
			"operand: a number of about 600000008 digits in arithmetic, more than 4096"},
		{"tonumber of a long string", `tonumber("1${format("%04000000d", 0)}")`, nil,
			"tonumber: a string of 4000001 bytes converted to a number, more than 4096"},
		{"parseint of a long string", `parseint("1${format("%04000000d", 0)}", 10)`, nil,
			"parseint: a string of 4000001 bytes converted to a number"},
		{"a long string in arithmetic", `"1${format("%04000000d", 0)}" + 0 > 1`, nil,
			"operand: a string of 4000001 bytes converted to a number"},
		{"a long string for a number parameter", `abs("1${format("%04000000d", 0)}")`, nil,
			"abs: a string of 4000001 bytes converted to a number"},
		{"a long string for a numeric verb", `format("%d", "1${format("%04000000d", 0)}")`, nil,
			"format: a string of 4000001 bytes converted to a number"},
		{"split", `split("", local.s)`, map[string]string{"s": "${" + big(1<<20) + "}"}, "split: the result would have 1048577 elements"},
		// A number of 3 million digits is built and would be stored: every later plan, scan
		// and destroy parsed it again from the state (30 s each, growing with the square).
		{"a number of millions of digits", `tonumber("1e3000000")`, nil,
			"tonumber: the value holds a number of about 2999960 digits, more than 4096"},
		// coalesce's type unifies its arguments' types pairwise: 60,001 of two types ran the
		// process out of memory.
		{"coalesce of many arguments", `coalesce(local.a...)`, map[string]string{
			"a": `${jsondecode("[${replace(format("%030000d", 0), "0", "1,\"a\",")}0]")}`},
			"coalesce: converting 60001 elements of different types compares every pair of them"},
		{"setproduct of a long tuple", `length(setproduct(local.a, ["x"]))`, map[string]string{
			"a": `${jsondecode("[${replace(format("%05000d", 0), "0", "1,\"a\",")}0]")}`},
			"setproduct: converting 10002 elements"},
		// A conditional unifies its results' types: go-cty sorted the 30,001 element types of
		// two tuples of different lengths pairwise (80 s and 14 GB allocated, not interrupted).
		{"conditional over a tuple of two types", `length(true ? local.a : [true])`, map[string]string{
			"a": `${jsondecode("[${replace(format("%015000d", 0), "0", "1,\"a\",")}0]")}`},
			"conditional: converting 30002 elements of different types compares every pair of them"},
		{"conditional nested in a tuple", `length(true ? [local.a] : [[true]])`, map[string]string{
			"a": `${jsondecode("[${replace(format("%015000d", 0), "0", "1,\"a\",")}0]")}`},
			"conditional: converting 30004 elements of different types"},
		// == walks both operands whole (and their marks): about 10 ms a comparison of two lists
		// of 100,000 elements, charged nothing.
		{"comparisons of long lists", `length([for i in range(64) : local.a == local.b])`, map[string]string{
			"a": `${split("", format("%100000s", ""))}`,
			"b": `${split("", format("%100000s", ""))}`},
			"this plan or apply would build or visit more than 1048576 elements"},
		// A private-key operation takes time in about the cube of the key's size and cannot be
		// interrupted: a fake PKCS #1 key of 65,536 bits ran for minutes per call, past the
		// plan timeout, again at every retry (an attack trial). Refused by its encoding's size
		// before it is parsed.
		{"rsadecrypt with a huge key", `rsadecrypt("AAAA", local.k)`, map[string]string{"k": hugePEM},
			"rsadecrypt: the key's encoding (40000 bytes) is that of a key of about 71111 bits, more than 8192"},
		// A gzip bomb whose 16 MiB are not UTF-8: each call failed inside try after
		// decompressing them, and was charged nothing (1,000 calls: 115 s of CPU from 22 KB).
		{"base64gunzip failing inside try", `length([for i in range(100) : try(base64gunzip(local.g), "z")])`, map[string]string{"g": gzipBomb(t)},
			"base64gunzip: this plan or apply would build or read more than 134217728 bytes of text"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newMemHarness(t, t.TempDir())
			start := time.Now()
			_, err := h.apply(t, outputDoc(t, tt.expr, tt.locals), nil)
			took := time.Since(start)
			if err == nil {
				t.Fatalf("%s was evaluated; want it refused", tt.expr)
			}
			msg := err.Error()
			if !strings.Contains(msg, tt.want) || !strings.Contains(msg, "Evaluation limit exceeded") ||
				!strings.Contains(msg, "main.tf.json:") {
				t.Errorf("error %q; want it to name the limit (%q) and the position", msg, tt.want)
			}
			if !errors.Is(err, engine.ErrEvaluationLimit) {
				t.Errorf("error %v does not match engine.ErrEvaluationLimit", err)
			}
			if took > 10*time.Second {
				t.Errorf("refused after %v; want it refused quickly", took)
			}
		})
	}
}

// ctxArgs are string arguments.
func ctxArgs(s ...string) []cty.Value {
	out := make([]cty.Value, len(s))
	for i, x := range s {
		out[i] = cty.StringVal(x)
	}
	return out
}

// jsonQuote is s as an HCL quoted string (JSON's quoting is a subset of HCL's).
func jsonQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestEvaluationLimits_legitimate: what OpenTofu users write stays within the limits:
// bcrypt at the default cost and at the highest accepted cost, format widths, a setproduct of
// a few thousand elements, a for expression over a thousand objects.
func TestEvaluationLimits_legitimate(t *testing.T) {
	t.Parallel()
	for _, expr := range []string{
		`length(bcrypt("x")) + length(bcrypt("x", 12))`,
		`format("%08.3f|%-10s|%5d", 3.14159, "a", 42)`,
		`length(setproduct(range(32), range(32), ["a", "b"]))`,
		`length([for i in range(1000) : {name = "n-${i}", tags = {a = i, b = "x"}}])`,
		`jsonencode(yamldecode("{a: &a [1, 2], b: *a, c: *a}"))`,
		`indent(4, "a\nb\nc")`,
		`length(jsondecode("` + strings.Repeat("[", 256) + `\"x\"` + strings.Repeat("]", 256) + `"))`,
		`length(yamldecode("` + strings.Repeat("[", 256) + `x` + strings.Repeat("]", 256) + `"))`,
		`length(yamldecode(` + jsonQuote(yamlChain(250)) + `))`,
		`"${1e30 * 1e30} ${tostring(-1.5e-20)}"`,
		`length(regexall("[0-9]+", format("%0100000d", 0))) + length(replace(format("%0100000d", 0), "/0{10}/", "x"))`,
		// A tuple of one element type converts in one pass (before, go-cty compared every
		// pair: 100,000 strings took 1 min 40 s of one CPU).
		`length(toset([for x in split(",", replace(format("%0100000d", 0), "0", ",")) : x])) + length(tolist([for x in range(1000) : {a = x}]))`,
		`length(tomap({for i in range(1000) : "k${i}" => i})) + length(distinct([for x in range(1000) : x % 7]))`,
		`format("%s=%d", format("%05000s", "x"), 3)`,
		// A conditional over a long tuple of one type and an empty one unifies in one pass.
		`length(true ? [for x in split(",", replace(format("%0100000d", 0), "0", ",")) : x] : []) + length(false ? [] : [for i in range(1000) : {a = i}])`,
		`length(true ? [1, "a"] : [2, "b"]) + (["a", "b"] == ["a", "b"] ? 1 : 0)`,
		// A long key that is no number indexes a map.
		`{(format("k%05000d", 0)) = 1}[format("k%05000d", 0)] + sum([1, "2"]) + jsondecode("{\"a\": [1.5e3]}").a[0]`,
	} {
		h := newMemHarness(t, t.TempDir())
		if _, err := h.apply(t, outputDoc(t, expr, nil), nil); err != nil {
			t.Errorf("%s: %v", expr, err)
		}
	}
}

// TestBudget_contextEndsEvaluation: every function call and for-expression iteration checks
// the operation's context: once it ends, the next one fails with the context's error.
func TestBudget_contextEndsEvaluation(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	b := newBudget(ctx)
	upper := b.functions()["upper"]
	if _, err := upper.Call(ctxArgs("a")); err != nil {
		t.Fatal(err)
	}
	cancel()
	_, err := upper.Call(ctxArgs("a"))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("after cancel: %v, want context.Canceled", err)
	}
}

// TestInstrument_keepsVariables: the checks instrument adds leave everything a template
// refers to visible to a walk of its syntax tree (hclsyntax.Variables: try and can read it to
// wait for unknown values), for-expression variables still scoped, and its value unchanged.
func TestInstrument_keepsVariables(t *testing.T) {
	t.Parallel()
	const src = `${try(upper(local.x), [for s in var.l : "${s}-${local.y}" if s != ""], {a = [local.z]})}`
	parse := func() hclsyntax.Expression {
		tpl, diags := hclsyntax.ParseTemplate([]byte(src), "t", hcl.InitialPos)
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		return tpl
	}
	names := func(x hclsyntax.Expression) []string {
		var out []string
		for _, tr := range hclsyntax.Variables(x) {
			out = append(out, traversalText(tr))
		}
		return out
	}
	want := names(parse())
	inst := instrument(parse())
	if got := names(inst); fmt.Sprint(got) != fmt.Sprint(want) || len(want) != 4 {
		t.Errorf("variables %v, want %v", got, want)
	}
	b := newBudget(t.Context())
	ctx := &hcl.EvalContext{Functions: b.functions(), Variables: map[string]cty.Value{
		"local": cty.ObjectVal(map[string]cty.Value{"x": cty.UnknownVal(cty.String), "y": cty.StringVal("y"), "z": cty.True}),
		"var":   cty.ObjectVal(map[string]cty.Value{"l": cty.TupleVal([]cty.Value{cty.StringVal("a")})}),
	}}
	got, diags := inst.Value(ctx)
	if diags.HasErrors() || got.IsKnown() {
		t.Errorf("try over an unknown value: %#v %v, want it unknown (it waits for the value)", got, diags)
	}
}

// TestNesting_attacks: a configuration whose string nests deep enough to overflow the stack
// of hcl's parser, walkers or evaluation (a fatal error no recover catches: the whole
// process, every tenant's plans with it) is refused before hcl reads it, with the string's
// position, as is a template built at run time for templatestring and a JSON document
// nested past hcl/v2/json's parser.
func TestNesting_attacks(t *testing.T) {
	t.Parallel()
	const n = 100_000
	deepJSON := `{"output": {"o": {"value": ` + strings.Repeat("[", n) + strings.Repeat("]", n) + `}}}`
	for _, tt := range []struct{ name, doc, want string }{
		{"tuples in a template", outputDoc(t, strings.Repeat("[", n)+strings.Repeat("]", n), nil),
			"Expression nested too deeply: This template nests more than 256 levels deep"},
		{"unary minus", outputDoc(t, strings.Repeat("-", n)+"1", nil), "Expression nested too deeply"},
		{"nested quotes in a local", outputDoc(t, "local.a", map[string]string{"a": strings.Repeat(`${"`, n) + strings.Repeat(`"}`, n)}),
			"Expression nested too deeply"},
		{"an object key", `{"output": {"o": {"value": {"${` + strings.Repeat("!", n) + `true}": 1}}}}`, "Expression nested too deeply"},
		{"templatestring", outputDoc(t, `templatestring(replace(format("%0100000d", 0), "0", "$${-"), {})`, nil),
			"Expression nested too deeply"},
		{"document", deepJSON, "the document nests more than 1024 levels deep"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newMemHarness(t, t.TempDir())
			_, err := h.apply(t, tt.doc, nil)
			if err == nil {
				t.Fatal("the configuration was evaluated; want it refused")
			}
			if msg := err.Error(); !strings.Contains(msg, tt.want) || !strings.Contains(msg, "main.tf.json:1,") {
				t.Errorf("error %.300q; want %q at its position in main.tf.json", msg, tt.want)
			}
		})
	}
}

// TestEvaluationLimits_count: a count over the elements of one value is refused before a key is
// made for each instance (a count of 1e9 ran the process out of memory; the policy gate's
// maxResources, 0 for no limit, is the admin's, so the engine bounds it too).
func TestEvaluationLimits_count(t *testing.T) {
	t.Parallel()
	h := newMemHarness(t, t.TempDir())
	_, err := h.apply(t, `{"resource":{"terraform_data":{"a":{"count":1000000000}}}}`, nil)
	if !errors.Is(err, engine.ErrEvaluationLimit) || !strings.Contains(err.Error(), "1000000000 instances, more than 262144") {
		t.Fatalf("count 1e9: %v; want it refused by the evaluation limits", err)
	}
}

// TestEvaluationLimits_sequences: a document of more than hclnest.MaxSequences template
// sequences is refused before hcl lexes it (2.7 million made one plan and apply take 33 s of
// CPU; found by an eighth trial); at the limit it is evaluated.
func TestEvaluationLimits_sequences(t *testing.T) {
	t.Parallel()
	doc := func(n int) string {
		return `{"locals":{"a":"` + strings.Repeat("${1}", n) + `"},"resource":{"terraform_data":{"a":{"input":"${length(local.a)}"}}}}`
	}
	h := newMemHarness(t, t.TempDir())
	_, err := h.apply(t, doc(hclnest.MaxSequences+1), nil)
	if !errors.Is(err, engine.ErrEvaluationLimit) || !strings.Contains(err.Error(), "more than 100000 template sequences") {
		t.Fatalf("over the limit: %v; want it refused by the evaluation limits", err)
	}
	if _, err := h.apply(t, doc(hclnest.MaxSequences-1), nil); err != nil {
		t.Fatalf("at the limit: %v", err)
	}
}

// TestEvaluationLimits_typeDefaults: a variable's type whose optional() default is a for
// expression (hcl's typeexpr evaluates it while the configuration is read, outside every
// evaluation limit) is refused before it is evaluated: four nested loops over 100 elements in
// a 1 KB document took 3 GB and a minute of CPU (found by a ninth trial); three, 719 MB.
// Literal defaults are read.
func TestEvaluationLimits_typeDefaults(t *testing.T) {
	// Not parallel: allocatedBy reads the process's allocations.
	l := "[" + strings.Repeat("0,", 99) + "0]"
	loops := "0"
	for i := range 4 {
		loops = fmt.Sprintf("[for v%d in %s: %s]", i, l, loops)
	}
	doc := func(ty string) []byte {
		b, err := json.Marshal(map[string]any{"variable": map[string]any{"v": map[string]any{"type": ty, "default": map[string]any{}}}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	var alloc uint64
	var err error
	alloc = proctest.Allocated(func() { _, err = ParseConfig(doc("object({a=optional(any, " + loops + ")})")) })
	if !errors.Is(err, engine.ErrEvaluationLimit) || !strings.Contains(err.Error(), "var.v: type") || !strings.Contains(err.Error(), "ForExpr") {
		t.Fatalf("a for expression in a type's default: %v; want it refused", err)
	}
	if alloc > 64<<20 {
		t.Errorf("%d MB allocated reading the document: the default was evaluated", alloc>>20)
	}
	cfg, err := ParseConfig(doc(`object({a=optional(list(number), [1, 2]), b=optional(string, "x"), c=optional(map(string), {})})`))
	if err != nil || cfg.Variables["v"] == nil {
		t.Fatalf("literal defaults: %v", err)
	}
}

// nestedDefaults is a type whose optional() default, at each of d levels, is a list of k
// objects of the level below: hcl fills each inserted object's defaults, k^d objects.
func nestedDefaults(k, d int) string {
	elems := strings.TrimSuffix(strings.Repeat("{},", k), ",")
	ty := "object({})"
	for range d {
		ty = "object({a=optional(list(" + ty + "),[" + elems + "])})"
	}
	return ty
}

// TestEvaluationLimits_readTimeConversions: what go-cty converts or evaluates while the
// configuration is read, where no budget runs, is bounded (found by a tenth trial): a
// variable's default of more than MaxDefaultElements elements (1,000 numbers that hash alike
// for a set(number): 13 s; 24,000 values of three types for a list(any): 1 GB), the same in
// an optional() default of its type (more than hclnest.MaxTypeParts parts), and a
// replace_triggered_by that is not a reference (three nested for expressions over a
// 300-element attribute: 27 million elements built on every plan, 1.9 GB), and optional()
// defaults of objects nested in collections (3 objects a level, 14 levels: 3^14 objects,
// 2.1 GB from 700 bytes, found by an eleventh trial). Within the bounds, each is read.
func TestEvaluationLimits_readTimeConversions(t *testing.T) {
	t.Parallel()
	nums := func(n int) []any {
		out := make([]any, n)
		for i := range out {
			out[i] = fmt.Sprintf("1.%012d", i+1)
		}
		return out
	}
	variable := func(ty string, def any) string {
		b, err := json.Marshal(map[string]any{"variable": map[string]any{"v": map[string]any{"type": ty, "default": def}}})
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	mixed := func(n int) []any {
		out := make([]any, n)
		for i := range out {
			out[i] = []any{"a", true, 1}[i%3]
		}
		return out
	}
	numList := func(n int) string {
		b, _ := json.Marshal(nums(n))
		return strings.ReplaceAll(string(b), `"`, "")
	}
	for _, tt := range []struct{ name, doc, want string }{
		{"a set default", variable("set(number)", nums(MaxDefaultElements+1)), "more than 256 elements"},
		{"a mixed default", variable("list(any)", mixed(300)), "more than 256 elements"},
		{"an optional() default", variable("object({a=optional(set(number), "+numList(300)+")})", map[string]any{}), "more than 256 parts"},
		{"nested optional() defaults", variable(nestedDefaults(3, 14), map[string]any{"b": 1}), "holds an object inside a collection"},
		{"replace_triggered_by", `{"resource":{"terraform_data":{"b":{"input":[1,2,3]},"a":{"input":"x","lifecycle":{"replace_triggered_by":["[for a in terraform_data.b.input : [for b in terraform_data.b.input : a]]"]}}}}}`,
			"want a reference to a resource"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := ParseConfig([]byte(tt.doc))
			if !errors.Is(err, engine.ErrEvaluationLimit) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("%v; want it refused (%q)", err, tt.want)
			}
		})
	}
	for _, doc := range []string{
		variable("set(number)", nums(MaxDefaultElements-1)), // and the set itself
		variable("object({a=optional(set(number), "+numList(100)+")})", map[string]any{}),
	} {
		if _, err := ParseConfig([]byte(doc)); err != nil {
			t.Errorf("within the bounds: %v", err)
		}
	}
}

// TestEvaluationLimits_unknownLocalsEvaluatedOnce: a local whose value is known only after
// apply is evaluated once while no value changes, as a known one is: 24 locals that each refer
// to the previous one twice were evaluated 2^24 times (each building a two-element tuple, so
// the plan was refused past the element budget; with costlier locals it ran for the handler's
// whole deadline).
func TestEvaluationLimits_unknownLocalsEvaluatedOnce(t *testing.T) {
	t.Parallel()
	locals := map[string]string{"c0": "${[terraform_data.x.id, terraform_data.x.id]}"}
	for i := 1; i <= 24; i++ {
		locals[fmt.Sprintf("c%d", i)] = fmt.Sprintf("${[local.c%d[0], local.c%d[1]]}", i-1, i-1)
	}
	doc, err := json.Marshal(map[string]any{
		"locals": locals,
		"resource": map[string]any{"terraform_data": map[string]any{
			"x": map[string]any{"input": "x"},
			"y": map[string]any{"input": "${length(local.c24)}"},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	h := newMemHarness(t, t.TempDir())
	if _, err := h.apply(t, string(doc), nil); err != nil {
		t.Fatalf("plan and apply of a chain of unknown locals: %v", err)
	}
}
