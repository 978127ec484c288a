package catalog_test

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/lava-operator/lava/internal/lang/arch"
	"github.com/lava-operator/lava/internal/lang/catalog"
	"github.com/lava-operator/lava/internal/lang/gate"
	"github.com/lava-operator/lava/internal/lang/tlisp"
)

func TestRegistry_equalsEmbeddedFiles(t *testing.T) {
	reg := slices.Sorted(maps.Keys(catalog.Registry()))
	if diff := cmp.Diff(reg, catalog.Names()); diff != "" {
		t.Errorf("registry names (-) differ from embedded architectures/*.tlisp (+):\n%s", diff)
	}
	if n := len(reg); n != 41 {
		t.Errorf("registry has %d architectures, want 41 (docs/dialect.md section 3: upstream's 40, pleme-io-dns included, and Lava's modules-demo)", n)
	}
}

func TestList_sortedAndComplete(t *testing.T) {
	var names []string
	for _, e := range catalog.List() {
		names = append(names, e.Name)
		if e.MinResources != catalog.Registry()[e.Name] {
			t.Errorf("%s: MinResources %d, registry says %d", e.Name, e.MinResources, catalog.Registry()[e.Name])
		}
		if len(e.Source) == 0 {
			t.Errorf("%s: empty Source", e.Name)
		}
	}
	if !slices.IsSorted(names) {
		t.Errorf("List is not sorted by name: %v", names)
	}
	if diff := cmp.Diff(catalog.Names(), names); diff != "" {
		t.Errorf("List names differ from the embedded files:\n%s", diff)
	}
}

func TestGet_unknown(t *testing.T) {
	for _, name := range []string{"", "nope", "aws-vpc-network.tlisp", "../aws-vpc-network", "architectures/aws-vpc-network", "AWS-VPC-NETWORK"} {
		if _, ok := catalog.Get(name); ok {
			t.Errorf("Get(%q) found an entry, want none", name)
		}
		_, err := catalog.Interface(name)
		want := `unknown bundled architecture "` + name + `"`
		if err == nil || err.Error() != want {
			t.Errorf("Interface(%q) error = %v, want %s", name, err, want)
		}
		var ue *catalog.UnknownError
		if !errors.As(err, &ue) || ue.Name != name {
			t.Errorf("Interface(%q) error is not an *UnknownError naming it: %#v", name, err)
		}
	}
}

func TestGet_sourceIsACopy(t *testing.T) {
	a, _ := catalog.Get("dns-record-set")
	a.Source[0] = 'X'
	b, _ := catalog.Get("dns-record-set")
	if b.Source[0] == 'X' {
		t.Fatal("Get returned the embedded bytes, not a copy: a caller's write leaked into the catalog")
	}
}

// TestMatrix is upstream's architecture_matrix as Go: every bundled architecture evaluates with
// its minimal bag (its required interface inputs only), renders exactly its registry count,
// has an interface of the same name that accepts the bag and agrees with its :inputs, and
// every reference in the render points at a rendered resource or data source.
func TestMatrix(t *testing.T) {
	for _, e := range catalog.List() {
		t.Run(e.Name, func(t *testing.T) {
			t.Parallel()
			iface, err := catalog.Interface(e.Name)
			if err != nil {
				t.Fatalf("Interface: %v", err)
			}
			if iface.Name != e.Name || e.Interface == nil || e.Interface.Name != e.Name {
				t.Fatalf("interface name %q (entry %v), want %q", iface.Name, e.Interface, e.Name)
			}
			if iface.Doc == "" {
				t.Errorf("interface has no :doc")
			}

			b := minimalBag(t, iface)
			if res := gate.Validate(iface, bag(b)); !res.OK() {
				t.Errorf("interface rejects the minimal bag %v: %v", b, res.Err())
			}
			decls, ds := tlisp.DeclaredInputs(e.Source, tlisp.Options{File: catalog.File(e.Name)})
			if ds.HasErrors() {
				t.Fatalf("DeclaredInputs: %v", ds)
			}
			var inputs []gate.ArchInput
			for _, d := range decls {
				inputs = append(inputs, gate.ArchInput{Name: d.Name, HasDefault: d.Default != nil, Pos: d.Pos})
			}
			for _, f := range gate.CheckArchitecture(iface, inputs) {
				if f.Severity == gate.SeverityError {
					t.Errorf("interface and :inputs disagree: %s", f.Message)
				}
			}
			// Every input the architecture declares without a default is required by the
			// interface, so the gate never admits a bag that cannot evaluate.
			for _, d := range decls {
				if f, ok := iface.Input(d.Name); d.Default == nil && (!ok || !f.Required) {
					t.Errorf("input %q has no default but the interface does not require it", d.Name)
				}
			}

			a, out, warnings := renderArch(t, e.Name, b)
			if a.Name != e.Name {
				t.Errorf("architecture name %q, want %q", a.Name, e.Name)
			}
			if len(a.Resources) < e.MinResources {
				t.Errorf("rendered %d resources, want at least %d", len(a.Resources), e.MinResources)
			}
			if len(a.Resources) != e.MinResources {
				t.Errorf("rendered %d resources with the minimal bag; the registry says %d", len(a.Resources), e.MinResources)
			}
			doc := decode(t, out)
			if n := countResources(doc); n != len(a.Resources) {
				t.Errorf("JSON holds %d resources, the architecture %d (duplicate addresses?)", n, len(a.Resources))
			}
			for _, p := range danglingRefs(doc, out) {
				t.Error(p)
			}
			for _, w := range warnings {
				// Allowed warnings: :result without :outputs (upstream's contract style) and
				// names sanitized from a domain (docs/dialect.md section 3).
				if !strings.Contains(w.Message, ":result is not rendered") && !strings.Contains(w.Message, "is not a valid Terraform identifier") {
					t.Errorf("unexpected warning: %s", w)
				}
			}
			if !isASCII(string(out)) {
				t.Errorf("rendered JSON is not ASCII")
			}
		})
	}
}

