package tlisp

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestEval_modules: a :modules call renders its source and arguments (dashes turned into
// underscores, values evaluated as attributes), and (ref module "NAME" OUT) refers to its
// output.
func TestEval_modules(t *testing.T) {
	t.Parallel()
	a, _ := evalOK(t, `(deflava-architecture m
  :inputs ((:name "web"))
  :modules ((net :source "./modules/net" :cidr-block "10.0.0.0/16" :label "{name}" :tags ((Env "dev"))))
  :resources ((terraform-data "x" :input (ref module "net" vpc_id)))
  :outputs (:vpc (ref module "net" vpc_id)))`, Bindings{})
	if len(a.Modules) != 1 {
		t.Fatalf("modules = %+v", a.Modules)
	}
	m := a.Modules[0]
	args, err := mapJSON(&m.Arguments)
	if err != nil {
		t.Fatal(err)
	}
	if m.Name != "net" || m.Source != "./modules/net" || string(args) != `{"cidr_block":"10.0.0.0/16","label":"web","tags":{"Env":"dev"}}` ||
		m.Pos.String() != "t.tlisp:3:13" {
		t.Errorf("module = %s %s %s at %s", m.Name, m.Source, args, m.Pos)
	}
	if got := attrs(t, a.Resources, "terraform_data.x"); got != `{"input":"${module.net.vpc_id}"}` {
		t.Errorf("ref to the module's output = %s", got)
	}
}

func TestEval_moduleErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, src string
		want      []string
	}{
		{"no source and a meta-argument", `(deflava-architecture a
  :modules ((net :cidr "x") (db :source "./modules/db" :count 2))
  :resources ())`, []string{
			"t.tlisp:2:13: module net: missing :source (expected :source \"./modules/DIR\", a module directory bundled with the architecture)",
			"t.tlisp:2:56: module db: :count is not supported (a bundled module inherits the root's providers; count, for_each and depends_on are not written in the dialect)",
		}},
		{"duplicate and undeclared", `(deflava-architecture a
  :modules ((net :source "./modules/net") (net :source "./modules/other"))
  :resources ((terraform-data "x" :input (ref module "nope" id))))`, []string{
			"t.tlisp:2:43: duplicate module module.net (first declared at t.tlisp:2:13)",
			"t.tlisp:3:42: reference to undeclared module module.nope (declare it in :modules)",
		}},
		{"bad forms", `(deflava-architecture a
  :modules ("net" (1 :source "x") (net :source x))
  :resources ())`, []string{
			"t.tlisp:2:13: expected deflava-architecture form, got module not a list (expected (NAME :source \"./modules/DIR\" :input value ...), got string \"net\")",
			"t.tlisp:2:20: expected deflava-architecture form, got module head not sym (expected a module name like net)",
			"t.tlisp:2:48: type mismatch: expected module :source string (\"./modules/DIR\"), got symbol `x`",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, diags := EvalArchitecture([]byte(tt.src), Bindings{}, Options{File: "t.tlisp"})
			var got []string
			for _, d := range diags.Errors() {
				got = append(got, d.String())
			}
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("errors (-want +got):\n%s", d)
			}
		})
	}
}
