package tlisp

import (
	"bytes"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// Limits on what the reader and evaluator accept.
const (
	// MaxSourceBytes is the largest source accepted (1 MiB).
	MaxSourceBytes = 1 << 20
	// MaxDepth is the deepest list nesting accepted.
	MaxDepth = 256
	// MaxResources is the most resource, data and import expansions one evaluation performs
	// (loop iterations included, whether or not :when keeps them).
	MaxResources = 10000
	// MaxIterations is the most for-each iterations one evaluation performs (nested loops over
	// empty lists expand nothing but still iterate).
	MaxIterations = 100000
	// MaxInterpolatedBytes bounds the total size of the strings one evaluation puts into the
	// architecture (16 MiB): literals, interpolations and variable values, loops included.
	MaxInterpolatedBytes = 16 << 20
	// MaxValues bounds the values one evaluation builds into the architecture: every string,
	// number, boolean, list and map entry of every attribute and every {reference}
	// interpolated, loops included (a map's keys count
	// as strings toward MaxInterpolatedBytes). Numbers and empty lists cost no string bytes, so
	// without it a 200 KB source of integers repeated through nested loops built gigabytes.
	MaxValues = 1 << 20
	// MaxRecordFields bounds the fields of one row of a record input a for-each iterates:
	// each is a loop variable, and every reference in the body is looked up among them.
	MaxRecordFields = 256
	// MaxLoopVariables bounds the loop variables live at once in nested for-each loops (two
	// per list loop, one per record field plus the index): every reference in the innermost
	// body is looked up among them, so 240 loops over a 256-field row made each of 250,000
	// references scan 61,000 variables (54 s).
	MaxLoopVariables = 1024
)

// Options configure reading and evaluation.
type Options struct {
	// File is the name used in positions and diagnostics ("" leaves it out).
	File string
	// SecretInputs names the inputs whose bound values come from Secrets. A diagnostic that
	// would quote a value interpolated from one of them (directly, or through a for-each
	// variable over it) shows the template and "<redacted>" instead, so no secret reaches a
	// status, event or log through a diagnostic.
	SecretInputs map[string]bool
	// TemplateSequences, when set, returns the byte ranges [start, end) of a string that lie
	// inside a Terraform template sequence ("${…}" or "%{…}", quoted strings in it
	// included), in order and not overlapping. A "{NAME}" interpolated inside one is an error: the value would land in the
	// source's own expression, where escaping cannot keep it data (a quote in it would end an
	// HCL string). internal/lang/render sets it with hcl's template lexer; this package stays
	// free of hcl (hack/depcheck.sh).
	TemplateSequences func(s string) [][2]int
}

// Parse reads every top-level form of src. On an error it returns the forms
// read so far and the diagnostics.
func Parse(src []byte, opts Options) (forms []*Node, diags Diagnostics) {
	forms, diags, _ = parse(src, opts)
	return forms, diags
}

// parse is Parse that also tells whether the forms are complete enough to evaluate despite
// errors: true when every error was an unexpected top-level ")" or lists left unclosed at the
// end of input (closed there), so evaluation can report further errors.
func parse(src []byte, opts Options) (forms []*Node, diags Diagnostics, usable bool) {
	defer func() {
		if r := recover(); r != nil {
			forms, usable = nil, false
			diags = append(diags, internalError(opts.File, r))
		}
	}()
	r := &reader{src: src, file: opts.File, line: 1, col: 1}
	if len(src) <= MaxSourceBytes {
		r.text = string(src)
	}
	if len(src) > MaxSourceBytes {
		r.errorf(r.pos(), "source is %d bytes, larger than the %d-byte (1 MiB) limit", len(src), MaxSourceBytes)
		return nil, r.diags, false
	}
	for !r.stop {
		r.skipSpace()
		if r.i >= len(r.src) {
			break
		}
		if r.src[r.i] == ')' {
			r.errorf(r.pos(), "unexpected close paren at offset %d (no list is open here: remove it or add the `(` it closes)", r.i)
			r.advance()
			continue
		}
		n := r.read(0)
		if n != nil {
			forms = append(forms, n)
		}
	}
	return forms, r.diags, !r.fatal
}

func internalError(file string, r any) Diagnostic {
	return Diagnostic{
		Pos:      Pos{File: file, Line: 1, Col: 1},
		Severity: SeverityError,
		Message:  fmt.Sprintf("internal error: %v (please report this source)", r),
	}
}

type reader struct {
	slab  []Node  // nodes are carved from slabs to allocate less
	stack []*Node // children of the lists being read, copied out when a list closes
	ptrs  []*Node // slab the lists' element slices are carved from
	text  string  // the source as one string: atoms and escape-free strings slice it
	src   []byte
	file  string
	i     int
	line  int
	col   int
	diags Diagnostics
	stop  bool // no further reading (end of input inside a list, or a fatal error)
	fatal bool // an error that leaves the forms unusable for evaluation
}

// children copies a list's elements into a slice carved from a shared slab (capped, so an
// append by a caller reallocates instead of overwriting a neighbour).
func (r *reader) children(elems []*Node) []*Node {
	n := len(elems)
	if n == 0 {
		return []*Node{}
	}
	if cap(r.ptrs)-len(r.ptrs) < n {
		size := max(n, 256, min(len(r.src)/12, 1<<14))
		r.ptrs = make([]*Node, 0, size)
	}
	start := len(r.ptrs)
	r.ptrs = append(r.ptrs, elems...)
	return r.ptrs[start:len(r.ptrs):len(r.ptrs)]
}

// node returns a fresh node from the current slab.
func (r *reader) node(n Node) *Node {
	if len(r.slab) == cap(r.slab) {
		// About one node per 12 source bytes in typical architectures: the first slab usually
		// holds them all; later ones are smaller.
		size := 64
		if r.slab == nil {
			size = max(size, min(len(r.src)/12, 1<<14))
		}
		r.slab = make([]Node, 0, size)
	}
	r.slab = append(r.slab, n)
	return &r.slab[len(r.slab)-1]
}

func (r *reader) pos() Pos { return Pos{File: r.file, Line: r.line, Col: r.col, Offset: r.i} }

// fatalf reports an error after which the forms cannot be evaluated.
func (r *reader) fatalf(p Pos, format string, args ...any) {
	r.fatal = true
	r.errorf(p, format, args...)
}

func (r *reader) errorf(p Pos, format string, args ...any) {
	if len(r.diags) >= MaxDiagnostics {
		r.stop, r.fatal = true, true
		return
	}
	r.diags = append(r.diags, Diagnostic{Pos: p, Severity: SeverityError, Message: message(format, args...)})
}

// advance consumes one byte, keeping line and rune column.
func (r *reader) advance() {
	c := r.src[r.i]
	r.i++
	switch {
	case c == '\n':
		r.line++
		r.col = 1
	case c&0xC0 != 0x80:
		// The first byte of a rune (ASCII or a UTF-8 leading byte): next rune's column.
		r.col++
	}
}

// skipLine advances to byte end, which must not be past a newline: the column grows by the
// number of runes skipped.
func (r *reader) skipLine(end int) {
	for _, c := range r.src[r.i:end] {
		if c&0xC0 != 0x80 {
			r.col++
		}
	}
	r.i = end
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ',' }

// isDelim reports whether c ends an atom body.
func isDelim(c byte) bool { return isSpace(c) || c == '(' || c == ')' || c == ';' }

func (r *reader) skipSpace() {
	for r.i < len(r.src) {
		c := r.src[r.i]
		switch {
		case isSpace(c):
			r.advance()
		case c == ';':
			end := bytes.IndexByte(r.src[r.i:], '\n')
			if end < 0 {
				end = len(r.src) - r.i
			}
			r.skipLine(r.i + end) // the comment, not the newline

		default:
			return
		}
	}
}

// read reads one datum starting at a non-space byte. It returns nil after reporting an error.
func (r *reader) read(depth int) *Node {
	p := r.pos()
	switch c := r.src[r.i]; c {
	case '(':
		return r.readList(p, depth+1)
	case '"':
		return r.readString(p)
	case '#':
		r.advance()
		if r.i >= len(r.src) {
			r.fatalf(p, "unexpected end of input after '#' at offset %d (expected #t or #f)", p.Offset)
			r.stop = true
			return nil
		}
		c2 := r.src[r.i]
		switch c2 {
		case 't', 'f':
			r.advance()
			return r.node(Node{Kind: NodeBool, Pos: p, Bool: c2 == 't'})
		}
		ch, _ := utf8.DecodeRune(r.src[r.i:])
		r.fatalf(p, "unexpected character %q at offset %d (expected #t or #f)", ch, r.i)
		r.advance()
		return nil
	case ':':
		r.advance()
		body, ok := r.atomBody(p)
		if !ok {
			return nil
		}
		return r.node(Node{Kind: NodeKeyword, Pos: p, Text: body})
	default:
		body, ok := r.atomBody(p)
		if !ok {
			return nil
		}
		if maybeInt(body) {
			if n, err := strconv.ParseInt(body, 10, 64); err == nil {
				return r.node(Node{Kind: NodeInt, Pos: p, Int: n})
			}
		}
		return r.node(Node{Kind: NodeSymbol, Pos: p, Text: body})
	}
}

func (r *reader) atomBody(p Pos) (string, bool) {
	start := r.i
	end := r.i
	for end < len(r.src) && !isDelim(r.src[end]) {
		end++
	}
	r.skipLine(end)
	b := r.src[start:r.i]
	if !utf8.Valid(b) {
		r.fatalf(p, "atom starting at offset %d is not valid UTF-8", p.Offset)
		return "", false
	}
	return r.text[start:r.i], true
}

// maybeInt reports whether s could parse as a base-10 integer (an optional sign, then a digit),
// so most symbols skip strconv.
func maybeInt(s string) bool {
	if s != "" && (s[0] == '+' || s[0] == '-') {
		s = s[1:]
	}
	return s != "" && '0' <= s[0] && s[0] <= '9'
}

func (r *reader) readList(p Pos, depth int) *Node {
	if depth > MaxDepth {
		r.fatalf(p, "list nesting deeper than %d levels at offset %d", MaxDepth, p.Offset)
		r.stop = true
		return nil
	}
	r.advance() // (
	n := r.node(Node{Kind: NodeList, Pos: p})
	base := len(r.stack)
	defer func() {
		n.List = r.children(r.stack[base:])
		clear(r.stack[base:])
		r.stack = r.stack[:base]
	}()
	for !r.stop {
		r.skipSpace()
		if r.i >= len(r.src) {
			// Reported where it is detected, the end of input; the list is closed there so
			// evaluation can still point at later mistakes. Only the innermost is reported.
			if !r.stop {
				r.errorf(r.pos(), "unclosed list starting at offset %d (line %d, column %d): missing `)` at end of input", p.Offset, p.Line, p.Col)
			}
			r.stop = true
			return n
		}
		if r.src[r.i] == ')' {
			r.advance()
			return n
		}
		if e := r.read(depth); e != nil {
			r.stack = append(r.stack, e)
		}
	}
	if r.fatal {
		return nil
	}
	return n // an inner list reached the end of input
}

func (r *reader) readString(p Pos) *Node {
	r.advance() // opening quote
	start := r.i
	var buf []byte // nil while the string has no escape: the text is src[start:r.i]
	for r.i < len(r.src) {
		c := r.src[r.i]
		switch c {
		case '"':
			var text string
			if buf == nil {
				text = r.text[start:r.i]
			} else {
				text = string(buf)
			}
			r.advance()
			if !utf8.ValidString(text) {
				r.fatalf(p, "string starting at offset %d is not valid UTF-8", p.Offset)
				return nil
			}
			return r.node(Node{Kind: NodeString, Pos: p, Text: text})
		case '\\':
			if buf == nil {
				buf = append([]byte{}, r.src[start:r.i]...)
			}
			r.advance()
			if r.i >= len(r.src) {
				continue // unterminated
			}
			e := r.src[r.i]
			r.advance()
			switch e {
			case 'n':
				buf = append(buf, '\n')
			case 'r':
				buf = append(buf, '\r')
			case 't':
				buf = append(buf, '\t')
			default: // \\, \" and any other byte: taken literally
				buf = append(buf, e)
			}
		default:
			if buf != nil {
				buf = append(buf, c)
			}
			r.advance()
		}
	}
	r.fatalf(p, "unterminated string starting at offset %d", p.Offset)
	r.stop = true
	return nil
}

// posInString returns the position of the decoded byte k of the string literal starting at
// quote (the opening quote's position), re-scanning the raw source for escapes and newlines.
func posInString(src []byte, quote Pos, k int) Pos {
	p := quote
	i := quote.Offset
	if i < 0 || i >= len(src) || src[i] != '"' {
		return quote
	}
	step := func() {
		c := src[i]
		i++
		switch {
		case c == '\n':
			p.Line++
			p.Col = 1
		case c&0xC0 != 0x80:
			p.Col++
		}
	}
	step() // the quote
	for d := 0; d < k && i < len(src) && src[i] != '"'; d++ {
		if src[i] == '\\' {
			step()
			if i >= len(src) {
				break
			}
		}
		step()
	}
	p.Offset = i
	return p
}
