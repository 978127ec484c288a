package tlisp

import (
	"bytes"
	"regexp"
	"strconv"
	"strings"

	"github.com/lava-operator/lava/internal/lang/arch"
)

// scalar resolves a scalar variable: loop variables (innermost first), then scalar inputs.
func (e *evaluator) scalar(name string) (string, bool) {
	for i := len(e.loop) - 1; i >= 0; i-- {
		if e.loop[i].name == name {
			return e.loop[i].value, true
		}
	}
	s, ok := e.scalars[name]
	return s, ok
}

// secretVar reports whether the variable name resolves to a value from a secret input.
func (e *evaluator) secretVar(name string) bool {
	for i := len(e.loop) - 1; i >= 0; i-- {
		if e.loop[i].name == name {
			return e.loop[i].secret
		}
	}
	return e.secret[name]
}

// tainted reports whether the string or symbol node n interpolates a secret input.
func (e *evaluator) tainted(n *Node) bool {
	name, _ := e.secretUse(n)
	return name != ""
}

// secretUse returns the name of the first secret input (or loop variable over one) that the
// string or symbol node n interpolates and the byte offset of its "{" in n's text, or "" when
// n uses none.
func (e *evaluator) secretUse(n *Node) (string, int) {
	if len(e.secret) == 0 || n == nil {
		return "", 0
	}
	t := n.Text
	base := 0
	for {
		j := strings.IndexByte(t, '{')
		if j < 0 {
			return "", 0
		}
		k := strings.IndexByte(t[j+1:], '}')
		if k < 0 {
			return "", 0
		}
		expr := strings.TrimSpace(t[j+1 : j+1+k])
		off := base + j
		t = t[j+1+k+1:]
		base = off + 1 + k + 1
		if !isTemplateExpr(expr) {
			continue
		}
		if e.secretVar(expr) {
			return expr, off
		}
		if l, _, ok := strings.Cut(expr, "+"); ok && e.secretVar(strings.TrimSpace(l)) {
			return strings.TrimSpace(l), off
		}
		if i := strings.LastIndexByte(expr, '-'); i > 0 && e.secretVar(expr[:i]) {
			return expr[:i], off
		}
	}
}

// noSecretName reports an error at the first secret interpolation in n, a string that becomes
// an address or key (what names it: "resource name", "data source name", ...), and reports
// whether n is free of secret inputs. An address appears in plans, events and artifacts, so
// a secret binding may only reach attribute values.
func (e *evaluator) noSecretName(n *Node, what string) bool {
	name, off := e.secretUse(n)
	if name == "" {
		return true
	}
	article := "a"
	if strings.ContainsRune("aeiou", rune(what[0])) {
		article = "an"
	}
	e.errorf(e.exprPos(n, off), "%s %s must not contain a secret binding (`%s`)", article, what, name)
	return false
}

// metaArguments are the attributes Terraform reads as addresses and expressions, not values
// (depends_on, provider, lifecycle): a secret binding there is an error, like one in a name.
// Rendered marked sensitive, it would make the configuration invalid, and OpenTofu quotes an
// invalid configuration line in its error.
var metaArguments = map[string]bool{"depends_on": true, "provider": true, "lifecycle": true}

// noSecretIn is [evaluator.noSecretName] over every string and symbol of n (a list, map or
// scalar), what naming the attribute (a consonant first); it reports the first secret use only.
func (e *evaluator) noSecretIn(n *Node, what string) bool {
	if n == nil || len(e.secret) == 0 {
		return true
	}
	switch n.Kind {
	case NodeString:
		return e.noSecretName(n, what)
	case NodeSymbol:
		if e.secretVar(n.Text) {
			e.errorf(n.Pos, "a %s must not contain a secret binding (`%s`)", what, n.Text)
			return false
		}
	}
	for _, c := range n.List {
		if !e.noSecretIn(c, what) {
			return false
		}
	}
	return true
}

// quoteValue quotes the value v interpolated from node n for a message, or shows the template
// with "<redacted>" when n uses a secret input.
func (e *evaluator) quoteValue(n *Node, v string) string {
	if e.tainted(n) {
		return strconv.Quote(n.Text) + " (<redacted>: it uses a secret binding)"
	}
	return strconv.Quote(v)
}

