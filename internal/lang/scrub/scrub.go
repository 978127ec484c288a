// Package scrub finds many secret strings in a text at once and replaces the text they cover.
//
// A [Set] is built once from the patterns (a radix tree of them) and replaces in one pass
// over the text: every byte any occurrence of any pattern covers is hidden, overlapping and
// adjacent occurrences as one replacement. Replacing patterns one after the other (longest
// first) costs the number of patterns times the text, and leaves the part of a shorter
// secret that overlaps a longer one's occurrence in the text; a one-pass replacer that takes
// the leftmost match (strings.Replacer) leaves the rest of a longer secret that overlaps it.
// An Aho-Corasick library with a dense transition table per state (measured:
// github.com/BobuSumisu/aho-corasick v1.0.3) took 50 s and 3.3 GB to build the set of 116,000
// secret forms this tree builds in under a second (docs/design/0030-secret-redaction.md).
package scrub

import (
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
	nodes []node
}

// node is a node of the radix tree: the edge from its parent is label; kids are sorted by
// the first byte of their labels. When end is set a pattern ends here; lead and trail are
// its context (the smallest of the patterns with this text).
type node struct {
	label       string
	kids        []int32
	end         bool
	lead, trail int
}

// New returns the Set of patterns. Empty texts and patterns whose context leaves nothing to
// cover are ignored; a text given twice keeps the widest cover.
func New(patterns ...Pattern) *Set {
	s := &Set{nodes: []node{{}}}
	for _, p := range patterns {
		if p.Lead < 0 || p.Trail < 0 || p.Lead+p.Trail >= len(p.Text) {
			continue
		}
		s.insert(p)
	}
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

// child returns the index in n.kids of the kid whose label starts with c, and whether there
// is one.
func (s *Set) child(n *node, c byte) (int, bool) {
	return slices.BinarySearchFunc(n.kids, c, func(k int32, c byte) int {
		return int(s.nodes[k].label[0]) - int(c)
	})
}

// insert adds p to the tree.
func (s *Set) insert(p Pattern) {
	cur, rest := 0, p.Text
	for len(rest) > 0 {
		i, ok := s.child(&s.nodes[cur], rest[0])
		if !ok {
			s.nodes = append(s.nodes, node{label: rest})
			n := &s.nodes[cur]
			n.kids = slices.Insert(n.kids, i, int32(len(s.nodes)-1))
			cur, rest = len(s.nodes)-1, ""
			break
		}
		k := int(s.nodes[cur].kids[i])
		label := s.nodes[k].label
		common := 0
		for common < len(label) && common < len(rest) && label[common] == rest[common] {
			common++
		}
		if common < len(label) {
			// Split the edge: a new node for the common part takes k as its only kid.
			s.nodes = append(s.nodes, node{label: label[:common], kids: []int32{int32(k)}})
			mid := int32(len(s.nodes) - 1)
			s.nodes[k].label = label[common:]
			s.nodes[cur].kids[i] = mid
			k = int(mid)
		}
		cur, rest = k, rest[common:]
	}
	n := &s.nodes[cur]
	if !n.end {
		n.end, n.lead, n.trail = true, p.Lead, p.Trail
		return
	}
	n.lead, n.trail = min(n.lead, p.Lead), min(n.trail, p.Trail)
}

// Len returns the number of tree nodes (at most twice the number of distinct patterns).
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.nodes)
}

// Replace returns text with every run of bytes covered by an occurrence of a pattern replaced
// by with. The work is at most the text's length times the longest pattern's, however many
// patterns there are.
func (s *Set) Replace(text, with string) string {
	out, _ := s.replace(text, with)
	return out
}

// replace is [Set.Replace]; steps counts the tree edges it followed.
func (s *Set) replace(text, with string) (out string, steps int) {
	if s == nil || len(s.nodes) == 0 || len(s.nodes[0].kids) == 0 {
		return text, 0
	}
	// depth[i] > 0: byte i is covered (a difference array of the covers).
	var depth []int32
	for i := 0; i < len(text); i++ {
		cur, pos := 0, i
		for pos < len(text) {
			n := &s.nodes[cur]
			j, ok := s.child(n, text[pos])
			if !ok {
				break
			}
			steps++
			k := int(n.kids[j])
			label := s.nodes[k].label
			if !strings.HasPrefix(text[pos:], label) {
				break
			}
			cur, pos = k, pos+len(label)
			if m := &s.nodes[k]; m.end {
				if depth == nil {
					depth = make([]int32, len(text)+1)
				}
				depth[i+m.lead]++
				depth[pos-m.trail]--
			}
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
