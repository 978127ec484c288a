package gate

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/lava-operator/lava/internal/lang/arch"
)

// Cause names why a value failed its type; the causes and their messages are lava-types'
// TypeError variants (docs/dialect.md section 4.1).
type Cause int

// The causes of a [TypeError].
const (
	NotInteger Cause = iota + 1
	NotBoolean
	NotCIDR
	NotIPv4
	NotIPv6
	NotHostname
	NotAvailabilityZone
	NotEmail
	NotURL
	OutOfRange
	NotInEnum
	BadLength
	PatternMismatch
	TooFewItems
	TooManyItems
	WrongValidator
)

// TypeError is a value that does not satisfy a field type. Error returns lava-types' message
// for the cause, for example "`x` is not a valid IPv4 CIDR block (expected like 10.0.0.0/16)",
// "`preview` not in enum [prod, staging, dev]", "value 80 out of range [1024, 65535]" or
// "list has too few items: 0 < 1".
type TypeError struct {
	Cause Cause
	// Value is the offending value (for a list-count cause, the empty string).
	Value string
	msg   string
}

func (e *TypeError) Error() string { return e.msg }

func typeErr(c Cause, value, format string, args ...any) *TypeError {
	return &TypeError{Cause: c, Value: value, msg: fmt.Sprintf(format, args...)}
}

// CheckValue validates one string value against t with lava-types' rules:
//   - string, any, dynamic: anything;
//   - integer: a base-10 signed 64-bit integer (an optional sign);
//   - boolean: one of true, false, #t, #f;
//   - cidr-block: a dotted-quad IPv4 address, "/", a decimal prefix length of at most 32;
//   - ipv4, ipv6: an address of that family (no IPv6 zone);
//   - hostname: RFC 1123: 1 to 253 bytes of dot-separated labels of 1 to 63 ASCII letters,
//     digits or "-", a label neither starting nor ending with "-";
//   - availability-zone: the last character an ASCII letter, the rest at least 3 bytes with a
//     digit ("us-east-1a");
//   - email: "local@domain", local non-empty, domain a hostname (split at the first "@");
//   - url: "scheme://rest", the scheme non-empty ASCII letters, digits or "+", rest non-empty;
//   - enum: one of the listed strings;
//   - int-range, port-range: an integer within [Lo, Hi] inclusive;
//   - length: the length in characters (runes) within [MinLen, MaxLen] (nil is unbounded);
//   - pattern: a plain substring, prefix ("starts-with") or suffix ("ends-with") test, never
//     a regular expression ("contains" is the default);
//   - list-of: a scalar cannot be checked against a list type (use [CheckList]).
//
// The error, when not nil, is a *[TypeError].
func CheckValue(t arch.Type, v string) error {
	switch t.Kind {
	case arch.TypeString, arch.TypeAny, arch.TypeDynamic:
		return nil
	case arch.TypeInteger:
		if _, err := strconv.ParseInt(v, 10, 64); err != nil {
			return notInteger(v)
		}
		return nil
	case arch.TypeBoolean:
		switch v {
		case "true", "false", "#t", "#f":
			return nil
		}
		return typeErr(NotBoolean, v, "`%s` is not a valid boolean (expected true|false|#t|#f)", v)
	case arch.TypeCIDRBlock:
		return checkCIDR(v)
	case arch.TypeIPv4:
		if a, err := netip.ParseAddr(v); err != nil || !a.Is4() {
			return typeErr(NotIPv4, v, "`%s` is not a valid IPv4 address", v)
		}
		return nil
	case arch.TypeIPv6:
		if a, err := netip.ParseAddr(v); err != nil || !a.Is6() || a.Zone() != "" {
			return typeErr(NotIPv6, v, "`%s` is not a valid IPv6 address", v)
		}
		return nil
	case arch.TypeHostname:
		if !isHostname(v) {
			return typeErr(NotHostname, v, "`%s` is not a valid RFC 1123 hostname", v)
		}
		return nil
	case arch.TypeAvailabilityZone:
		return checkAvailabilityZone(v)
	case arch.TypeEmail:
		local, domain, ok := strings.Cut(v, "@")
		if !ok || local == "" || domain == "" || !isHostname(domain) {
			return typeErr(NotEmail, v, "`%s` is not a valid email (expected localpart@domain)", v)
		}
		return nil
	case arch.TypeURL:
		return checkURL(v)
	case arch.TypeEnum:
		for _, c := range t.Enum {
			if c == v {
				return nil
			}
		}
		return typeErr(NotInEnum, v, "`%s` not in enum [%s]", v, strings.Join(t.Enum, ", "))
	case arch.TypeIntRange, arch.TypePortRange:
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return notInteger(v)
		}
		if n < t.Lo || n > t.Hi {
			return typeErr(OutOfRange, v, "value %d out of range [%d, %d]", n, t.Lo, t.Hi)
		}
		return nil
	case arch.TypeLength:
		n := utf8.RuneCountInString(v)
		if (t.MinLen != nil && n < *t.MinLen) || (t.MaxLen != nil && n > *t.MaxLen) {
			return typeErr(BadLength, v, "length %d out of range [%s, %s]", n, bound(t.MinLen, "0"),
				bound(t.MaxLen, "unbounded"))
		}
		return nil
	case arch.TypePattern:
		var ok bool
		switch t.Match {
		case "starts-with":
			ok = strings.HasPrefix(v, t.Pattern)
		case "ends-with":
			ok = strings.HasSuffix(v, t.Pattern)
		default:
			ok = strings.Contains(v, t.Pattern)
		}
		if !ok {
			return typeErr(PatternMismatch, v, "`%s` doesn't match pattern `%s`", v, t.Pattern)
		}
		return nil
	case arch.TypeListOf:
		return typeErr(WrongValidator, v, "wrong validator: list type — use validate_list")
	default:
		return typeErr(WrongValidator, v, "wrong validator: unknown type %s", t.Kind)
	}
}

