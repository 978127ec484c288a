package tlisp

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// sexpr renders forms back to text for compact comparisons.
func sexpr(forms []*Node) string {
	parts := make([]string, len(forms))
	for i, f := range forms {
		parts[i] = f.String()
	}
	return strings.Join(parts, " | ")
}

func TestParse_atoms(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, src, want string
		kinds           []NodeKind
	}{
		{"symbol", "abc", "abc", []NodeKind{NodeSymbol}},
		{"keyword", ":cidr-block", ":cidr-block", []NodeKind{NodeKeyword}},
		{"lone colon is the empty keyword", ":", ":", []NodeKind{NodeKeyword}},
		{"string", `"hi there"`, `"hi there"`, []NodeKind{NodeString}},
		{"bools", "#t #f", "#t | #f", []NodeKind{NodeBool, NodeBool}},
		{"#true reads #t then rue", "#true", "#t | rue", []NodeKind{NodeBool, NodeSymbol}},
		{"ints", "-3 0 6443 +5", "-3 | 0 | 6443 | 5", []NodeKind{NodeInt, NodeInt, NodeInt, NodeInt}},
		{"int64 overflow is a symbol", "9223372036854775808", "9223372036854775808", []NodeKind{NodeSymbol}},
		{"no floats", "1.5", "1.5", []NodeKind{NodeSymbol}},
		{"no quoting", "'x `y", "'x | `y", []NodeKind{NodeSymbol, NodeSymbol}},
		{"quote does not end an atom", `a"b`, `a"b`, []NodeKind{NodeSymbol}},
		{"braces are atom characters", "{x}", "{x}", []NodeKind{NodeSymbol}},
		{"commas are whitespace", "(a,b,,c)", "(a b c)", []NodeKind{NodeList}},
		{"comments", "; one\n(a ;; two\n b) ; three", "(a b)", []NodeKind{NodeList}},
		{"semicolon in string is text", `"a;b"`, `"a;b"`, []NodeKind{NodeString}},
		{"nested", "(a (b (c)) ())", "(a (b (c)) ())", []NodeKind{NodeList}},
		{"several forms", "(a) (b) c", "(a) | (b) | c", []NodeKind{NodeList, NodeList, NodeSymbol}},
		{"semicolon ends an atom", "ab;c\nd", "ab | d", []NodeKind{NodeSymbol, NodeSymbol}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			forms, diags := Parse([]byte(tt.src), Options{})
			if len(diags) != 0 {
				t.Fatalf("diagnostics: %v", diags)
			}
			if got := sexpr(forms); got != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
			var kinds []NodeKind
			for _, f := range forms {
				kinds = append(kinds, f.Kind)
			}
			if diff := cmp.Diff(tt.kinds, kinds); diff != "" {
				t.Errorf("kinds (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParse_stringEscapesAndUTF8(t *testing.T) {
	t.Parallel()
	forms, diags := Parse([]byte("\"a\\nb\\rc\\td\\\\e\\\"f\\qg\nh é\""), Options{})
	if len(diags) != 0 {
		t.Fatal(diags)
	}
	if got, want := forms[0].Text, "a\nb\rc\td\\e\"fqg\nh é"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestParse_positions(t *testing.T) {
	t.Parallel()
	src := "; c\n(aé \"ü\" :k\n\t  42)"
	forms, diags := Parse([]byte(src), Options{File: "f.tlisp"})
	if len(diags) != 0 {
		t.Fatal(diags)
	}
	l := forms[0]
	got := []Pos{l.Pos, l.List[0].Pos, l.List[1].Pos, l.List[2].Pos, l.List[3].Pos}
	want := []Pos{
		{File: "f.tlisp", Line: 2, Col: 1, Offset: 4},
		{File: "f.tlisp", Line: 2, Col: 2, Offset: 5},
		{File: "f.tlisp", Line: 2, Col: 5, Offset: 9}, // "aé" is 2 runes, 3 bytes
		{File: "f.tlisp", Line: 2, Col: 9, Offset: 14},
		{File: "f.tlisp", Line: 3, Col: 4, Offset: 20}, // a tab is one column
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("positions (-want +got):\n%s", diff)
	}
}

func TestParse_errors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, src string
		want      string // first diagnostic
	}{
		{"unterminated string", "(a\n  \"abc", "f:2:3: unterminated string starting at offset 5"},
		{"unterminated escape", `"abc\`, "f:1:1: unterminated string starting at offset 0"},
		{"unexpected close paren", "(a)\n )", "f:2:2: unexpected close paren at offset 5 (no list is open here: remove it or add the `(` it closes)"},
		{"unclosed list reported at end of input", "(a\n (b c)", "f:2:7: unclosed list starting at offset 0 (line 1, column 1): missing `)` at end of input"},
		{"bad hash", "(a #x)", "f:1:4: unexpected character 'x' at offset 4 (expected #t or #f)"},
		{"hash at end", "#", "f:1:1: unexpected end of input after '#' at offset 0 (expected #t or #f)"},
		{"invalid utf-8 in string", "\"a\xffb\"", "f:1:1: string starting at offset 0 is not valid UTF-8"},
		{"invalid utf-8 in atom", "ab\xff", "f:1:1: atom starting at offset 0 is not valid UTF-8"},
		{"too deep", strings.Repeat("(", MaxDepth+1), "f:1:257: list nesting deeper than 256 levels at offset 256"},
		{"too large", strings.Repeat(" ", MaxSourceBytes+1), "f:1:1: source is 1048577 bytes, larger than the 1048576-byte (1 MiB) limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, diags := Parse([]byte(tt.src), Options{File: "f"})
			if len(diags) == 0 {
				t.Fatal("no diagnostics")
			}
			if got := diags[0].String(); got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

func TestParse_depthLimitAccepted(t *testing.T) {
	t.Parallel()
	src := strings.Repeat("(", MaxDepth) + strings.Repeat(")", MaxDepth)
	if _, diags := Parse([]byte(src), Options{}); len(diags) != 0 {
		t.Errorf("nesting of exactly %d levels: %v", MaxDepth, diags)
	}
}

func TestPosInString(t *testing.T) {
	t.Parallel()
	src := []byte("(x \"a\\n{b}\n{c}\")")
	forms, _ := Parse(src, Options{})
	s := forms[0].List[1]
	tests := []struct {
		off  int
		want Pos
	}{
		{0, Pos{Line: 1, Col: 5, Offset: 4}},
		{2, Pos{Line: 1, Col: 8, Offset: 7}},  // '{' after the escaped \n
		{6, Pos{Line: 2, Col: 1, Offset: 11}}, // after the raw newline
	}
	for _, tt := range tests {
		if got := posInString(src, s.Pos, tt.off); got != tt.want {
			t.Errorf("posInString(%d) = %+v, want %+v", tt.off, got, tt.want)
		}
	}
}
