package render

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/lava-operator/lava/internal/lang/arch"
	"github.com/lava-operator/lava/internal/lang/bundle"
)

// Render renders a as Terraform JSON twice: pretty (2-space indent and a trailing newline) and
// compact (one line, no insignificant whitespace, no trailing newline), keys in insertion order
// (see the package doc), its [SensitiveOutputs] computed once for both. An empty architecture
// renders "{}\n" and "{}". The only error is a Value that cannot be represented (an unknown
// kind, a NaN or infinite float).
func Render(a *arch.Architecture) (pretty, compact []byte, err error) {
	var sensitive map[string]bool
	if a.Outputs.Len() > 0 {
		sensitive = SensitiveOutputs(a)
	}
	if pretty, err = renderJSON(a, true, sensitive); err != nil {
		return nil, nil, err
	}
	if compact, err = renderJSON(a, false, sensitive); err != nil {
		return nil, nil, err
	}
	return pretty, compact, nil
}

// renderJSON renders a pretty or compact; sensitive are a's [SensitiveOutputs] (nil: computed
// here), so a synthesis that renders both computes them once.
func renderJSON(a *arch.Architecture, pretty bool, sensitive map[string]bool) ([]byte, error) {
	w := emitter{pretty: pretty, b: make([]byte, 0, 8192), sensitive: sensitive}
	if err := w.architecture(a); err != nil {
		return nil, err
	}
	if pretty {
		w.b = append(w.b, '\n')
	}
	return w.b, nil
}

// emitter appends JSON to b. first[i] tells whether the open container at depth i has no
// member yet.
type emitter struct {
	b      []byte
	pretty bool
	first  []bool
	// sensitive are the architecture's sensitive outputs (nil: not computed yet).
	sensitive map[string]bool
}

func (w *emitter) newline() {
	w.b = append(w.b, '\n')
	for range w.first {
		w.b = append(w.b, ' ', ' ')
	}
}

func (w *emitter) open(c byte) {
	w.b = append(w.b, c)
	w.first = append(w.first, true)
}

func (w *emitter) close(c byte) {
	empty := w.first[len(w.first)-1]
	w.first = w.first[:len(w.first)-1]
	if w.pretty && !empty {
		w.newline()
	}
	w.b = append(w.b, c)
}

// elem starts an array element or object member.
func (w *emitter) elem() {
	top := len(w.first) - 1
	if !w.first[top] {
		w.b = append(w.b, ',')
	}
	w.first[top] = false
	if w.pretty {
		w.newline()
	}
}

func (w *emitter) key(k string) {
	w.elem()
	w.b = appendString(w.b, k)
	w.b = append(w.b, ':')
	if w.pretty {
		w.b = append(w.b, ' ')
	}
}

func (w *emitter) str(s string) { w.b = appendString(w.b, s) }

func (w *emitter) architecture(a *arch.Architecture) error {
	w.open('{')
	if a == nil {
		w.close('}')
		return nil
	}
	if len(a.Variables) > 0 {
		if err := w.variables(a.Variables); err != nil {
			return err
		}
	}
	if len(a.Providers) > 0 {
		w.key("provider")
		if err := w.providers(a.Providers); err != nil {
			return err
		}
	}
	if a.Locals.Len() > 0 {
		w.key("locals")
		if err := w.mapValue(&a.Locals); err != nil {
			return err
		}
	}
	if len(a.Resources) > 0 {
		w.key("resource")
		if err := w.resources(a.Resources, false); err != nil {
			return err
		}
	}
	if len(a.DataSources) > 0 {
		w.key("data")
		if err := w.resources(a.DataSources, true); err != nil {
			return err
		}
	}
	if len(a.Modules) > 0 {
		if err := w.modules(a.Modules); err != nil {
			return err
		}
	}
	if a.Outputs.Len() > 0 {
		w.key("output")
		w.open('{')
		if w.sensitive == nil {
			w.sensitive = SensitiveOutputs(a)
		}
		sensitive := w.sensitive
		for k, v := range a.Outputs.All() {
			w.key(k)
			w.open('{')
			w.key("value")
			if err := w.value(v); err != nil {
				return fmt.Errorf("output %s: %w", k, err)
			}
			if sensitive[k] {
				w.key("sensitive")
				w.b = append(w.b, "true"...)
			}
			w.close('}')
		}
		w.close('}')
	}
	w.objects("import", len(a.Imports), func(i int) {
		w.key("to")
		w.str(a.Imports[i].To)
		w.key("id")
		w.str(a.Imports[i].ID)
	})
	if err := w.blocks(a); err != nil {
		return err
	}
	if len(a.Bundle) > 0 {
		if err := w.bundle(a.Bundle); err != nil {
			return err
		}
	}
	w.close('}')
	return nil
}

