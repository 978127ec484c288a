package render

import (
	"fmt"
	"strings"
	"testing"

	"github.com/lava-operator/lava/internal/lang/policy"
	"github.com/lava-operator/lava/internal/lang/tlisp"
)

// synthBlocks synthesizes an inline architecture (file in.tlisp) and returns the output and
// the errors of the synthesis and of the default tenant policy.
func synthBlocks(t *testing.T, src string) (*Output, []string) {
	t.Helper()
	in := Input{SourceKind: SourceInline, SourceText: []byte(src), File: "in.tlisp"}
	out, ds := Synthesize(in)
	if !ds.HasErrors() {
		ds = append(ds, CheckPolicy(in, out, policy.Default())...)
	}
	var errs []string
	for _, d := range ds.Errors() {
		errs = append(errs, d.String())
	}
	return out, errs
}

// TestSynthesize_blocks: the variable, check, moved and removed blocks render with references
// a Terraform engine accepts, a move between module calls included, and pass the default
// tenant policy.
func TestSynthesize_blocks(t *testing.T) {
	t.Parallel()
	out, errs := synthBlocks(t, `(deflava-architecture blocks
  :variables ((name :type string :default "web"
                :validation ((:condition "${length(var.name) > 0}" :error-message "name is empty: ${var.name}"))))
  :resources ((terraform-data "a" :input "${var.name}"))
  :modules ((net :source "./modules/net"))
  :moved ((:from "module.old-net" :to "module.net")
          (:from "terraform-data.a-old[0]" :to "terraform-data.a")
          (:from "module.net.terraform_data.x" :to "module.net.terraform_data.y"))
  :removed ((:from "module.gone" :destroy #t))
  :checks ((named :assert ((:condition "${terraform_data.a.output == var.name}" :error-message "the marker lost its name")))))`)
	// The local module source has no bundle in an inline source: that error only.
	if len(errs) != 1 || !strings.Contains(errs[0], "names a module directory, but an inline source has no bundle") {
		t.Fatalf("errors %q", errs)
	}
	_ = out
	out, errs = synthBlocks(t, `(deflava-architecture blocks
  :variables ((name :type string :default "web"
                :validation ((:condition "${length(var.name) > 0}" :error-message "name is empty: ${var.name}"))))
  :resources ((terraform-data "a" :input "${var.name}"))
  :moved ((:from "terraform-data.a-old[0]" :to "terraform-data.a"))
  :removed ((:from "terraform-data.gone" :destroy #t))
  :checks ((named :assert ((:condition "${terraform_data.a.output == var.name}" :error-message "the marker lost its name")))))`)
	if len(errs) > 0 {
		t.Fatalf("errors %q", errs)
	}
	for _, want := range []string{`"moved":[{"from":"terraform_data.a-old[0]","to":"terraform_data.a"}]`,
		`"removed":[{"from":"terraform_data.gone","lifecycle":{"destroy":true}}]`,
		`"variable":{"name":{"type":"string","default":"web","validation":[`,
		`"check":{"named":{"assert":[{"condition":"${terraform_data.a.output == var.name}","error_message":"the marker lost its name"}]}}`} {
		if !strings.Contains(string(out.Compact), want) {
			t.Errorf("rendered JSON lacks %s:\n%s", want, out.Compact)
		}
	}
}

// TestSynthesize_blocksReferences: a reference in a check's assertion or a variable's
// validation, and a moved block's :to, name what the document declares; the error is at the
// check's or variable's form with the JSON path.
func TestSynthesize_blocksReferences(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ name, body, want string }{
		{"check assertion", `:checks ((c :assert ((:condition "${aws_vpc.nope.id != \"\"}" :error-message "m")))))`,
			"in.tlisp:3:12: check.c.assert.0.condition: reference to undeclared resource aws_vpc.nope (column 3)"},
		{"check message", `:checks ((c :assert ((:condition "${1 == 1}" :error-message "${local.nope}")))))`,
			"in.tlisp:3:12: check.c.assert.0.error_message: reference to undeclared local value local.nope"},
		{"variable validation", `:variables ((v :default "x" :validation ((:condition "${var.w == \"x\"}" :error-message "m")))))`,
			"in.tlisp:3:15: variable.v.validation.0.condition: reference to undeclared input variable var.w"},
		{"moved to a module not declared", `:moved ((:from "module.a" :to "module.b")))`,
			"in.tlisp:3:33: moved :to names undeclared module module.b (declare it in :modules)"},
		{"unknown function in a check", `:checks ((c :assert ((:condition "${nope(1)}" :error-message "m")))))`,
			"call to unknown function nope"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, errs := synthBlocks(t, "(deflava-architecture refs\n  :resources ((terraform-data \"a\" :input \"x\"))\n  "+tt.body)
			if len(errs) == 0 || !strings.Contains(errs[0], tt.want) {
				t.Errorf("errors %q, want %q", errs, tt.want)
			}
		})
	}
}