// unknownVar reports an unknown variable unless its input already failed.
func (e *evaluator) unknownVar(p Pos, name string) {
	if e.bad[name] && !e.shadowed(name) {
		return
	}
	hint := ""
	switch {
	case e.lists[name] != nil && !e.shadowed(name):
		hint = " (`" + name + "` is a list input: use it alone, as \"{" + name + "}\" or a bare symbol, or iterate it with for-each)"
	case e.records[name] != nil && !e.shadowed(name):
		hint = " (`" + name + "` is a record input: iterate it with for-each and use ITEM_field)"
	}
	e.errorf(p, "interpolation: unknown var `%s`%s", name, hint)
}

// charge counts size bytes of strings evaluated into the output (literal, interpolated or
// variable values) against MaxInterpolatedBytes, so loops and repeated variables cannot
// multiply a large string or binding into an unbounded rendered JSON.
func (e *evaluator) charge(p Pos, size int) bool {
	return e.within(p, &e.interpd, size, MaxInterpolatedBytes,
		"the architecture's strings exceed %d bytes (limit reached here)")
}

// countValues counts n values built into the output against MaxValues.
func (e *evaluator) countValues(p Pos, n int) bool {
	return e.within(p, &e.values, n, MaxValues,
		"the architecture's values exceed %d (strings, numbers, booleans, lists and map entries, loops included; limit reached here)")
}

// within adds n to *used and reports whether it stays within limit; past it, the first limit
// reached is reported at p (format takes the limit) and evaluation stops.
func (e *evaluator) within(p Pos, used *int, n, limit int, format string) bool {
	*used += n
	if *used <= limit {
		return true
	}
	if !e.limitd {
		e.limitd = true
		e.errorf(p, format, limit)
	}
	e.full = true
	return false
}

func listBytes(l []string) int {
	n := 0
	for _, s := range l {
		n += len(s)
	}
	return n
}

// evalValue evaluates an attribute value. Every value it builds counts toward [MaxValues].
func (e *evaluator) evalValue(n *Node) (arch.Value, bool) {
	if !e.countValues(n.Pos, 1) {
		return arch.Value{}, false
	}
	switch n.Kind {
	case NodeString:
		if e.tainted(n) {
			e.taints++
		}
		if name, ok := wholeVar(n.Text); ok {
			if _, isScalar := e.scalar(name); !isScalar {
				if l, isList := e.lists[name]; isList {
					return stringList(l), e.charge(n.Pos, listBytes(l)) && e.countValues(n.Pos, len(l))
				}
			}
		}
		s, ok := e.interp(n)
		return arch.String(s), ok
	case NodeSymbol:
		if len(e.secret) > 0 && e.secretVar(n.Text) {
			e.taints++
		}
		if s, ok := e.scalar(n.Text); ok {
			return arch.String(s), e.charge(n.Pos, len(s))
		}
		if l, ok := e.lists[n.Text]; ok {
			return stringList(l), e.charge(n.Pos, listBytes(l)) && e.countValues(n.Pos, len(l))
		}
		e.unknownVar(n.Pos, n.Text)
		return arch.Value{}, false
	case NodeBool:
		return arch.Bool(n.Bool), true
	case NodeInt:
		return arch.Int(n.Int), true
	case NodeKeyword:
		e.errorf(n.Pos, "type mismatch: expected value (not kw), got :%s (write a string like \"%s\")", n.Text, n.Text)
		return arch.Value{}, false
	}
	// A list.
	xs := n.List
	if len(xs) == 0 {
		return arch.List(), true
	}
	if xs[0].IsSymbol("ref") {
		return e.evalRef(n)
	}
	if isTagPairs(xs) {
		m := &arch.Map{}
		m.Grow(len(xs))
		ok := true
		for _, p := range xs {
			v, vok := e.evalValue(p.List[1])
			if !vok || !e.charge(p.List[0].Pos, len(p.List[0].Text)) {
				ok = false
				continue
			}
			m.Set(p.List[0].Text, v)
		}
		return arch.MapValue(m), ok
	}
	if xs[0].Kind == NodeKeyword {
		m := &arch.Map{}
		ok := true
		for i := 0; i < len(xs); i += 2 {
			k := xs[i]
			if k.Kind != NodeKeyword {
				e.errorf(k.Pos, "keyword map: expected a :key, got %s", describe(k))
				ok = false
				continue
			}
			if i+1 >= len(xs) {
				e.errorf(k.Pos, "keyword map: odd number of elements (:%s has no value)", k.Text)
				return arch.Value{}, false
			}
			v, vok := e.evalValue(xs[i+1])
			if !vok || !e.charge(k.Pos, len(k.Text)) {
				ok = false
				continue
			}
			m.Set(k.Text, v)
		}
		return arch.MapValue(m), ok
	}
	out := make([]arch.Value, 0, len(xs))
	ok := true
	for _, x := range xs {
		if !e.appendElement(&out, x) {
			ok = false
		}
	}
	return arch.List(out...), ok
}

