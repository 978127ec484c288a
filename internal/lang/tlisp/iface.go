package tlisp

import (
	"math"
	"strconv"
	"strings"

	"github.com/lava-operator/lava/internal/lang/arch"
)

// ReadInterfaces reads every deflava-interface form of src, in source
// order. Unknown clause and field keys are ignored; an unknown type keyword is an error. When
// any diagnostic is an error the returned slice holds only the interfaces read without error.
func ReadInterfaces(src []byte, opts Options) (ifaces []*arch.Interface, diags Diagnostics) {
	defer func() {
		if r := recover(); r != nil {
			ifaces = nil
			diags = append(diags, internalError(opts.File, r))
		}
	}()
	forms, pdiags, usable := parse(src, opts)
	if !usable {
		return nil, pdiags
	}
	e := newEvaluator(src, opts)
	e.diags, e.nerr = pdiags, len(pdiags.Errors())
	for _, f := range forms {
		if e.full {
			break
		}
		if f.Head() != "deflava-interface" {
			continue
		}
		before := e.nerr
		iface := e.readInterface(f)
		if iface != nil && e.nerr == before {
			ifaces = append(ifaces, iface)
		}
	}
	sortDiags(e.diags)
	return ifaces, e.diags
}

func (e *evaluator) readInterface(form *Node) *arch.Interface {
	xs := form.List
	if len(xs) < 2 || xs[1].Kind != NodeSymbol {
		e.errorf(at(form, 1), "expected deflava-interface form, got missing name (expected (deflava-interface NAME ...))")
		return nil
	}
	iface := &arch.Interface{Name: xs[1].Text, Pos: form.Pos}
	for i := 2; i+1 < len(xs); i += 2 {
		k, v := xs[i], xs[i+1]
		if k.Kind != NodeKeyword {
			continue
		}
		switch k.Text {
		case "doc":
			if v.Kind == NodeString {
				iface.Doc = v.Text
			}
		case "inputs", "outputs":
			if v.Kind != NodeList {
				e.errorf(v.Pos, "malformed field declaration: :%s not a list (expected :%s ((:name :type T ...) ...))", k.Text, k.Text)
				continue
			}
			for _, fn := range v.List {
				f, ok := e.readField(fn)
				if !ok {
					continue
				}
				if k.Text == "inputs" {
					iface.Inputs = upsertField(iface.Inputs, f)
				} else {
					iface.Outputs = upsertField(iface.Outputs, f)
				}
			}
		}
	}
	return iface
}

// upsertField replaces a field of the same name in place (upstream's ordered map) or appends.
func upsertField(fs []arch.Field, f arch.Field) []arch.Field {
	for i := range fs {
		if fs[i].Name == f.Name {
			fs[i] = f
			return fs
		}
	}
	return append(fs, f)
}

func (e *evaluator) readField(n *Node) (arch.Field, bool) {
	if n.Kind != NodeList {
		e.errorf(n.Pos, "malformed field declaration: field not a list (expected (:name :type T ...), got %s)", describe(n))
		return arch.Field{}, false
	}
	if len(n.List) == 0 || n.List[0].Kind != NodeKeyword {
		e.errorf(at(n, 0), "malformed field declaration: field head must be :kw (expected (:name :type T ...))")
		return arch.Field{}, false
	}
	f := arch.Field{Name: n.List[0].Text, Pos: n.Pos, Type: arch.Type{Kind: arch.TypeAny}}
	var minItems, maxItems *int
	ok := true
	for i := 1; i+1 < len(n.List); i += 2 {
		k, v := n.List[i], n.List[i+1]
		if k.Kind != NodeKeyword {
			continue
		}
		switch k.Text {
		case "type":
			t, tok := e.readType(v)
			if !tok {
				ok = false
				continue
			}
			f.Type = t
		case "required":
			f.Required = v.Kind == NodeBool && v.Bool
		case "default":
			f.Default = renderDefault(v)
		case "doc":
			if v.Kind == NodeString {
				d := v.Text
				f.Doc = &d
			}
		case "min-items":
			minItems = nonNegInt(v)
		case "max-items":
			maxItems = nonNegInt(v)
		}
	}
	if f.Type.Kind == arch.TypeListOf {
		if minItems != nil {
			f.Type.MinItems = minItems
		}
		if maxItems != nil {
			f.Type.MaxItems = maxItems
		}
	}
	f.Loose = f.Type.IsLoose()
	return f, ok
}