// bundle renders the bundled modules as {"//": {"lava_modules": {DIR: {...}}}}
// (bundle.Key), directories sorted, each module's JSON re-indented to its depth (pretty) or
// compacted.
func (w *emitter) bundle(mods map[string][]byte) error {
	w.key("//")
	w.open('{')
	w.key(bundle.Key)
	w.open('{')
	for _, dir := range slices.Sorted(maps.Keys(mods)) {
		w.key(dir)
		var buf bytes.Buffer
		var err error
		if w.pretty {
			prefix := strings.Repeat("  ", len(w.first))
			err = json.Indent(&buf, bytes.TrimSpace(mods[dir]), prefix, "  ")
		} else {
			err = json.Compact(&buf, mods[dir])
		}
		if err != nil {
			return fmt.Errorf("bundled module %s: %w", dir, err)
		}
		w.b = append(w.b, buf.Bytes()...)
	}
	w.close('}')
	w.close('}')
	return nil
}

// providers renders {NAME: {alias?, config...}}; a NAME declared more than once becomes an
// array of its configurations in declaration order.
func (w *emitter) providers(ps []arch.ProviderRef) error {
	var order []string
	byName := map[string][]int{}
	for i, p := range ps {
		if _, ok := byName[p.Name]; !ok {
			order = append(order, p.Name)
		}
		byName[p.Name] = append(byName[p.Name], i)
	}
	w.open('{')
	for _, name := range order {
		w.key(name)
		idx := byName[name]
		if len(idx) > 1 {
			w.open('[')
		}
		for _, i := range idx {
			if len(idx) > 1 {
				w.elem()
			}
			p := &ps[i]
			w.open('{')
			if p.Alias != "" {
				w.key("alias")
				w.str(p.Alias)
			}
			for k, v := range p.Config.All() {
				w.key(k)
				if err := w.value(v); err != nil {
					return fmt.Errorf("provider %s: %s: %w", name, k, err)
				}
			}
			w.close('}')
		}
		if len(idx) > 1 {
			w.close(']')
		}
	}
	w.close('}')
	return nil
}

// resources renders {TYPE: {NAME: body}}: types in first-appearance order, names in order. A
// repeated address (possible only for values built in code; the evaluator rejects it) keeps the
// first position and the last body.
func (w *emitter) resources(rs []arch.Resource, data bool) error {
	var types []string
	byType := map[string][]int{}
	for i := range rs {
		t := rs[i].Type
		if _, ok := byType[t]; !ok {
			types = append(types, t)
		}
		byType[t] = append(byType[t], i)
	}
	w.open('{')
	for _, t := range types {
		w.key(t)
		w.open('{')
		idx := dedupeLastWins(rs, byType[t])
		for _, i := range idx {
			r := &rs[i]
			w.key(r.Name)
			if err := w.resourceBody(r, data); err != nil {
				return fmt.Errorf("%s: %w", r.Address(), err)
			}
		}
		w.close('}')
	}
	w.close('}')
	return nil
}

