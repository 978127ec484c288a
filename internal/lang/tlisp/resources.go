package tlisp

import (
	"strconv"
	"strings"

	"github.com/lava-operator/lava/internal/lang/arch"
)

// kebabToSnake turns every '-' into '_' (type ids, attribute, local and provider keys).
func kebabToSnake(s string) string {
	if strings.IndexByte(s, '-') < 0 {
		return s
	}
	return strings.ReplaceAll(s, "-", "_")
}

// snake is kebabToSnake cached for the evaluation (loops convert the same keys repeatedly).
func (e *evaluator) snake(s string) string {
	if strings.IndexByte(s, '-') < 0 {
		return s
	}
	if c, ok := e.snakeCache[s]; ok {
		return c
	}
	if e.snakeCache == nil {
		e.snakeCache = map[string]string{}
	}
	c := strings.ReplaceAll(s, "-", "_")
	e.snakeCache[s] = c
	return c
}

// evalEntry evaluates one element of :resources (resource, for-each or import) or of :data.
// Its steps: the entry's shape, the for-each and import forms, the name, the attributes and
// meta-arguments, then the declaration (unless :when is false).
func (e *evaluator) evalEntry(n *Node, inData bool) {
	what := "resource"
	if inData {
		what = "data source"
	}
	if !e.entryShape(n, what) {
		return
	}
	switch head := n.List[0].Text; {
	case head == "for-each" && !inData:
		e.evalForEach(n)
		return
	case head == "for-each":
		e.errorf(n.Pos, "for-each is not supported in :data (only in :resources)")
		return
	case head == "import" && !inData:
		e.evalImport(n)
		return
	}
	if !e.countExpansion(n.Pos) {
		return
	}
	r := arch.Resource{Type: e.snake(n.List[0].Text), Pos: n.Pos}
	r.Attributes.Grow((len(n.List) - 2) / 2)
	refMark := len(e.refs)
	nameOK := e.entryName(n, what, &r)
	taintMark := e.taints
	include, count, forEach := e.entryAttributes(n, &r)
	e.entryMeta(&r, count, forEach, inData)
	r.Secret = e.taints > taintMark
	if !include {
		if nameOK {
			setMap(&e.omitted, r.Address(), n.Pos)
		}
		e.refs = e.refs[:refMark]
		return
	}
	if nameOK {
		e.declareEntry(n, r, inData)
	}
}

// entryShape reports whether n has the shape of an entry, (TYPE ...) with a symbol head; it
// reports an error at n (or its head) when not. what names the entry ("resource" or "data
// source").
func (e *evaluator) entryShape(n *Node, what string) bool {
	if n.Kind != NodeList {
		e.errorf(n.Pos, "expected deflava-architecture form, got %s not a list (expected (TYPE \"NAME\" :attr value ...), got %s)", what, describe(n))
		return false
	}
	if len(n.List) == 0 || n.List[0].Kind != NodeSymbol {
		p := n.Pos
		got := "an empty list"
		if len(n.List) > 0 {
			p, got = n.List[0].Pos, describe(n.List[0])
		}
		e.errorf(p, "expected deflava-architecture form, got %s head not sym (expected a type symbol like aws-vpc, got %s)", what, got)
		return false
	}
	return true
}

// entryName sets r.Name from the entry's second element, a quoted name without secrets, and
// reports whether it is a valid name; otherwise it reports an error.
func (e *evaluator) entryName(n *Node, what string, r *arch.Resource) bool {
	if len(n.List) < 2 || n.List[1].Kind != NodeString {
		p, got := n.Pos, "nothing"
		if len(n.List) >= 2 {
			p, got = n.List[1].Pos, describe(n.List[1])
		}
		e.errorf(p, "expected deflava-architecture form, got %s name not string (expected a quoted name like \"main\", got %s)", what, got)
		return false
	}
	if !e.noSecretName(n.List[1], what+" name") {
		// An address is shown in events and artifacts: no secret in it.
		return false
	}
	name, ok := e.interp(n.List[1])
	if !ok {
		return false
	}
	var nameOK bool
	r.Name, nameOK = e.resourceName(name, n.List[1], true)
	return nameOK
}

