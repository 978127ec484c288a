package arch

import "fmt"

// Pos is a position in a source file. Line and Col are 1-based; Col counts characters (runes),
// not bytes; Offset is the 0-based byte offset. The zero Pos means "no position".
type Pos struct {
	File   string
	Line   int
	Col    int
	Offset int
}

// IsValid reports whether p names a real position (Line >= 1).
func (p Pos) IsValid() bool { return p.Line >= 1 }

// String formats p as "file:line:col", "line:col" without a file, or "-" when invalid.
func (p Pos) String() string {
	switch {
	case !p.IsValid():
		return "-"
	case p.File == "":
		return fmt.Sprintf("%d:%d", p.Line, p.Col)
	default:
		return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col)
	}
}
