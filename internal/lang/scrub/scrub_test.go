package scrub

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// naive is the reference: every byte of every occurrence of every pattern (its context left
// out) is covered; each run of covered bytes becomes with.
func naive(patterns []Pattern, text, with string) string {
	covered := make([]bool, len(text))
	for _, p := range patterns {
		if p.Lead+p.Trail >= len(p.Text) {
			continue
		}
		for i := 0; i+len(p.Text) <= len(text); i++ {
			if text[i:i+len(p.Text)] == p.Text {
				for j := i + p.Lead; j < i+len(p.Text)-p.Trail; j++ {
					covered[j] = true
				}
			}
		}
	}
	var b strings.Builder
	for i := range text {
		switch {
		case !covered[i]:
			b.WriteByte(text[i])
		case i == 0 || !covered[i-1]:
			b.WriteString(with)
		}
	}
	return b.String()
}

func TestSet_Replace(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		patterns []Pattern
		text     string
		want     string
	}{
		{"none", nil, "a secret", "a secret"},
		{"one", []Pattern{{Text: "hunter2"}}, "pw=hunter2 and hunter2", "pw=X and X"},
		{"contained", []Pattern{{Text: "hunter2"}, {Text: "hunter2-long"}}, "pw=hunter2-long and hunter2", "pw=X and X"},
		// A shorter secret that overlaps the start of a longer one: neither is left in part
		// (replacing the longer first left "xx"; a leftmost match left "tail").
		{"overlap", []Pattern{{Text: "secret-tail"}, {Text: "xxsec"}}, "[xxsecret-tail]", "[X]"},
		{"overlap both ways", []Pattern{{Text: "abcd"}, {Text: "cdef"}}, "abcdef abcd cdef", "X X X"},
		{"adjacent", []Pattern{{Text: "abc"}, {Text: "def"}}, "abcdef", "X"},
		{"context", []Pattern{{Text: `"ab"`, Lead: 1, Trail: 1}, {Text: "value ab ", Lead: 6, Trail: 1}}, `"ab" ab value ab `, `"X" ab value X `},
		{"context only", []Pattern{{Text: `""`, Lead: 1, Trail: 1}}, `""`, `""`},
		{"empty", []Pattern{{Text: ""}}, "text", "text"},
		{"text shorter", []Pattern{{Text: "longsecret"}}, "long", "long"},
		{"same text, widest cover", []Pattern{{Text: `"ab"`, Lead: 1, Trail: 1}, {Text: `"ab"`}}, `x"ab"x`, "xXx"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := New(tt.patterns...).Replace(tt.text, "X"); got != tt.want {
				t.Errorf("Replace(%q) = %q, want %q", tt.text, got, tt.want)
			}
			if got := naive(tt.patterns, tt.text, "X"); got != tt.want {
				t.Errorf("reference: %q, want %q", got, tt.want)
			}
		})
	}
	var nilSet *Set
	if got := nilSet.Replace("abc", "X"); got != "abc" {
		t.Errorf("nil Set: %q", got)
	}
}

// TestSet_Replace_matchesReference compares with the reference on random patterns and texts of
// a small alphabet, where occurrences overlap and share prefixes often.
func TestSet_Replace_matchesReference(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	word := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = "abc"[rng.IntN(3)]
		}
		return string(b)
	}
	for i := range 2000 {
		var ps []Pattern
		for range 1 + rng.IntN(6) {
			w := word(1 + rng.IntN(6))
			lead, trail := 0, 0
			if rng.IntN(3) == 0 {
				lead, trail = rng.IntN(2), rng.IntN(2)
			}
			ps = append(ps, Pattern{Text: w, Lead: lead, Trail: trail})
		}
		text := word(rng.IntN(40))
		if got, want := New(ps...).Replace(text, "X"), naive(ps, text, "X"); got != want {
			t.Fatalf("case %d: patterns %+v, text %q: got %q, want %q", i, ps, text, got, want)
		}
	}
}

// TestSet_manyPatternsAttack: 160,000 patterns (the forms of 16,000 Secret values, as a tenant
// binds them) are built into one state per distinct prefix, and a message is scrubbed in one
// pass: at most two steps a byte of text and one per span marked, whatever the number of
// patterns (replacing one pattern after the other scanned the text once per pattern: 160,000
// scans).
func TestSet_manyPatternsAttack(t *testing.T) {
	t.Parallel()
	var ps []Pattern
	total := 0
	for i := range 16000 {
		for f := range 10 {
			p := Pattern{Text: fmt.Sprintf("v%06d-form%d", i, f)}
			total += len(p.Text)
			ps = append(ps, p)
		}
	}
	s := New(ps...)
	if s.Len() > total+1 {
		t.Fatalf("%d states for %d bytes of patterns", s.Len(), total)
	}
	text := strings.Repeat("error near v000123-form4 and v015999-form9, v0000 ", 160)
	got, steps := s.replace(text, "X")
	if strings.Contains(got, "-form") {
		t.Fatalf("a pattern is left: %.200q", got)
	}
	checkSteps(t, steps, text)
	t.Logf("%d states, %d steps for %d bytes", s.Len(), steps, len(text))
}

// checkSteps fails when replacing text took more than three steps a byte: two for the
// transitions and failure links followed, one for the spans marked (every pattern here covers
// its whole text, so the patterns ending at a byte cover one span).
func checkSteps(t *testing.T, steps int, text string) {
	t.Helper()
	if bound := 3 * len(text); steps > bound {
		t.Fatalf("%d steps for %d bytes of text, want at most %d", steps, len(text), bound)
	}
}

// TestSet_longPatternAttack: a text that keeps repeating the start of a long secret, and
// secrets nested in one another (a, aa, aaa, ...), made the work the text's length times the
// longest secret: a 2 MB sensitive value in a 4 MB error message took 172 s to redact. The
// work is now linear in the text; the cover is still exact.
func TestSet_longPatternAttack(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", 1<<20)
	near := strings.Repeat(long[:len(long)-1]+"b", 4)
	t.Run("the start of a long secret, repeated", func(t *testing.T) {
		t.Parallel()
		s := Strings(long, "zz")
		text := near + "zz" + long + "zz"
		got, steps := s.replace(text, "X")
		if want := near + "X"; got != want {
			t.Fatalf("got %d bytes ending %q, want %d bytes ending %q", len(got), got[max(0, len(got)-8):], len(want), want[len(want)-8:])
		}
		checkSteps(t, steps, text)
	})
	t.Run("nested secrets", func(t *testing.T) {
		t.Parallel()
		var texts []string
		for n := 1; n <= 2000; n++ {
			texts = append(texts, long[:n]+"b")
		}
		s := Strings(texts...)
		text := "x" + near[:1<<21] + "x"
		got, steps := s.replace(text, "X")
		rest := strings.Repeat("a", 1<<20-1-2000) + "X"
		if want := "x" + rest + rest + "x"; got != want {
			t.Fatalf("got %d bytes (%d X), want %d bytes", len(got), strings.Count(got, "X"), len(want))
		}
		checkSteps(t, steps, text)
	})
}

func BenchmarkSet(b *testing.B) {
	var texts []string
	for i := range 30000 {
		texts = append(texts, fmt.Sprintf("\x01${\xfb%05d", i))
	}
	msg := strings.Repeat("synthesis failed: value \x01${\xfb00042 is not valid; ", 100)
	b.Run("build", func(b *testing.B) {
		for b.Loop() {
			Strings(texts...)
		}
	})
	s := Strings(texts...)
	b.Run("replace", func(b *testing.B) {
		for b.Loop() {
			s.Replace(msg, "(redacted)")
		}
	})
}
