package tlisp

import (
	"strconv"
	"strings"
)

// NodeKind tells what a [Node] holds.
type NodeKind uint8

// The node kinds of the reader.
const (
	NodeList NodeKind = iota
	NodeSymbol
	NodeKeyword
	NodeString
	NodeInt
	NodeBool
)

var nodeKindNames = [...]string{"list", "symbol", "keyword", "string", "integer", "boolean"}

// String returns the lower-case kind name ("list", "symbol", ...).
func (k NodeKind) String() string {
	if int(k) >= len(nodeKindNames) {
		return "NodeKind(" + strconv.Itoa(int(k)) + ")"
	}
	return nodeKindNames[k]
}

// Node is one datum read from source. Which fields are meaningful depends on Kind:
//   - NodeList: List (the elements, possibly empty);
//   - NodeSymbol: Text (verbatim, case-sensitive);
//   - NodeKeyword: Text without the leading colon (":cidr-block" is "cidr-block");
//   - NodeString: Text, the decoded string (escapes applied, valid UTF-8);
//   - NodeInt: Int (base-10 signed 64-bit);
//   - NodeBool: Bool (#t or #f).
//
// Pos is where the datum starts: the "(" of a list, the opening quote of a string, the ":" of
// a keyword.
type Node struct {
	Kind NodeKind
	Bool bool
	Pos  Pos
	Text string
	Int  int64
	List []*Node
}

// IsSymbol reports whether n is the symbol name.
func (n *Node) IsSymbol(name string) bool {
	return n != nil && n.Kind == NodeSymbol && n.Text == name
}

// Head returns the symbol text of a list's first element, or "" when n is not a list headed by
// a symbol.
func (n *Node) Head() string {
	if n == nil || n.Kind != NodeList || len(n.List) == 0 || n.List[0].Kind != NodeSymbol {
		return ""
	}
	return n.List[0].Text
}

// String renders n back as source text (strings re-escaped), for messages and tests.
func (n *Node) String() string {
	var b strings.Builder
	n.write(&b)
	return b.String()
}

func (n *Node) write(b *strings.Builder) {
	if n == nil {
		b.WriteString("<nil>")
		return
	}
	switch n.Kind {
	case NodeList:
		b.WriteByte('(')
		for i, e := range n.List {
			if i > 0 {
				b.WriteByte(' ')
			}
			e.write(b)
		}
		b.WriteByte(')')
	case NodeSymbol:
		b.WriteString(n.Text)
	case NodeKeyword:
		b.WriteByte(':')
		b.WriteString(n.Text)
	case NodeString:
		b.WriteByte('"')
		for i := 0; i < len(n.Text); i++ {
			switch c := n.Text[i]; c {
			case '"', '\\':
				b.WriteByte('\\')
				b.WriteByte(c)
			case '\n':
				b.WriteString(`\n`)
			case '\r':
				b.WriteString(`\r`)
			case '\t':
				b.WriteString(`\t`)
			default:
				b.WriteByte(c)
			}
		}
		b.WriteByte('"')
	case NodeInt:
		b.WriteString(strconv.FormatInt(n.Int, 10))
	case NodeBool:
		if n.Bool {
			b.WriteString("#t")
		} else {
			b.WriteString("#f")
		}
	}
}

// describe names n for a message: "symbol `x`", "string \"x\"", "list", ...
func describe(n *Node) string {
	if n == nil {
		return "nothing"
	}
	switch n.Kind {
	case NodeSymbol:
		return "symbol `" + n.Text + "`"
	case NodeKeyword:
		return "keyword `:" + n.Text + "`"
	case NodeString:
		return "string " + strconv.Quote(n.Text)
	case NodeInt:
		return "integer " + strconv.FormatInt(n.Int, 10)
	case NodeBool:
		return "boolean " + n.String()
	default:
		return "list"
	}
}
