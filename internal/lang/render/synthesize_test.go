package render

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/lava-operator/lava/internal/lang/arch"
	"github.com/lava-operator/lava/internal/lang/tlisp"
)

// seedSource is the inline source of examples/cloud/prod-vpc.yaml, the seed manifest.
const seedSource = `(deflava-architecture demo-vpc
  :inputs ((:cidr "10.42.0.0/16"))
  :resources ((aws-vpc "main" :cidr-block "{cidr}")))
`

// TestSeedSource_isTheExample pins examples/cloud/prod-vpc.yaml (the seed manifest) to
// seedSource and its bindings, gate and engine, so the tests here render exactly what the
// example applies.
func TestSeedSource_isTheExample(t *testing.T) {
	raw, err := os.ReadFile("../../../examples/cloud/prod-vpc.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		APIVersion string `json:"apiVersion"`
		Kind       string
		Metadata   struct{ Name, Namespace string }
		Spec       struct {
			Source   struct{ Inline string }
			Bindings map[string]string
			Gate     string
			Engine   string
		}
	}
	if err := yaml.UnmarshalStrict(raw, &m, yaml.DisallowUnknownFields); err != nil {
		t.Fatalf("examples/cloud/prod-vpc.yaml: %v", err)
	}
	if diff := cmp.Diff(seedSource, m.Spec.Source.Inline); diff != "" {
		t.Errorf("inline source differs from seedSource (-want +got):\n%s", diff)
	}
	want := map[string]string{"name": "prod", "cidr": "10.42.0.0/16"}
	if diff := cmp.Diff(want, m.Spec.Bindings); diff != "" {
		t.Errorf("bindings (-want +got):\n%s", diff)
	}
	if m.APIVersion != "lava.pleme.io/v1alpha1" || m.Kind != "LavaArchitecture" || m.Metadata.Name != "prod-vpc" || m.Metadata.Namespace != "infra" || m.Spec.Gate != "aws-vpc-network" || m.Spec.Engine != "embedded" {
		t.Errorf("metadata/gate/engine changed: %+v", m)
	}
}

func errorsOf(ds tlisp.Diagnostics) []string {
	var out []string
	for _, d := range ds.Errors() {
		out = append(out, d.String())
	}
	return out
}

// TestSynthesize_seed is the seed manifest: inline source, bindings name+cidr, gate
// aws-vpc-network. It passes the gate, renders the one VPC, and warns about `name`.
func TestSynthesize_seed(t *testing.T) {
	t.Parallel()
	out, diags := Synthesize(Input{
		SourceKind: SourceInline,
		SourceText: []byte(seedSource),
		File:       "seed.tlisp",
		Bindings:   tlisp.Bindings{Scalars: map[string]string{"name": "prod", "cidr": "10.42.0.0/16"}},
		Gate:       "aws-vpc-network",
	})
	if out == nil || diags.HasErrors() {
		t.Fatalf("Synthesize failed: %v", diags)
	}
	if got, want := string(out.Compact), `{"resource":{"aws_vpc":{"main":{"cidr_block":"10.42.0.0/16"}}}}`; got != want {
		t.Errorf("Compact = %s, want %s", got, want)
	}
	if got, want := string(out.JSON), "{\n  \"resource\": {\n    \"aws_vpc\": {\n      \"main\": {\n        \"cidr_block\": \"10.42.0.0/16\"\n      }\n    }\n  }\n}\n"; got != want {
		t.Errorf("JSON = %q, want %q", got, want)
	}
	var undeclared bool
	for _, w := range out.Warnings {
		if strings.Contains(w.Message, `"name"`) && strings.Contains(w.Message, "not declared") {
			undeclared = true
		}
	}
	if !undeclared {
		t.Errorf("no warning about the undeclared `name` binding in %v", out.Warnings)
	}
	r := out.Record
	if r.SourceKind != "inline" || r.Gate != "aws-vpc-network" || r.ArchitectureName != "demo-vpc" || r.ResourceCount != 1 ||
		r.EvaluatorVersion != tlisp.EvaluatorVersion || len(r.SourceDigest) != 64 || len(r.BindingsDigest) != 64 || len(r.TerraformJSONDigest) != 64 {
		t.Errorf("Record = %+v", r)
	}
	if r.SourceDigest != SourceDigest(seedSource) {
		t.Errorf("SourceDigest %s is not the digest of the inline text", r.SourceDigest)
	}
	if d, _ := DigestJSON(out.JSON); d != r.TerraformJSONDigest {
		t.Errorf("TerraformJSONDigest %s differs from the pretty JSON's digest %s", r.TerraformJSONDigest, d)
	}
}

