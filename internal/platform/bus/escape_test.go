package bus

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/quick"
)

func TestEscapeToken_table(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in, want string
	}{
		{"", "="},
		{"prod-vpc", "prod-vpc"},
		{"web.prod", "web_prod"},
		{"a.b.c", "a_b_c"},
		{"UPPER", "UPPER"},
		{"under_score", "under=5fscore"},
		{"eq=", "eq=3d"},
		{"*", "=2a"},
		{">", "=3e"},
		{"a b\tc", "a=20b=09c"},
		{"é", "=c3=a9"},
		{"/", "=2f"},
		{"\x00\xff", "=00=ff"},
		{strings.Repeat("a.", 126) + "a", strings.Repeat("a_", 126) + "a"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			if got := EscapeToken(tt.in); got != tt.want {
				t.Fatalf("EscapeToken(%q) = %q, want %q", tt.in, got, tt.want)
			}
			back, err := UnescapeToken(tt.want)
			if err != nil || back != tt.in {
				t.Fatalf("UnescapeToken(%q) = %q, %v; want %q", tt.want, back, err, tt.in)
			}
		})
	}
}

func TestUnescapeToken_rejectsNonCanonical(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		"",      // empty token: not an escape of anything
		"a.b",   // dot
		"a=",    // truncated
		"a=5",   // truncated
		"=5F",   // uppercase hex
		"=61",   // 'a' escaped although literal
		"=2e",   // '.' escaped although it has '_'
		"=2d",   // '-' escaped
		"a*b",   // raw wildcard char
		"a>",    // raw wildcard char
		"a b",   // whitespace
		"é",     // raw non-ASCII
		"==3d",  // '=' then bad
		"=zz",   // not hex
		"a/b",   // slash is not in the alphabet
		"=3d=",  // trailing lone '='
		"x\x00", // control byte
	} {
		if got, err := UnescapeToken(in); !errors.Is(err, ErrInvalidToken) {
			t.Errorf("UnescapeToken(%q) = %q, %v; want ErrInvalidToken", in, got, err)
		}
	}
}

// validToken is the alphabet promise: non-empty, [-0-9A-Za-z_=], so a subject token (no '.',
// '*', '>', whitespace) and a KV key segment.
func validToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !literal(s[i]) && s[i] != '_' && s[i] != '=' {
			return false
		}
	}
	return true
}

func TestEscapeToken_roundTripProperty(t *testing.T) {
	t.Parallel()
	f := func(s string) bool {
		tok := EscapeToken(s)
		back, err := UnescapeToken(tok)
		return err == nil && back == s && validToken(tok)
	}
	if err := quick.Check(f, &quick.Config{MaxCount: 20000}); err != nil {
		t.Fatal(err)
	}
	// Byte strings, not only valid UTF-8.
	g := func(b []byte) bool { return f(string(b)) }
	if err := quick.Check(g, &quick.Config{MaxCount: 20000}); err != nil {
		t.Fatal(err)
	}
}

// FuzzEscapeToken: escaping is total, lands in the token alphabet and round-trips.
func FuzzEscapeToken(f *testing.F) {
	for _, s := range []string{"", "a", "web.prod", "_", "=", "*", ">", "a b", "é", "\xff", "=3d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tok := EscapeToken(s)
		if !validToken(tok) {
			t.Fatalf("EscapeToken(%q) = %q: outside the token alphabet", s, tok)
		}
		back, err := UnescapeToken(tok)
		if err != nil || back != s {
			t.Fatalf("UnescapeToken(EscapeToken(%q)) = %q, %v", s, back, err)
		}
	})
}

// FuzzUnescapeToken: whatever UnescapeToken accepts, EscapeToken gives back unchanged, so a
// token has exactly one meaning (injectivity from the other side).
func FuzzUnescapeToken(f *testing.F) {
	for _, s := range []string{"=", "a_b", "=5f", "=5F", "=61", "a=", "x=2a"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, tok string) {
		s, err := UnescapeToken(tok)
		if err != nil {
			return
		}
		if again := EscapeToken(s); again != tok {
			t.Fatalf("UnescapeToken(%q) = %q, but EscapeToken(%q) = %q", tok, s, s, again)
		}
	})
}

// k8sNames are DNS-1123 namespaces and names built to collide under naive escapings
// (dots vs dashes vs underscores, splits of one dotted string across namespace and name).
var k8sNames = []string{
	"a", "b", "a.b", "a-b", "ab", "a.b.c", "a-b.c", "a.b-c", "b.c", "c", "a.b.c.d", "x", "0", "9z",
	"web.prod", "web-prod", "webprod", "prod", "web", strings.Repeat("n", 253),
	strings.Repeat("a.", 126) + "a", strings.Repeat("a-", 126) + "a", "kube-system", "default",
}

