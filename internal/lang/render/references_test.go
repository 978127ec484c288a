package render

import (
	"fmt"
	"strings"
	"testing"

	"github.com/lava-operator/lava/internal/platform/testutil/proctest"

	"github.com/lava-operator/lava/internal/lang/policy"
	"github.com/lava-operator/lava/internal/lang/tlisp"
)

// TestSynthesize_references: a reference to something the document does not declare, or a
// resource type used as a value, is an error at the form that holds it; every kind of
// reference Terraform accepts without providers passes.
func TestSynthesize_references(t *testing.T) {
	t.Parallel()
	synth := func(body string) tlisp.Diagnostics {
		src := "(deflava-architecture refs\n  :inputs ((:azs (\"a\" \"b\")))\n" + body
		_, ds := Synthesize(Input{SourceKind: SourceInline, SourceText: []byte(src), File: "refs.tlisp"})
		return ds.Errors()
	}
	for _, tt := range []struct{ name, body, want string }{
		{"undeclared resource", `  :resources ((aws-vpc "main" :cidr-block "${aws_vpc.nope.cidr_block}")))`,
			"refs.tlisp:3:15: resource.aws_vpc.main.cidr_block: reference to undeclared resource aws_vpc.nope (column 3)"},
		{"resource type as a value", `  :resources ((aws-subnet "a" :x "1"))
  :outputs (:ids "${[for s in aws_subnet : s.id]}"))`,
			"refs.tlisp:4:13: output.ids.value: invalid reference: the resource type aws_subnet is not a value"},
		{"undeclared data source", `  :resources ((aws-vpc "main" :x "${data.aws_ami.nope.id}")))`,
			"reference to undeclared data source data.aws_ami.nope"},
		{"undeclared local", `  :resources ((aws-vpc "main" :x "${local.nope}")))`,
			"reference to undeclared local value local.nope"},
		{"undeclared variable", `  :resources ((aws-vpc "main" :x "${var.nope}")))`,
			"reference to undeclared input variable var.nope"},
		{"undeclared module", `  :resources ((aws-vpc "main" :x "${module.nope.id}")))`,
			"reference to undeclared module module.nope"},
		{"in a map key", `  :resources ((aws-vpc "main" :tags (("${aws_vpc.nope.id}" "x")))))`,
			"reference to undeclared resource aws_vpc.nope"},
		{"in depends_on", `  :resources ((aws-vpc "main" :x "1" :depends-on ("aws_vpc.nope"))))`,
			"reference to undeclared resource aws_vpc.nope"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ds := synth(tt.body)
			if len(ds) == 0 {
				t.Fatalf("no error, want %q", tt.want)
			}
			if got := ds[0].String(); !strings.Contains(got, tt.want) {
				t.Errorf("error %q, want %q", got, tt.want)
			}
		})
	}
	ok := `  :locals (:l "x")
  :data ((aws-ami "base" :owners ("self")))
  :resources
  ((aws-vpc "main" :cidr-block "10.0.0.0/16" :name "${local.l}-${data.aws_ami.base.id}-${path.module}-${terraform.workspace}")
   (aws-subnet "s" :count 2 :vpc-id (ref aws-vpc "main" id) :cidr-block "${cidrsubnet(aws_vpc.main.cidr_block, 8, count.index)}")
   (aws-route "r" :for-each (:a "1") :id "${each.key}-${each.value}" :all "${[for s in aws_subnet.s : s.id]}"
     :lifecycle (:ignore-changes ("tags")))
   (aws-security-group "g" :dynamic (:ingress (:for-each "${[1, 2]}" :content (:port "${ingress.value}")))
     :other (:dynamic (:rule (:for-each "${[1]}" :iterator "it" :content (:n "${it.value}"))))))
  :outputs (:vpc (ref aws-vpc "main" id) :all "${aws_subnet.s[*].id}" :ids ((for-each ((i az) (enumerate azs)) "${aws_subnet.s[${i}].id}"))))`
	if ds := synth(ok); len(ds) > 0 {
		t.Errorf("legitimate references refused: %v", ds)
	}
}

// TestSynthesize_manyBadReferences: the reference errors stop at tlisp.MaxDiagnostics, then one
// counts the rest (99,225 of them printed 18.5 MB).
func TestSynthesize_manyBadReferences(t *testing.T) {
	t.Parallel()
	src := `(deflava-architecture refs :inputs ((:xs ("1" "2" "3" "4" "5" "6" "7" "8" "9" "10")))
  :resources ((null-resource "n" :x ((for-each ((i a) (enumerate xs)) (for-each ((j b) (enumerate xs)) "${aws_vpc.nope.id}"))))))`
	_, ds := Synthesize(Input{SourceKind: SourceInline, SourceText: []byte(src), File: "refs.tlisp"})
	errs := ds.Errors()
	if len(errs) != tlisp.MaxDiagnostics+1 || !strings.Contains(errs[len(errs)-1].Message, "and 50 more reference or function call error(s)") {
		t.Fatalf("%d errors (%v); want %d, the last counting the rest", len(errs), errs, tlisp.MaxDiagnostics+1)
	}
}

