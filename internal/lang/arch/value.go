package arch

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
)

// Kind tells which field of a [Value] is set.
type Kind int

// The kinds of [Value]; the zero Kind is KindNull.
const (
	KindNull Kind = iota
	KindBool
	KindInt
	KindFloat
	KindString
	KindRef
	KindList
	KindMap
)

var kindNames = [...]string{"null", "bool", "int", "float", "string", "ref", "list", "map"}

// String returns the lower-case kind name ("null", "bool", ...).
func (k Kind) String() string {
	if k < 0 || int(k) >= len(kindNames) {
		return "Kind(" + strconv.Itoa(int(k)) + ")"
	}
	return kindNames[k]
}

// Value is an attribute value: Null | Bool | Int | Float | String | Ref | List | Map. Only the
// field that Kind names is meaningful. The zero Value is Null.
type Value struct {
	Kind  Kind
	Bool  bool
	Int   int64
	Float float64
	Str   string
	Ref   ResourceRef
	List  []Value
	Map   *Map
}

// Constructors for each kind.

// Null returns the null value.
func Null() Value { return Value{} }

// Bool returns a boolean value.
func Bool(b bool) Value { return Value{Kind: KindBool, Bool: b} }

// Int returns an integer value.
func Int(i int64) Value { return Value{Kind: KindInt, Int: i} }

// Float returns a floating-point value.
func Float(f float64) Value { return Value{Kind: KindFloat, Float: f} }

// String returns a string value.
func String(s string) Value { return Value{Kind: KindString, Str: s} }

// RefValue returns a reference value.
func RefValue(r ResourceRef) Value { return Value{Kind: KindRef, Ref: r} }

// List returns a list value holding vs (not copied). A nil vs is an empty list.
func List(vs ...Value) Value {
	if vs == nil {
		vs = []Value{}
	}
	return Value{Kind: KindList, List: vs}
}

// MapValue returns a map value; a nil m is an empty map.
func MapValue(m *Map) Value {
	if m == nil {
		m = &Map{}
	}
	return Value{Kind: KindMap, Map: m}
}

// ResourceRef names an attribute of a resource or data source: Type is the Terraform type
// ("aws_vpc", or "data.aws_ami" for a data source), Name the resource name, Attribute the
// attribute path ("id").
type ResourceRef struct {
	Type      string
	Name      string
	Attribute string
}

// Address returns "type.name".
func (r ResourceRef) Address() string { return r.Type + "." + r.Name }

// String returns the Terraform interpolation "${type.name.attr}", the form a reference takes
// in Terraform JSON.
func (r ResourceRef) String() string { return "${" + r.Type + "." + r.Name + "." + r.Attribute + "}" }

// MarshalJSON renders v in Terraform JSON configuration syntax: a Ref becomes its "${...}"
// string at any depth, a Map keeps insertion order, Null is null. It never fails for values
// built by this package's constructors; a Float that is NaN or infinite is an error.
func (v Value) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	if err := v.appendJSON(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func (v Value) appendJSON(buf *bytes.Buffer) error {
	switch v.Kind {
	case KindNull:
		buf.WriteString("null")
	case KindBool:
		buf.WriteString(strconv.FormatBool(v.Bool))
	case KindInt:
		buf.WriteString(strconv.FormatInt(v.Int, 10))
	case KindFloat:
		b, err := json.Marshal(v.Float)
		if err != nil {
			return fmt.Errorf("arch: float %v: %w", v.Float, err)
		}
		buf.Write(b)
	case KindString:
		appendJSONString(buf, v.Str)
	case KindRef:
		appendJSONString(buf, v.Ref.String())
	case KindList:
		buf.WriteByte('[')
		for i, e := range v.List {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := e.appendJSON(buf); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	case KindMap:
		return v.Map.appendJSON(buf)
	default:
		return fmt.Errorf("arch: unknown value kind %d", int(v.Kind))
	}
	return nil
}

// appendJSONString writes s as a JSON string with encoding/json's escaping rules, but without
// HTML escaping, so "<", ">" and "&" stay readable in rendered Terraform JSON.
func appendJSONString(buf *bytes.Buffer, s string) {
	var tmp bytes.Buffer
	enc := json.NewEncoder(&tmp)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a Go string always encodes
	buf.Write(bytes.TrimSuffix(tmp.Bytes(), []byte("\n")))
}

// Map is an ordered string-keyed map. Set on an existing key replaces the value and keeps the
// key's first position ("last wins, position of first kept"). The zero Map is empty and ready.
type Map struct {
	entries []mapEntry
	// index maps a key to its position in entries; built only once the map grows past
	// mapIndexMin entries (small maps, the common case, are scanned).
	index map[string]int
}

type mapEntry struct {
	key string
	val Value
}

// mapIndexMin is the size from which a Map keeps a hash index.
const mapIndexMin = 8

// NewMap returns an empty map.
func NewMap() *Map { return &Map{} }

func (m *Map) find(k string) int {
	if m.index != nil {
		if i, ok := m.index[k]; ok {
			return i
		}
		return -1
	}
	for i := range m.entries {
		if m.entries[i].key == k {
			return i
		}
	}
	return -1
}

// Set stores v under k.
func (m *Map) Set(k string, v Value) {
	if i := m.find(k); i >= 0 {
		m.entries[i].val = v
		return
	}
	m.entries = append(m.entries, mapEntry{key: k, val: v})
	switch {
	case m.index != nil:
		m.index[k] = len(m.entries) - 1
	case len(m.entries) > mapIndexMin:
		m.index = make(map[string]int, 2*len(m.entries))
		for i, e := range m.entries {
			m.index[e.key] = i
		}
	}
}

// Get returns the value under k and whether it is present. A nil Map is empty.
func (m *Map) Get(k string) (Value, bool) {
	if m == nil {
		return Value{}, false
	}
	if i := m.find(k); i >= 0 {
		return m.entries[i].val, true
	}
	return Value{}, false
}

// Grow makes room for n more entries without reallocating (an allocation hint; optional).
func (m *Map) Grow(n int) {
	if n > 0 && cap(m.entries)-len(m.entries) < n {
		m.entries = append(make([]mapEntry, 0, len(m.entries)+n), m.entries...)
	}
}

// Len returns the number of keys. A nil Map has length 0.
func (m *Map) Len() int {
	if m == nil {
		return 0
	}
	return len(m.entries)
}

// Keys returns the keys in insertion order (a copy).
func (m *Map) Keys() []string {
	if m == nil {
		return nil
	}
	keys := make([]string, len(m.entries))
	for i, e := range m.entries {
		keys[i] = e.key
	}
	return keys
}

// All iterates over the entries in insertion order.
func (m *Map) All() func(yield func(string, Value) bool) {
	return func(yield func(string, Value) bool) {
		if m == nil {
			return
		}
		for _, e := range m.entries {
			if !yield(e.key, e.val) {
				return
			}
		}
	}
}

// MarshalJSON renders the map as a JSON object in insertion order (see [Value.MarshalJSON]).
func (m *Map) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	if err := m.appendJSON(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func (m *Map) appendJSON(buf *bytes.Buffer) error {
	buf.WriteByte('{')
	for i, e := range m.entries {
		if i > 0 {
			buf.WriteByte(',')
		}
		appendJSONString(buf, e.key)
		buf.WriteByte(':')
		if err := e.val.appendJSON(buf); err != nil {
			return err
		}
	}
	buf.WriteByte('}')
	return nil
}