// dedupeLastWins returns idx with each repeated name at its first position holding the index of
// its last occurrence. Without repeats (the usual case) idx is returned as is.
func dedupeLastWins(rs []arch.Resource, idx []int) []int {
	if len(idx) < 2 {
		return idx
	}
	pos := make(map[string]int, len(idx))
	var out []int // nil until the first repeat; before it, positions equal indices in idx
	for n, i := range idx {
		name := rs[i].Name
		if p, ok := pos[name]; ok {
			if out == nil {
				out = append([]int(nil), idx[:n]...)
			}
			out[p] = i
			continue
		}
		if out == nil {
			pos[name] = n
		} else {
			pos[name] = len(out)
			out = append(out, i)
		}
	}
	if out == nil {
		return idx
	}
	return out
}

func (w *emitter) resourceBody(r *arch.Resource, data bool) error {
	w.open('{')
	for k, v := range r.Attributes.All() {
		w.key(k)
		if err := w.value(v); err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
	}
	if !data {
		switch {
		case r.Count != nil:
			w.key("count")
			w.b = strconv.AppendInt(w.b, *r.Count, 10)
		case r.ForEach != nil:
			w.key("for_each")
			if err := w.mapValue(r.ForEach); err != nil {
				return fmt.Errorf("for_each: %w", err)
			}
		}
		if r.Provider != nil {
			w.key("provider")
			p := r.Provider.Name
			if r.Provider.Alias != "" {
				p += "." + r.Provider.Alias
			}
			w.str(p)
		}
		if len(r.DependsOn) > 0 {
			w.key("depends_on")
			w.open('[')
			for _, d := range r.DependsOn {
				w.elem()
				w.str(d.Address())
			}
			w.close(']')
		}
	}
	w.close('}')
	return nil
}

func (w *emitter) mapValue(m *arch.Map) error {
	w.open('{')
	for k, v := range m.All() {
		w.key(k)
		if err := w.value(v); err != nil {
			return err
		}
	}
	w.close('}')
	return nil
}

func (w *emitter) value(v arch.Value) error {
	switch v.Kind {
	case arch.KindNull:
		w.b = append(w.b, "null"...)
	case arch.KindBool:
		w.b = strconv.AppendBool(w.b, v.Bool)
	case arch.KindInt:
		w.b = strconv.AppendInt(w.b, v.Int, 10)
	case arch.KindFloat:
		if math.IsNaN(v.Float) || math.IsInf(v.Float, 0) {
			return fmt.Errorf("float %v has no JSON form", v.Float)
		}
		b, err := json.Marshal(v.Float)
		if err != nil {
			return fmt.Errorf("float %v: %w", v.Float, err)
		}
		w.b = append(w.b, b...)
	case arch.KindString:
		w.str(v.Str)
	case arch.KindRef:
		w.b = append(w.b, `"${`...)
		w.b = appendStringBody(w.b, v.Ref.Type)
		w.b = append(w.b, '.')
		w.b = appendStringBody(w.b, v.Ref.Name)
		w.b = append(w.b, '.')
		w.b = appendStringBody(w.b, v.Ref.Attribute)
		w.b = append(w.b, `}"`...)
	case arch.KindList:
		w.open('[')
		for _, e := range v.List {
			w.elem()
			if err := w.value(e); err != nil {
				return err
			}
		}
		w.close(']')
	case arch.KindMap:
		return w.mapValue(v.Map)
	default:
		return fmt.Errorf("unknown value kind %d", int(v.Kind))
	}
	return nil
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string with encoding/json's escaping, except that '<', '>'
// and '&' are kept (SetEscapeHTML(false)): control characters escaped, U+2028 and U+2029
// escaped, invalid UTF-8 replaced by U+FFFD.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	b = appendStringBody(b, s)
	return append(b, '"')
}

func appendStringBody(b []byte, s string) []byte {
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	return append(b, s[start:]...)
}