// appendElement evaluates x, one element of a list value, onto out: a for-each gives one
// element per iteration (its body another for-each: nested, flattened as resource loops are).
func (e *evaluator) appendElement(out *[]arch.Value, x *Node) bool {
	if x.Kind != NodeList || x.Head() != "for-each" {
		v, ok := e.evalValue(x)
		if ok {
			*out = append(*out, v)
		}
		return ok
	}
	ok := true
	e.forEach(x, "a value", func(body *Node) {
		if !e.appendElement(out, body) {
			ok = false
		}
	})
	return ok
}

// isTagPairs reports whether every element is a 2-element list headed by a symbol.
func isTagPairs(xs []*Node) bool {
	for _, p := range xs {
		if p.Kind != NodeList || len(p.List) != 2 || p.List[0].Kind != NodeSymbol {
			return false
		}
	}
	return true
}

func stringList(l []string) arch.Value {
	out := make([]arch.Value, len(l))
	for i, s := range l {
		out[i] = arch.String(s)
	}
	return arch.List(out...)
}

// wholeVar reports whether s is exactly "{X}" with X (trimmed) a plain name.
func wholeVar(s string) (string, bool) {
	if len(s) < 3 || s[0] != '{' || s[len(s)-1] != '}' {
		return "", false
	}
	inner := strings.TrimSpace(s[1 : len(s)-1])
	if inner == "" || !isIdent(inner) {
		return "", false
	}
	return inner, true
}

func isIdentByte(c byte) bool {
	return c == '_' || c == '-' || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9')
}

func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isIdentByte(s[i]) {
			return false
		}
	}
	return true
}

// isTemplateExpr reports whether the trimmed span t is a variable reference: an identifier,
// optionally followed by +N or -N.
func isTemplateExpr(t string) bool {
	if isIdent(t) {
		return true // also covers a-N
	}
	l, r, ok := strings.Cut(t, "+")
	if !ok {
		return false
	}
	_, err := strconv.ParseInt(strings.TrimSpace(r), 10, 64)
	return err == nil && isIdent(strings.TrimSpace(l))
}

