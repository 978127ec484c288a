package arch

import "strconv"

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

// Constructors for the kinds the evaluator builds. The zero Value is Null; no syntax of the
// dialect makes a Float (code that needs one sets Kind and Float).

// Bool returns a boolean value.
func Bool(b bool) Value { return Value{Kind: KindBool, Bool: b} }

// Int returns an integer value.
func Int(i int64) Value { return Value{Kind: KindInt, Int: i} }

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
