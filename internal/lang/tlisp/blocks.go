package tlisp

import (
	"strings"

	"github.com/lava-operator/lava/internal/lang/arch"
)

// The grammars of the clauses that write Terraform's variable, check, moved and removed
// blocks, quoted in their errors.
const (
	variablesGrammar = `((NAME :type T :default VALUE :description "..." :validation ((:condition "${...}" :error-message "...") ...)) ...)`
	checksGrammar    = `((NAME :assert ((:condition "${...}" :error-message "...") ...)) ...)`
	movedGrammar     = `((:from "TYPE.OLD" :to "TYPE.NEW") ...)`
	removedGrammar   = `((:from "TYPE.NAME" :destroy #f) ...)`
	ruleGrammar      = `(:condition "${...}" :error-message "...")`
)

// pendingAddr is a moved or removed block's address waiting for the declarations to be known
// ([evaluator.checkBlocks]).
type pendingAddr struct {
	addr blockAddr
	pos  Pos
}

type pendingMove struct{ from, to pendingAddr }

// blockAddr is a moved or removed block's address: a resource ("TYPE.NAME", Res set), a
// module call ("module.NAME", Module set), either with instance keys (Keyed), or an address
// inside a module call (Nested: "module.a.TYPE.NAME", left to the engines).
type blockAddr struct {
	Text        string
	Res, Module string
	Keyed       bool
	Nested      bool
}

// evalBlockClauses evaluates the clauses that write Terraform's variable, check, moved and
// removed blocks: :variables, :checks, :moved and :removed.
func (e *evaluator) evalBlockClauses(vals map[string]*Node, a *arch.Architecture) {
	if v, ok := vals["variables"]; ok {
		e.evalVariables(v, a)
	}
	if c, ok := vals["checks"]; ok {
		e.evalChecks(c, a)
	}
	if m, ok := vals["moved"]; ok {
		e.evalMoved(m)
	}
	if r, ok := vals["removed"]; ok {
		e.evalRemoved(r)
	}
}

// keyPairs reads xs[from:] as :key value pairs whose keys are in allowed, in the grammar
// named by grammar, and returns the value of each key (the last of a repeated key, with a
// warning). It reports an error and returns false for a non-keyword key, a key without a
// value and a key not allowed.
func (e *evaluator) keyPairs(xs []*Node, from int, what, grammar string, allowed ...string) (map[string]*Node, bool) {
	vals := map[string]*Node{}
	ok := true
	for i := from; i < len(xs); i += 2 {
		k := xs[i]
		if k.Kind != NodeKeyword {
			e.errorf(k.Pos, "%s: expected a :key, got %s (expected %s)", what, describe(k), grammar)
			return vals, false
		}
		if i+1 >= len(xs) {
			e.errorf(k.Pos, "%s: :%s has no value (expected %s)", what, k.Text, grammar)
			return vals, false
		}
		found := false
		for _, a := range allowed {
			found = found || a == k.Text
		}
		if !found {
			e.errorf(k.Pos, "%s: unknown key :%s (expected one of :%s)", what, k.Text, strings.Join(allowed, ", :"))
			ok = false
			continue
		}
		if _, dup := vals[k.Text]; dup {
			e.warnf(k.Pos, "%s: :%s is set twice; the last value wins", what, k.Text)
		}
		vals[k.Text] = xs[i+1]
	}
	return vals, ok
}

// clauseList reports whether n, the value of clause, is a list; it reports an error when not.
func (e *evaluator) clauseList(n *Node, clause, grammar string) bool {
	if n.Kind != NodeList {
		e.errorf(n.Pos, "expected deflava-architecture form, got %s not a list (expected %s, got %s)", clause, grammar, describe(n))
		return false
	}
	return true
}

// namedEntry reads one (NAME :key value ...) entry of clause: NAME a symbol that is a
// Terraform identifier, declared once in seen (kind names it in messages, "variable var").
// It returns the name and the pairs, and false after reporting an error.
func (e *evaluator) namedEntry(n *Node, clause, kind, grammar string, seen map[string]Pos, allowed ...string) (string, map[string]*Node, bool) {
	if n.Kind != NodeList || len(n.List) == 0 || n.List[0].Kind != NodeSymbol {
		e.errorf(n.Pos, "%s: expected an entry (NAME :key value ...) with a symbol NAME, got %s (expected %s)", clause, describe(n), grammar)
		return "", nil, false
	}
	name := n.List[0].Text
	if !validName(name) {
		e.errorf(n.List[0].Pos, "%s: the name %q is not a Terraform identifier (letters, digits, _ and -, starting with a letter or _)", clause, name)
		return "", nil, false
	}
	if p, dup := seen[name]; dup {
		e.errorf(n.Pos, "duplicate %s.%s (first declared at %s)", kind, name, p)
		return "", nil, false
	}
	seen[name] = n.Pos
	vals, ok := e.keyPairs(n.List, 1, kind+"."+name, grammar, allowed...)
	return name, vals, ok
}