func nonNegInt(v *Node) *int {
	if v.Kind != NodeInt || v.Int < 0 || v.Int > math.MaxInt32 {
		return nil
	}
	n := int(v.Int)
	return &n
}

// renderDefault renders a field default to a string: strings and symbols verbatim, booleans
// "true"/"false", integers in decimal, flat lists comma-joined (nil when empty).
func renderDefault(v *Node) *string {
	var s string
	switch v.Kind {
	case NodeString, NodeSymbol:
		s = v.Text
	case NodeBool:
		s = strconv.FormatBool(v.Bool)
	case NodeInt:
		s = strconv.FormatInt(v.Int, 10)
	case NodeList:
		var parts []string
		for _, x := range v.List {
			if x.Kind == NodeString || x.Kind == NodeSymbol {
				parts = append(parts, x.Text)
			}
		}
		if len(parts) == 0 {
			return nil
		}
		s = strings.Join(parts, ",")
	default:
		return nil
	}
	return &s
}

func (e *evaluator) readType(v *Node) (arch.Type, bool) {
	switch v.Kind {
	case NodeKeyword:
		k, ok := arch.TypeKindByKeyword(v.Text)
		if !ok {
			e.errorf(v.Pos, "unknown type keyword `%s`", v.Text)
			return arch.Type{}, false
		}
		return arch.Type{Kind: k}, true
	case NodeList:
		return e.readParamType(v)
	default:
		e.errorf(v.Pos, "malformed type form: expected a type keyword like :string or a form like (:list-of :string), got %s", describe(v))
		return arch.Type{}, false
	}
}

// typeOpts reads the keyword/value pairs of a parametric type from position 1.
func typeOpts(xs []*Node) map[string]*Node {
	m := map[string]*Node{}
	for i := 1; i+1 < len(xs); i += 2 {
		if xs[i].Kind == NodeKeyword {
			m[xs[i].Text] = xs[i+1]
		}
	}
	return m
}

// readParamType reads a parametric type form, (:HEAD ...): :list-of, :enum, :int-range,
// :port-range, :length or :pattern. It reports an error at v (or its head) and returns false
// for a malformed form or an unknown head.
func (e *evaluator) readParamType(v *Node) (arch.Type, bool) {
	xs := v.List
	if len(xs) == 0 || xs[0].Kind != NodeKeyword {
		e.errorf(at(v, 0), "malformed type form: parametric head must be :kw (like (:list-of :string))")
		return arch.Type{}, false
	}
	switch head := xs[0].Text; head {
	case "list-of":
		return e.readListOfType(v)
	case "enum":
		t := arch.Type{Kind: arch.TypeEnum, Enum: []string{}}
		for _, x := range xs[1:] {
			if x.Kind == NodeString || x.Kind == NodeSymbol {
				t.Enum = append(t.Enum, x.Text)
			}
		}
		return t, true
	case "int-range", "port-range":
		return e.readRangeType(v, head)
	case "length":
		return e.readLengthType(v)
	case "pattern":
		return readPatternType(xs), true
	default:
		e.errorf(xs[0].Pos, "unknown type keyword `%s`", head)
		return arch.Type{}, false
	}
}