// TestSynthesize_functionCalls: a call to a function no engine knows, or with an argument count
// its signature does not accept, is an error at the form that holds it, with the column of the
// function's name; every call an engine accepts passes, OpenTofu-only and provider-defined
// functions included.
func TestSynthesize_functionCalls(t *testing.T) {
	t.Parallel()
	synth := func(body string) tlisp.Diagnostics {
		src := "(deflava-architecture calls\n  :inputs ((:azs (\"a\" \"b\")))\n" + body
		_, ds := Synthesize(Input{SourceKind: SourceInline, SourceText: []byte(src), File: "calls.tlisp"})
		return ds.Errors()
	}
	for _, tt := range []struct {
		name, body string
		want       []string
	}{
		{"unknown function", `  :resources ((aws-vpc "main" :cidr-block "${cidrsubnett(\"10.0.0.0/8\", 8, 1)}")))`,
			[]string{"calls.tlisp:3:15: resource.aws_vpc.main.cidr_block: call to unknown function cidrsubnett (column 3)"}},
		{"core:: only once", `  :resources ((aws-vpc "main" :x "${core::core::abs(1)}")))`,
			[]string{"call to unknown function core::core::abs (column 3)"}},
		{"too many arguments", `  :resources ((aws-vpc "main" :x "a-${upper(\"a\", \"b\")}")))`,
			[]string{"resource.aws_vpc.main.x: wrong number of arguments to function upper: it takes 1, got 2 (column 5)"}},
		{"too few arguments", `  :locals (:l "${cidrsubnet(\"10.0.0.0/8\", 8)}")
  :resources ((aws-vpc "main" :x "${local.l}")))`,
			[]string{"calls.tlisp:3:12: locals.l: wrong number of arguments to function cidrsubnet: it takes 3, got 2 (column 3)"}},
		{"variadic without its fixed parameter", `  :resources ((aws-vpc "main" :x "1"))
  :outputs (:o "${cidrsubnets()}"))`,
			[]string{"calls.tlisp:4:13: output.o.value: wrong number of arguments to function cidrsubnets: it takes at least 1, got 0 (column 3)"}},
		{"nested, in source order with references", `  :resources ((aws-vpc "main" :x "${max(aws_vpc.nope.n, nosuch(1), length())}")))`,
			[]string{"reference to undeclared resource aws_vpc.nope (column 7)", "call to unknown function nosuch (column 23)",
				"wrong number of arguments to function length: it takes 1, got 0 (column 34)"}},
		{"fixed arguments before an expansion", `  :resources ((aws-vpc "main" :x "${abs(1, 2, [3]...)}")))`,
			[]string{"too many arguments to function abs: it takes 1, and 2 come before the expanded one (column 3)"}},
		{"in a map key", `  :resources ((aws-vpc "main" :for-each ("${nosuch()}" "x"))))`,
			[]string{"resource.aws_vpc.main.for_each.${nosuch()} (a key): call to unknown function nosuch (column 3)"}},
		{"in a dynamic block", `  :resources ((aws-security-group "g" :dynamic (:ingress (:for-each "${[1]}" :content (:port "${tostring(ingress.value, 1)}"))))))`,
			[]string{"wrong number of arguments to function tostring: it takes 1, got 2"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ds := synth(tt.body)
			if len(ds) != len(tt.want) {
				t.Fatalf("%d errors %v, want %d", len(ds), ds, len(tt.want))
			}
			for i, w := range tt.want {
				if got := ds[i].String(); !strings.Contains(got, w) {
					t.Errorf("error %d %q, want %q", i, got, w)
				}
			}
		})
	}
	ok := `  :locals (:l "${merge()}" :m "${concat([1], [2], [3], [4])}" :n "${format(\"%s\", \"x\")}")
  :resources
  ((aws-vpc "main" :cidr-block "10.0.0.0/16"
     :a "${cidrsubnets(\"10.0.0.0/8\", 4, 4, 8)}" :b "${lookup({a = 1}, \"a\")}" :c "${lookup({a = 1}, \"b\", 2)}"
     :d "${core::upper(\"x\")}" :e "${urldecode(\"a%20b\")}" :f "${min([1, 2]...)}" :g "${abs([1]...)}"
     :h "${provider::aws::arn_parse(\"arn:aws:iam::1:root\")}" :i "${provider::aws::east::arn_parse(1, 2, 3)}"
     :j "${try(local.l, local.m, null)}" :k "${uuid()}" :m "${join(\",\", [for s in local.m : tostring(s)])}"
     :n "${file(\"/x\")}"))
  :outputs (:o "${jsonencode({for k, v in local.l : k => upper(v)})}"))`
	if ds := synth(ok); len(ds) > 0 {
		t.Errorf("calls every engine accepts refused: %v", ds)
	}
}

