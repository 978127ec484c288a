package render

import (
	"strings"
	"testing"

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
	if len(errs) != tlisp.MaxDiagnostics+1 || !strings.Contains(errs[len(errs)-1].Message, "and 50 more reference error(s)") {
		t.Fatalf("%d errors (%v); want %d, the last counting the rest", len(errs), errs, tlisp.MaxDiagnostics+1)
	}
}
