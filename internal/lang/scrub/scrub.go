// Package scrub finds many secret strings in a text at once and replaces the text they cover.
//
// A [Set] is an Aho-Corasick automaton of the patterns (Aho and Corasick, "Efficient string
// matching: an aid to bibliographic search", CACM 18(6), 1975), kept sparse: the states are
// numbered breadth first so each state's transitions are one sorted run of bytes, about 13
// bytes per byte of the distinct patterns. [Set.Replace] reads the text once and hides every
// byte any occurrence of any pattern covers, overlapping and adjacent occurrences as one
// replacement; its work is linear in the text whatever the patterns (a text that keeps
// repeating the start of a long pattern, or patterns nested in one another, included).
// Replacing patterns one after the other (longest first) costs the number of patterns times
// the text, and leaves the part of a shorter secret that overlaps a longer one's occurrence in
// the text; a one-pass replacer that takes the leftmost match (strings.Replacer) leaves the
// rest of a longer secret that overlaps it. An Aho-Corasick library with a dense transition
// table per state (measured: github.com/BobuSumisu/aho-corasick v1.0.3) took 50 s and 3.3 GB
// to build a set of 116,000 secret forms (docs/design/0030-secret-redaction.md).
package scrub

import (
	"cmp"
	"slices"
	"strings"
)

// Pattern is a text to find. Lead and Trail bytes at its start and end must match too but are
// context, not covered: the pattern `"ab"` with Lead 1 and Trail 1 hides only ab where it
// stands quoted.
type Pattern struct {
	Text        string
	Lead, Trail int
}

// Set is a set of patterns ready to be found. The zero value and nil find nothing. A Set is
// safe for concurrent use.
type Set struct {
	// The states of the automaton, breadth first; state 0 is the root (the empty prefix).
	// The kids of state s are states kids[s] to kids[s+1]-1, sorted by edge, the byte that
	// leads to each.
	kids []int32
	edge []byte
	// fail is the state of the longest proper suffix of the state's prefix that is a state.
	fail []int32
	// cover indexes covers: the bytes that the patterns ending at the state (its own and
	// those of its suffixes) hide, or -1 for none.
	cover []int32
	// covers are lists of disjoint spans sorted by trail. Where the text read up to end has
	// reached the state, each span covers the bytes end-back to end-trail-1.
	covers [][]span
	// root is the root's transitions by byte (0: none; no transition leads to the root).
	root [256]int32
}

// span is a run of covered bytes, counted back from the end of what was read.
type span struct{ back, trail int32 }

// New returns the Set of patterns. Empty texts and patterns whose context leaves nothing to
// cover are ignored; a text given twice keeps the widest cover. Building costs sorting the
// distinct texts, then time and memory linear in their total length.
func New(patterns ...Pattern) *Set {
	ps := patternsByText(patterns)
	if len(ps) == 0 {
		return &Set{}
	}
	s := &Set{edge: []byte{0}, cover: []int32{-1}}
	parent := s.build(ps)
	s.link(parent)
	return s
}

// Strings returns the Set of texts, each covered whole.
func Strings(texts ...string) *Set {
	ps := make([]Pattern, 0, len(texts))
	for _, t := range texts {
		ps = append(ps, Pattern{Text: t})
	}
	return New(ps...)
}

// patternsByText returns the patterns that cover something, sorted by text, one per text with
// the least lead and trail of that text's patterns.
func patternsByText(patterns []Pattern) []Pattern {
	var ps []Pattern
	for _, p := range patterns {
		if p.Lead >= 0 && p.Trail >= 0 && p.Lead+p.Trail < len(p.Text) {
			ps = append(ps, p)
		}
	}
	slices.SortFunc(ps, func(a, b Pattern) int { return strings.Compare(a.Text, b.Text) })
	out := ps[:0]
	for _, p := range ps {
		if n := len(out); n > 0 && out[n-1].Text == p.Text {
			out[n-1].Lead, out[n-1].Trail = min(out[n-1].Lead, p.Lead), min(out[n-1].Trail, p.Trail)
			continue
		}
		out = append(out, p)
	}
	return out
}

