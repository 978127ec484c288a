package gate

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/lava-operator/lava/internal/lang/arch"
)

// vpcInterface is lava-schema's test interface: cidr (default), azs (list-of AZ, 1..6), env
// (enum, default), closed.
func vpcInterface() *arch.Interface {
	return &arch.Interface{
		Name: "aws-vpc-network",
		Inputs: []arch.Field{
			{Name: "cidr", Type: kw(arch.TypeCIDRBlock), Default: ptr("10.0.0.0/16")},
			{Name: "azs", Type: arch.Type{Kind: arch.TypeListOf, Elem: ptr(kw(arch.TypeAvailabilityZone)), MinItems: ptr(1), MaxItems: ptr(6)}},
			{Name: "env", Type: arch.Type{Kind: arch.TypeEnum, Enum: []string{"prod", "staging", "dev"}}, Default: ptr("prod")},
		},
	}
}

// dnsInterface requires three inputs without defaults (docs/dialect.md section 3.1 B).
func dnsInterface() *arch.Interface {
	return &arch.Interface{
		Name: "dns-record-set",
		Inputs: []arch.Field{
			{Name: "zone-id", Type: kw(arch.TypeString), Required: true},
			{Name: "name", Type: kw(arch.TypeString), Required: true},
			{Name: "domain", Type: kw(arch.TypeHostname), Required: true},
			{Name: "apex-target", Type: kw(arch.TypeIPv4)},
		},
	}
}

func messages(errs []error) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

func TestValidate(t *testing.T) {
	t.Parallel()
	loose := vpcInterface()
	loose.Inputs = append(loose.Inputs, arch.Field{Name: "tags", Type: kw(arch.TypeAny), Loose: true})
	tests := []struct {
		name  string
		iface *arch.Interface
		bag   Bag
		want  []string
	}{
		{"valid bag passes", vpcInterface(), Bag{Scalars: map[string]string{"cidr": "10.0.0.0/16", "env": "prod"}}, nil},
		{"empty bag passes when nothing is required", vpcInterface(), Bag{}, nil},
		{"bad cidr", vpcInterface(), Bag{Scalars: map[string]string{"cidr": "not-a-cidr"}},
			[]string{"type error on input `cidr`: `not-a-cidr` is not a valid IPv4 CIDR block (expected like 10.0.0.0/16)"}},
		{"unknown field", vpcInterface(), Bag{Scalars: map[string]string{"unknown": "x"}},
			[]string{"unknown input `unknown` (no loose-fields slot declared)"}},
		{"loose slot admits unknown fields", loose, Bag{Scalars: map[string]string{"cidr": "10.0.0.0/16", "anything-goes": "even-this"}}, nil},
		{"enum miss", vpcInterface(), Bag{Scalars: map[string]string{"env": "preview"}},
			[]string{"type error on input `env`: `preview` not in enum [prod, staging, dev]"}},
		{"list binding checked per element", vpcInterface(), Bag{Lists: map[string][]string{"azs": {"us-east-1a", "nope"}}},
			[]string{"type error on input `azs`: `nope` is not a valid AWS availability zone (expected like us-east-1a)"}},
		{"empty list too few", vpcInterface(), Bag{Lists: map[string][]string{"azs": {}}},
			[]string{"type error on input `azs`: list has too few items: 0 < 1"}},
		{"scalar split on commas for list-of", vpcInterface(), Bag{Scalars: map[string]string{"azs": "us-east-1a,us-east-1b"}}, nil},
		{"list element with a comma counts twice", vpcInterface(), Bag{Lists: map[string][]string{"azs": {"us-east-1a,us-east-1b", "us-east-1c,us-east-1d", "us-west-1a,us-west-1b", "eu-west-1a"}}},
			[]string{"type error on input `azs`: list has too many items: 7 > 6"}},
		{"list projected comma-joined for a scalar type", vpcInterface(), Bag{Lists: map[string][]string{"cidr": {"10.0.0.0/16", "10.1.0.0/16"}}},
			[]string{"type error on input `cidr`: `10.0.0.0/16,10.1.0.0/16` is not a valid IPv4 CIDR block (expected like 10.0.0.0/16)"}},
		{"missing required, in declaration order", dnsInterface(), Bag{},
			[]string{"missing required input `zone-id`", "missing required input `name`", "missing required input `domain`"}},
		{"errors accumulate: missing, then bag order", dnsInterface(),
			Bag{Scalars: map[string]string{"zone-id": "Z1", "domain": "-bad", "apex-target": "1.2.3", "zz": "x"}, Lists: map[string][]string{"aa": {"y"}}},
			[]string{
				"missing required input `name`",
				"type error on input `apex-target`: `1.2.3` is not a valid IPv4 address",
				"type error on input `domain`: `-bad` is not a valid RFC 1123 hostname",
				"unknown input `zz` (no loose-fields slot declared)",
				"unknown input `aa` (no loose-fields slot declared)",
			}},
		{"scalar wins over list for the same key", vpcInterface(), Bag{Scalars: map[string]string{"cidr": "10.0.0.0/8"}, Lists: map[string][]string{"cidr": {"bad"}}}, nil},
		{"record binding satisfies required", &arch.Interface{Name: "repos", Inputs: []arch.Field{
			{Name: "repos", Type: arch.Type{Kind: arch.TypeListOf, Elem: ptr(kw(arch.TypeAny)), MinItems: ptr(1)}, Required: true}}},
			Bag{Records: map[string][]map[string]string{"repos": {{"slug": "a"}}}}, nil},
		{"record binding count checked", &arch.Interface{Name: "repos", Inputs: []arch.Field{
			{Name: "repos", Type: arch.Type{Kind: arch.TypeListOf, Elem: ptr(kw(arch.TypeString)), MinItems: ptr(1)}, Required: true}}},
			Bag{Records: map[string][]map[string]string{"repos": {}}},
			[]string{"type error on input `repos`: list has too few items: 0 < 1"}},
		{"record binding for a scalar type", &arch.Interface{Name: "x", Inputs: []arch.Field{{Name: "n", Type: kw(arch.TypeInteger)}}},
			Bag{Records: map[string][]map[string]string{"n": {{"a": "1"}}}},
			[]string{"type error on input `n`: a record list cannot be checked as integer"}},
		{"nil interface accepts everything", nil, Bag{Scalars: map[string]string{"x": "y"}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res := Validate(tt.iface, tt.bag)
			if diff := cmp.Diff(tt.want, messages(res.Errors)); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
			if res.OK() != (len(tt.want) == 0) || (res.Err() == nil) != (len(tt.want) == 0) {
				t.Errorf("OK() = %v, Err() = %v with %d errors", res.OK(), res.Err(), len(tt.want))
			}
		})
	}
}