// entryAttributes evaluates the entry's :key value pairs into r.Attributes and returns the
// value of :when (true when absent or not a boolean) and the unevaluated :count and :for-each
// nodes (nil when absent).
func (e *evaluator) entryAttributes(n *Node, r *arch.Resource) (include bool, count, forEach *Node) {
	include = true
	xs := n.List
	for i := 2; i < len(xs); i += 2 {
		k := xs[i]
		if k.Kind != NodeKeyword {
			e.errorf(k.Pos, "expected deflava-architecture form, got attr key not :kw (expected :name value pairs, got %s)", describe(k))
			continue
		}
		if i+1 >= len(xs) {
			e.errorf(k.Pos, "attribute :%s has no value", k.Text)
			break
		}
		v := xs[i+1]
		switch k.Text {
		case "when":
			if b, ok := e.truthy(v); ok {
				include = b
			}
			continue
		case "count":
			count = v
			continue
		case "for-each":
			forEach = v
			continue
		}
		key := e.snake(k.Text)
		if metaArguments[key] && !e.noSecretIn(v, "meta-argument "+key) {
			continue
		}
		val, ok := e.evalValue(v)
		if !ok {
			continue
		}
		if key == "lifecycle" {
			val = lifecycleKeys(val)
		}
		if r.Attributes.Len() > 0 {
			if _, dup := r.Attributes.Get(key); dup {
				e.warnf(k.Pos, "attribute %s is set twice; the last value wins", key)
			}
		}
		r.Attributes.Set(key, val)
	}
	return include, count, forEach
}

// entryMeta sets r.Count and r.ForEach from the :count and :for-each nodes (either may be
// nil). They exclude each other, and a data source ignores both with a warning.
func (e *evaluator) entryMeta(r *arch.Resource, count, forEach *Node, inData bool) {
	if count != nil && forEach != nil {
		e.errorf(forEach.Pos, "a resource cannot have both :count and :for-each")
	}
	if count != nil {
		if count.Kind != NodeInt {
			e.errorf(count.Pos, "type mismatch: expected :count expects integer (an integer literal, got %s)", describe(count))
		} else if count.Int < 0 {
			e.errorf(count.Pos, ":count must not be negative, got %d", count.Int)
		} else if inData {
			e.warnf(count.Pos, ":count is not rendered for a data source (ignored)")
		} else {
			c := count.Int
			r.Count = &c
		}
	}
	if forEach != nil {
		if m, ok := e.evalForEachMeta(forEach); ok {
			if inData {
				e.warnf(forEach.Pos, ":for-each is not rendered for a data source (ignored)")
			} else {
				r.ForEach = m
			}
		}
	}
}

// declareEntry adds r, declared at n, to the resources (or data sources), unless its address
// is already declared: that is an error naming the first declaration.
func (e *evaluator) declareEntry(n *Node, r arch.Resource, inData bool) {
	addr := r.Address()
	decl := &e.declared
	if inData {
		decl = &e.dataDecl
	}
	if prev, dup := (*decl)[addr]; dup {
		kind := "resource address "
		if inData {
			kind = "data source address data."
		}
		e.errorf(n.Pos, "duplicate %s%s (first declared at %s)", kind, addr, prev)
		return
	}
	setMap(decl, addr, n.Pos)
	if inData {
		e.data = append(e.data, r)
	} else {
		e.resources = append(e.resources, r)
	}
}

// countExpansion counts one expanded resource, data source or import against MaxResources.
func (e *evaluator) countExpansion(p Pos) bool {
	e.expanded++
	if e.expanded > MaxResources {
		if !e.limitd {
			e.limitd = true
			e.errorf(p, "more than %d resources after loop expansion (limit reached here)", MaxResources)
		}
		e.full = true
		return false
	}
	return true
}

// countIteration counts one for-each iteration against MaxIterations.
func (e *evaluator) countIteration(p Pos) bool {
	e.iters++
	if e.iters > MaxIterations {
		if !e.limitd {
			e.limitd = true
			e.errorf(p, "more than %d for-each iterations (limit reached here)", MaxIterations)
		}
		e.full = true
		return false
	}
	return true
}

