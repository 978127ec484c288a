package arch

// Interface is a typed contract for an architecture's bindings, read from a
// deflava-interface form (docs/dialect.md section 4.1). The gate validates a binding bag against it.
type Interface struct {
	Name string
	Doc  string
	// Inputs and Outputs keep declaration order.
	Inputs  []Field
	Outputs []Field
	Pos     Pos
}

// Input returns the input field named name.
func (i *Interface) Input(name string) (Field, bool) {
	for _, f := range i.Inputs {
		if f.Name == name {
			return f, true
		}
	}
	return Field{}, false
}

// Field is one declared input or output of an [Interface].
type Field struct {
	Name     string
	Type     Type
	Required bool
	// Default is the default rendered as a string (lists comma-joined); nil when absent.
	Default *string
	// Doc is the :doc text; nil when absent.
	Doc *string
	// Loose is true when Type is :any or :dynamic: such a field makes the interface open-set.
	Loose bool
	Pos   Pos
}

// TypeKind names a field type of the interface grammar.
type TypeKind int

// The field types of docs/dialect.md section 4.1. The keyword types first, then the compound forms.
const (
	TypeString TypeKind = iota
	TypeInteger
	TypeBoolean
	TypeAny
	TypeDynamic
	TypeCIDRBlock
	TypeIPv4
	TypeIPv6
	TypeHostname
	TypeAvailabilityZone
	TypeEmail
	TypeURL
	TypeListOf
	TypeEnum
	TypeIntRange
	TypePortRange
	TypeLength
	TypePattern
)

var typeKindNames = [...]string{
	"string", "integer", "boolean", "any", "dynamic", "cidr-block", "ipv4", "ipv6", "hostname",
	"availability-zone", "email", "url", "list-of", "enum", "int-range", "port-range", "length",
	"pattern",
}

// String returns the grammar's keyword for k ("cidr-block", "list-of", ...).
func (k TypeKind) String() string {
	if k < 0 || int(k) >= len(typeKindNames) {
		return "unknown"
	}
	return typeKindNames[k]
}

// TypeKindByKeyword maps a keyword type name (without the colon) to its kind; ok is false for
// an unknown keyword. Only the keyword types are found, not the compound forms.
func TypeKindByKeyword(kw string) (TypeKind, bool) {
	for k := TypeString; k <= TypeURL; k++ {
		if typeKindNames[k] == kw {
			return k, true
		}
	}
	return 0, false
}

// Type is a field type. Which fields matter depends on Kind:
//   - TypeListOf: Elem, MinItems, MaxItems;
//   - TypeEnum: Enum;
//   - TypeIntRange, TypePortRange: Lo, Hi (inclusive);
//   - TypeLength: MinLen, MaxLen (characters; nil is unbounded);
//   - TypePattern: Pattern and Match ("starts-with", "ends-with" or "contains").
type Type struct {
	Kind     TypeKind
	Elem     *Type
	MinItems *int
	MaxItems *int
	Enum     []string
	Lo, Hi   int64
	MinLen   *int
	MaxLen   *int
	Pattern  string
	Match    string
}

// IsLoose reports whether the type accepts any value and opens the interface (:any, :dynamic).
func (t Type) IsLoose() bool { return t.Kind == TypeAny || t.Kind == TypeDynamic }
