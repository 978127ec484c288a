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
// binds them) are built into a tree of at most two nodes each, and a message is scrubbed in
// one pass: the edges followed are bounded by the text's length times the longest pattern,
// whatever the number of patterns (replacing one pattern after the other scanned the text
// once per pattern: 160,000 scans).
func TestSet_manyPatternsAttack(t *testing.T) {
	t.Parallel()
	var ps []Pattern
	longest := 0
	for i := range 16000 {
		for f := range 10 {
			p := Pattern{Text: fmt.Sprintf("v%06d-form%d", i, f)}
			longest = max(longest, len(p.Text))
			ps = append(ps, p)
		}
	}
	s := New(ps...)
	if s.Len() > 2*len(ps)+1 {
		t.Fatalf("%d nodes for %d patterns", s.Len(), len(ps))
	}
	text := strings.Repeat("error near v000123-form4 and v015999-form9, v0000 ", 160)
	got, steps := s.replace(text, "X")
	if strings.Contains(got, "-form") {
		t.Fatalf("a pattern is left: %.200q", got)
	}
	if bound := len(text) * longest; steps > bound {
		t.Fatalf("%d steps for %d bytes of text, want at most %d", steps, len(text), bound)
	}
	t.Logf("%d nodes, %d steps for %d bytes", s.Len(), steps, len(text))
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