// resourceName validates an interpolated resource name, sanitizing it when it is not a valid
// Terraform identifier. warn reports the sanitizing (refs apply the rule silently).
func (e *evaluator) resourceName(name string, n *Node, warn bool) (string, bool) {
	if name == "" {
		e.errorf(n.Pos, "resource name is empty after interpolation")
		return "", false
	}
	s := SanitizeName(name)
	if s != name && warn {
		if e.tainted(n) {
			e.warnf(n.Pos, "resource name %s is not a valid Terraform identifier (letters, digits, _ and -, starting with a letter or _); sanitized", e.quoteValue(n, name))
		} else {
			e.warnf(n.Pos, "resource name %q is not a valid Terraform identifier (letters, digits, _ and -, starting with a letter or _); using %q", name, s)
		}
	}
	return s, true
}

// SanitizeName returns name made a valid Terraform identifier: every character other than an
// ASCII letter, digit, '_' or '-' becomes '-', and a name that then starts with a digit or '-'
// gets a '_' prefix. A valid name is returned unchanged.
func SanitizeName(name string) string {
	if validName(name) {
		return name
	}
	var b strings.Builder
	for _, c := range name {
		if isNameChar(c) {
			b.WriteRune(c)
		} else {
			b.WriteByte('-')
		}
	}
	s := b.String()
	if s == "" || !isNameStart(rune(s[0])) {
		s = "_" + s
	}
	return s
}

func isNameStart(c rune) bool {
	return c == '_' || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z')
}

func isNameChar(c rune) bool { return isNameStart(c) || c == '-' || ('0' <= c && c <= '9') }

func validName(s string) bool {
	if s == "" || !isNameStart(rune(s[0])) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if !isNameChar(rune(s[i])) {
			return false
		}
	}
	return true
}

// truthy evaluates a :when predicate.
func (e *evaluator) truthy(v *Node) (bool, bool) {
	switch v.Kind {
	case NodeBool:
		return v.Bool, true
	case NodeInt:
		return v.Int != 0, true
	case NodeString, NodeSymbol:
		s, ok := e.interp(v)
		if !ok {
			return false, false
		}
		switch s {
		case "true", "#t", "1":
			return true, true
		case "false", "#f", "0", "":
			return false, true
		}
		hint := ""
		if v.Kind == NodeSymbol {
			if _, isVar := e.scalar(v.Text); isVar {
				hint = " (to use the input write \"{" + v.Text + "}\")"
			}
		}
		e.errorf(v.Pos, "type mismatch: expected boolean (true|false|#t|#f|1|0), got %s%s", e.quoteValue(v, s), hint)
		return false, false
	default:
		e.errorf(v.Pos, "type mismatch: expected boolean (true|false|#t|#f|1|0), got %s", describe(v))
		return false, false
	}
}

// evalForEachMeta evaluates a :for-each meta-argument: (k v k v ...), keys keywords or
// strings taken verbatim.
func (e *evaluator) evalForEachMeta(n *Node) (*arch.Map, bool) {
	if n.Kind != NodeList {
		e.errorf(n.Pos, "type mismatch: expected :for-each map (k v ...), got %s", describe(n))
		return nil, false
	}
	m := &arch.Map{}
	ok := true
	for i := 0; i < len(n.List); i += 2 {
		k := n.List[i]
		if k.Kind != NodeKeyword && k.Kind != NodeString {
			e.errorf(k.Pos, "type mismatch: expected :for-each key (a keyword or string), got %s", describe(k))
			ok = false
			continue
		}
		if i+1 >= len(n.List) {
			e.errorf(k.Pos, ":for-each key %q has no value", k.Text)
			return nil, false
		}
		v, vok := e.evalValue(n.List[i+1])
		if !vok {
			ok = false
			continue
		}
		m.Set(k.Text, v)
	}
	return m, ok
}

// evalForEach expands (for-each ((IDX ITEM) (enumerate SOURCE)) BODY).
func (e *evaluator) evalForEach(n *Node) {
	e.forEach(n, "a resource form", func(body *Node) { e.evalEntry(body, false) })
}