// readListOfType reads (:list-of TYPE [:min-items N] [:max-items M]).
func (e *evaluator) readListOfType(v *Node) (arch.Type, bool) {
	xs := v.List
	if len(xs) < 2 {
		e.errorf(v.Pos, "malformed type form: :list-of missing inner (expected (:list-of TYPE), like (:list-of :string))")
		return arch.Type{}, false
	}
	inner, ok := e.readType(xs[1])
	if !ok {
		return arch.Type{}, false
	}
	t := arch.Type{Kind: arch.TypeListOf, Elem: &inner}
	for i := 2; i+1 < len(xs); i += 2 {
		if xs[i].Kind != NodeKeyword {
			continue
		}
		switch xs[i].Text {
		case "min-items":
			t.MinItems = nonNegInt(xs[i+1])
		case "max-items":
			t.MaxItems = nonNegInt(xs[i+1])
		}
	}
	return t, true
}

// intOpt is the first of the options names that is an integer literal in m.
func intOpt(m map[string]*Node, names ...string) (int64, bool) {
	for _, n := range names {
		if x, ok := m[n]; ok && x.Kind == NodeInt {
			return x.Int, true
		}
	}
	return 0, false
}

// readRangeType reads (:int-range :lo N :hi M) or (:port-range :lo N :hi M) (head names
// which; :min and :max are accepted for :lo and :hi). A port bound outside 0..65535 counts as
// missing.
func (e *evaluator) readRangeType(v *Node, head string) (arch.Type, bool) {
	m := typeOpts(v.List)
	lo, lok := intOpt(m, "lo", "min")
	hi, hok := intOpt(m, "hi", "max")
	kind := arch.TypeIntRange
	if head == "port-range" {
		kind = arch.TypePortRange
		if lok && (lo < 0 || lo > 65535) {
			lok = false
		}
		if hok && (hi < 0 || hi > 65535) {
			hok = false
		}
	}
	if !lok {
		e.errorf(v.Pos, "malformed type form: :%s needs :lo (expected (:%s :lo N :hi M) with %s)", head, head, rangeInts(head))
		return arch.Type{}, false
	}
	if !hok {
		e.errorf(v.Pos, "malformed type form: :%s needs :hi (expected (:%s :lo N :hi M) with %s)", head, head, rangeInts(head))
		return arch.Type{}, false
	}
	return arch.Type{Kind: kind, Lo: lo, Hi: hi}, true
}

// readLengthType reads (:length :min N :max M), both integers >= 0.
func (e *evaluator) readLengthType(v *Node) (arch.Type, bool) {
	m := typeOpts(v.List)
	t := arch.Type{Kind: arch.TypeLength}
	if x, ok := m["min"]; ok {
		t.MinLen = nonNegInt(x)
	}
	if x, ok := m["max"]; ok {
		t.MaxLen = nonNegInt(x)
	}
	if t.MinLen == nil {
		e.errorf(v.Pos, "malformed type form: :length needs :min (expected (:length :min N :max M) with integers >= 0)")
		return arch.Type{}, false
	}
	if t.MaxLen == nil {
		e.errorf(v.Pos, "malformed type form: :length needs :max (expected (:length :min N :max M) with integers >= 0)")
		return arch.Type{}, false
	}
	return t, true
}

// readPatternType reads (:pattern :source "TEXT" :match-kind KIND) from the form's elements
// xs. :value is accepted for :source; KIND is contains (the default), starts-with or
// ends-with, and anything else reads as contains.
func readPatternType(xs []*Node) arch.Type {
	t := arch.Type{Kind: arch.TypePattern, Match: "contains"}
	for i := 1; i+1 < len(xs); i += 2 {
		if xs[i].Kind != NodeKeyword {
			continue
		}
		x := xs[i+1]
		switch xs[i].Text {
		case "source", "value":
			if x.Kind == NodeString {
				t.Pattern = x.Text
			} else {
				t.Pattern = ""
			}
		case "match-kind":
			mk := "contains"
			if x.Kind == NodeSymbol {
				switch x.Text {
				case "starts-with", "ends-with":
					mk = x.Text
				}
			}
			t.Match = mk
		}
	}
	return t
}

// rangeInts describes the integers a range type form head (int-range, port-range) takes.
func rangeInts(head string) string {
	if head == "port-range" {
		return "integers from 0 to 65535"
	}
	return "integers"
}
