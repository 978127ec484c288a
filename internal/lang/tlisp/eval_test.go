package tlisp

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/lava-operator/lava/internal/lang/arch"
)

func evalOK(t *testing.T, src string, b Bindings) (*arch.Architecture, Diagnostics) {
	t.Helper()
	a, diags := EvalArchitecture([]byte(src), b, Options{File: "t.tlisp"})
	if diags.HasErrors() || a == nil {
		t.Fatalf("evaluation failed: %v", diags)
	}
	return a, diags
}

// attrs returns a resource's attributes as compact JSON (insertion order), "" when absent.
func attrs(t *testing.T, rs []arch.Resource, addr string) string {
	t.Helper()
	for i := range rs {
		if rs[i].Address() == addr {
			b, err := mapJSON(&rs[i].Attributes)
			if err != nil {
				t.Fatal(err)
			}
			return string(b)
		}
	}
	return ""
}

func addrs(rs []arch.Resource) []string {
	out := []string{}
	for i := range rs {
		out = append(out, rs[i].Address())
	}
	return out
}

func firstError(t *testing.T, src string, b Bindings) string {
	t.Helper()
	a, diags := EvalArchitecture([]byte(src), b, Options{File: "t.tlisp"})
	if a != nil || !diags.HasErrors() {
		t.Fatalf("want an error, got %v (diags %v)", a, diags)
	}
	return diags.Errors()[0].String()
}

