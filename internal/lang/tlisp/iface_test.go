package tlisp

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/lava-operator/lava/internal/lang/arch"
)

func ptr[T any](v T) *T { return &v }

func TestReadInterfaces(t *testing.T) {
	t.Parallel()
	src := `
(deflava-architecture skipped :resources ())
(deflava-interface aws-vpc-network
  :doc "Test VPC interface"
  :unknown-clause (whatever)
  :inputs ((:cidr :type :cidr-block :default "10.0.0.0/16")
           (:env :type :string :required #t :doc "environment")
           (:azs :type (:list-of :availability-zone :max-items 6) :min-items 1 :default ("a" "b"))
           (:tier :type (:enum "prod" "staging" dev) :unknown-key 1)
           (:n :type (:int-range :lo 1 :hi 10) :default 3)
           (:port :type (:port-range :min 1024 :max 65535))
           (:label :type (:length :min 1 :max 63))
           (:prefix :type (:pattern :source "arn:" :match-kind starts-with))
           (:suffix :type (:pattern :value ".io" :match-kind ends-with))
           (:free)
           (:flag :type :boolean :default #t)
           (:open :type :dynamic :default ()))
  :outputs ((:vpc-id :type :string :required #t)))
(deflava-interface second)`
	ifaces, diags := ReadInterfaces([]byte(src), Options{File: "i"})
	if len(diags) != 0 {
		t.Fatalf("diagnostics: %v", diags)
	}
	if len(ifaces) != 2 || ifaces[1].Name != "second" {
		t.Fatalf("got %d interfaces", len(ifaces))
	}
	got := ifaces[0]
	p := func(line, col, off int) arch.Pos { return arch.Pos{File: "i", Line: line, Col: col, Offset: off} }
	want := &arch.Interface{
		Name: "aws-vpc-network",
		Doc:  "Test VPC interface",
		Pos:  p(3, 1, 46),
		Inputs: []arch.Field{
			{Name: "cidr", Type: arch.Type{Kind: arch.TypeCIDRBlock}, Default: ptr("10.0.0.0/16")},
			{Name: "env", Type: arch.Type{Kind: arch.TypeString}, Required: true, Doc: ptr("environment")},
			{Name: "azs", Type: arch.Type{Kind: arch.TypeListOf, Elem: &arch.Type{Kind: arch.TypeAvailabilityZone}, MinItems: ptr(1), MaxItems: ptr(6)}, Default: ptr("a,b")},
			{Name: "tier", Type: arch.Type{Kind: arch.TypeEnum, Enum: []string{"prod", "staging", "dev"}}},
			{Name: "n", Type: arch.Type{Kind: arch.TypeIntRange, Lo: 1, Hi: 10}, Default: ptr("3")},
			{Name: "port", Type: arch.Type{Kind: arch.TypePortRange, Lo: 1024, Hi: 65535}},
			{Name: "label", Type: arch.Type{Kind: arch.TypeLength, MinLen: ptr(1), MaxLen: ptr(63)}},
			{Name: "prefix", Type: arch.Type{Kind: arch.TypePattern, Pattern: "arn:", Match: "starts-with"}},
			{Name: "suffix", Type: arch.Type{Kind: arch.TypePattern, Pattern: ".io", Match: "ends-with"}},
			{Name: "free", Type: arch.Type{Kind: arch.TypeAny}, Loose: true},
			{Name: "flag", Type: arch.Type{Kind: arch.TypeBoolean}, Default: ptr("true")},
			{Name: "open", Type: arch.Type{Kind: arch.TypeDynamic}, Loose: true},
		},
		Outputs: []arch.Field{{Name: "vpc-id", Type: arch.Type{Kind: arch.TypeString}, Required: true}},
	}
	if diff := cmp.Diff(want, got, cmp.FilterPath(func(p cmp.Path) bool {
		return p.Last().String() == ".Pos" && len(p) > 3
	}, cmp.Ignore())); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if got.Inputs[0].Pos != p(6, 12, 149) {
		t.Errorf("field position = %v offset %d", got.Inputs[0].Pos, got.Inputs[0].Pos.Offset)
	}
}

func TestReadInterfaces_errors(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, src, want string }{
		{"unknown type keyword", "(deflava-interface x :inputs ((:a :type :float)))", "f:1:41: unknown type keyword `float`"},
		{"unknown parametric", "(deflava-interface x :inputs ((:a :type (:map-of :string))))", "f:1:42: unknown type keyword `map-of`"},
		{"missing name", "(deflava-interface :inputs ())", "f:1:20: expected deflava-interface form, got missing name (expected (deflava-interface NAME ...))"},
		{"field head", "(deflava-interface x :inputs ((a :type :string)))", "f:1:32: malformed field declaration: field head must be :kw (expected (:name :type T ...))"},
		{"int-range needs hi", "(deflava-interface x :inputs ((:a :type (:int-range :lo 1))))", "f:1:41: malformed type form: :int-range needs :hi (expected (:int-range :lo N :hi M) with integers)"},
		{"length needs min", "(deflava-interface x :inputs ((:a :type (:length :max 3))))", "f:1:41: malformed type form: :length needs :min (expected (:length :min N :max M) with integers >= 0)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ifaces, diags := ReadInterfaces([]byte(tt.src), Options{File: "f"})
			if len(ifaces) != 0 {
				t.Errorf("interfaces returned despite errors: %v", ifaces)
			}
			if !diags.HasErrors() || diags.Errors()[0].String() != tt.want {
				t.Errorf("got  %v\nwant %s", diags, tt.want)
			}
		})
	}
}
