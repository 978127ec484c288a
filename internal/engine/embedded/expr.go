package embedded

import (
	"fmt"
	"math/big"
	"strconv"
	"strings"

	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
)

// A traversal step: an attribute name or an index key.
type step struct {
	name string // attribute, when key is nil
	key  any    // string or int64 index
}

// ref is one reference found in an interpolation: its root object and the rest of the path.
type ref struct {
	// kind: "resource", "data", "local", "count", "each".
	kind string
	// typ and name of a resource or data source; name of a local; attribute of count/each.
	typ, name string
	// rest is the traversal after the referenced object.
	rest []step
	// text is the source text, for errors.
	text string
}

// address is the configuration address the reference depends on ("aws_vpc.main",
// "data.x.y", "local.z"); "" for count and each.
func (r ref) address() string {
	switch r.kind {
	case "resource":
		return r.typ + "." + r.name
	case "data":
		return "data." + r.typ + "." + r.name
	case "local":
		return "local." + r.name
	}
	return ""
}

// templatePart is a literal or a reference.
type templatePart struct {
	lit string
	ref *ref
}

// parseTemplate splits a Terraform JSON string into literals and ${...} references. Only
// references are supported inside ${}: type.name.attr, data.type.name.attr, local.name,
// count.index, each.key, each.value, with .attr, [N] and ["key"] steps. "$${" and "%%{" are
// escapes; "%{" directives are not supported.
func parseTemplate(s string) ([]templatePart, error) {
	var parts []templatePart
	var lit strings.Builder
	for i := 0; i < len(s); {
		switch {
		case strings.HasPrefix(s[i:], "$${"):
			lit.WriteString("${")
			i += 3
		case strings.HasPrefix(s[i:], "%%{"):
			lit.WriteString("%{")
			i += 3
		case strings.HasPrefix(s[i:], "%{"):
			return nil, fmt.Errorf("template directive in %q is not supported", s)
		case strings.HasPrefix(s[i:], "${"):
			end := strings.IndexByte(s[i:], '}')
			if end < 0 {
				return nil, fmt.Errorf("unterminated ${ in %q", s)
			}
			body := strings.TrimSpace(strings.Trim(s[i+2:i+end], "~"))
			r, err := parseRef(body)
			if err != nil {
				return nil, err
			}
			if lit.Len() > 0 {
				parts = append(parts, templatePart{lit: lit.String()})
				lit.Reset()
			}
			parts = append(parts, templatePart{ref: r})
			i += end + 1
		default:
			lit.WriteByte(s[i])
			i++
		}
	}
	if lit.Len() > 0 || len(parts) == 0 {
		parts = append(parts, templatePart{lit: lit.String()})
	}
	return parts, nil
}