// interp interpolates the string or symbol node n.
func (e *evaluator) interp(n *Node) (string, bool) {
	t := n.Text
	if strings.IndexByte(t, '{') < 0 {
		return t, e.charge(n.Pos, len(t))
	}
	var b bytes.Buffer
	b.Grow(len(t) + 16)
	ok := true
	var seqs [][2]int
	if e.sequences != nil && (strings.Contains(t, "${") || strings.Contains(t, "%{")) {
		seqs = e.sequences(t)
	}
	i, span := 0, 0
	for i < len(t) {
		if e.full {
			// The diagnostics' cap or a limit was reached: nothing more is recorded, and
			// working out positions for nothing costs the square of the string.
			return "", false
		}
		j := strings.IndexByte(t[i:], '{')
		if j < 0 {
			b.WriteString(t[i:])
			break
		}
		j += i
		b.WriteString(t[i:j])
		k := strings.IndexByte(t[j+1:], '}')
		if k < 0 {
			b.WriteString(t[j:])
			break
		}
		k += j + 1
		expr := strings.TrimSpace(t[j+1 : k])
		if !isTemplateExpr(expr) {
			b.WriteString(t[j : k+1]) // not a variable reference: verbatim
			i = k + 1
			continue
		}
		// Every reference counts toward MaxValues, whatever it expands to ("" too).
		if !e.countValues(n.Pos, 1) {
			return "", false
		}
		// seqs is in order and j only grows: span moves forward, never back.
		for span < len(seqs) && seqs[span][1] <= j {
			span++
		}
		if span < len(seqs) && j >= seqs[span][0] {
			e.errorf(e.exprPos(n, j), "{%s} is inside a Terraform template sequence (${...} or %%{...}): a value is interpolated only into the string's text, where it stays data; bind it to a local and refer to the local there", expr)
			ok = false
			i = k + 1
			continue
		}
		v, vok := e.templateExpr(expr, n, j)
		if !vok {
			ok = false
		}
		if e.interpd+b.Len()+len(v) > MaxInterpolatedBytes {
			if !e.limitd {
				e.limitd = true
				e.errorf(e.exprPos(n, j), "the architecture's strings exceed %d bytes (limit reached here)", MaxInterpolatedBytes)
			}
			e.full = true
			return "", false
		}
		if v != "" && strings.IndexByte("{$%", v[0]) >= 0 {
			literalTail(&b)
		}
		b.WriteString(v)
		i = k + 1
	}
	return b.String(), e.charge(n.Pos, b.Len()) && ok
}

// literalTail rewrites a run of "$" and "%" at the end of b as the interpolation of that run as
// a string literal (`${"$"}`), so it stays literal text whatever follows. interp calls it before
// a value that starts with "{", "$" or "%": joined with a "$" or "%" right before it, such a
// value would open a Terraform template sequence (a binding "{path.cwd}" after "$" becomes
// "${path.cwd}") or turn one into an escape (a Secret binding's `${sensitive("…")}` after "$"
// becomes the literal text "$${sensitive(…)}", unmarked). render.EscapeTemplate handles the
// other side, a binding that ends with "$" or "%" before a "{".
// Only the run is rewritten (b is truncated before it), so a string of many such values costs
// time in its length, not in the square of it.
func literalTail(b *bytes.Buffer) {
	s := b.Bytes()
	run := len(s) - len(bytes.TrimRight(s, "$%"))
	if run == 0 {
		return
	}
	tail := string(s[len(s)-run:])
	b.Truncate(len(s) - run)
	b.WriteString(`${"` + tail + `"}`)
}

// exprPos is the position of byte off of n's text (inside a string literal when n is one).
func (e *evaluator) exprPos(n *Node, off int) Pos {
	if n.Kind == NodeString {
		return posInString(e.src, n.Pos, off)
	}
	p := n.Pos
	p.Col += len([]rune(n.Text[:off]))
	p.Offset += off
	return p
}

// templateExpr resolves var, var+N or var-N: the whole text as a name first (so kebab names
// like name-prefix win), then the arithmetic forms over an integer-valued variable.
func (e *evaluator) templateExpr(t string, n *Node, off int) (string, bool) {
	if v, ok := e.scalar(t); ok {
		return v, true
	}
	if l, r, ok := strings.Cut(t, "+"); ok {
		name := strings.TrimSpace(l)
		delta, _ := strconv.ParseInt(strings.TrimSpace(r), 10, 64)
		return e.arith(name, delta, n, off, t)
	}
	if idx := strings.LastIndexByte(t, '-'); idx > 0 {
		if delta, err := strconv.ParseInt(t[idx+1:], 10, 64); err == nil {
			name := t[:idx]
			if v, ok := e.scalar(name); ok {
				if e.secretVar(name) {
					return e.arith(name, -delta, n, off, t)
				}
				if iv, err := strconv.ParseInt(v, 10, 64); err == nil {
					return e.sum(iv, -delta, n, off, t)
				}
			}
		}
	}
	e.unknownVar(e.exprPos(n, off), t)
	return "", false
}