func TestResourceNames_collisionFree(t *testing.T) {
	t.Parallel()
	seen := map[string][2]string{}
	for _, ns := range k8sNames {
		for _, name := range k8sNames {
			pair := [2]string{ns, name}
			outs := map[string]string{
				"resource": ResourceSubject(ns, name, EventObserved),
				"phase":    PhaseSubject(ns, name, EventApplied),
				"command":  CommandSubject(StageApply, ns, name, VerbRetry),
				"receipt":  ReceiptSubject(ns, name),
				"key":      ResourceKey(ns, name),
				"wm":       WatermarkKey(ServiceApplier, ns, name),
			}
			for kind, out := range outs {
				k := kind + "|" + out
				if prev, ok := seen[k]; ok && prev != pair {
					t.Fatalf("%s %q for both %v and %v", kind, out, prev, pair)
				}
				seen[k] = pair
			}
			for _, subj := range []string{outs["resource"], outs["phase"], outs["command"], outs["receipt"]} {
				got, err := ParseSubject(subj)
				if err != nil || got.Namespace != ns || got.Name != name {
					t.Fatalf("ParseSubject(%q) = %+v, %v; want %s/%s", subj, got, err, ns, name)
				}
				if got.String() != subj {
					t.Fatalf("Subject.String() = %q, want %q", got.String(), subj)
				}
			}
			if gns, gname, err := ParseResourceKey(outs["key"]); err != nil || gns != ns || gname != name {
				t.Fatalf("ParseResourceKey(%q) = %q, %q, %v", outs["key"], gns, gname, err)
			}
			if svc, gns, gname, err := ParseWatermarkKey(outs["wm"]); err != nil || svc != ServiceApplier || gns != ns || gname != name {
				t.Fatalf("ParseWatermarkKey(%q) = %q, %q, %q, %v", outs["wm"], svc, gns, gname, err)
			}
		}
	}
}

// FuzzResourceSubject: for any two (namespace, name) pairs, equal subjects and keys mean equal
// pairs, and every subject parses back to its pair.
func FuzzResourceSubject(f *testing.F) {
	f.Add("a.b", "c", "a", "b.c")
	f.Add("a", "b_c", "a", "b.c")
	f.Add("", "x", "x", "")
	f.Fuzz(func(t *testing.T, ns1, n1, ns2, n2 string) {
		s1, s2 := PhaseSubject(ns1, n1, EventPlanned), PhaseSubject(ns2, n2, EventPlanned)
		k1, k2 := ResourceKey(ns1, n1), ResourceKey(ns2, n2)
		same := ns1 == ns2 && n1 == n2
		if (s1 == s2) != same || (k1 == k2) != same {
			t.Fatalf("(%q,%q) and (%q,%q): subjects %q %q, keys %q %q", ns1, n1, ns2, n2, s1, s2, k1, k2)
		}
		got, err := ParseSubject(s1)
		if err != nil || got.Namespace != ns1 || got.Name != n1 {
			t.Fatalf("ParseSubject(%q) = %+v, %v", s1, got, err)
		}
		if !kvKeyValid(k1) {
			t.Fatalf("ResourceKey(%q, %q) = %q is not a valid KV key", ns1, n1, k1)
		}
	})
}

// kvKeyValid mirrors nats.go's KV key rule: [-/_=.a-zA-Z0-9]+, no leading, trailing or
// doubled '.'.
func kvKeyValid(k string) bool {
	if k == "" || k[0] == '.' || k[len(k)-1] == '.' || strings.Contains(k, "..") {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !literal(c) && !strings.ContainsRune("/_=.", rune(c)) {
			return false
		}
	}
	return true
}

func TestParseSubject_errors(t *testing.T) {
	t.Parallel()
	for _, s := range []string{
		"",
		"lava.v1.resource.a.b",                // too few tokens
		"lava.v1.resource.a.b.applied",        // not a resource event
		"lava.v1.phase.a.b.Applied",           // not snake case
		"lava.v1.phase.a.b.*",                 // wildcard
		"lava.v1.phase.a.b.c.applied",         // too many tokens
		"lava.v1.phase.a*.b.applied",          // bad escape
		"lava.v1.phase.a.=61.applied",         // non-canonical escape
		"lava.v1.command.apply.a.b",           // too few
		"lava.anomaly.critical",               // too few
		"lava.anomaly.Critical.apply_failure", // case
		"lava.v1.receipt.a",                   // too few
		"other.subject",
	} {
		if got, err := ParseSubject(s); !errors.Is(err, ErrInvalidSubject) {
			t.Errorf("ParseSubject(%q) = %+v, %v; want ErrInvalidSubject", s, got, err)
		}
	}
	got, err := ParseSubject("lava.anomaly.critical.apply_failure")
	if err != nil || got.Severity != "critical" || got.AnomalyKind != "apply_failure" {
		t.Errorf("anomaly subject parsed as %+v, %v", got, err)
	}
}

// ParseWatermarkKey inverts [WatermarkKey], so the tests can check that no two resources share
// a watermark key. Errors wrap [ErrInvalidToken].
func ParseWatermarkKey(key string) (service, namespace, name string, err error) {
	parts := strings.Split(key, ".")
	if len(parts) != 3 || !isWord(parts[0]) {
		return "", "", "", fmt.Errorf("%w: watermark key %q, want service.namespace.name", ErrInvalidToken, key)
	}
	namespace, name, err = unescapePair(parts[1], parts[2])
	return parts[0], namespace, name, err
}

// String formats s back into its subject, so the tests can check that a subject parses back
// to itself.
func (s Subject) String() string {
	switch s.Kind {
	case KindResource:
		return ResourceSubject(s.Namespace, s.Name, s.Event)
	case KindPhase:
		return PhaseSubject(s.Namespace, s.Name, s.Event)
	case KindCommand:
		return CommandSubject(s.Stage, s.Namespace, s.Name, s.Verb)
	case KindAnomaly:
		return AnomalySubject(s.Severity, s.AnomalyKind)
	case KindReceipt:
		return ReceiptSubject(s.Namespace, s.Name)
	}
	return ""
}