// forEach runs each for one iteration of the loop n, `(for-each ((IDX ITEM) (enumerate
// SOURCE)) BODY)`, with the loop variables bound, passing BODY; what names the body expected
// (for the error when it is missing). Errors are reported; each is not run after one.
func (e *evaluator) forEach(n *Node, what string, each func(body *Node)) {
	xs := n.List
	if len(xs) < 2 || xs[1].Kind != NodeList || len(xs[1].List) < 2 {
		p := n.Pos
		if len(xs) >= 2 {
			p = xs[1].Pos
		}
		e.errorf(p, "expected deflava-architecture form, got for-each binding (expected ((i item) (enumerate SOURCE)))")
		return
	}
	binding := xs[1].List
	vars, iter := binding[0], binding[1]
	if vars.Kind != NodeList {
		e.errorf(vars.Pos, "expected deflava-architecture form, got for-each vars (expected (i item), got %s)", describe(vars))
		return
	}
	if iter.Kind != NodeList {
		e.errorf(iter.Pos, "expected deflava-architecture form, got for-each iter (expected (enumerate SOURCE), got %s)", describe(iter))
		return
	}
	if iter.Head() != "enumerate" {
		e.errorf(iter.Pos, "expected deflava-architecture form, got for-each iter != enumerate (expected (enumerate SOURCE), got %s)", iter)
		return
	}
	if len(iter.List) < 2 || iter.List[1].Kind != NodeSymbol {
		p := iter.Pos
		if len(iter.List) >= 2 {
			p = iter.List[1].Pos
		}
		e.errorf(p, "expected deflava-architecture form, got enumerate source (expected the name of a list or record input)")
		return
	}
	if len(xs) < 3 {
		e.errorf(n.Pos, "expected deflava-architecture form, got for-each body (expected %s after the binding)", what)
		return
	}
	if len(xs) > 3 {
		e.warnf(xs[3].Pos, "for-each takes one body form; the forms after the first are ignored")
	}
	body := xs[2]
	idxVar, itemVar := "i", "item"
	if len(vars.List) > 0 && vars.List[0].Kind == NodeSymbol {
		idxVar = vars.List[0].Text
	}
	if len(vars.List) > 1 && vars.List[1].Kind == NodeSymbol {
		itemVar = vars.List[1].Text
	}
	src := iter.List[1]
	name := src.Text
	mark := len(e.loop)
	defer func() { e.loop = e.loop[:mark] }()
	secret := e.secret[name]
	if rows, ok := e.records[name]; ok && !e.shadowed(name) {
		for i, row := range rows {
			if e.full || !e.countIteration(n.Pos) {
				return
			}
			if len(row) > MaxRecordFields {
				// Each field is a loop variable every reference is looked up among.
				e.errorf(src.Pos, "record input `%s`: row %d has %d fields, more than %d", name, i, len(row), MaxRecordFields)
				return
			}
			if live := mark + 1 + len(row); live > MaxLoopVariables {
				e.errorf(n.Pos, "for-each: %d loop variables live in the nested loops here, more than %d", live, MaxLoopVariables)
				return
			}
			e.loop = append(e.loop[:mark], loopVar{name: idxVar, value: strconv.Itoa(i)})
			for f, v := range row {
				e.loop = append(e.loop, loopVar{name: itemVar + "_" + f, value: v, secret: secret})
			}
			each(body)
		}
		return
	}
	if items, ok := e.lists[name]; ok && !e.shadowed(name) {
		for i, it := range items {
			if e.full || !e.countIteration(n.Pos) {
				return
			}
			if live := mark + 2; live > MaxLoopVariables {
				e.errorf(n.Pos, "for-each: %d loop variables live in the nested loops here, more than %d", live, MaxLoopVariables)
				return
			}
			e.loop = append(e.loop[:mark], loopVar{name: idxVar, value: strconv.Itoa(i)}, loopVar{name: itemVar, value: it, secret: secret})
			each(body)
		}
		return
	}
	if e.bad[name] {
		return
	}
	hint := " (for-each needs a list or record input)"
	if _, ok := e.scalar(name); ok {
		hint = " (`" + name + "` is a scalar; for-each needs a list or record input)"
	}
	e.errorf(src.Pos, "interpolation: unknown var `%s`%s", name, hint)
}

// shadowed reports whether a loop variable hides the input name.
func (e *evaluator) shadowed(name string) bool {
	for i := len(e.loop) - 1; i >= 0; i-- {
		if e.loop[i].name == name {
			return true
		}
	}
	return false
}

