package gate

import (
	"errors"
	"strings"
	"testing"

	"github.com/lava-operator/lava/internal/lang/arch"
)

func ptr[T any](v T) *T { return &v }

func kw(k arch.TypeKind) arch.Type { return arch.Type{Kind: k} }

// TestCheckValue covers every validator of docs/dialect.md section 4.1 with lava-types' own test cases
// (docs/dialect.md section 11, lava-types) plus the edges of each rule.
func TestCheckValue(t *testing.T) {
	t.Parallel()
	portRange := arch.Type{Kind: arch.TypePortRange, Lo: 1024, Hi: 65535}
	enum := arch.Type{Kind: arch.TypeEnum, Enum: []string{"prod", "staging", "dev"}}
	length := arch.Type{Kind: arch.TypeLength, MinLen: ptr(3), MaxLen: ptr(10)}
	tests := []struct {
		name  string
		typ   arch.Type
		value string
		// cause is 0 when the value is valid.
		cause Cause
		msg   string
	}{
		{"any empty", kw(arch.TypeAny), "", 0, ""},
		{"any anything", kw(arch.TypeAny), "anything", 0, ""},
		{"dynamic", kw(arch.TypeDynamic), "x,y", 0, ""},
		{"string", kw(arch.TypeString), "", 0, ""},

		{"integer", kw(arch.TypeInteger), "-42", 0, ""},
		{"integer plus sign", kw(arch.TypeInteger), "+7", 0, ""},
		{"integer max", kw(arch.TypeInteger), "9223372036854775807", 0, ""},
		{"integer overflow", kw(arch.TypeInteger), "9223372036854775808", NotInteger, "`9223372036854775808` is not a valid integer"},
		{"integer float", kw(arch.TypeInteger), "1.5", NotInteger, "`1.5` is not a valid integer"},
		{"integer empty", kw(arch.TypeInteger), "", NotInteger, "`` is not a valid integer"},

		{"boolean true", kw(arch.TypeBoolean), "true", 0, ""},
		{"boolean #f", kw(arch.TypeBoolean), "#f", 0, ""},
		{"boolean 1", kw(arch.TypeBoolean), "1", NotBoolean, "`1` is not a valid boolean (expected true|false|#t|#f)"},
		{"boolean True", kw(arch.TypeBoolean), "True", NotBoolean, "`True` is not a valid boolean (expected true|false|#t|#f)"},

		{"cidr /16", kw(arch.TypeCIDRBlock), "10.0.0.0/16", 0, ""},
		{"cidr /12", kw(arch.TypeCIDRBlock), "172.16.0.0/12", 0, ""},
		{"cidr /0", kw(arch.TypeCIDRBlock), "0.0.0.0/0", 0, ""},
		{"cidr /32", kw(arch.TypeCIDRBlock), "10.1.2.3/32", 0, ""},
		{"cidr /33", kw(arch.TypeCIDRBlock), "10.0.0.0/33", NotCIDR, "`10.0.0.0/33` is not a valid IPv4 CIDR block (expected like 10.0.0.0/16)"},
		{"cidr no slash", kw(arch.TypeCIDRBlock), "10.0.0.0", NotCIDR, "`10.0.0.0` is not a valid IPv4 CIDR block (expected like 10.0.0.0/16)"},
		{"cidr not an ip", kw(arch.TypeCIDRBlock), "not-an-ip/16", NotCIDR, "`not-an-ip/16` is not a valid IPv4 CIDR block (expected like 10.0.0.0/16)"},
		{"cidr ipv6", kw(arch.TypeCIDRBlock), "2001:db8::/32", NotCIDR, "`2001:db8::/32` is not a valid IPv4 CIDR block (expected like 10.0.0.0/16)"},
		{"cidr empty prefix", kw(arch.TypeCIDRBlock), "10.0.0.0/", NotCIDR, "`10.0.0.0/` is not a valid IPv4 CIDR block (expected like 10.0.0.0/16)"},
		{"cidr octet 256", kw(arch.TypeCIDRBlock), "10.0.0.256/8", NotCIDR, "`10.0.0.256/8` is not a valid IPv4 CIDR block (expected like 10.0.0.0/16)"},

		{"ipv4", kw(arch.TypeIPv4), "10.0.0.1", 0, ""},
		{"ipv4 three octets", kw(arch.TypeIPv4), "10.0.1", NotIPv4, "`10.0.1` is not a valid IPv4 address"},
		{"ipv4 given ipv6", kw(arch.TypeIPv4), "::1", NotIPv4, "`::1` is not a valid IPv4 address"},
		{"ipv6", kw(arch.TypeIPv6), "2001:db8::1", 0, ""},
		{"ipv6 mapped", kw(arch.TypeIPv6), "::ffff:1.2.3.4", 0, ""},
		{"ipv6 given ipv4", kw(arch.TypeIPv6), "10.0.0.1", NotIPv6, "`10.0.0.1` is not a valid IPv6 address"},
		{"ipv6 zone", kw(arch.TypeIPv6), "fe80::1%eth0", NotIPv6, "`fe80::1%eth0` is not a valid IPv6 address"},

		{"hostname", kw(arch.TypeHostname), "example.com", 0, ""},
		{"hostname deep", kw(arch.TypeHostname), "sub.example.co.uk", 0, ""},
		{"hostname single label", kw(arch.TypeHostname), "localhost", 0, ""},
		{"hostname leading dash", kw(arch.TypeHostname), "-leading-dash.com", NotHostname, "`-leading-dash.com` is not a valid RFC 1123 hostname"},
		{"hostname trailing dash", kw(arch.TypeHostname), "trailing-dash-.com", NotHostname, "`trailing-dash-.com` is not a valid RFC 1123 hostname"},
		{"hostname space", kw(arch.TypeHostname), "space invalid.com", NotHostname, "`space invalid.com` is not a valid RFC 1123 hostname"},
		{"hostname empty", kw(arch.TypeHostname), "", NotHostname, "`` is not a valid RFC 1123 hostname"},
		{"hostname empty label", kw(arch.TypeHostname), "a..b", NotHostname, "`a..b` is not a valid RFC 1123 hostname"},
		{"hostname label 63", kw(arch.TypeHostname), strings.Repeat("a", 63) + ".com", 0, ""},
		{"hostname label 64", kw(arch.TypeHostname), strings.Repeat("a", 64) + ".com", NotHostname, "`" + strings.Repeat("a", 64) + ".com` is not a valid RFC 1123 hostname"},
		{"hostname underscore", kw(arch.TypeHostname), "_acme.example.com", NotHostname, "`_acme.example.com` is not a valid RFC 1123 hostname"},
		{"hostname non-ascii", kw(arch.TypeHostname), "bücher.de", NotHostname, "`bücher.de` is not a valid RFC 1123 hostname"},

		{"az us-east-1a", kw(arch.TypeAvailabilityZone), "us-east-1a", 0, ""},
		{"az eu-west-2b", kw(arch.TypeAvailabilityZone), "eu-west-2b", 0, ""},
		{"az ap-southeast-3c", kw(arch.TypeAvailabilityZone), "ap-southeast-3c", 0, ""},
		{"az no trailing letter", kw(arch.TypeAvailabilityZone), "us-east", NotAvailabilityZone, "`us-east` is not a valid AWS availability zone (expected like us-east-1a)"},
		{"az too short", kw(arch.TypeAvailabilityZone), "xx", NotAvailabilityZone, "`xx` is not a valid AWS availability zone (expected like us-east-1a)"},
		{"az trailing digit", kw(arch.TypeAvailabilityZone), "us-east-1", NotAvailabilityZone, "`us-east-1` is not a valid AWS availability zone (expected like us-east-1a)"},
		{"az empty", kw(arch.TypeAvailabilityZone), "", NotAvailabilityZone, "`` is not a valid AWS availability zone (expected like us-east-1a)"},
		{"az no digit", kw(arch.TypeAvailabilityZone), "not-a-zone", NotAvailabilityZone, "`not-a-zone` is not a valid AWS availability zone (expected like us-east-1a)"},

		{"email", kw(arch.TypeEmail), "a@example.com", 0, ""},
		{"email no at", kw(arch.TypeEmail), "noatsign", NotEmail, "`noatsign` is not a valid email (expected localpart@domain)"},
		{"email no local", kw(arch.TypeEmail), "@nolocal", NotEmail, "`@nolocal` is not a valid email (expected localpart@domain)"},
		{"email no domain", kw(arch.TypeEmail), "nodomain@", NotEmail, "`nodomain@` is not a valid email (expected localpart@domain)"},
		{"email two ats", kw(arch.TypeEmail), "a@b@c.com", NotEmail, "`a@b@c.com` is not a valid email (expected localpart@domain)"},

		{"url https", kw(arch.TypeURL), "https://example.com", 0, ""},
		{"url s3", kw(arch.TypeURL), "s3://bucket/key", 0, ""},
		{"url git+ssh", kw(arch.TypeURL), "git+ssh://x", 0, ""},
		{"url no scheme", kw(arch.TypeURL), "noscheme.com", NotURL, "`noscheme.com` is not a valid URL (expected scheme://...)"},
		{"url empty scheme", kw(arch.TypeURL), "://nopath", NotURL, "`://nopath` is not a valid URL (expected scheme://...)"},
		{"url empty rest", kw(arch.TypeURL), "https://", NotURL, "`https://` is not a valid URL (expected scheme://...)"},
		{"url bad scheme", kw(arch.TypeURL), "ht-tp://x", NotURL, "`ht-tp://x` is not a valid URL (expected scheme://...)"},

		{"enum prod", enum, "prod", 0, ""},
		{"enum dev", enum, "dev", 0, ""},
		{"enum miss", enum, "preview", NotInEnum, "`preview` not in enum [prod, staging, dev]"},

		{"port 8080", portRange, "8080", 0, ""},
		{"port lo inclusive", portRange, "1024", 0, ""},
		{"port hi inclusive", portRange, "65535", 0, ""},
		{"port below", portRange, "80", OutOfRange, "value 80 out of range [1024, 65535]"},
		{"port above", portRange, "65536", OutOfRange, "value 65536 out of range [1024, 65535]"},
		{"port not a number", portRange, "abc", NotInteger, "`abc` is not a valid integer"},
		{"int range in", arch.Type{Kind: arch.TypeIntRange, Lo: -5, Hi: 5}, "-5", 0, ""},
		{"int range out", arch.Type{Kind: arch.TypeIntRange, Lo: -5, Hi: 5}, "6", OutOfRange, "value 6 out of range [-5, 5]"},

		{"length min", length, "abc", 0, ""},
		{"length max", length, "abcdefghij", 0, ""},
		{"length short", length, "ab", BadLength, "length 2 out of range [3, 10]"},
		{"length long", length, "abcdefghijk", BadLength, "length 11 out of range [3, 10]"},
		{"length counts characters", length, "ééé", 0, ""},
		{"length no max", arch.Type{Kind: arch.TypeLength, MinLen: ptr(2)}, "a", BadLength, "length 1 out of range [2, unbounded]"},

		{"pattern starts-with", arch.Type{Kind: arch.TypePattern, Pattern: "https://", Match: "starts-with"}, "https://x", 0, ""},
		{"pattern starts-with miss", arch.Type{Kind: arch.TypePattern, Pattern: "https://", Match: "starts-with"}, "http://x", PatternMismatch, "`http://x` doesn't match pattern `https://`"},
		{"pattern ends-with", arch.Type{Kind: arch.TypePattern, Pattern: ".tlisp", Match: "ends-with"}, "foo.tlisp", 0, ""},
		{"pattern ends-with miss", arch.Type{Kind: arch.TypePattern, Pattern: ".tlisp", Match: "ends-with"}, "foo.rb", PatternMismatch, "`foo.rb` doesn't match pattern `.tlisp`"},
		{"pattern contains", arch.Type{Kind: arch.TypePattern, Pattern: "pleme", Match: "contains"}, "pleme-io/lava", 0, ""},
		{"pattern contains miss", arch.Type{Kind: arch.TypePattern, Pattern: "pleme", Match: "contains"}, "nothing", PatternMismatch, "`nothing` doesn't match pattern `pleme`"},
		{"pattern is not a regex", arch.Type{Kind: arch.TypePattern, Pattern: "a.c", Match: "contains"}, "abc", PatternMismatch, "`abc` doesn't match pattern `a.c`"},

		{"list-of as scalar", arch.Type{Kind: arch.TypeListOf, Elem: ptr(kw(arch.TypeString))}, "a", WrongValidator, "wrong validator: list type — use validate_list"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := CheckValue(tt.typ, tt.value)
			if tt.cause == 0 {
				if err != nil {
					t.Fatalf("CheckValue(%s, %q) = %v, want nil", tt.typ.Kind, tt.value, err)
				}
				return
			}
			var te *TypeError
			if !errors.As(err, &te) {
				t.Fatalf("CheckValue(%s, %q) = %v, want a *TypeError", tt.typ.Kind, tt.value, err)
			}
			if te.Cause != tt.cause {
				t.Errorf("cause = %d, want %d", te.Cause, tt.cause)
			}
			if te.Error() != tt.msg {
				t.Errorf("message = %q, want %q", te.Error(), tt.msg)
			}
		})
	}
}