func TestMatrix_defaultsOnlyEvaluate(t *testing.T) {
	// An architecture whose interface requires nothing renders with no bindings at all.
	for _, e := range catalog.List() {
		required := slices.ContainsFunc(e.Interface.Inputs, func(f arch.Field) bool { return f.Required })
		if required {
			continue
		}
		a, diags := tlisp.EvalArchitecture(e.Source, tlisp.Bindings{}, tlisp.Options{File: catalog.File(e.Name)})
		if diags.HasErrors() || a == nil || len(a.Resources) != e.MinResources {
			t.Errorf("%s with no bindings: %v resources=%v", e.Name, diags.Errors(), a)
		}
	}
}

func TestGate_dnsRecordSetRejectsEmptyBag(t *testing.T) {
	iface, err := catalog.Interface("dns-record-set")
	if err != nil {
		t.Fatal(err)
	}
	res := gate.Validate(iface, gate.Bag{})
	var got []string
	for _, e := range res.Errors {
		got = append(got, e.Error())
	}
	want := []string{
		"missing required input `zone-id`",
		"missing required input `name`",
		"missing required input `domain`",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("gate errors for an empty bag (-want +got):\n%s", diff)
	}
	var mr *gate.MissingRequired
	if !errors.As(res.Err(), &mr) {
		t.Errorf("rejection does not unwrap to *gate.MissingRequired: %v", res.Err())
	}
	if got, want := res.Err().Error(), "interface `dns-record-set` rejected 3 field(s): missing required input `zone-id`"; got != want {
		t.Errorf("summary %q, want %q", got, want)
	}
}

func TestGate_upstreamCases(t *testing.T) {
	tests := []struct {
		name    string
		iface   string
		bag     gate.Bag
		wantErr string // "" when the bag must pass
	}{
		{"vpc accepts cidr", "aws-vpc-network", gate.Bag{Scalars: map[string]string{"cidr": "10.42.0.0/16"}}, ""},
		{"vpc accepts the seed manifest's bindings", "aws-vpc-network", gate.Bag{Scalars: map[string]string{"name": "prod", "cidr": "10.42.0.0/16"}}, ""},
		{"vpc rejects a bad cidr", "aws-vpc-network", gate.Bag{Scalars: map[string]string{"cidr": "10.0.0.0/33"}}, "type error on input `cidr`"},
		{"vpc rejects an empty az list", "aws-vpc-network", gate.Bag{Lists: map[string][]string{"availability-zones": {}}}, "list has too few items: 0 < 1"},
		{"vpc rejects an unknown input", "aws-vpc-network", gate.Bag{Scalars: map[string]string{"region": "us-east-1"}}, "unknown input `region`"},
		{"cloudflare rejects a missing zone-id", "cloudflare-dns-records", gate.Bag{}, "missing required input `zone-id`"},
		{"akeyless accepts name-prefix=staging", "akeyless-secrets", gate.Bag{Scalars: map[string]string{"name-prefix": "staging"}}, ""},
		{"tunnel rejects emit-cname=maybe", "cloudflare-tunnel", gate.Bag{Scalars: map[string]string{
			"account-id": sample["account-id"], "tunnel-name": "t", "tunnel-secret": sample["tunnel-secret"],
			"zone-id": sample["zone-id"], "hostname": "demo.example.com", "emit-cname": "maybe"}}, "type error on input `emit-cname`"},
		{"zone rejects a zone-type outside the enum", "cloudflare-zone", gate.Bag{Scalars: map[string]string{
			"account-id": sample["account-id"], "domain": "example.com", "zone-type": "secondary"}}, "not in enum [full, partial]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			iface, err := catalog.Interface(tt.iface)
			if err != nil {
				t.Fatal(err)
			}
			err = gate.Validate(iface, tt.bag).Err()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("rejected: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(errorsText(err), tt.wantErr)):
				t.Errorf("error %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

// errorsText joins the messages of every field error of a rejection.
func errorsText(err error) string {
	var r *gate.Rejected
	if !errors.As(err, &r) {
		return err.Error()
	}
	var ss []string
	for _, e := range r.Errors {
		ss = append(ss, e.Error())
	}
	return strings.Join(ss, "\n")
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