// evalRules evaluates a list of (:condition "${...}" :error-message "...") rules (a check's
// :assert, a variable's :validation); what names the owner in messages. At least one rule is
// required when required is set.
func (e *evaluator) evalRules(n *Node, what string, required bool) ([]arch.Rule, bool) {
	if n.Kind != NodeList {
		e.errorf(n.Pos, "%s: expected a list of rules (%s ...), got %s", what, ruleGrammar, describe(n))
		return nil, false
	}
	if required && len(n.List) == 0 {
		e.errorf(n.Pos, "%s: expected at least one rule %s, got ()", what, ruleGrammar)
		return nil, false
	}
	var out []arch.Rule
	ok := true
	for _, r := range n.List {
		if r.Kind != NodeList {
			e.errorf(r.Pos, "%s: expected a rule %s, got %s", what, ruleGrammar, describe(r))
			ok = false
			continue
		}
		vals, rok := e.keyPairs(r.List, 0, what, ruleGrammar, "condition", "error-message")
		if !rok {
			ok = false
			continue
		}
		var rule arch.Rule
		for _, k := range []string{"condition", "error-message"} {
			v, has := vals[k]
			if !has {
				e.errorf(r.Pos, "%s: the rule has no :%s (expected %s)", what, k, ruleGrammar)
				rok = false
				continue
			}
			if v.Kind != NodeString {
				e.errorf(v.Pos, "type mismatch: expected %s :%s string, got %s", what, k, describe(v))
				rok = false
				continue
			}
			val, vok := e.evalValue(v)
			rok = rok && vok
			if k == "condition" {
				rule.Condition = val
			} else {
				rule.ErrorMessage = val
			}
		}
		if rok {
			out = append(out, rule)
		}
		ok = ok && rok
	}
	return out, ok
}

// evalVariables evaluates :variables into variable blocks. A variable's value is its :default
// (required: the engines take no other input), a literal: no reference, no secret binding and
// no Terraform template sequence, since the engines read a default without evaluating it.
func (e *evaluator) evalVariables(n *Node, a *arch.Architecture) {
	if !e.clauseList(n, ":variables", variablesGrammar) {
		return
	}
	seen := map[string]Pos{}
	for _, vn := range n.List {
		if e.full {
			return
		}
		name, vals, ok := e.namedEntry(vn, ":variables", "var", variablesGrammar, seen, "type", "default", "description", "validation")
		if name == "" {
			continue
		}
		v := arch.Variable{Name: name, Pos: vn.Pos}
		where := "var." + name
		if t, has := vals["type"]; has {
			if t.Kind != NodeSymbol && t.Kind != NodeString {
				e.errorf(t.Pos, "type mismatch: expected %s :type symbol or string (string, number, bool, \"list(string)\"), got %s", where, describe(t))
				ok = false
			} else {
				v.Type = t.Text
			}
		}
		if d, has := vals["description"]; has {
			if d.Kind != NodeString {
				e.errorf(d.Pos, "type mismatch: expected %s :description string, got %s", where, describe(d))
				ok = false
			} else if s, sok := e.interp(d); sok && e.noSecretName(d, "variable description") {
				v.Description = s
			} else {
				ok = false
			}
		}
		ok = e.variableDefault(vn, vals, &v) && ok
		if r, has := vals["validation"]; has {
			rules, rok := e.evalRules(r, where+" :validation", false)
			v.Validations, ok = rules, ok && rok
		}
		if ok {
			a.Variables = append(a.Variables, v)
			a.KeyPos["variable."+name] = vn.Pos
		}
	}
}

// variableDefault evaluates the :default of the variable form vn into v.Default.
func (e *evaluator) variableDefault(vn *Node, vals map[string]*Node, v *arch.Variable) bool {
	where := "var." + v.Name
	d, has := vals["default"]
	if !has {
		e.errorf(vn.Pos, "%s: missing :default (expected :default VALUE: the engines take no other value for a variable)", where)
		return false
	}
	mark := e.taints
	val, ok := e.evalValue(d)
	if !ok {
		return false
	}
	if e.taints > mark {
		e.errorf(d.Pos, "%s: a variable default must not contain a secret binding (it is rendered as a literal; use the binding in an attribute)", where)
		return false
	}
	if p := literalProblem(val); p != "" {
		e.errorf(d.Pos, "%s: :default is a literal value, %s", where, p)
		return false
	}
	v.Default = val
	return true
}