// build makes the states of the sorted, distinct patterns ps one depth at a time, breadth
// first: at depth d, a pattern makes a new state unless it shares its first d bytes with the
// pattern before it (sorted, the patterns sharing a prefix are adjacent, and a shorter one
// between two cannot share it). The parents of the states made are in state order, so each
// state's kids are made together, in byte order. It returns each state's parent and leaves
// in cover each pattern's own span.
func (s *Set) build(ps []Pattern) []int32 {
	lcp := make([]int, len(ps))
	for i := 1; i < len(ps); i++ {
		a, b := ps[i-1].Text, ps[i].Text
		n := 0
		for n < len(a) && n < len(b) && a[n] == b[n] {
			n++
		}
		lcp[i] = n
	}
	parent := []int32{0}
	at := make([]int32, len(ps)) // the state each pattern has reached
	live := make([]int, len(ps)) // the patterns longer than the depth before, in order
	for i := range live {
		live[i] = i
	}
	for d := 1; len(live) > 0; d++ {
		next := live[:0]
		var last int32
		for k, i := range live {
			p := ps[i]
			if k == 0 || lcp[i] < d {
				parent = append(parent, at[i])
				s.edge = append(s.edge, p.Text[d-1])
				s.cover = append(s.cover, -1)
				last = int32(len(s.edge) - 1)
			}
			at[i] = last
			if len(p.Text) > d {
				next = append(next, i)
				continue
			}
			s.cover[last] = int32(len(s.covers))
			s.covers = append(s.covers, []span{{back: int32(d - p.Lead), trail: int32(p.Trail)}})
		}
		live = next
	}
	return parent
}

// link sets the kids' ranges, the root's table, the failure states and each state's covers:
// its own span joined with its failure state's covers (states are breadth first, so a failure
// state, being shallower, is done first).
func (s *Set) link(parent []int32) {
	n := len(s.edge)
	s.kids = make([]int32, n+1)
	s.fail = make([]int32, n)
	t := 1
	for st := range n {
		for t < n && int(parent[t]) < st {
			t++
		}
		s.kids[st] = int32(t)
	}
	s.kids[n] = int32(n)
	for t := s.kids[0]; t < s.kids[1]; t++ {
		s.root[s.edge[t]] = t
	}
	for t := 1; t < n; t++ {
		if p := parent[t]; p != 0 {
			f := s.fail[p]
			for {
				if u := s.next(f, s.edge[t]); u != 0 {
					s.fail[t] = u
					break
				}
				if f == 0 {
					break
				}
				f = s.fail[f]
			}
		}
		inherited := s.cover[s.fail[t]]
		switch own := s.cover[t]; {
		case inherited < 0:
		case own < 0:
			s.cover[t] = inherited
		default:
			s.covers[own] = joinSpans(s.covers[own], s.covers[inherited])
		}
	}
}

// joinSpans returns the union of the spans of a and b, disjoint and sorted by trail.
func joinSpans(a, b []span) []span {
	all := slices.SortedFunc(slices.Values(slices.Concat(a, b)), func(x, y span) int { return cmp.Compare(x.trail, y.trail) })
	out := all[:1]
	for _, sp := range all[1:] {
		last := &out[len(out)-1]
		if sp.trail <= last.back {
			last.back = max(last.back, sp.back)
			continue
		}
		out = append(out, sp)
	}
	return out
}

// next returns the state st goes to on byte c, or 0 for none.
func (s *Set) next(st int32, c byte) int32 {
	if st == 0 {
		return s.root[c]
	}
	lo, hi := s.kids[st], s.kids[st+1]
	i, ok := slices.BinarySearch(s.edge[lo:hi], c)
	if !ok {
		return 0
	}
	return lo + int32(i)
}

// Len returns the number of states: one more than the number of distinct prefixes of the
// patterns, at most their total length plus one.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.edge)
}

// Replace returns text with every run of bytes covered by an occurrence of a pattern replaced
// by with. The work is linear in the text's length, however many patterns there are and
// however long (at most two steps a byte, and one per disjoint span the patterns ending there
// cover).
func (s *Set) Replace(text, with string) string {
	out, _ := s.replace(text, with)
	return out
}

// replace is [Set.Replace]; steps counts the transitions and failure links followed and the
// spans marked.
func (s *Set) replace(text, with string) (out string, steps int) {
	if s == nil || len(s.edge) <= 1 {
		return text, 0
	}
	// depth[i] > 0: byte i is covered (a difference array of the covers).
	var depth []int32
	var st int32
	for i := 0; i < len(text); i++ {
		c := text[i]
		for {
			steps++
			if u := s.next(st, c); u != 0 {
				st = u
				break
			}
			if st == 0 {
				break
			}
			st = s.fail[st]
		}
		cv := s.cover[st]
		if cv < 0 {
			continue
		}
		if depth == nil {
			depth = make([]int32, len(text)+1)
		}
		end := int32(i + 1)
		for _, sp := range s.covers[cv] {
			steps++
			depth[end-sp.back]++
			depth[end-sp.trail]--
		}
	}
	if depth == nil {
		return text, steps
	}
	var b strings.Builder
	b.Grow(len(text))
	covered := int32(0)
	for i := 0; i < len(text); i++ {
		was := covered > 0
		covered += depth[i]
		switch {
		case covered > 0 && !was:
			b.WriteString(with)
		case covered == 0:
			b.WriteByte(text[i])
		}
	}
	return b.String(), steps
}