func TestEval_interpolationAndTypes(t *testing.T) {
	t.Parallel()
	a, _ := evalOK(t, `
(deflava-architecture demo
  :inputs ((:name "main") (:name-prefix "np") (:n "5"))
  :resources ((aws-vpc "{name}-vpc"
                :cidr-block "10.0.0.0/16"
                :map-public-ip #t
                :port 443
                :k "{name-prefix}|{n+10}|{n-2}|{ name }|{i+x}|{\"a\": 1}|{}|{unclosed"
                :sym name)))`, Bindings{})
	if a.Name != "demo" {
		t.Errorf("name = %q", a.Name)
	}
	got := attrs(t, a.Resources, "aws_vpc.main-vpc")
	want := `{"cidr_block":"10.0.0.0/16","map_public_ip":true,"port":443,"k":"np|15|3|main|{i+x}|{\"a\": 1}|{}|{unclosed","sym":"main"}`
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestEval_inputPrecedence(t *testing.T) {
	t.Parallel()
	src := `(deflava-architecture p :inputs ((:x "def") (:azs ("a" b)) (:empty ()))
  :resources ((r "r" :x x :azs "{azs}" :azs2 azs :e empty)))`
	tests := []struct {
		name string
		b    Bindings
		want string
	}{
		{"defaults", Bindings{}, `{"x":"def","azs":["a","b"],"azs2":["a","b"],"e":[]}`},
		{"scalar beats list", Bindings{
			Scalars: map[string]string{"x": "s"},
			Lists:   map[string][]string{"x": {"l"}, "azs": {"c"}},
		}, `{"x":"s","azs":["c"],"azs2":["c"],"e":[]}`},
		{"list replaces scalar default", Bindings{Lists: map[string][]string{"x": {"l1", "l2"}}},
			`{"x":["l1","l2"],"azs":["a","b"],"azs2":["a","b"],"e":[]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a, _ := evalOK(t, src, tt.b)
			if got := attrs(t, a.Resources, "r.r"); got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

func TestEval_loops(t *testing.T) {
	t.Parallel()
	src := `(deflava-architecture l
  :inputs ((:azs ("us-east-1a" "us-east-1b")) (:tiers (pub priv)) (:name "n"))
  :resources (
    (for-each ((i az) (enumerate azs))
      (for-each ((j tier) (enumerate tiers))
        (aws-subnet "{name}-{tier}-{i}"
          :cidr-block "10.0.{i+10}.0/24" :az az :j "{j}")))
    (for-each (() (enumerate azs)) (x "d-{i}" :v item))
    (for-each ((name) (enumerate azs)) (y "shadow-{name}" :v "{name}"))))`
	a, _ := evalOK(t, src, Bindings{})
	want := []string{
		"aws_subnet.n-pub-0", "aws_subnet.n-priv-0", "aws_subnet.n-pub-1", "aws_subnet.n-priv-1",
		"x.d-0", "x.d-1", "y.shadow-0", "y.shadow-1",
	}
	if diff := cmp.Diff(want, addrs(a.Resources)); diff != "" {
		t.Errorf("addresses (-want +got):\n%s", diff)
	}
	if got, want := attrs(t, a.Resources, "aws_subnet.n-priv-1"), `{"cidr_block":"10.0.11.0/24","az":"us-east-1b","j":"1"}`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	if got, want := attrs(t, a.Resources, "x.d-1"), `{"v":"us-east-1b"}`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

func TestEval_recordLoops(t *testing.T) {
	t.Parallel()
	src := `(deflava-architecture gh
  :inputs ((:repos ()) (:owner "pleme-io"))
  :resources ((for-each ((i repo) (enumerate repos))
                (github-repository "{repo_slug}"
                  :name "{owner}/{repo_slug}" :description "{repo_description}" :idx "{i}"))))`
	rows := []map[string]string{
		{"slug": "a", "description": "first"},
		{"slug": "b", "description": "second"},
	}
	a, _ := evalOK(t, src, Bindings{Records: map[string][]map[string]string{"repos": rows}})
	if diff := cmp.Diff([]string{"github_repository.a", "github_repository.b"}, addrs(a.Resources)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if got, want := attrs(t, a.Resources, "github_repository.b"), `{"name":"pleme-io/b","description":"second","idx":"1"}`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}

	// An empty record list renders nothing.
	a, _ = evalOK(t, src, Bindings{Records: map[string][]map[string]string{"repos": {}}})
	if len(a.Resources) != 0 {
		t.Errorf("empty record list rendered %v", addrs(a.Resources))
	}
	// A field missing from a row is an unknown var, with no leakage from the previous row.
	got := firstError(t, src, Bindings{Records: map[string][]map[string]string{"repos": {rows[0], {"slug": "c"}}}})
	if want := "t.tlisp:5:61: interpolation: unknown var `repo_description`"; got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	// The bare item is not bound in a record loop.
	got = firstError(t, `(deflava-architecture gh :inputs ((:repos ()))
  :resources ((for-each ((i repo) (enumerate repos)) (r "{repo}"))))`,
		Bindings{Records: map[string][]map[string]string{"repos": rows}})
	if want := "t.tlisp:2:58: interpolation: unknown var `repo`"; got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestEval_maps(t *testing.T) {
	t.Parallel()
	a, _ := evalOK(t, `(deflava-architecture m :inputs ((:env "prod"))
  :resources ((r "r"
    :tags ((Name "x") (Env env) (Nested ((A "1"))))
    :plist (:host "db" :port 5432 :in-name (:a #t))
    :arr ((ref r "other" id) (ref r "other" arn))
    :mixed ("a" 1 #f ())
    :empty ())
   (r "other")))`, Bindings{})
	want := `{"tags":{"Name":"x","Env":"prod","Nested":{"A":"1"}},"plist":{"host":"db","port":5432,"in-name":{"a":true}},"arr":["${r.other.id}","${r.other.arn}"],"mixed":["a",1,false,[]],"empty":[]}`
	if got := attrs(t, a.Resources, "r.r"); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// TestEval_lifecycleKeys: the dialect's kebab-case keywords inside :lifecycle render as
// Terraform's meta-argument names; other nested maps keep their keys.
func TestEval_lifecycleKeys(t *testing.T) {
	t.Parallel()
	src := `(deflava-architecture w
  :resources ((aws-s3-bucket "b" :bucket "x" :tags (:my-tag "v")
                :lifecycle (:prevent-destroy #t :create-before-destroy #t :ignore-changes ("tags")
                            :replace-triggered-by ("aws_s3_bucket.other")
                            :precondition ((:condition "ok" :error-message "not ok"))
                            :postcondition (:condition "ok" :error-message "still not ok")))))`
	a, _ := evalOK(t, src, Bindings{})
	want := `{"bucket":"x","tags":{"my-tag":"v"},"lifecycle":{"prevent_destroy":true,"create_before_destroy":true,` +
		`"ignore_changes":["tags"],"replace_triggered_by":["aws_s3_bucket.other"],` +
		`"precondition":[{"condition":"ok","error_message":"not ok"}],"postcondition":{"condition":"ok","error_message":"still not ok"}}}`
	if got := attrs(t, a.Resources, "aws_s3_bucket.b"); got != want {
		t.Errorf("attributes\n got %s\nwant %s", got, want)
	}
}

func TestEval_metaArguments(t *testing.T) {
	t.Parallel()
	src := `(deflava-architecture w :inputs ((:enable "true"))
  :resources ((a "counted" :count 3 :x 1)
              (b "each" :for-each (:a "1" "b-c" (ref a "counted" id)) :x 1)
              (c "off" :when #f :x 1)
              (c "on" :when #t)
              (c "int" :when 0)
              (c "bound" :when "{enable}")
              (c "sym" :when true)))`
	a, _ := evalOK(t, src, Bindings{})
	if diff := cmp.Diff([]string{"a.counted", "b.each", "c.on", "c.bound", "c.sym"}, addrs(a.Resources)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if c := a.Resources[0].Count; c == nil || *c != 3 {
		t.Errorf("count = %v", c)
	}
	fe, err := mapJSON(a.Resources[1].ForEach)
	if err != nil || string(fe) != `{"a":"1","b-c":"${a.counted.id}"}` {
		t.Errorf("for_each = %s (%v)", fe, err)
	}
	a, _ = evalOK(t, src, Bindings{Scalars: map[string]string{"enable": "false"}})
	if diff := cmp.Diff([]string{"a.counted", "b.each", "c.on", "c.sym"}, addrs(a.Resources)); diff != "" {
		t.Errorf("enable=false (-want +got):\n%s", diff)
	}
	got := firstError(t, src, Bindings{Scalars: map[string]string{"enable": "maybe"}})
	if want := `t.tlisp:7:32: type mismatch: expected boolean (true|false|#t|#f|1|0), got "maybe"`; got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestEval_clauses(t *testing.T) {
	t.Parallel()
	a, diags := evalOK(t, `(deflava-architecture c
  :doc "ignored" :requires (x)
  :inputs ((:region "us-east-1"))
  :providers ((aws :region region :alias "east" :default-tags (:a "b"))
              (aws :region "us-west-2" :source "hashicorp/aws")
              (google))
  :locals (:common-tags (:team "x") :n 3)
  :data ((aws-ami "ubuntu" :most-recent #t :owners ("099720109477")))
  :outputs (:vpc-id (ref aws-vpc "v" id) :ami (ref data.aws-ami "ubuntu" id))
  :resources ((aws-vpc "v")
              (import "aws_vpc.v" "vpc-123")
              (import "aws_vpc.v" "vpc-456" :when #f))
  :result (:ignored "x"))`, Bindings{})
	if len(diags) != 0 {
		t.Errorf("unexpected diagnostics: %v", diags)
	}
	if len(a.Providers) != 3 || a.Providers[0].Alias != "east" || a.Providers[0].Source != "hashicorp/aws" ||
		a.Providers[2].Source != "hashicorp/google" {
		t.Errorf("providers = %+v", a.Providers)
	}
	cfg, _ := mapJSON(&a.Providers[0].Config)
	if string(cfg) != `{"region":"us-east-1","default_tags":{"a":"b"}}` {
		t.Errorf("provider config = %s", cfg)
	}
	loc, _ := mapJSON(&a.Locals)
	if string(loc) != `{"common_tags":{"team":"x"},"n":3}` {
		t.Errorf("locals = %s", loc)
	}
	out, _ := mapJSON(&a.Outputs)
	if string(out) != `{"vpc-id":"${aws_vpc.v.id}","ami":"${data.aws_ami.ubuntu.id}"}` {
		t.Errorf("outputs = %s", out)
	}
	if got := attrs(t, a.DataSources, "aws_ami.ubuntu"); got != `{"most_recent":true,"owners":["099720109477"]}` {
		t.Errorf("data = %s", got)
	}
	if diff := cmp.Diff([]arch.Import{{To: "aws_vpc.v", ID: "vpc-123"}}, a.Imports); diff != "" {
		t.Errorf("imports (-want +got):\n%s", diff)
	}
}

func TestEval_warnings(t *testing.T) {
	t.Parallel()
	_, diags := evalOK(t, `(deflava-architecture w
  :inputs ((:domain "pleme.io"))
  :resources ((cloudflare-zone "{domain}" :x 1 :x 2)
              (r "9lives")
              (r "uses" :z (ref cloudflare-zone "{domain}" id)))
  :result (:zone-id "x"))
(deflava-architecture second :resources ())`,
		Bindings{Scalars: map[string]string{"name": "prod", "domain": "pleme.io"}})
	var got []string
	for _, d := range diags {
		got = append(got, d.String())
	}
	want := []string{
		`t.tlisp:2:3: warning: binding "name" is not declared in the :inputs of w (ignored)`,
		`t.tlisp:3:32: warning: resource name "pleme.io" is not a valid Terraform identifier (letters, digits, _ and -, starting with a letter or _); using "pleme-io"`,
		`t.tlisp:3:48: warning: attribute x is set twice; the last value wins`,
		`t.tlisp:4:18: warning: resource name "9lives" is not a valid Terraform identifier (letters, digits, _ and -, starting with a letter or _); using "_9lives"`,
		`t.tlisp:6:3: warning: :result is not rendered (it is a consumer-side contract); declare :outputs to render Terraform outputs`,
		`t.tlisp:7:1: warning: only the first deflava-architecture form (at t.tlisp:1:1) is evaluated; this one is ignored`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestEval_errorsWithPositions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, src string
		b         Bindings
		want      []string
	}{
		{"no architecture", `(deflava-interface x)`, Bindings{},
			[]string{"t.tlisp:1:1: expected deflava-architecture form, got no deflava-architecture form (the source needs a (deflava-architecture NAME :resources (...)) form)"}},
		{"missing binding and cascade suppressed", `(deflava-architecture a
  :inputs ((:cidr))
  :resources ((aws-vpc "v" :cidr-block "{cidr}")))`, Bindings{},
			[]string{"t.tlisp:2:12: missing input binding for cidr"}},
		{"bad defaults", `(deflava-architecture a
  :inputs ((:n 3) (:l ("a" 1)))
  :resources ())`, Bindings{}, []string{
			`t.tlisp:2:16: type mismatch: expected string | list, got integer 3 (defaults are strings: write "3")`,
			"t.tlisp:2:28: type mismatch: expected list of strings, got integer 1",
		}},
		{"several errors accumulate", `(deflava-architecture a
  :resources ((aws-vpc "v" :x :kw :y "{nope}")
              (aws-vpc 12)
              (aws-vpc "w" :count "3")
              "str"
              ()))`, Bindings{}, []string{
			"t.tlisp:2:31: type mismatch: expected value (not kw), got :kw (write a string like \"kw\")",
			"t.tlisp:2:39: interpolation: unknown var `nope`",
			"t.tlisp:3:24: expected deflava-architecture form, got resource name not string (expected a quoted name like \"main\", got integer 12)",
			"t.tlisp:4:35: type mismatch: expected :count expects integer (an integer literal, got string \"3\")",
			"t.tlisp:5:15: expected deflava-architecture form, got resource not a list (expected (TYPE \"NAME\" :attr value ...), got string \"str\")",
			"t.tlisp:6:15: expected deflava-architecture form, got resource head not sym (expected a type symbol like aws-vpc, got an empty list)",
		}},
		{"duplicate address names both positions", `(deflava-architecture a
  :inputs ((:xs ("a" "b")))
  :resources ((aws-vpc "v")
              (for-each ((i x) (enumerate xs)) (aws-vpc "v"))))`, Bindings{}, []string{
			"t.tlisp:4:48: duplicate resource address aws_vpc.v (first declared at t.tlisp:3:15)",
			"t.tlisp:4:48: duplicate resource address aws_vpc.v (first declared at t.tlisp:3:15)",
		}},
		{"dangling refs", `(deflava-architecture a
  :resources ((aws-vpc "v" :when #f)
              (aws-subnet "s" :vpc-id (ref aws-vpc "v" id) :other (ref aws-igw "g" id)
                :ami (ref data.aws-ami "x" id)))
  :outputs (:o (ref aws-subnet "nope" id)))`, Bindings{}, []string{
			"t.tlisp:3:39: reference to resource aws_vpc.v, which its :when omits (declared at t.tlisp:2:15)",
			"t.tlisp:3:67: reference to undeclared resource aws_igw.g",
			"t.tlisp:4:22: reference to undeclared data source data.aws_ami.x",
			"t.tlisp:5:16: reference to undeclared resource aws_subnet.nope",
		}},
		{"list input inside a larger string", `(deflava-architecture a :inputs ((:azs ("a")))
  :resources ((r "r" :x "{azs}-x")))`, Bindings{}, []string{
			"t.tlisp:2:26: interpolation: unknown var `azs` (`azs` is a list input: use it alone, as \"{azs}\" or a bare symbol, or iterate it with for-each)",
		}},
		{"for-each over a scalar", `(deflava-architecture a :inputs ((:azs "a"))
  :resources ((for-each ((i x) (enumerate azs)) (r "r-{i}"))))`, Bindings{}, []string{
			"t.tlisp:2:43: interpolation: unknown var `azs` (`azs` is a scalar; for-each needs a list or record input)",
		}},
		{"bad refs", `(deflava-architecture a
  :resources ((r "r" :a (ref "x" "y" id) :b (ref r y id) :c (ref r "y") :d (ref r "r" id extra))))`, Bindings{}, []string{
			"t.tlisp:2:30: unknown reference form: type (expected (ref TYPE \"NAME\" ATTR))",
			"t.tlisp:2:52: unknown reference form: name (expected (ref TYPE \"NAME\" ATTR) with a quoted NAME)",
			"t.tlisp:2:61: unknown reference form: attr (expected (ref TYPE \"NAME\" ATTR) with an attribute symbol like id)",
			"t.tlisp:2:90: unknown reference form: expected (ref TYPE \"NAME\" ATTR), got extra elements",
		}},
		{"clause errors", `(deflava-architecture a
  :resources ()
  :outputs (x 1)
  :locals (:a)
  :providers ((:aws) 3))`, Bindings{}, []string{
			"t.tlisp:3:13: expected deflava-architecture form, got :outputs head not :kw (expected (:key value ...), got symbol `x`)",
			"t.tlisp:4:12: expected deflava-architecture form, got :locals missing value (for :a; expected (:key value ...), every :key followed by its value)",
			"t.tlisp:5:16: expected deflava-architecture form, got provider head not sym (expected a provider name like aws)",
			"t.tlisp:5:22: expected deflava-architecture form, got provider not a list (expected (NAME :key value ...), got integer 3)",
		}},
		{"keyword map odd", `(deflava-architecture a :resources ((r "r" :m (:a 1 :b))))`, Bindings{}, []string{
			"t.tlisp:1:53: keyword map: odd number of elements (:b has no value)",
		}},
		{"columns count characters, not bytes", "(deflava-architecture a :resources ((r \"x\" :d \"é✓\\n{nope}\")))", Bindings{}, []string{
			"t.tlisp:1:52: interpolation: unknown var `nope`",
		}},
		{"empty name", `(deflava-architecture a :inputs ((:p "")) :resources ((r "{p}")))`, Bindings{}, []string{
			"t.tlisp:1:58: resource name is empty after interpolation",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a, diags := EvalArchitecture([]byte(tt.src), tt.b, Options{File: "t.tlisp"})
			if a != nil {
				t.Errorf("architecture returned despite errors")
			}
			var got []string
			for _, d := range diags.Errors() {
				got = append(got, d.String())
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestEval_limits(t *testing.T) {
	t.Parallel()
	items := make([]string, 101)
	for i := range items {
		items[i] = fmt.Sprint(i)
	}
	src := `(deflava-architecture big :inputs ((:xs ()))
  :resources ((for-each ((i x) (enumerate xs)) (for-each ((j y) (enumerate xs)) (r "r-{i}-{j}")))))`
	_, diags := EvalArchitecture([]byte(src), Bindings{Lists: map[string][]string{"xs": items}}, Options{File: "t.tlisp"})
	errs := diags.Errors()
	if len(errs) != 1 || !strings.Contains(errs[0].Message, "more than 10000 resources after loop expansion") {
		t.Errorf("diags = %v", errs)
	}

	// Nested loops over empty lists expand nothing but are bounded too.
	src = "(deflava-architecture a :inputs ((:xs (a b)) (:empty ())) :resources (" +
		strings.Repeat("(for-each ((i x) (enumerate xs)) ", 40) + "(for-each ((i x) (enumerate empty)) (r \"x\"))" +
		strings.Repeat(")", 40) + "))"
	_, diags = EvalArchitecture([]byte(src), Bindings{}, Options{})
	errs = diags.Errors()
	if len(errs) != 1 || !strings.Contains(errs[0].Message, "more than 100000 for-each iterations") {
		t.Errorf("diags = %v", errs)
	}

	// Interpolation output is bounded.
	big := strings.Repeat("x", 1<<20)
	src = "(deflava-architecture a :inputs ((:big \"\")) :resources ((r \"r\" :a \"" + strings.Repeat("{big}", 20) + "\")))"
	_, diags = EvalArchitecture([]byte(src), Bindings{Scalars: map[string]string{"big": big}}, Options{})
	errs = diags.Errors()
	if len(errs) != 1 || !strings.Contains(errs[0].Message, "strings exceed 16777216 bytes") {
		t.Errorf("diags = %v", errs)
	}

	src = "(deflava-architecture a :inputs ((:big \"\")) :resources ((r \"r\" :a (" + strings.Repeat("big ", 20) + "))))"
	_, diags = EvalArchitecture([]byte(src), Bindings{Scalars: map[string]string{"big": big}}, Options{})
	errs = diags.Errors()
	if len(errs) != 1 || !strings.Contains(errs[0].Message, "strings exceed 16777216 bytes") {
		t.Errorf("bare symbols: diags = %v", errs)
	}

	// Errors stop at MaxDiagnostics.
	var b strings.Builder
	b.WriteString("(deflava-architecture many :resources (")
	for i := range 200 {
		fmt.Fprintf(&b, "(r \"r%d\" :x :bad)\n", i)
	}
	b.WriteString("))")
	_, diags = EvalArchitecture([]byte(b.String()), Bindings{}, Options{})
	if n := len(diags.Errors()); n != MaxDiagnostics {
		t.Errorf("%d errors, want %d", n, MaxDiagnostics)
	}
}

func TestEval_unclosedListStillEvaluated(t *testing.T) {
	t.Parallel()
	_, diags := EvalArchitecture([]byte("(deflava-architecture a\n  :resources ((r \"x\" :k :v))\n"), Bindings{}, Options{File: "f"})
	var got []string
	for _, d := range diags {
		got = append(got, d.String())
	}
	want := []string{
		"f:2:25: type mismatch: expected value (not kw), got :v (write a string like \"v\")",
		"f:3:1: unclosed list starting at offset 0 (line 1, column 1): missing `)` at end of input",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestDiagnostics_Err(t *testing.T) {
	t.Parallel()
	ds := Diagnostics{
		{Pos: Pos{File: "f", Line: 1, Col: 2}, Severity: SeverityWarning, Message: "w"},
		{Pos: Pos{File: "f", Line: 3, Col: 4}, Severity: SeverityError, Message: "e1"},
		{Pos: Pos{File: "f", Line: 5, Col: 6}, Severity: SeverityError, Message: "e2"},
	}
	if (Diagnostics{ds[0]}).Err() != nil {
		t.Error("warnings only: Err() != nil")
	}
	err := ds.Err()
	if err == nil || err.Error() != "f:3:4: e1" {
		t.Fatalf("Err() = %v", err)
	}
	wrapped := fmt.Errorf("render: %w", err)
	var list *ErrorList
	if !errorsAs(wrapped, &list) || len(list.Diags) != 3 {
		t.Errorf("errors.As ErrorList: %v", list)
	}
	if got := ds.String(); got != "f:1:2: warning: w\nf:3:4: e1\nf:5:6: e2" {
		t.Errorf("Diagnostics.String() = %q", got)
	}
	var d Diagnostic
	if !errorsAs(wrapped, &d) || d.Message != "e1" {
		t.Errorf("errors.As Diagnostic: %v", d)
	}
	if got := ds[0].String(); got != "f:1:2: warning: w" {
		t.Errorf("warning String() = %q", got)
	}
	if SeverityError.String() != "error" || SeverityWarning.String() != "warning" {
		t.Error("Severity.String")
	}
}

func TestDeclaredInputs(t *testing.T) {
	t.Parallel()
	decls, diags := DeclaredInputs([]byte(`(deflava-architecture a
  :inputs ((:name "main") (:azs ("a" "b")) (:req) (:bad 3))
  :resources ())`), Options{File: "f"})
	if len(diags.Errors()) != 1 {
		t.Errorf("diags = %v", diags)
	}
	want := []InputDecl{
		{Name: "name", Default: &InputDefault{Scalar: "main"}, Pos: Pos{File: "f", Line: 2, Col: 12, Offset: 35}},
		{Name: "azs", Default: &InputDefault{IsList: true, Items: []string{"a", "b"}}, Pos: Pos{File: "f", Line: 2, Col: 27, Offset: 50}},
		{Name: "req", Pos: Pos{File: "f", Line: 2, Col: 44, Offset: 67}},
	}
	if diff := cmp.Diff(want, decls); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestEval_secretValuesNeverInDiagnostics(t *testing.T) {
	t.Parallel()
	src := `(deflava-architecture s
  :inputs ((:token "") (:tokens ()) (:name "x"))
  :resources ((r "a" :when "{token}")
              (r "b-{token+1}")
              (for-each ((i tk) (enumerate tokens)) (r "c-{i}" :when "{tk}"))
              (r "{token}.x")
              (import "{token}" "id")
              (r "d" :n "{token+1}")
              (r "e" :n "{token-1}")))`
	b := Bindings{
		Scalars: map[string]string{"token": "12"},
		Lists:   map[string][]string{"tokens": {"hunter3"}},
	}
	opts := Options{File: "s", SecretInputs: map[string]bool{"token": true, "tokens": true}}
	_, diags := EvalArchitecture([]byte(src), b, opts)
	if n := len(diags.Errors()); n != 7 {
		t.Errorf("%d errors, want 7: %v", n, diags)
	}
	// Arithmetic over a secret is refused, integer or not: the engine gets the value marked
	// sensitive (render.SensitiveTemplate), never a number to add to.
	for _, d := range diags.Errors()[5:] {
		if !strings.Contains(d.Message, "is a secret binding: no arithmetic over it") {
			t.Errorf("arithmetic over a secret: %s", d)
		}
	}
	b.Scalars["token"] = "hunter2"
	_, diags = EvalArchitecture([]byte(src), b, opts)
	if len(diags.Warnings()) != 0 {
		t.Errorf("want no warning (a secret in a name is an error, not sanitized): %v", diags)
	}
	for _, d := range diags {
		if strings.Contains(d.Message, "hunter") {
			t.Errorf("secret value in diagnostic: %s", d)
		}
		if !strings.Contains(d.Message, "<redacted>") && !strings.Contains(d.Message, "must not contain a secret binding") &&
			!strings.Contains(d.Message, "is a secret binding") {
			t.Errorf("diagnostic does not say it redacted: %s", d)
		}
	}
	// Without SecretInputs the value is shown.
	_, diags = EvalArchitecture([]byte(src), b, Options{File: "s"})
	if !strings.Contains(diags.Errors()[0].Message, `got "hunter2"`) {
		t.Errorf("plain value not shown: %v", diags.Errors()[0])
	}
}

// TestEval_secretInputInMetaArgumentIsError: depends_on, a resource's provider and lifecycle
// are addresses and expressions to Terraform; a secret binding in one is an error at its
// position, never quoted (tofu init quotes the rendered line of an invalid one).
func TestEval_secretInputInMetaArgumentIsError(t *testing.T) {
	t.Parallel()
	src := `(deflava-architecture s
  :inputs ((:pw "") (:ok "terraform_data.a"))
  :resources ((terraform-data "a" :input "x")
              (terraform-data "b" :input "x" :depends-on ("{pw}"))
              (terraform-data "c" :input "x" :provider "{pw}")
              (terraform-data "d" :input "x" :lifecycle (:ignore_changes ("{pw}")))
              (terraform-data "e" :input "x" :lifecycle (:replace_triggered_by (pw)))
              (terraform-data "f" :input "{pw}" :depends-on ("{ok}"))))`
	b := Bindings{Scalars: map[string]string{"pw": "hunter22"}}
	_, diags := EvalArchitecture([]byte(src), b, Options{File: "s", SecretInputs: map[string]bool{"pw": true}})
	errs := diags.Errors()
	want := []string{"s:4:60: a meta-argument depends_on must not contain a secret binding (`pw`)",
		"s:5:57: a meta-argument provider must not contain", "s:6:76: a meta-argument lifecycle must not contain",
		"s:7:81: a meta-argument lifecycle must not contain"}
	if len(errs) != len(want) {
		t.Fatalf("%d errors, want %d: %v", len(errs), len(want), diags)
	}
	for i, w := range want {
		if got := errs[i].String(); !strings.Contains(got, w) || strings.Contains(got, "hunter") {
			t.Errorf("error %d = %q, want %q and no value", i, got, w)
		}
	}
}

// A secret input interpolated into anything that becomes an address (resource, data source,
// ref and import names, provider alias and source) is an error at the interpolation: addresses
// appear in events and artifacts. Attribute values may carry secrets.
func TestEval_secretInputInNameIsError(t *testing.T) {
	opts := Options{File: "s", SecretInputs: map[string]bool{"token": true, "tokens": true}}
	b := Bindings{
		Scalars: map[string]string{"token": "TOPSECRET", "n": "3"},
		Lists:   map[string][]string{"tokens": {"TOPSECRET2"}},
	}
	tests := []struct {
		name string
		body string
		want string // "" means no error
	}{
		{"resource name", `:resources ((terraform-data "t{token}"))`,
			"s:3:33: a resource name must not contain a secret binding (`token`)"},
		{"resource name arithmetic", `:resources ((terraform-data "x-{ token+1 }"))`,
			"s:3:34: a resource name must not contain a secret binding (`token`)"},
		{"loop item over a secret list", `:resources ((for-each ((i tk) (enumerate tokens)) (terraform-data "r-{tk}")))`,
			"s:3:72: a resource name must not contain a secret binding (`tk`)"},
		{"data source name", `:resources () :data ((http "{token}" :url "u"))`,
			"s:3:31: a data source name must not contain a secret binding (`token`)"},
		{"ref name", `:resources ((terraform-data "a") (terraform-data "b" :input (ref terraform-data "a{token}" id)))`,
			"s:3:85: a ref name must not contain a secret binding (`token`)"},
		{"import address", `:resources ((terraform-data "a") (import "terraform_data.{token}" "id"))`,
			"s:3:60: an import address must not contain a secret binding (`token`)"},
		{"provider alias", `:resources () :providers ((aws :alias "{token}"))`,
			"s:3:42: a provider alias must not contain a secret binding (`token`)"},
		{"attribute value may carry a secret", `:resources ((terraform-data "t-{n}" :input "{token}"))`, ""},
		{"loop index over a secret list is not secret", `:resources ((for-each ((i tk) (enumerate tokens)) (terraform-data "r-{i}" :input tk)))`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := "(deflava-architecture s\n  :inputs ((:token \"\") (:tokens ()) (:n \"\"))\n  " + tt.body + ")"
			a, diags := EvalArchitecture([]byte(src), b, opts)
			var got string
			if errs := diags.Errors(); len(errs) > 0 {
				got = errs[0].String()
			}
			if got != tt.want {
				t.Errorf("first error = %q, want %q (all: %v)", got, tt.want, diags)
			}
			if tt.want == "" && a == nil {
				t.Fatalf("no architecture: %v", diags)
			}
			for _, d := range diags {
				if strings.Contains(d.Message, "TOPSECRET") {
					t.Errorf("secret value in diagnostic: %s", d)
				}
			}
			if a != nil {
				for _, r := range a.Resources {
					if strings.Contains(r.Address(), "TOPSECRET") {
						t.Errorf("secret value in address %s", r.Address())
					}
				}
			}
			// Without SecretInputs the same source is accepted (the evaluator cannot know).
			if tt.want != "" {
				_, plain := EvalArchitecture([]byte(src), b, Options{File: "s"})
				for _, d := range plain.Errors() {
					if strings.Contains(d.Message, "secret binding") {
						t.Errorf("secret error without SecretInputs: %s", d)
					}
				}
			}
		})
	}
}

// TestEval_valueAttacks: what a small source could build. A
// 200 KB source of integers repeated through two nested loops (30 × 30 × 100,000 values, no
// string bytes) took 4 GB before "fatal error: out of memory" in lava up; it is refused at
// MaxValues. A binding "$" interpolated 40,000 times into one string allocated 4.7 GB
// (literalTail copied the whole string at each reference); it stays linear.
func TestEval_valueAttacks(t *testing.T) {
	items := make([]string, 30)
	for i := range items {
		items[i] = fmt.Sprint(i)
	}
	src := `(deflava-architecture boom :inputs ((:a ()))
  :resources ((for-each ((i x) (enumerate a)) (for-each ((j y) (enumerate a))
    (terraform-data "r-{i}-{j}" :input (` + strings.Repeat("1 ", 100_000) + `))))))`
	_, diags := EvalArchitecture([]byte(src), Bindings{Lists: map[string][]string{"a": items}}, Options{File: "t.tlisp"})
	errs := diags.Errors()
	if len(errs) != 1 || !strings.Contains(errs[0].Message, "values exceed 1048576") || !strings.HasPrefix(errs[0].String(), "t.tlisp:3:") {
		t.Errorf("diags = %v; want one error at t.tlisp:3 naming the limit of 1048576 values", errs)
	}

	// A list binding counts its elements.
	empties := make([]string, 2000)
	src = `(deflava-architecture lists :inputs ((:e ()) (:a ()))
  :resources ((for-each ((i x) (enumerate a)) (for-each ((j y) (enumerate a))
    (terraform-data "r-{i}-{j}" :input e)))))`
	_, diags = EvalArchitecture([]byte(src), Bindings{Lists: map[string][]string{"e": empties, "a": items}}, Options{File: "t.tlisp"})
	if errs := diags.Errors(); len(errs) != 1 || !strings.Contains(errs[0].Message, "values exceed 1048576") {
		t.Errorf("list binding: diags = %v", errs)
	}

	src = `(deflava-architecture tail :inputs ((:v ""))
  :resources ((terraform-data "x" :input "` + strings.Repeat("{v}", 40_000) + `")))`
	var mid runtime.MemStats
	runtime.ReadMemStats(&mid)
	arch, diags := EvalArchitecture([]byte(src), Bindings{Scalars: map[string]string{"v": "$"}}, Options{File: "t.tlisp"})
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if errs := diags.Errors(); len(errs) != 0 || arch == nil {
		t.Fatalf("diags = %v", errs)
	}
	// Allocation is deterministic where time is not: 40,000 "$" references make a string of
	// 240 KB; the quadratic rewrite allocated 4.7 GB (this test does not run in parallel, so the figure is its own).
	if alloc := after.TotalAlloc - mid.TotalAlloc; alloc > 256<<20 {
		t.Errorf("interpolating 40,000 references allocated %d MB; want far under 256 MB", alloc>>20)
	}
}

// TestEval_interpolationAttacks: sources of at most 1 MiB. 349,477 references
// to an undeclared name in one string took 4 minutes (each error position rescanned the
// string, after the diagnostics' cap too); a reference expanding to "" cost nothing, so
// 10,000 loop passes over 349,000 of them took 2 minutes and 9.8 GB. The first now stops at the
// cap (a watchdog far above its time catches the old behaviour), the second at MaxValues.
func TestEval_interpolationAttacks(t *testing.T) {
	src := `(deflava-architecture x :resources ((aws-vpc "a" :x "` + strings.Repeat("{q}", 349_000) + `")))`
	done := make(chan Diagnostics, 1)
	go func() {
		_, diags := EvalArchitecture([]byte(src), Bindings{}, Options{File: "t.tlisp"})
		done <- diags
	}()
	select {
	case diags := <-done:
		if n := len(diags.Errors()); n != MaxDiagnostics {
			t.Errorf("%d errors, want the cap %d", n, MaxDiagnostics)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("349,000 unknown references still evaluating after 30s (the cap does not stop the string)")
	}

	// A record row of 10,000 fields: 10,000 loop variables every reference scanned.
	wide := map[string]string{}
	for i := range 10_000 {
		wide[fmt.Sprint("f", i)] = "v"
	}
	src = `(deflava-architecture x :inputs ((:rs ()))
  :resources ((for-each ((i r) (enumerate rs)) (aws-vpc "a{i}" :x "` + strings.Repeat("{r_f1}", 1000) + `"))))`
	_, diags := EvalArchitecture([]byte(src), Bindings{Records: map[string][]map[string]string{"rs": {wide}}}, Options{File: "t.tlisp"})
	if errs := diags.Errors(); len(errs) != 1 || !strings.Contains(errs[0].Message, "row 0 has 10000 fields, more than 256") {
		t.Errorf("wide record: diags = %v; want the limit of a row's fields", errs)
	}

	// Nested record loops: each level keeps its row's fields live, so 240 levels over one
	// 256-field row had every reference scan 61,000 loop variables (54 s, found by an eighth
	// trial); the live loop variables are bounded.
	row := map[string]string{}
	for i := range MaxRecordFields {
		row[fmt.Sprint("f", i)] = "v"
	}
	body := `(aws-vpc "a" :x "` + strings.Repeat("{s}", 1000) + `")`
	for d := range 240 {
		body = fmt.Sprintf("(for-each ((i%d a%d) (enumerate r)) %s)", d, d, body)
	}
	src = `(deflava-architecture x :inputs ((:r ()) (:s "v")) :resources (` + body + `))`
	_, diags = EvalArchitecture([]byte(src), Bindings{Records: map[string][]map[string]string{"r": {row}}}, Options{File: "t.tlisp"})
	if errs := diags.Errors(); len(errs) != 1 || !strings.Contains(errs[0].Message, fmt.Sprintf("loop variables live in the nested loops here, more than %d", MaxLoopVariables)) {
		t.Errorf("nested record loops: diags = %v; want the limit of live loop variables", errs)
	}

	empties := make([]string, 100)
	src = `(deflava-architecture x :inputs ((:e "") (:l ()))
  :resources ((for-each ((i it) (enumerate l)) (aws-vpc "a{i}" :x "` + strings.Repeat("{e}", 20_000) + `"))))`
	_, diags = EvalArchitecture([]byte(src), Bindings{Scalars: map[string]string{"e": ""}, Lists: map[string][]string{"l": empties}}, Options{File: "t.tlisp"})
	if errs := diags.Errors(); len(errs) != 1 || !strings.Contains(errs[0].Message, "values exceed 1048576") {
		t.Errorf("empty references in a loop: diags = %v; want the limit of values", errs)
	}
}

// TestEval_forEachInList: a for-each element of a list value gives one element per iteration,
// over a list input and a record input, nested, beside plain elements; its errors are those of
// a resource loop.
func TestEval_forEachInList(t *testing.T) {
	t.Parallel()
	a, _ := evalOK(t, `
(deflava-architecture demo
  :inputs ((:name "main") (:azs ("a" "b")) (:teams ()) (:empty ()))
  :resources
  ((for-each ((i az) (enumerate azs))
     (aws-subnet "{name}-{i}" :availability-zone "{az}")))
  :outputs (:ids ((for-each ((i az) (enumerate azs)) (ref aws-subnet "{name}-{i}" id)))
            :mixed ("first" (for-each ((i az) (enumerate azs)) "{i}:{az}") "last")
            :nested ((for-each ((i x) (enumerate azs)) (for-each ((j y) (enumerate azs)) "{x}{y}")))
            :rows ((for-each ((i r) (enumerate teams)) "{r_name}={i}"))
            :none ((for-each ((i e) (enumerate empty)) "{e}"))))`,
		Bindings{Lists: map[string][]string{"empty": {}}, Records: map[string][]map[string]string{"teams": {{"name": "ops"}, {"name": "dev"}}}})
	got, err := mapJSON(&a.Outputs)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"ids":["${aws_subnet.main-0.id}","${aws_subnet.main-1.id}"],"mixed":["first","0:a","1:b","last"],` +
		`"nested":["aa","ab","ba","bb"],"rows":["ops=0","dev=1"],"none":[]}`
	if string(got) != want {
		t.Errorf("outputs = %s\nwant      %s", got, want)
	}
	for _, tt := range []struct{ src, want string }{
		{`((for-each ((i x) (enumerate nope)) "{x}"))`, "unknown var `nope`"},
		// Alone in its list, a two-element (for-each B) reads as a tag pair (section 1.6).
		{`("x" (for-each ((i x) (enumerate azs))))`, "expected a value after the binding"},
		{`((for-each ((i x) (each azs)) "{x}"))`, "for-each iter != enumerate"},
		{`((for-each ((i x) (enumerate azs)) "{y}"))`, "unknown var `y`"},
	} {
		msg := firstError(t, `(deflava-architecture demo :inputs ((:azs ("a")))
  :resources ((null-resource "n")) :outputs (:o `+tt.src+`))`, Bindings{})
		if !strings.Contains(msg, tt.want) {
			t.Errorf("%s: %s, want %q", tt.src, msg, tt.want)
		}
	}
}

// TestEval_providerVersion: :version is a version constraint kept on the provider (never
// rendered, like :source); a string that is not a constraint is an error at the value.
func TestEval_providerVersion(t *testing.T) {
	t.Parallel()
	a, _ := evalOK(t, `(deflava-architecture c
  :providers ((aws :version "~> 6.0" :region "us-east-1")
              (github :source "integrations/github" :version ">= 6.9, < 7.0")
              (google))
  :resources ())`, Bindings{})
	if a.Providers[0].Version != "~> 6.0" || a.Providers[1].Version != ">= 6.9, < 7.0" || a.Providers[2].Version != "" {
		t.Errorf("versions = %q, %q, %q", a.Providers[0].Version, a.Providers[1].Version, a.Providers[2].Version)
	}
	if cfg, _ := mapJSON(&a.Providers[0].Config); string(cfg) != `{"region":"us-east-1"}` {
		t.Errorf("provider config = %s, want :version left out", cfg)
	}
	for _, tc := range []struct{ src, want string }{
		{`(deflava-architecture c :providers ((aws :version "six")) :resources ())`,
			`t.tlisp:1:51: provider aws: :version "six" is not a version constraint (expected e.g. "~> 5.14" or ">= 6.0, < 7.0")`},
		{`(deflava-architecture c :providers ((aws :version 6)) :resources ())`,
			"t.tlisp:1:51: type mismatch: expected provider :version string, got integer 6"},
	} {
		if got := firstError(t, tc.src, Bindings{}); got != tc.want {
			t.Errorf("got  %s\nwant %s", got, tc.want)
		}
	}
}

// TestEval_diagnosticsBounded: a diagnostic quoting a value a binding made (here a resource name
// of 180,000 control bytes, which %q writes four times as long, twice) is cut to MaxMessageLen:
// no binding makes a diagnostic, or the gate verdict, phase event and receipt that carry it,
// large.
func TestEval_diagnosticsBounded(t *testing.T) {
	t.Parallel()
	src := `(deflava-architecture p :inputs ((:name "x")) :resources ((terraform-data "{name}g1" :input "v")))`
	_, diags := EvalArchitecture([]byte(src), Bindings{Scalars: map[string]string{"name": strings.Repeat("\x01", 180_000)}}, Options{File: "f.tlisp"})
	if len(diags) == 0 {
		t.Fatal("an invalid resource name gave no diagnostic")
	}
	for _, d := range diags {
		if n := len(d.Message); n > MaxMessageLen+len("…") {
			t.Errorf("a %s message of %d bytes, want at most %d", d.Severity, n, MaxMessageLen)
		}
		if s := d.String(); len(s) > MaxMessageLen+len("f.tlisp:1:1: warning: …")+8 {
			t.Errorf("a diagnostic of %d bytes", len(s))
		}
	}
	long := Diagnostic{Severity: SeverityError, Message: strings.Repeat("é", MaxMessageLen)}
	if s := long.String(); len(s) > MaxMessageLen+len("…") || !utf8.ValidString(s) {
		t.Errorf("a Diagnostic built with a long message prints %d bytes (valid UTF-8: %v)", len(s), utf8.ValidString(s))
	}
}