// TestSynthesize_manyBadReferencesInOneStringAttack: 30,000 undeclared references in one
// 180 KB string. Each error clipped the whole string again for its message, past the cap
// (about 8 minutes of synth's CPU at 1 MiB, found by an eighth trial): the string is now
// clipped once, so synthesis allocates about what the string's size calls for, not the
// number of errors times it.
func TestSynthesize_manyBadReferencesInOneStringAttack(t *testing.T) {
	src := `(deflava-architecture refs :resources ((null-resource "n" :x "` + strings.Repeat("${a.b}", 30000) + `")))`
	var ds tlisp.Diagnostics
	alloc := proctest.Allocated(func() {
		_, ds = Synthesize(Input{SourceKind: SourceInline, SourceText: []byte(src), File: "refs.tlisp"})
	})
	errs := ds.Errors()
	if len(errs) != tlisp.MaxDiagnostics+1 || !strings.Contains(errs[len(errs)-1].Message, "more reference or function call error(s)") {
		t.Fatalf("%d errors, want %d, the last counting the rest", len(errs), tlisp.MaxDiagnostics+1)
	}
	const bound = 1 << 30
	t.Logf("%d bytes of source, %d MB allocated", len(src), alloc>>20)
	if alloc > bound {
		t.Errorf("%d MB allocated, want at most %d MB: the string is re-read per error", alloc>>20, bound>>20)
	}
}

// TestCheckPolicy_manyDeniedFunctionsAttack: 20,000 distinct denied functions
// (provider::p::fN) in one string: one violation each, each clipping the whole string again
// (34.5 s of CPU at 509 KB, 5.3 MB of messages, found by an eighth trial). The string is
// clipped once and the violations stop at tlisp.MaxDiagnostics, then one counts the rest.
func TestCheckPolicy_manyDeniedFunctionsAttack(t *testing.T) {
	var b strings.Builder
	for i := range 20000 {
		fmt.Fprintf(&b, "${(provider::p::f%d())}", i)
	}
	in := Input{SourceKind: SourceInline, SourceText: []byte(`(deflava-architecture x :resources ((null-resource "n" :x "` + b.String() + `")))`), File: "x.tlisp"}
	out, ds := Synthesize(in)
	if out == nil {
		t.Fatalf("synthesis failed: %v", ds)
	}
	var vs tlisp.Diagnostics
	alloc := proctest.Allocated(func() { vs = CheckPolicy(in, out, policy.Default()) })
	if len(vs) != tlisp.MaxDiagnostics+1 || !strings.Contains(vs[len(vs)-1].Message, "and 19950 more violation(s)") {
		t.Fatalf("%d violations (last %q), want %d, the last counting the rest", len(vs), vs[len(vs)-1].Message, tlisp.MaxDiagnostics+1)
	}
	const bound = 1 << 30
	t.Logf("%d bytes of source, %d MB allocated", len(in.SourceText), alloc>>20)
	if alloc > bound {
		t.Errorf("%d MB allocated, want at most %d MB: the string is re-read per violation", alloc>>20, bound>>20)
	}
}

// TestSynthesize_manySequencesAttack: 16 copies of a string of 7,000 interpolations (a loop
// over a list input), 112,000 template sequences in the rendered JSON: refused at synthesis
// (hclnest.MaxSequences), before the gate and the references parse them. 2.7 million of them
// rendered and made each plan and apply of the object take 33 s of the applier's CPU (found
// by an eighth trial).
func TestSynthesize_manySequencesAttack(t *testing.T) {
	t.Parallel()
	src := `(deflava-architecture x :inputs ((:l ("a" "b" "c" "d" "e" "f" "g" "h" "i" "j" "k" "l" "m" "n" "o" "p")))
  :resources ((null-resource "n" :x ((for-each ((j b) (enumerate l)) "` + strings.Repeat("${(1)}", 7000) + `")))))`
	out, ds := Synthesize(Input{SourceKind: SourceInline, SourceText: []byte(src), File: "x.tlisp"})
	errs := ds.Errors()
	if out != nil || len(errs) != 1 || !strings.Contains(errs[0].Message, "more than 100000 template sequences") || errs[0].Pos.Line != 1 {
		t.Fatalf("out %v, errors %v; want one error at the architecture naming the limit", out != nil, errs)
	}
}
