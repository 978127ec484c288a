package manifest

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	yaml "go.yaml.in/yaml/v3"

	"github.com/lava-operator/lava/internal/lang/arch"
)

// InlineMapper returns the function that maps a position inside the inline source held by
// node n back to the manifest file:
//   - a literal block scalar ("|", "|-", "|+", "|2"): content line k is file line n.Line+k and
//     every column moves right by the block's indentation, so the mapping is exact;
//   - a single-line plain or quoted scalar without escapes: same line, columns shifted to the
//     value's start;
//   - anything else (folded ">" blocks, escapes, multi-line flow scalars): the text was
//     rewritten by YAML, so every position maps to the start of the value.
func InlineMapper(file string, data []byte, n *yaml.Node) func(arch.Pos) arch.Pos {
	if n == nil {
		return nil
	}
	start := arch.Pos{File: file, Line: n.Line, Col: n.Column}
	lines := strings.Split(string(data), "\n")
	fallback := func(p arch.Pos) arch.Pos {
		if !p.IsValid() {
			return p
		}
		return start
	}
	switch {
	case n.Style&yaml.LiteralStyle != 0:
		indent, ok := blockIndent(lines, n)
		if !ok {
			return fallback
		}
		return func(p arch.Pos) arch.Pos {
			if !p.IsValid() {
				return p
			}
			return arch.Pos{File: file, Line: n.Line + p.Line, Col: indent + p.Col}
		}
	case n.Style&(yaml.FoldedStyle) != 0 || strings.Contains(n.Value, "\n"):
		return fallback
	default:
		shift := 0
		if n.Style&(yaml.SingleQuotedStyle|yaml.DoubleQuotedStyle) != 0 {
			shift = 1
		}
		if n.Line-1 >= len(lines) {
			return fallback
		}
		line := []rune(lines[n.Line-1])
		from := n.Column - 1 + shift
		if from < 0 || from+utf8.RuneCountInString(n.Value) > len(line) ||
			string(line[from:from+utf8.RuneCountInString(n.Value)]) != n.Value {
			return fallback
		}
		return func(p arch.Pos) arch.Pos {
			if !p.IsValid() {
				return p
			}
			return arch.Pos{File: file, Line: n.Line, Col: from + p.Col}
		}
	}
}

// blockIndent finds the content indentation of the literal block scalar n (its indicator on
// line n.Line): with an explicit indentation indicator ("|2") the indentation of the line that
// holds the indicator plus the digit, else the leading spaces of the first non-blank content
// line (YAML's auto-detection).
func blockIndent(lines []string, n *yaml.Node) (int, bool) {
	if n.Line < 1 || n.Line > len(lines) {
		return 0, false
	}
	header := lines[n.Line-1]
	lead := len(header) - len(strings.TrimLeft(header, " "))
	if h := []rune(header); n.Column-1 < len(h) {
		for _, r := range h[n.Column-1:] {
			if r >= '1' && r <= '9' {
				return lead + int(r-'0'), true
			}
			if r == ' ' || r == '#' {
				break
			}
		}
	}
	for _, l := range lines[n.Line:] {
		if strings.TrimSpace(l) == "" {
			continue
		}
		return len(l) - len(strings.TrimLeft(l, " ")), true
	}
	return 0, false
}

// inlinePos matches a position in an inline source as the synth service reports it.
var inlinePos = regexp.MustCompile(`\binline:(\d+):(\d+)`)

// MapInlineText rewrites every "inline:LINE:COL" in msg with mapInline (nil: msg as it is),
// so a status message points into the manifest file as `lava validate` does.
func MapInlineText(msg string, mapInline func(arch.Pos) arch.Pos) string {
	if mapInline == nil || !strings.Contains(msg, "inline:") {
		return msg
	}
	return inlinePos.ReplaceAllStringFunc(msg, func(m string) string {
		sub := inlinePos.FindStringSubmatch(m)
		line, err1 := strconv.Atoi(sub[1])
		col, err2 := strconv.Atoi(sub[2])
		if err1 != nil || err2 != nil {
			return m
		}
		p := mapInline(arch.Pos{File: "inline", Line: line, Col: col})
		if !p.IsValid() || p.File == "" {
			return m
		}
		return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col)
	})
}
