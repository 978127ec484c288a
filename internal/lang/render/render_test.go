package render

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/lava-operator/lava/internal/lang/arch"
	"github.com/lava-operator/lava/internal/lang/tlisp"
)

func renderCompact(t *testing.T, src string, b tlisp.Bindings) string {
	t.Helper()
	a, diags := tlisp.EvalArchitecture([]byte(src), b, tlisp.Options{File: "t.tlisp"})
	if a == nil {
		t.Fatalf("evaluation failed: %v", diags)
	}
	out, err := renderJSON(a, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// TestUpstreamBehaviours are lava-eval's and magma-lava's own tests (upstream lava-eval, magma-lava)
// as far as they concern rendering.
func TestUpstreamBehaviours(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, src string
		b         tlisp.Bindings
		want      string
	}{
		{"inline tlisp renders resource.aws_vpc.main as an object",
			`(deflava-architecture demo-vpc :inputs ((:cidr "10.42.0.0/16")) :resources ((aws-vpc "main" :cidr-block "{cidr}")))`,
			tlisp.Bindings{Scalars: map[string]string{"name": "prod", "cidr": "10.42.0.0/16"}},
			`{"resource":{"aws_vpc":{"main":{"cidr_block":"10.42.0.0/16"}}}}`},
		{"{name}-vpc interpolation and dash to underscore type ids",
			`(deflava-architecture a :inputs ((:name "x")) :resources ((aws-internet-gateway "{name}-vpc")))`,
			tlisp.Bindings{}, `{"resource":{"aws_internet_gateway":{"x-vpc":{}}}}`},
		{"{i+10} arithmetic",
			`(deflava-architecture a :inputs ((:zs ("a" "b"))) :resources ((for-each ((i z) (enumerate zs)) (s "s-{i}" :c "10.0.{i+10}.0/24"))))`,
			tlisp.Bindings{}, `{"resource":{"s":{"s-0":{"c":"10.0.10.0/24"},"s-1":{"c":"10.0.11.0/24"}}}}`},
		{":data renders bool and array",
			`(deflava-architecture a :resources () :data ((aws-ami "u" :most-recent #t :owners ("1" "2"))))`,
			tlisp.Bindings{}, `{"data":{"aws_ami":{"u":{"most_recent":true,"owners":["1","2"]}}}}`},
		{":outputs keep the key and render a ref string",
			`(deflava-architecture a :resources ((aws-vpc "v")) :outputs (:vpc-id (ref aws-vpc "v" id)))`,
			tlisp.Bindings{}, `{"resource":{"aws_vpc":{"v":{}}},"output":{"vpc-id":{"value":"${aws_vpc.v.id}"}}}`},
		{"two providers with the same name become an array",
			`(deflava-architecture a :resources () :providers ((aws :region "us-east-1") (aws :alias "w" :region "us-west-2")))`,
			tlisp.Bindings{}, `{"provider":{"aws":[{"region":"us-east-1"},{"alias":"w","region":"us-west-2"}]}}`},
		{":locals key conversion and number",
			`(deflava-architecture a :resources () :locals (:retention-days 30))`,
			tlisp.Bindings{}, `{"locals":{"retention_days":30}}`},
		{":count and :for-each meta-arguments after the attributes",
			`(deflava-architecture a :resources ((r "c" :count 2 :x 1) (r "f" :for-each (:a "1") :x 1)))`,
			tlisp.Bindings{}, `{"resource":{"r":{"c":{"x":1,"count":2},"f":{"x":1,"for_each":{"a":"1"}}}}}`},
		{":when #f omits the resource",
			`(deflava-architecture a :resources ((r "off" :when #f) (r "on")))`,
			tlisp.Bindings{}, `{"resource":{"r":{"on":{}}}}`},
		{":when {enable} follows the binding",
			`(deflava-architecture a :inputs ((:enable "true")) :resources ((r "x" :when "{enable}")))`,
			tlisp.Bindings{Scalars: map[string]string{"enable": "false"}}, `{}`},
		{"record loop renders one resource per row",
			`(deflava-architecture a :inputs ((:repos ())) :resources ((for-each ((i repo) (enumerate repos)) (github-repository "{repo_slug}" :description "{repo_description}"))))`,
			tlisp.Bindings{Records: map[string][]map[string]string{"repos": {{"slug": "a", "description": "A"}, {"slug": "b", "description": "B"}}}},
			`{"resource":{"github_repository":{"a":{"description":"A"},"b":{"description":"B"}}}}`},
		{"string lists still iterate",
			`(deflava-architecture a :inputs ((:xs ())) :resources ((for-each ((i x) (enumerate xs)) (r "{x}"))))`,
			tlisp.Bindings{Lists: map[string][]string{"xs": {"p", "q"}}}, `{"resource":{"r":{"p":{},"q":{}}}}`},
		{"empty architecture renders {}",
			`(deflava-architecture a :resources ())`, tlisp.Bindings{}, `{}`},
		{"imports render as a top-level array after output",
			`(deflava-architecture a :resources ((r "x") (import "r.x" "id-1")) :outputs (:o "v"))`,
			tlisp.Bindings{}, `{"resource":{"r":{"x":{}}},"output":{"o":{"value":"v"}},"import":[{"to":"r.x","id":"id-1"}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := renderCompact(t, tt.src, tt.b); got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

// TestJSON_codeBuiltArchitecture covers what no syntax sets: depends_on, per-resource provider,
// floats, null, a repeated address (last body wins at the first position), the top-level order.
func TestJSON_codeBuiltArchitecture(t *testing.T) {
	t.Parallel()
	one := int64(1)
	a := &arch.Architecture{Name: "x"}
	a.Imports = []arch.Import{{To: "t.a", ID: "1"}}
	a.Outputs.Set("o", arch.Value{})
	a.DataSources = []arch.Resource{{Type: "d", Name: "n", Count: &one}}
	r1 := arch.Resource{Type: "t", Name: "a", Count: &one,
		DependsOn: []arch.ResourceRef{{Type: "t", Name: "b"}, {Type: "data.d", Name: "n"}},
		Provider:  &arch.ProviderRef{Name: "aws", Alias: "west"}}
	r1.Attributes.Set("f", arch.Value{Kind: arch.KindFloat, Float: 1.5})
	r2 := arch.Resource{Type: "u", Name: "z"}
	r3 := arch.Resource{Type: "t", Name: "b", Provider: &arch.ProviderRef{Name: "aws"}}
	r4 := arch.Resource{Type: "t", Name: "a"}
	r4.Attributes.Set("replaced", arch.Bool(true))
	a.Resources = []arch.Resource{r1, r2, r3, r4}
	a.Locals.Set("l", arch.List())
	a.Providers = []arch.ProviderRef{{Name: "aws"}}
	got, err := renderJSON(a, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"provider":{"aws":{}},"locals":{"l":[]},"resource":{"t":{"a":{"replaced":true},"b":{"provider":"aws"}},"u":{"z":{}}},"data":{"d":{"n":{}}},"output":{"o":{"value":null}},"import":[{"to":"t.a","id":"1"}]}`
	if string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	a.Resources = a.Resources[:3]
	got, _ = renderJSON(a, false, nil)
	if !strings.Contains(string(got), `"a":{"f":1.5,"count":1,"provider":"aws.west","depends_on":["t.b","data.d.n"]}`) {
		t.Errorf("meta-arguments: %s", got)
	}

	if b, err := renderJSON(nil, true, nil); err != nil || string(b) != "{}\n" {
		t.Errorf("renderJSON(nil) = %q, %v", b, err)
	}
	bad := &arch.Architecture{Locals: arch.Map{}}
	bad.Locals.Set("nan", arch.Value{Kind: arch.KindFloat, Float: zero() / zero()})
	if _, _, err := Render(bad); err == nil {
		t.Error("NaN rendered without error")
	}
}

func zero() float64 { return 0 }

// TestAppendString_matchesEncodingJSON compares the emitter's string escaping with
// encoding/json's (HTML escaping off).
func TestAppendString_matchesEncodingJSON(t *testing.T) {
	t.Parallel()
	inputs := []string{
		"", "plain", `quote " backslash \ slash /`, "<a href=\"x\">&amp;</a>", "\x00\x01\x1f\x7f",
		"\b\f\n\r\t", "é ✓ 😀", "\u2028\u2029", "bad \xff utf8 \xc3", "\xed\xa0\x80 surrogate",
		"${aws_vpc.main.id}",
	}
	for _, s := range inputs {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(s); err != nil {
			t.Fatal(err)
		}
		want := strings.TrimSuffix(buf.String(), "\n")
		if got := string(appendString(nil, s)); got != want {
			t.Errorf("appendString(%q) = %s, want %s", s, got, want)
		}
	}
}