func isIdentStart(c byte) bool { return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isIdentChar(c byte) bool  { return isIdentStart(c) || c == '-' || c >= '0' && c <= '9' }

// parseRef parses one traversal expression.
func parseRef(src string) (*ref, error) {
	unsupported := func() (*ref, error) {
		return nil, fmt.Errorf("expression %q is not supported: only references like type.name.attr are", src)
	}
	var steps []step
	i := 0
	ident := func() (string, bool) {
		if i >= len(src) || !isIdentStart(src[i]) {
			return "", false
		}
		j := i
		for j < len(src) && isIdentChar(src[j]) {
			j++
		}
		s := src[i:j]
		i = j
		return s, true
	}
	root, ok := ident()
	if !ok {
		return unsupported()
	}
	steps = append(steps, step{name: root})
	for i < len(src) {
		switch src[i] {
		case '.':
			i++
			if i < len(src) && src[i] >= '0' && src[i] <= '9' { // legacy index: a.0.b
				j := i
				for j < len(src) && src[j] >= '0' && src[j] <= '9' {
					j++
				}
				n, _ := strconv.ParseInt(src[i:j], 10, 64)
				steps = append(steps, step{key: n})
				i = j
				continue
			}
			name, ok := ident()
			if !ok {
				return unsupported()
			}
			steps = append(steps, step{name: name})
		case '[':
			end := strings.IndexByte(src[i:], ']')
			if end < 0 {
				return unsupported()
			}
			inner := strings.TrimSpace(src[i+1 : i+end])
			i += end + 1
			if n, err := strconv.ParseInt(inner, 10, 64); err == nil {
				steps = append(steps, step{key: n})
				continue
			}
			if len(inner) >= 2 && inner[0] == '"' {
				s, err := strconv.Unquote(inner)
				if err != nil {
					return unsupported()
				}
				steps = append(steps, step{key: s})
				continue
			}
			return unsupported()
		default:
			return unsupported()
		}
	}
	r := &ref{text: src}
	name := func(k int) (string, bool) {
		if k < len(steps) && steps[k].key == nil {
			return steps[k].name, true
		}
		return "", false
	}
	switch root {
	case "count", "each":
		attr, ok := name(1)
		if !ok || len(steps) > 2 && root == "count" {
			return unsupported()
		}
		r.kind, r.name, r.rest = root, attr, steps[2:]
	case "local":
		n, ok := name(1)
		if !ok {
			return unsupported()
		}
		r.kind, r.name, r.rest = "local", n, steps[2:]
	case "data":
		t, ok1 := name(1)
		n, ok2 := name(2)
		if !ok1 || !ok2 {
			return unsupported()
		}
		r.kind, r.typ, r.name, r.rest = "data", t, n, steps[3:]
	case "var", "self", "path", "terraform", "module":
		return nil, fmt.Errorf("reference %q is not supported (no %s. values in rendered architectures)", src, root)
	default:
		n, ok := name(1)
		if !ok {
			return unsupported()
		}
		r.kind, r.typ, r.name, r.rest = "resource", root, n, steps[2:]
	}
	return r, nil
}

// applySteps walks a value along steps. Unknown values yield unknown results; a missing
// attribute or key is an error.
func applySteps(v cty.Value, steps []step, what string) (cty.Value, error) {
	for _, st := range steps {
		if !v.IsKnown() {
			return cty.DynamicVal, nil
		}
		if v.IsNull() {
			return cty.NilVal, fmt.Errorf("%s: attempt to read from a null value", what)
		}
		ty := v.Type()
		switch {
		case st.key == nil && ty.IsObjectType():
			if !ty.HasAttribute(st.name) {
				return cty.NilVal, fmt.Errorf("%s: no attribute %q", what, st.name)
			}
			v = v.GetAttr(st.name)
		case st.key == nil && ty.IsMapType():
			v = indexValue(v, cty.StringVal(st.name))
		case st.key != nil:
			var k cty.Value
			switch key := st.key.(type) {
			case string:
				k = cty.StringVal(key)
			case int64:
				k = cty.NumberIntVal(key)
			}
			if ty.IsObjectType() {
				if k.Type() != cty.String || !ty.HasAttribute(k.AsString()) {
					return cty.NilVal, fmt.Errorf("%s: no key %s", what, k.GoString())
				}
				v = v.GetAttr(k.AsString())
				continue
			}
			if ty.IsSetType() {
				return cty.NilVal, fmt.Errorf("%s: sets cannot be indexed", what)
			}
			if ty.IsListType() || ty.IsTupleType() {
				n, err := convert.Convert(k, cty.Number)
				if err != nil {
					return cty.NilVal, fmt.Errorf("%s: index must be a number", what)
				}
				k = n
			}
			if !v.HasIndex(k).True() {
				return cty.NilVal, fmt.Errorf("%s: no element %s", what, k.GoString())
			}
			v = v.Index(k)
		default:
			return cty.NilVal, fmt.Errorf("%s: cannot read %q from a %s", what, st.name, ty.FriendlyName())
		}
	}
	return v, nil
}

func indexValue(v, k cty.Value) cty.Value {
	if !v.HasIndex(k).True() {
		return cty.NullVal(v.Type().ElementType())
	}
	return v.Index(k)
}

// scope resolves references during evaluation.
type scope interface {
	resolve(r *ref) (cty.Value, error)
}

// evalJSON turns a decoded JSON value (json.Number, string, bool, nil, []any, map[string]any)
// into a cty value, evaluating string templates in sc.
func evalJSON(x any, sc scope) (cty.Value, error) {
	switch t := x.(type) {
	case nil:
		return cty.NullVal(cty.DynamicPseudoType), nil
	case bool:
		return cty.BoolVal(t), nil
	case numberText:
		f, _, err := big.ParseFloat(string(t), 10, 512, big.ToNearestEven)
		if err != nil {
			return cty.NilVal, fmt.Errorf("number %s: %w", t, err)
		}
		return cty.NumberVal(f), nil
	case string:
		return evalTemplate(t, sc)
	case []any:
		vals := make([]cty.Value, len(t))
		for i, e := range t {
			v, err := evalJSON(e, sc)
			if err != nil {
				return cty.NilVal, err
			}
			vals[i] = v
		}
		return cty.TupleVal(vals), nil
	case map[string]any:
		vals := make(map[string]cty.Value, len(t))
		for k, e := range t {
			v, err := evalJSON(e, sc)
			if err != nil {
				return cty.NilVal, err
			}
			vals[k] = v
		}
		return cty.ObjectVal(vals), nil
	default:
		return cty.NilVal, fmt.Errorf("unexpected JSON value %T", x)
	}
}

// evalTemplate evaluates a template string: a lone "${ref}" yields the referenced value with
// its own type; otherwise the parts are joined as a string (unknown if any part is).
func evalTemplate(s string, sc scope) (cty.Value, error) {
	parts, err := parseTemplate(s)
	if err != nil {
		return cty.NilVal, err
	}
	if len(parts) == 1 && parts[0].ref == nil {
		return cty.StringVal(parts[0].lit), nil
	}
	if len(parts) == 1 {
		return sc.resolve(parts[0].ref)
	}
	var b strings.Builder
	for _, p := range parts {
		if p.ref == nil {
			b.WriteString(p.lit)
			continue
		}
		v, err := sc.resolve(p.ref)
		if err != nil {
			return cty.NilVal, err
		}
		if !v.IsKnown() {
			return cty.UnknownVal(cty.String), nil
		}
		if v.IsNull() {
			return cty.NilVal, fmt.Errorf("${%s}: a null value cannot be used in a string", p.ref.text)
		}
		sv, err := convert.Convert(v, cty.String)
		if err != nil {
			return cty.NilVal, fmt.Errorf("${%s}: cannot be used in a string: %w", p.ref.text, err)
		}
		if !sv.IsKnown() {
			return cty.UnknownVal(cty.String), nil
		}
		b.WriteString(sv.AsString())
	}
	return cty.StringVal(b.String()), nil
}

// numberText is a JSON number kept as its text (json.Number without the import in callers).
type numberText string

// collectRefs returns every reference in a decoded JSON value.
func collectRefs(x any) ([]*ref, error) {
	var out []*ref
	var walk func(any) error
	walk = func(x any) error {
		switch t := x.(type) {
		case string:
			parts, err := parseTemplate(t)
			if err != nil {
				return err
			}
			for _, p := range parts {
				if p.ref != nil {
					out = append(out, p.ref)
				}
			}
		case []any:
			for _, e := range t {
				if err := walk(e); err != nil {
					return err
				}
			}
		case map[string]any:
			for _, k := range sortedKeys(t) {
				if err := walk(t[k]); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return out, walk(x)
}