// evalImport evaluates (import "ADDR" "ID" :when V).
func (e *evaluator) evalImport(n *Node) {
	xs := n.List
	if len(xs) < 3 || xs[1].Kind != NodeString || xs[2].Kind != NodeString {
		e.errorf(n.Pos, "malformed import (expected (import \"TYPE.NAME\" \"ID\" :when value))")
		return
	}
	if !e.countExpansion(n.Pos) {
		return
	}
	if !e.noSecretName(xs[1], "import address") {
		return
	}
	to, ok1 := e.interp(xs[1])
	id, ok2 := e.interp(xs[2])
	include := true
	for i := 3; i < len(xs); i += 2 {
		k := xs[i]
		if k.Kind != NodeKeyword || i+1 >= len(xs) {
			e.errorf(k.Pos, "malformed import: expected :when value, got %s", describe(k))
			return
		}
		if k.Text != "when" {
			e.warnf(k.Pos, "import ignores :%s (only :when is recognised)", k.Text)
			continue
		}
		if b, ok := e.truthy(xs[i+1]); ok {
			include = b
		} else {
			return
		}
	}
	if !ok1 || !ok2 || !include {
		return
	}
	typ, name, found := strings.Cut(to, ".")
	if !found || typ == "" || name == "" {
		e.errorf(xs[1].Pos, "import address %s is not TYPE.NAME", e.quoteValue(xs[1], to))
		return
	}
	if !strings.ContainsAny(name, "[") {
		name = SanitizeName(name)
	}
	to = typ + "." + name
	e.imports = append(e.imports, pendingImport{imp: arch.Import{To: to, ID: id}, pos: xs[1].Pos})
}

// checkRefs reports references and imports to resources and data sources not declared.
func (e *evaluator) checkRefs() {
	for _, r := range e.refs {
		if r.ref.Type == "module" {
			if _, ok := e.modules[r.ref.Name]; !ok {
				e.errorf(r.pos, "reference to undeclared module module.%s (declare it in :modules)", r.ref.Name)
			}
			continue
		}
		if typ, ok := strings.CutPrefix(r.ref.Type, "data."); ok {
			addr := typ + "." + r.ref.Name
			if _, ok := e.dataDecl[addr]; !ok {
				e.errorf(r.pos, "reference to undeclared data source data.%s", addr)
			}
			continue
		}
		addr := r.ref.Address()
		if _, ok := e.declared[addr]; ok {
			continue
		}
		if p, ok := e.omitted[addr]; ok {
			e.errorf(r.pos, "reference to resource %s, which its :when omits (declared at %s)", addr, p)
			continue
		}
		e.errorf(r.pos, "reference to undeclared resource %s", addr)
	}
	for _, im := range e.imports {
		if _, ok := e.declared[im.imp.To]; ok {
			continue
		}
		if strings.Contains(im.imp.To, "[") {
			continue // an indexed address: checked by Terraform
		}
		if p, ok := e.omitted[im.imp.To]; ok {
			e.errorf(im.pos, "import to resource %s, which its :when omits (declared at %s)", im.imp.To, p)
			continue
		}
		e.errorf(im.pos, "import to undeclared resource %s", im.imp.To)
	}
}

// lifecycleKeys renders the keys of a :lifecycle map (and of its precondition and
// postcondition maps) with Terraform's names: :prevent-destroy is prevent_destroy,
// :create-before-destroy create_before_destroy, :ignore-changes ignore_changes,
// :replace-triggered-by replace_triggered_by, :error-message error_message. Values are
// kept as written (ignore_changes holds attribute names, which are already Terraform's).
func lifecycleKeys(v arch.Value) arch.Value {
	switch v.Kind {
	case arch.KindMap:
		m := &arch.Map{}
		m.Grow(v.Map.Len())
		for k, x := range v.Map.All() {
			k = kebabToSnake(k)
			if k == "precondition" || k == "postcondition" {
				x = lifecycleKeys(x)
			}
			m.Set(k, x)
		}
		return arch.MapValue(m)
	case arch.KindList:
		out := make([]arch.Value, len(v.List))
		for i, x := range v.List {
			if x.Kind == arch.KindMap {
				x = lifecycleKeys(x)
			}
			out[i] = x
		}
		return arch.List(out...)
	}
	return v
}