func TestSynthesize_errors(t *testing.T) {
	t.Parallel()
	gatePos := arch.Pos{File: "m.yaml", Line: 9, Col: 9}
	tests := []struct {
		name string
		in   Input
		want []string
	}{
		{
			name: "unknown gate",
			in:   Input{SourceKind: SourceInline, SourceText: []byte(seedSource), Gate: "nope", GatePos: gatePos},
			want: []string{"m.yaml:9:9: unknown bundled interface \"nope\""},
		},
		{
			name: "unknown bundled name",
			in:   Input{SourceKind: SourceName, SourceName: "nope"},
			want: []string{"unknown bundled architecture \"nope\""},
		},
		{
			name: "unknown source kind",
			in:   Input{SourceKind: "git"},
			want: []string{"unknown source kind \"git\" (want inline, name or file)"},
		},
		{
			name: "gate rejects a bad CIDR before evaluation: summary then each field at its binding",
			in: Input{
				SourceKind: SourceInline, SourceText: []byte(seedSource), File: "s.tlisp",
				Bindings: tlisp.Bindings{Scalars: map[string]string{"cidr": "10.0.0.0/33", "zone": "x"}},
				Gate:     "aws-vpc-network", GatePos: gatePos,
				BindingPos: map[string]arch.Pos{"cidr": {File: "m.yaml", Line: 12, Col: 5}},
			},
			want: []string{
				"m.yaml:9:9: interface `aws-vpc-network` rejected 2 field(s): type error on input `cidr`: `10.0.0.0/33` is not a valid IPv4 CIDR block (expected like 10.0.0.0/16)",
				"m.yaml:12:5: type error on input `cidr`: `10.0.0.0/33` is not a valid IPv4 CIDR block (expected like 10.0.0.0/16)",
				"m.yaml:9:9: unknown input `zone` (no loose-fields slot declared)",
			},
		},
		{
			name: "gate with 3 missing required inputs (an upstream gate behaviour)",
			in:   Input{SourceKind: SourceName, SourceName: "dns-record-set", Gate: "dns-record-set"},
			want: []string{
				"interface `dns-record-set` rejected 3 field(s): missing required input `zone-id`",
				"missing required input `zone-id`",
				"missing required input `name`",
				"missing required input `domain`",
			},
		},
		{
			name: "gate requires an input the architecture does not declare",
			in: Input{
				SourceKind: SourceInline, SourceText: []byte(seedSource), File: "s.tlisp",
				Bindings: tlisp.Bindings{Scalars: map[string]string{"zone-id": "Z1", "name": "n", "domain": "example.com"}},
				Gate:     "dns-record-set",
			},
			want: []string{
				"interface `dns-record-set` requires input `zone-id`, which the architecture does not declare in :inputs",
				"interface `dns-record-set` requires input `name`, which the architecture does not declare in :inputs",
				"interface `dns-record-set` requires input `domain`, which the architecture does not declare in :inputs",
			},
		},
		{
			name: "evaluation errors are mapped with MapPos",
			in: Input{
				SourceKind: SourceInline, File: "m.yaml",
				SourceText: []byte("(deflava-architecture kw\n  :resources ((aws-vpc \"v\" :cidr-block :oops)))\n"),
				MapPos:     func(p arch.Pos) arch.Pos { p.Line += 10; p.Col += 6; return p },
			},
			want: []string{"m.yaml:12:46: type mismatch: expected value (not kw), got :oops (write a string like \"oops\")"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out, diags := Synthesize(tt.in)
			if out != nil {
				t.Fatalf("Synthesize succeeded, want errors %v", tt.want)
			}
			got := errorsOf(diags)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSynthesize_bundled(t *testing.T) {
	t.Parallel()
	out, diags := Synthesize(Input{
		SourceKind: SourceName,
		SourceName: "aws-vpc-network",
		Bindings: tlisp.Bindings{
			Scalars: map[string]string{"name": "preview"},
			Lists:   map[string][]string{"availability-zones": {"us-west-2a", "us-west-2b"}},
		},
		Gate: "aws-vpc-network",
		// A secret may reach attribute values only (a secret in a name is an error, see
		// TestSynthesize_secretInName): the zones are attribute values here.
		SecretKeys:  []string{"availability-zones"},
		BindingsKey: make([]byte, BindingsKeySize),
	})
	if out == nil {
		t.Fatalf("Synthesize failed: %v", diags)
	}
	var names []string
	for _, r := range out.Architecture.Resources {
		names = append(names, r.Address())
	}
	want := []string{
		"aws_vpc.preview-vpc", "aws_internet_gateway.preview-igw",
		"aws_subnet.preview-public-0", "aws_subnet.preview-public-1",
		"aws_subnet.preview-private-0", "aws_subnet.preview-private-1",
		"aws_eip.preview-nat-eip", "aws_nat_gateway.preview-nat", "aws_security_group.preview-default-sg",
	}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("resources (-want +got):\n%s", diff)
	}
	if out.Record.SourceKind != "name" || out.Record.ResourceCount != 9 {
		t.Errorf("Record = %+v", out.Record)
	}
	// A secret binding needs the key: without it the record cannot be made.
	_, diags = Synthesize(Input{
		SourceKind: SourceName, SourceName: "aws-vpc-network",
		Bindings:   tlisp.Bindings{Scalars: map[string]string{"name": "preview"}},
		SecretKeys: []string{"name"},
	})
	if !diags.HasErrors() {
		t.Error("a secret binding without a BindingsKey must fail")
	}
}

// TestSynthesize_bindingsDigest checks that the digest moves with a secret value but does not
// reveal it: two different keys give different digests for the same bindings.
func TestSynthesize_bindingsDigest(t *testing.T) {
	t.Parallel()
	digest := func(cidr string, key byte) string {
		k := make([]byte, BindingsKeySize)
		k[0] = key
		out, diags := Synthesize(Input{
			SourceKind: SourceInline, SourceText: []byte(seedSource),
			Bindings:   tlisp.Bindings{Scalars: map[string]string{"cidr": cidr}},
			SecretKeys: []string{"cidr"}, BindingsKey: k,
		})
		if out == nil {
			t.Fatalf("Synthesize: %v", diags)
		}
		return out.Record.BindingsDigest
	}
	a, b, c := digest("10.1.0.0/16", 1), digest("10.2.0.0/16", 1), digest("10.1.0.0/16", 2)
	if a == b || a == c {
		t.Errorf("digests must differ: %s %s %s", a, b, c)
	}
}

// TestSynthesize_secretsRedacted checks that no diagnostic carries a secret binding's value,
// long or short, from the gate or from the evaluator.
func TestSynthesize_secretsRedacted(t *testing.T) {
	t.Parallel()
	const whenSrc = `(deflava-architecture w
  :inputs ((:flag "true") (:token "x"))
  :resources ((terraform-data "d" :when "{flag}" :input "{token}")))`
	tests := []struct {
		name    string
		in      Input
		secrets []string
		want    string
	}{
		{
			name: "gate type errors",
			in: Input{
				SourceKind: SourceName, SourceName: "dns-record-set", Gate: "dns-record-set",
				Bindings: tlisp.Bindings{Scalars: map[string]string{
					"zone-id": "Z1", "name": "n", "domain": "-x", "apex-target": "hunter2-not-an-ip",
				}},
				SecretKeys: []string{"domain", "apex-target"},
			},
			secrets: []string{"hunter2-not-an-ip", "`-x`"},
			want:    "type error on input `apex-target`: `<redacted>` is not a valid IPv4 address",
		},
		{
			name: "evaluator errors",
			in: Input{
				SourceKind: SourceInline, SourceText: []byte(whenSrc),
				Bindings:   tlisp.Bindings{Scalars: map[string]string{"flag": "maybe-secret"}},
				SecretKeys: []string{"flag"},
			},
			secrets: []string{"maybe-secret"},
			want:    "<redacted>",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, diags := Synthesize(tt.in)
			if !diags.HasErrors() {
				t.Fatal("want errors")
			}
			var all strings.Builder
			for _, d := range diags {
				all.WriteString(d.String() + "\n")
			}
			for _, s := range tt.secrets {
				if strings.Contains(all.String(), s) {
					t.Errorf("a diagnostic reveals %q:\n%s", s, all.String())
				}
			}
			if !strings.Contains(all.String(), tt.want) {
				t.Errorf("diagnostics lack %q:\n%s", tt.want, all.String())
			}
		})
	}
}

// TestSynthesize_runtime covers magma-lava's dispatch behaviours: a bundled
// architecture renders with its defaults and with scalar overrides, and a gate whose required
// input is missing rejects the bindings before evaluation.
func TestSynthesize_runtime(t *testing.T) {
	t.Parallel()
	out, diags := Synthesize(Input{SourceKind: SourceName, SourceName: "aws-vpc-network"})
	if out == nil {
		t.Fatalf("defaults: %v", diags)
	}
	if len(out.Architecture.Resources) != 11 || out.Architecture.Resources[0].Name != "main-vpc" {
		t.Errorf("defaults render %d resources, first %q", len(out.Architecture.Resources), out.Architecture.Resources[0].Name)
	}
	out, diags = Synthesize(Input{
		SourceKind: SourceName, SourceName: "aws-vpc-network",
		Bindings: tlisp.Bindings{Scalars: map[string]string{"name": "edge", "cidr": "10.7.0.0/16"}},
	})
	if out == nil {
		t.Fatalf("overrides: %v", diags)
	}
	if !strings.Contains(string(out.Compact), `"edge-vpc":{"cidr_block":"10.7.0.0/16"`) {
		t.Errorf("overrides not rendered: %s", out.Compact)
	}
	_, diags = Synthesize(Input{SourceKind: SourceName, SourceName: "cloudflare-dns-records", Gate: "cloudflare-dns-records"})
	if errs := diags.Errors(); len(errs) == 0 || !strings.Contains(errs[0].Message, "missing required input `zone-id`") {
		t.Errorf("cloudflare gate without zone-id: %v", diags)
	}
}

// TestSynthesize_secretInName: Synthesize passes SecretKeys to the evaluator as SecretInputs, so
// a secret binding interpolated into a resource name (which reaches the Planned event and the
// artifacts as an address) is an error at its position, and no diagnostic shows the value.
func TestSynthesize_secretInName(t *testing.T) {
	t.Parallel()
	const src = `(deflava-architecture s
  :inputs ((:token ""))
  :resources ((terraform-data "t{token}" :input "{token}")))`
	in := Input{
		SourceKind: SourceInline, SourceText: []byte(src), File: "s.tlisp",
		Bindings:   tlisp.Bindings{Scalars: map[string]string{"token": "TOPSECRET-1234"}},
		SecretKeys: []string{"token"}, BindingsKey: make([]byte, BindingsKeySize),
	}
	out, diags := Synthesize(in)
	if out != nil {
		t.Fatalf("Synthesize rendered %v, want an error", out.Architecture.Resources)
	}
	want := []string{"s.tlisp:3:33: a resource name must not contain a secret binding (`token`)"}
	if diff := cmp.Diff(want, errorsOf(diags)); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
	for _, d := range diags {
		if strings.Contains(d.String(), "TOPSECRET") {
			t.Errorf("secret value in diagnostic: %s", d)
		}
	}
	// The same secret in an attribute value only is rendered (to the Terraform JSON artifact).
	in.SourceText = []byte(strings.Replace(src, `"t{token}"`, `"t"`, 1))
	out, diags = Synthesize(in)
	if out == nil {
		t.Fatalf("Synthesize: %v", diags)
	}
	if got := out.Architecture.Resources[0].Address(); got != "terraform_data.t" {
		t.Errorf("address %s", got)
	}
}

// TestSynthesize_manySecretKeysAttack: 10,000 Secret keys bound through a closed gate. Each
// unknown field was an error of its own and every message was redacted of every value, one
// value after the other: 40.7 s and 4.6 GB. The field errors stop at MaxDiagnostics (then one
// counts the rest), and the messages are still redacted.
func TestSynthesize_manySecretKeysAttack(t *testing.T) {
	t.Parallel()
	sc := map[string]string{"zone-id": "Z1", "name": "n", "domain": "example.com", "apex-target": "hunter2-not-an-ip"}
	keys := []string{"apex-target"}
	for i := range 10000 {
		k := fmt.Sprintf("k%05d", i)
		sc[k], keys = fmt.Sprintf("v%05d-secret", i), append(keys, k)
	}
	_, ds := Synthesize(Input{SourceKind: SourceName, SourceName: "dns-record-set", Gate: "dns-record-set",
		Bindings: tlisp.Bindings{Scalars: sc}, SecretKeys: keys})
	errs := errorsOf(ds)
	// The summary, MaxDiagnostics field errors and the count of the others.
	if len(errs) != tlisp.MaxDiagnostics+2 {
		t.Fatalf("%d errors, want %d", len(errs), tlisp.MaxDiagnostics+2)
	}
	if want := "… and 9951 more field error(s) of interface `dns-record-set`"; !strings.HasSuffix(errs[len(errs)-1], want) {
		t.Errorf("last error %q, want it to end %q", errs[len(errs)-1], want)
	}
	if len(ds) > 3*tlisp.MaxDiagnostics {
		t.Errorf("%d diagnostics", len(ds))
	}
	all := strings.Join(errs, "\n")
	if strings.Contains(all, "-secret") || strings.Contains(all, "hunter2") || !strings.Contains(all, "`<redacted>` is not a valid IPv4 address") {
		t.Errorf("a secret value is in the diagnostics, or the redacted one is missing:\n%.2000s", all)
	}
}