func (e *evaluator) arith(name string, delta int64, n *Node, off int, t string) (string, bool) {
	v, ok := e.scalar(name)
	if !ok {
		e.unknownVar(e.exprPos(n, off), name)
		return "", false
	}
	if e.secretVar(name) {
		// A Secret's value reaches the engine marked sensitive (render.SensitiveTemplate), not
		// as a number the evaluator could add to.
		e.errorf(e.exprPos(n, off), "type mismatch: expected int var (`%s` is a secret binding: no arithmetic over it in {%s})", name, t)
		return "", false
	}
	iv, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		e.errorf(e.exprPos(n, off), "type mismatch: expected int var (`%s` is %s in {%s})", name, strconv.Quote(v), t)
		return "", false
	}
	return e.sum(iv, delta, n, off, t)
}

func (e *evaluator) sum(a, b int64, n *Node, off int, t string) (string, bool) {
	s := a + b
	if (b > 0 && s < a) || (b < 0 && s > a) {
		e.errorf(e.exprPos(n, off), "integer overflow in {%s}", t)
		return "", false
	}
	return strconv.FormatInt(s, 10), true
}

// evalRef evaluates (ref TYPE "NAME" ATTR) to a reference, remembered for the undeclared check.
func (e *evaluator) evalRef(n *Node) (arch.Value, bool) {
	xs := n.List
	if len(xs) < 2 || xs[1].Kind != NodeSymbol {
		e.errorf(at(n, 1), "unknown reference form: type (expected (ref TYPE \"NAME\" ATTR))")
		return arch.Value{}, false
	}
	if len(xs) < 3 || xs[2].Kind != NodeString {
		e.errorf(at(n, 2), "unknown reference form: name (expected (ref TYPE \"NAME\" ATTR) with a quoted NAME)")
		return arch.Value{}, false
	}
	if len(xs) < 4 || (xs[3].Kind != NodeSymbol && xs[3].Kind != NodeString) || xs[3].Text == "" {
		e.errorf(at(n, 3), "unknown reference form: attr (expected (ref TYPE \"NAME\" ATTR) with an attribute symbol like id)")
		return arch.Value{}, false
	}
	if len(xs) > 4 {
		e.errorf(xs[4].Pos, "unknown reference form: expected (ref TYPE \"NAME\" ATTR), got extra elements")
		return arch.Value{}, false
	}
	if !e.noSecretName(xs[2], "ref name") {
		return arch.Value{}, false
	}
	name, ok := e.interp(xs[2])
	if !ok {
		return arch.Value{}, false
	}
	name, ok = e.resourceName(name, xs[2], false)
	if !ok {
		return arch.Value{}, false
	}
	ref := arch.ResourceRef{Type: e.snake(xs[1].Text), Name: name, Attribute: xs[3].Text}
	e.refs = append(e.refs, pendingRef{ref: ref, pos: n.Pos})
	return arch.RefValue(ref), true
}

// at returns the position of element i of list n, or n's position when it is missing.
func at(n *Node, i int) Pos {
	if i < len(n.List) {
		return n.List[i].Pos
	}
	return n.Pos
}

// evalPlist evaluates a flat (:KEY VALUE ...) clause (:outputs, :locals) into m and records, under
// prefix+KEY in a, each key's position and whether its value uses a secret input. In :outputs a
// value (sensitive VALUE) marks the output sensitive.
func (e *evaluator) evalPlist(n *Node, clause string, snake bool, m *arch.Map, prefix string, a *arch.Architecture) {
	if n.Kind != NodeList {
		e.errorf(n.Pos, "expected deflava-architecture form, got %s not a list (expected (:key value ...))", clause)
		return
	}
	xs := n.List
	for i := 0; i < len(xs); i += 2 {
		k := xs[i]
		if k.Kind != NodeKeyword {
			e.errorf(k.Pos, "expected deflava-architecture form, got %s head not :kw (expected (:key value ...), got %s)", clause, describe(k))
			if k.Kind == NodeList {
				continue
			}
			return
		}
		if i+1 >= len(xs) {
			e.errorf(k.Pos, "expected deflava-architecture form, got %s missing value (for :%s; expected (:key value ...), every :key followed by its value)", clause, k.Text)
			return
		}
		key := k.Text
		if snake {
			key = kebabToSnake(key)
		}
		vn := xs[i+1]
		if clause == ":outputs" && vn.Kind == NodeList && len(vn.List) > 0 && vn.List[0].IsSymbol("sensitive") {
			if len(vn.List) != 2 {
				e.errorf(vn.Pos, "sensitive takes one value (expected (sensitive VALUE), got %d)", len(vn.List)-1)
				continue
			}
			a.SensitiveOutputs[key] = true
			vn = vn.List[1]
		}
		mark := e.taints
		v, ok := e.evalValue(vn)
		if !ok {
			continue
		}
		if _, dup := m.Get(key); dup {
			e.warnf(k.Pos, "%s key %s is set twice; the last value wins", clause, key)
		}
		m.Set(key, v)
		a.KeyPos[prefix+key] = k.Pos
		if e.taints > mark {
			a.Secret[prefix+key] = true
		}
	}
}