// literalProblem says why v cannot be a variable's default ("" when it can): a reference, or
// a string holding a Terraform template sequence or escape ("${", "%{"), which the engines
// would read as text.
func literalProblem(v arch.Value) string {
	switch v.Kind {
	case arch.KindRef:
		return "got a reference (the engines do not evaluate a variable's default)"
	case arch.KindString:
		if strings.Contains(v.Str, "${") || strings.Contains(v.Str, "%{") {
			return "got a Terraform template sequence (the engines read a variable's default as text, without evaluating it)"
		}
	case arch.KindList:
		for _, x := range v.List {
			if p := literalProblem(x); p != "" {
				return p
			}
		}
	case arch.KindMap:
		for _, x := range v.Map.All() {
			if p := literalProblem(x); p != "" {
				return p
			}
		}
	}
	return ""
}

// evalChecks evaluates :checks into check blocks, each with at least one assertion.
func (e *evaluator) evalChecks(n *Node, a *arch.Architecture) {
	if !e.clauseList(n, ":checks", checksGrammar) {
		return
	}
	seen := map[string]Pos{}
	for _, cn := range n.List {
		if e.full {
			return
		}
		name, vals, ok := e.namedEntry(cn, ":checks", "check", checksGrammar, seen, "assert")
		if name == "" {
			continue
		}
		an, has := vals["assert"]
		if !has {
			if ok {
				e.errorf(cn.Pos, "check.%s: missing :assert (expected %s)", name, checksGrammar)
			}
			continue
		}
		rules, rok := e.evalRules(an, "check."+name+" :assert", true)
		if ok && rok {
			a.Checks = append(a.Checks, arch.Check{Name: name, Asserts: rules, Pos: cn.Pos})
			a.KeyPos["check."+name] = cn.Pos
		}
	}
}

// evalMoved reads :moved into e.moves; [evaluator.checkBlocks] checks them against the
// declarations.
func (e *evaluator) evalMoved(n *Node) {
	e.addressEntries(n, "moved", movedGrammar, `(:from "ADDR" :to "ADDR")`, []string{"from", "to"}, func(m *Node, vals map[string]*Node) {
		from, fok := e.blockAddress(m, vals, "moved", "from", movedGrammar)
		to, tok := e.blockAddress(m, vals, "moved", "to", movedGrammar)
		if fok && tok {
			e.moves = append(e.moves, pendingMove{from: from, to: to})
		}
	})
}

// evalRemoved reads :removed into e.removed; [evaluator.checkBlocks] checks them against
// the declarations.
func (e *evaluator) evalRemoved(n *Node) {
	e.addressEntries(n, "removed", removedGrammar, `(:from "ADDR" :destroy #f)`, []string{"from", "destroy"}, func(m *Node, vals map[string]*Node) {
		from, fok := e.blockAddress(m, vals, "removed", "from", removedGrammar)
		destroy := false
		if d, has := vals["destroy"]; has {
			b, dok := e.truthy(d)
			destroy, fok = b, fok && dok
		}
		if !fok {
			return
		}
		if from.addr.Keyed {
			e.errorf(from.pos, "removed :from %q has an instance key: a removed block names a resource or module call without keys (as the engines require)", from.addr.Text)
			return
		}
		e.removed = append(e.removed, pendingRemoved{from: from, destroy: destroy})
	})
}

// addressEntries reads the entries of the clause :what (:moved or :removed): each a list of
// keyword pairs among keys, example showing one. It reports an element that is not a list
// and an entry whose pairs do not read, and calls fn with each other entry and its values.
func (e *evaluator) addressEntries(n *Node, what, grammar, example string, keys []string, fn func(m *Node, vals map[string]*Node)) {
	if !e.clauseList(n, ":"+what, grammar) {
		return
	}
	for _, m := range n.List {
		if e.full {
			return
		}
		if m.Kind != NodeList {
			e.errorf(m.Pos, ":%s: expected an entry %s, got %s (expected %s)", what, example, describe(m), grammar)
			continue
		}
		if vals, ok := e.keyPairs(m.List, 0, what, grammar, keys...); ok {
			fn(m, vals)
		}
	}
}

type pendingRemoved struct {
	from    pendingAddr
	destroy bool
}

// blockAddress reads the address under key of a moved or removed entry m: a string without
// secret bindings, interpolated, naming a resource ("TYPE.NAME", the type's dashes turned
// into underscores and the name sanitized as a resource's), a module call ("module.NAME"),
// either with instance keys ("[0]", "[\"k\"]"), or an address inside a module call.
func (e *evaluator) blockAddress(m *Node, vals map[string]*Node, block, key, grammar string) (pendingAddr, bool) {
	n, has := vals[key]
	if !has {
		e.errorf(m.Pos, "%s: missing :%s (expected %s)", block, key, grammar)
		return pendingAddr{}, false
	}
	if n.Kind != NodeString {
		e.errorf(n.Pos, "type mismatch: expected %s :%s address string like \"TYPE.NAME\", got %s", block, key, describe(n))
		return pendingAddr{}, false
	}
	if !e.noSecretName(n, block+" address") {
		return pendingAddr{}, false
	}
	s, ok := e.interp(n)
	if !ok {
		return pendingAddr{}, false
	}
	ad, msg := parseBlockAddr(s)
	if msg != "" {
		e.errorf(n.Pos, "%s :%s %q %s", block, key, s, msg)
		return pendingAddr{}, false
	}
	return pendingAddr{addr: ad, pos: n.Pos}, true
}