// CheckList validates a list of values against a list-of type: the item count against
// MinItems and MaxItems first ("list has too few items: N < MIN", "list has too many items:
// N > MAX"), then each element against the element type; the first failure is returned as a
// *[TypeError]. A type that is not list-of is a WrongValidator error.
func CheckList(t arch.Type, vs []string) error {
	if t.Kind != arch.TypeListOf {
		return typeErr(WrongValidator, "", "wrong validator: expected ListOf")
	}
	if err := checkCount(t, len(vs)); err != nil {
		return err
	}
	elem := arch.Type{Kind: arch.TypeAny}
	if t.Elem != nil {
		elem = *t.Elem
	}
	for _, v := range vs {
		if err := CheckValue(elem, v); err != nil {
			return err
		}
	}
	return nil
}

func checkCount(t arch.Type, n int) error {
	if t.MinItems != nil && n < *t.MinItems {
		return typeErr(TooFewItems, "", "list has too few items: %d < %d", n, *t.MinItems)
	}
	if t.MaxItems != nil && n > *t.MaxItems {
		return typeErr(TooManyItems, "", "list has too many items: %d > %d", n, *t.MaxItems)
	}
	return nil
}

func notInteger(v string) *TypeError {
	return typeErr(NotInteger, v, "`%s` is not a valid integer", v)
}

func bound(p *int, none string) string {
	if p == nil {
		return none
	}
	return strconv.Itoa(*p)
}

func checkCIDR(v string) error {
	bad := func() error {
		return typeErr(NotCIDR, v, "`%s` is not a valid IPv4 CIDR block (expected like 10.0.0.0/16)", v)
	}
	ip, prefix, ok := strings.Cut(v, "/")
	if !ok {
		return bad()
	}
	if a, err := netip.ParseAddr(ip); err != nil || !a.Is4() {
		return bad()
	}
	p, err := strconv.ParseUint(prefix, 10, 8)
	if err != nil || p > 32 {
		return bad()
	}
	return nil
}

// isHostname is lava-types' RFC 1123 check; lengths are in bytes.
func isHostname(v string) bool {
	if v == "" || len(v) > 253 {
		return false
	}
	for label := range strings.SplitSeq(v, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !isASCIIAlnum(c) && c != '-' {
				return false
			}
		}
	}
	return true
}

func checkAvailabilityZone(v string) error {
	bad := typeErr(NotAvailabilityZone, v,
		"`%s` is not a valid AWS availability zone (expected like us-east-1a)", v)
	if v == "" {
		return bad
	}
	last := v[len(v)-1]
	if !isASCIILetter(last) {
		return bad
	}
	region := v[:len(v)-1]
	if len(region) < 3 || !strings.ContainsAny(region, "0123456789") {
		return bad
	}
	return nil
}

func checkURL(v string) error {
	bad := typeErr(NotURL, v, "`%s` is not a valid URL (expected scheme://...)", v)
	scheme, rest, ok := strings.Cut(v, "://")
	if !ok || scheme == "" || rest == "" {
		return bad
	}
	for i := 0; i < len(scheme); i++ {
		if c := scheme[i]; !isASCIIAlnum(c) && c != '+' {
			return bad
		}
	}
	return nil
}

func isASCIILetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

func isASCIIAlnum(c byte) bool { return isASCIILetter(c) || c >= '0' && c <= '9' }