// TestValidate_rejectedSummary checks upstream's summary string, the typed errors behind it,
// and the "rejects bad CIDR with count 1" case of lava-eval.
func TestValidate_rejectedSummary(t *testing.T) {
	t.Parallel()
	err := Validate(vpcInterface(), Bag{Scalars: map[string]string{"cidr": "10.0.0.0/33"}}).Err()
	want := "interface `aws-vpc-network` rejected 1 field(s): type error on input `cidr`: `10.0.0.0/33` is not a valid IPv4 CIDR block (expected like 10.0.0.0/16)"
	if err == nil || err.Error() != want {
		t.Fatalf("Err() = %v, want %q", err, want)
	}
	var rej *Rejected
	if !errors.As(err, &rej) || len(rej.Errors) != 1 {
		t.Fatalf("want a *Rejected with 1 error, got %#v", err)
	}
	var tm *TypeMismatch
	if !errors.As(err, &tm) || tm.Name != "cidr" {
		t.Fatalf("errors.As TypeMismatch: %#v", tm)
	}
	var te *TypeError
	if !errors.As(err, &te) || te.Cause != NotCIDR {
		t.Fatalf("errors.As TypeError: %#v", te)
	}

	err = Validate(dnsInterface(), Bag{}).Err()
	want = "interface `dns-record-set` rejected 3 field(s): missing required input `zone-id`"
	if err == nil || err.Error() != want {
		t.Fatalf("Err() = %v, want %q", err, want)
	}
	var mr *MissingRequired
	if !errors.As(err, &mr) || mr.Name != "zone-id" {
		t.Fatalf("errors.As MissingRequired: %#v", mr)
	}

	err = Validate(vpcInterface(), Bag{Scalars: map[string]string{"nope": "1"}}).Err()
	var uf *UnknownField
	if !errors.As(err, &uf) || uf.Name != "nope" {
		t.Fatalf("errors.As UnknownField: %#v", err)
	}
	if Validate(vpcInterface(), Bag{Scalars: map[string]string{"cidr": "10.0.0.0/16"}}).Err() != nil {
		t.Fatal("a valid CIDR must pass")
	}
}