// parseBlockAddr parses a moved or removed address; the message says what is wrong ("" when
// nothing is).
func parseBlockAddr(s string) (blockAddr, string) {
	const expect = `is not an address (expected "TYPE.NAME", "module.NAME" or "module.NAME.TYPE.NAME", with optional [N] or ["key"] instance keys)`
	ad := blockAddr{Text: s}
	var plain strings.Builder
	for rest := s; rest != ""; {
		i := strings.IndexByte(rest, '[')
		if i < 0 {
			plain.WriteString(rest)
			break
		}
		j := strings.IndexByte(rest[i:], ']')
		if j < 0 {
			return ad, expect
		}
		plain.WriteString(rest[:i])
		rest, ad.Keyed = rest[i+j+1:], true
	}
	parts := strings.Split(plain.String(), ".")
	for _, p := range parts {
		if p == "" {
			return ad, expect
		}
	}
	switch {
	case parts[0] == "data":
		return ad, "names a data source: data sources are not moved or removed (as in Terraform)"
	case parts[0] == "module" && len(parts) == 2:
		ad.Module = parts[1]
	case parts[0] == "module" && len(parts) > 2:
		ad.Nested = true
	case len(parts) == 2:
		typ := kebabToSnake(parts[0])
		ad.Res, ad.Text = typ+"."+parts[1], typ+s[len(parts[0]):]
		if !ad.Keyed {
			ad.Res = typ + "." + SanitizeName(parts[1])
			ad.Text = ad.Res
		}
	default:
		return ad, expect
	}
	return ad, ""
}

// checkBlocks checks the moved and removed addresses against the declarations and adds them
// to a: a move's :from no longer declared (unless it names an instance) and its :to declared,
// both of one kind (resources of one type, or module calls); a removed :from no longer
// declared. Addresses inside a module call are left to the engines.
func (e *evaluator) checkBlocks(a *arch.Architecture) {
	declared := func(ad blockAddr) (Pos, bool) {
		if ad.Module != "" {
			p, ok := e.modules[ad.Module]
			return p, ok
		}
		p, ok := e.declared[ad.Res]
		return p, ok
	}
	for _, m := range e.moves {
		from, to := m.from.addr, m.to.addr
		ftype, _, _ := strings.Cut(from.Res, ".")
		ttype, _, _ := strings.Cut(to.Res, ".")
		switch {
		case from.Nested || to.Nested:
		case (from.Module == "") != (to.Module == ""):
			e.errorf(m.from.pos, "moved %s to %s: a move is between two resources or two module calls", from.Text, to.Text)
		case from.Text == to.Text:
			e.errorf(m.from.pos, "moved %s to itself", from.Text)
		case ftype != ttype:
			e.errorf(m.from.pos, "moved %s to %s: a move keeps the resource type", from.Text, to.Text)
		default:
			if p, ok := declared(from); ok && !from.Keyed {
				e.errorf(m.from.pos, "moved :from %s is still declared (at %s): a moved block's from names what the architecture no longer declares", from.Text, p)
			}
			if _, ok := declared(to); !ok {
				e.undeclaredTarget(m.to, "moved :to")
			}
		}
		a.Moves = append(a.Moves, arch.Move{From: from.Text, To: to.Text})
	}
	for _, r := range e.removed {
		if p, ok := declared(r.from.addr); ok && !r.from.addr.Nested {
			e.errorf(r.from.pos, "removed :from %s is still declared (at %s): remove its form too (a :when that omits it is enough)", r.from.addr.Text, p)
		}
		a.Removed = append(a.Removed, arch.Removed{From: r.from.addr.Text, Destroy: r.destroy})
	}
}

// undeclaredTarget reports that what (moved :to) names a resource or module call the
// architecture does not declare, or one its :when omits.
func (e *evaluator) undeclaredTarget(t pendingAddr, what string) {
	if t.addr.Module != "" {
		e.errorf(t.pos, "%s names undeclared module module.%s (declare it in :modules)", what, t.addr.Module)
		return
	}
	if p, ok := e.omitted[t.addr.Res]; ok {
		e.errorf(t.pos, "%s names resource %s, which its :when omits (declared at %s)", what, t.addr.Res, p)
		return
	}
	e.errorf(t.pos, "%s names undeclared resource %s", what, t.addr.Res)
}