// TestCheckList is lava-types' list_of_validates_cardinality_and_items.
func TestCheckList(t *testing.T) {
	t.Parallel()
	azs := arch.Type{Kind: arch.TypeListOf, Elem: ptr(kw(arch.TypeAvailabilityZone)), MinItems: ptr(1), MaxItems: ptr(3)}
	tests := []struct {
		name  string
		typ   arch.Type
		vs    []string
		cause Cause
		msg   string
	}{
		{"one", azs, []string{"us-east-1a"}, 0, ""},
		{"two", azs, []string{"us-east-1a", "us-east-1b"}, 0, ""},
		{"too few", azs, nil, TooFewItems, "list has too few items: 0 < 1"},
		{"too many", azs, []string{"a", "b", "c", "d"}, TooManyItems, "list has too many items: 4 > 3"},
		{"bad element", azs, []string{"us-east-1a", "not-a-zone"}, NotAvailabilityZone, "`not-a-zone` is not a valid AWS availability zone (expected like us-east-1a)"},
		{"unbounded", arch.Type{Kind: arch.TypeListOf, Elem: ptr(kw(arch.TypeString))}, nil, 0, ""},
		{"not a list type", kw(arch.TypeString), []string{"a"}, WrongValidator, "wrong validator: expected ListOf"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := CheckList(tt.typ, tt.vs)
			if tt.cause == 0 {
				if err != nil {
					t.Fatalf("CheckList = %v, want nil", err)
				}
				return
			}
			var te *TypeError
			if !errors.As(err, &te) || te.Cause != tt.cause || te.Error() != tt.msg {
				t.Fatalf("CheckList = %v, want cause %d %q", err, tt.cause, tt.msg)
			}
		})
	}
}