func TestCheckArchitecture(t *testing.T) {
	t.Parallel()
	// aws-vpc-network as the catalog declares it: nothing required.
	vpc := &arch.Interface{Name: "aws-vpc-network", Inputs: []arch.Field{
		{Name: "name", Type: kw(arch.TypeString)},
		{Name: "cidr", Type: kw(arch.TypeCIDRBlock)},
		{Name: "availability-zones", Type: arch.Type{Kind: arch.TypeListOf, Elem: ptr(kw(arch.TypeAvailabilityZone))}},
		{Name: "environment", Type: kw(arch.TypeString)},
	}}
	tests := []struct {
		name   string
		iface  *arch.Interface
		inputs []ArchInput
		want   []Finding
	}{
		{
			name:   "seed manifest: only warnings",
			iface:  vpc,
			inputs: []ArchInput{{Name: "cidr", HasDefault: true}},
			want:   []Finding{{Severity: SeverityWarning, Message: "interface `aws-vpc-network` declares input(s) `name`, `availability-zones`, `environment` that the architecture does not; bindings for them pass the gate and are ignored"}},
		},
		{
			name:   "required input the architecture lacks is an error",
			iface:  dnsInterface(),
			inputs: []ArchInput{{Name: "zone-id"}, {Name: "domain"}, {Name: "apex-target", HasDefault: true}, {Name: "extra", HasDefault: true, Pos: arch.Pos{Line: 3, Col: 5}}, {Name: "nodefault"}},
			want: []Finding{
				{Severity: SeverityError, Input: "name", Message: "interface `dns-record-set` requires input `name`, which the architecture does not declare in :inputs"},
				{Severity: SeverityWarning, Input: "extra", Pos: arch.Pos{Line: 3, Col: 5}, Message: "architecture input `extra` is not declared by interface `dns-record-set`, which rejects any binding for it"},
				{Severity: SeverityWarning, Input: "nodefault", Message: "architecture input `nodefault` is not declared by interface `dns-record-set`, which rejects any binding for it; it has no default, so evaluation cannot succeed through this gate"},
			},
		},
		{
			name: "open interface: architecture extras are fine",
			iface: &arch.Interface{Name: "open", Inputs: []arch.Field{
				{Name: "a", Type: kw(arch.TypeString), Required: true, Default: ptr("x")},
				{Name: "tags", Type: kw(arch.TypeAny), Loose: true},
			}},
			inputs: []ArchInput{{Name: "a"}, {Name: "tags"}, {Name: "other"}},
			want:   nil,
		},
		{
			name:   "required with a default is only a warning",
			iface:  &arch.Interface{Name: "d", Inputs: []arch.Field{{Name: "a", Type: kw(arch.TypeString), Required: true, Default: ptr("x")}}},
			inputs: nil,
			want:   []Finding{{Severity: SeverityWarning, Message: "interface `d` declares input(s) `a` that the architecture does not; bindings for them pass the gate and are ignored"}},
		},
		{name: "nil interface", iface: nil, inputs: []ArchInput{{Name: "a"}}, want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := CheckArchitecture(tt.iface, tt.inputs)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("findings (-want +got):\n%s", diff)
			}
		})
	}
}

// TestInterface_roundTrip is lava-schema's interface_round_trips_through_serde: an interface
// survives JSON and still validates the same way.
func TestInterface_roundTrip(t *testing.T) {
	t.Parallel()
	iface := vpcInterface()
	b, err := json.Marshal(iface)
	if err != nil {
		t.Fatal(err)
	}
	var back arch.Interface
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(iface, &back); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	bag := Bag{Scalars: map[string]string{"env": "preview"}}
	if diff := cmp.Diff(messages(Validate(iface, bag).Errors), messages(Validate(&back, bag).Errors)); diff != "" {
		t.Errorf("validation differs after the round trip: %s", diff)
	}
}

// TestCheckArchitecture_manyInputsAttack: an architecture of 9,000 inputs that a closed
// interface does not declare gets MaxUndeclaredWarnings warnings and one that counts the rest
// (one warning each made 1.23 MB of warnings, a Synthesized event over NATS' max payload).
func TestCheckArchitecture_manyInputsAttack(t *testing.T) {
	t.Parallel()
	inputs := []ArchInput{{Name: "zone-id"}, {Name: "domain"}, {Name: "name"}, {Name: "apex-target"}}
	for i := range 9000 {
		inputs = append(inputs, ArchInput{Name: fmt.Sprintf("x%d", i), HasDefault: true})
	}
	got := CheckArchitecture(dnsInterface(), inputs)
	if len(got) != MaxUndeclaredWarnings+1 {
		t.Fatalf("%d findings, want %d", len(got), MaxUndeclaredWarnings+1)
	}
	want := "… and 8950 more architecture input(s) not declared by interface `dns-record-set`, which rejects any binding for them"
	if last := got[len(got)-1]; last.Severity != SeverityWarning || last.Message != want {
		t.Errorf("last finding = %+v, want the warning %q", last, want)
	}
	if got[0].Input != "x0" || got[MaxUndeclaredWarnings-1].Input != fmt.Sprintf("x%d", MaxUndeclaredWarnings-1) {
		t.Errorf("the first warnings are not about the first inputs: %+v", got[:2])
	}
}
