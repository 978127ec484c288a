package tlisp

import (
	"slices"
	"strings"
)

// InputDecl is one entry of an architecture's :inputs clause.
type InputDecl struct {
	// Name is the input key, verbatim ("availability-zones").
	Name string
	// Default is the declared default; nil when the entry has none (the input must be bound).
	Default *InputDefault
	// Pos is the position of the entry's list.
	Pos Pos
}

// InputDefault is an input's default: a scalar (string or symbol text) or a list of strings.
type InputDefault struct {
	// IsList is true for a list default (Items, possibly empty), false for a scalar (Scalar).
	IsList bool
	Scalar string
	Items  []string
}

// DeclaredInputs reads the :inputs clause of src's first deflava-architecture form. Malformed
// entries are reported and left out.
func DeclaredInputs(src []byte, opts Options) (decls []InputDecl, diags Diagnostics) {
	defer func() {
		if r := recover(); r != nil {
			decls = nil
			diags = append(diags, internalError(opts.File, r))
		}
	}()
	forms, pdiags, usable := parse(src, opts)
	if !usable {
		return nil, pdiags
	}
	e := newEvaluator(src, opts)
	e.diags, e.nerr = pdiags, len(pdiags.Errors())
	form := e.findArchitecture(forms)
	if form == nil {
		return nil, e.diags
	}
	vals, _ := e.clauses(form, "deflava-architecture")
	for _, d := range e.readInputs(vals["inputs"]) {
		if !d.bad {
			decls = append(decls, d.InputDecl)
		}
	}
	sortDiags(e.diags)
	return decls, e.diags
}

// readInputs parses the :inputs entries: (:KEY DEFAULT?), only the first two
// elements used.
type inputEntry struct {
	InputDecl
	bad bool // the default is malformed (already reported)
}

func (e *evaluator) readInputs(n *Node) []inputEntry {
	if n == nil {
		return nil
	}
	if n.Kind != NodeList {
		e.errorf(n.Pos, "expected deflava-architecture form, got :inputs not a list (expected :inputs ((:name default) ...))")
		return nil
	}
	var out []inputEntry
	seen := map[string]Pos{}
	for _, entry := range n.List {
		if entry.Kind != NodeList {
			e.errorf(entry.Pos, "expected deflava-architecture form, got input not a list (expected (:name default))")
			continue
		}
		if len(entry.List) == 0 || entry.List[0].Kind != NodeKeyword {
			p := entry.Pos
			if len(entry.List) > 0 {
				p = entry.List[0].Pos
			}
			e.errorf(p, "expected deflava-architecture form, got input head not :kw (expected (:name default))")
			continue
		}
		d := inputEntry{InputDecl: InputDecl{Name: entry.List[0].Text, Pos: entry.Pos}}
		if prev, ok := seen[d.Name]; ok {
			e.warnf(entry.Pos, "input %q is declared twice (first at %s)", d.Name, prev)
		}
		seen[d.Name] = entry.Pos
		if len(entry.List) > 1 {
			def, ok := e.readDefault(entry.List[1])
			d.Default, d.bad = def, !ok
		}
		if len(entry.List) > 2 {
			e.warnf(entry.List[2].Pos, "input %q: elements after the default are ignored", d.Name)
		}
		out = append(out, d)
	}
	return out
}

func (e *evaluator) readDefault(v *Node) (*InputDefault, bool) {
	switch v.Kind {
	case NodeString, NodeSymbol:
		return &InputDefault{Scalar: v.Text}, true
	case NodeList:
		d := &InputDefault{IsList: true, Items: make([]string, 0, len(v.List))}
		for _, it := range v.List {
			if it.Kind != NodeString && it.Kind != NodeSymbol {
				e.errorf(it.Pos, "type mismatch: expected list of strings, got %s", describe(it))
				return nil, false
			}
			d.Items = append(d.Items, it.Text)
		}
		return d, true
	default:
		e.errorf(v.Pos, "type mismatch: expected string | list, got %s (defaults are strings: write \"%s\")", describe(v), strings.Trim(v.String(), ":"))
		return nil, false
	}
}

// evalInputs fills the environment from the bindings and defaults (precedence scalar, list,
// record list, default) and returns the declared names.
func (e *evaluator) evalInputs(n *Node, b Bindings) map[string]bool {
	declared := map[string]bool{}
	for _, d := range e.readInputs(n) {
		declared[d.Name] = true
		if s, ok := b.Scalars[d.Name]; ok {
			e.scalars[d.Name] = s
		} else if l, ok := b.Lists[d.Name]; ok {
			e.lists[d.Name] = l
		} else if r, ok := b.Records[d.Name]; ok {
			setMap(&e.records, d.Name, r)
		} else if d.bad {
			setMap(&e.bad, d.Name, true) // the default's error is already reported
		} else if d.Default != nil {
			if d.Default.IsList {
				e.lists[d.Name] = d.Default.Items
			} else {
				e.scalars[d.Name] = d.Default.Scalar
			}
		} else {
			e.errorf(d.Pos, "missing input binding for %s", d.Name)
			setMap(&e.bad, d.Name, true)
		}
	}
	return declared
}

// warnUndeclared warns about every binding the architecture does not declare.
func (e *evaluator) warnUndeclared(form, inputsKw *Node, declared map[string]bool, b Bindings) {
	var names []string
	for k := range b.Scalars {
		names = append(names, k)
	}
	for k := range b.Lists {
		names = append(names, k)
	}
	for k := range b.Records {
		names = append(names, k)
	}
	slices.Sort(names)
	names = slices.Compact(names)
	p := form.Pos
	if inputsKw != nil {
		p = inputsKw.Pos
	}
	name := "anonymous"
	if len(form.List) > 1 && form.List[1].Kind == NodeSymbol {
		name = form.List[1].Text
	}
	for _, k := range names {
		if !declared[k] {
			e.warnf(p, "binding %q is not declared in the :inputs of %s (ignored)", k, name)
		}
	}
}