// versionConstraint matches a Terraform version constraint: comma-separated operator and
// version pairs ("~> 5.14", ">= 6.0, < 7.0", "1.2.3").
var versionConstraint = regexp.MustCompile(`^\s*(?:=|!=|>|>=|<|<=|~>)?\s*v?[0-9]+(?:\.[0-9]+){0,2}(?:-[0-9A-Za-z.-]+)?\s*(?:,\s*(?:=|!=|>|>=|<|<=|~>)?\s*v?[0-9]+(?:\.[0-9]+){0,2}(?:-[0-9A-Za-z.-]+)?\s*)*$`)

// evalProviders evaluates :providers ((NAME :k v ...) ...).
func (e *evaluator) evalProviders(n *Node) []arch.ProviderRef {
	if n.Kind != NodeList {
		e.errorf(n.Pos, "expected deflava-architecture form, got provider list not a list (expected ((NAME :key value ...) ...))")
		return nil
	}
	var out []arch.ProviderRef
	for _, p := range n.List {
		if p.Kind != NodeList {
			e.errorf(p.Pos, "expected deflava-architecture form, got provider not a list (expected (NAME :key value ...), got %s)", describe(p))
			continue
		}
		if len(p.List) == 0 || p.List[0].Kind != NodeSymbol {
			e.errorf(at(p, 0), "expected deflava-architecture form, got provider head not sym (expected a provider name like aws)")
			continue
		}
		pr := arch.ProviderRef{Name: p.List[0].Text, Pos: p.Pos}
		ok := true
		for i := 1; i < len(p.List); i += 2 {
			k := p.List[i]
			if k.Kind != NodeKeyword {
				e.errorf(k.Pos, "expected deflava-architecture form, got provider key not :kw (expected (NAME :key value ...), got %s)", describe(k))
				ok = false
				continue
			}
			if i+1 >= len(p.List) {
				e.errorf(k.Pos, "expected deflava-architecture form, got provider missing value (for :%s; expected (NAME :key value ...), every :key followed by its value)", k.Text)
				ok = false
				break
			}
			v := p.List[i+1]
			switch k.Text {
			case "alias", "source", "version":
				if v.Kind != NodeString && v.Kind != NodeSymbol {
					e.errorf(v.Pos, "type mismatch: expected provider :%s string, got %s", k.Text, describe(v))
					ok = false
					continue
				}
				if !e.noSecretName(v, "provider "+k.Text) {
					ok = false
					continue
				}
				s, sok := e.interp(v)
				if !sok {
					ok = false
					continue
				}
				switch k.Text {
				case "alias":
					pr.Alias = s
				case "source":
					pr.Source = s
				default:
					if !versionConstraint.MatchString(s) {
						e.errorf(v.Pos, "provider %s: :version %q is not a version constraint (expected e.g. \"~> 5.14\" or \">= 6.0, < 7.0\")", pr.Name, s)
						ok = false
						continue
					}
					pr.Version = s
				}
			default:
				val, vok := e.evalValue(v)
				if !vok {
					ok = false
					continue
				}
				pr.Config.Set(kebabToSnake(k.Text), val)
			}
		}
		if pr.Source == "" {
			pr.Source = "hashicorp/" + pr.Name
		}
		if ok {
			out = append(out, pr)
		}
	}
	return out
}