// TestCheckPolicy_blocks: the tenant policy holds a check's assertions and a variable's
// validations to the rules of attributes (a check's message is shown in every plan, so a
// file read there would leak the file), at the form.
func TestCheckPolicy_blocks(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ name, body, want string }{
		{"file in a check message", `:checks ((c :assert ((:condition "${1 == 2}" :error-message "${file(\"/etc/passwd\")}")))))`,
			"in.tlisp:3:12: policy: check c assert error message: the function file is not allowed"},
		{"file in a validation", `:variables ((v :default "x" :validation ((:condition "${fileexists(\"/etc/passwd\")}" :error-message "m")))))`,
			"in.tlisp:3:15: policy: variable v validation condition: the function fileexists is not allowed"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, errs := synthBlocks(t, "(deflava-architecture refs\n  :resources ((terraform-data \"a\" :input \"x\"))\n  "+tt.body)
			if len(errs) == 0 || !strings.Contains(errs[0], tt.want) {
				t.Errorf("errors %q, want %q", errs, tt.want)
			}
		})
	}
}

// TestEval_blocksNotSecret: a secret binding may not reach a variable's default (rendered as
// a literal) or a moved or removed address.
func TestEval_blocksNotSecret(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ name, body, want string }{
		{"variable default", `:variables ((v :default "{pw}")))`, "var.v: a variable default must not contain a secret binding"},
		{"moved address", `:moved ((:from "terraform-data.{pw}" :to "terraform-data.a")))`, "a moved address must not contain a secret binding (`pw`)"},
		{"removed address", `:removed ((:from "terraform-data.{pw}")))`, "a removed address must not contain a secret binding (`pw`)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			src := "(deflava-architecture s\n  :inputs ((:pw))\n  :resources ((terraform-data \"a\" :input \"x\"))\n  " + tt.body
			_, ds := tlisp.EvalArchitecture([]byte(src), tlisp.Bindings{Scalars: map[string]string{"pw": "hunter2"}},
				tlisp.Options{File: "in.tlisp", SecretInputs: map[string]bool{"pw": true}})
			if !ds.HasErrors() || !strings.Contains(ds.Errors()[0].String(), tt.want) || strings.Contains(ds.String(), "hunter2") {
				t.Errorf("diagnostics %q, want %q and no secret", ds, tt.want)
			}
		})
	}
}

// TestCheckPolicy_typeDefaultAttack: a variable's :type whose optional() default is a for
// expression passed synthesis and the policy, and the engines evaluate such a default while
// they read the configuration, outside every limit (four nested loops over 100 elements in a
// 1 KB manifest: 3 GB in the applier, found by a ninth trial). The policy refuses it at the
// variable; a literal default passes.
func TestCheckPolicy_typeDefaultAttack(t *testing.T) {
	t.Parallel()
	l := "[" + strings.Repeat("0,", 99) + "0]"
	loops := "0"
	for i := range 4 {
		loops = fmt.Sprintf("[for v%d in %s: %s]", i, l, loops)
	}
	src := func(ty string) string {
		return "(deflava-architecture t\n  :variables ((v :type \"" + ty + "\" :default ()))\n  :resources ((terraform-data \"a\" :input \"x\")))"
	}
	_, errs := synthBlocks(t, src("list(object({a=optional(any, "+loops+")}))"))
	if len(errs) != 1 || !strings.Contains(errs[0], "in.tlisp:2:") || !strings.Contains(errs[0], "variable v type") || !strings.Contains(errs[0], "optional() with a default") {
		t.Fatalf("errors %v; want the variable's type refused at its line", errs)
	}
	if _, errs := synthBlocks(t, src(`list(object({a=optional(number), b=optional(string)}))`)); len(errs) != 0 {
		t.Fatalf("optional attributes without defaults: %v", errs)
	}
}
