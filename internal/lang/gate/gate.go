package gate

import (
	"fmt"
	"slices"
	"strings"

	"github.com/lava-operator/lava/internal/lang/arch"
)

// Bag is the set of bindings a gate validates: what a LavaArchitecture (or the CLI) supplies.
// Scalars are `bindings`, Lists `listBindings`, Records `recordBindings` (each row a map from
// field name to value). Nil maps are empty.
type Bag struct {
	Scalars map[string]string
	Lists   map[string][]string
	Records map[string][]map[string]string
}

// entry is one bag key after projection.
type entry struct {
	name    string
	value   string // scalar, or the comma-joined list
	records []map[string]string
	isRec   bool
}

// entries walks the bag in upstream's order (scalars, lists, records; each sorted by key),
// taking a key bound several ways once with the evaluator's precedence.
func (b Bag) entries() []entry {
	var out []entry
	seen := make(map[string]bool)
	for _, k := range sortedKeys(b.Scalars) {
		seen[k] = true
		out = append(out, entry{name: k, value: b.Scalars[k]})
	}
	for _, k := range sortedKeys(b.Lists) {
		if !seen[k] {
			seen[k] = true
			out = append(out, entry{name: k, value: strings.Join(b.Lists[k], ",")})
		}
	}
	for _, k := range sortedKeys(b.Records) {
		if !seen[k] {
			seen[k] = true
			out = append(out, entry{name: k, records: b.Records[k], isRec: true})
		}
	}
	return out
}

// Has reports whether the bag binds key in any form.
func (b Bag) Has(key string) bool {
	if _, ok := b.Scalars[key]; ok {
		return true
	}
	if _, ok := b.Lists[key]; ok {
		return true
	}
	_, ok := b.Records[key]
	return ok
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// MissingRequired is a required input without a default that the bag does not bind.
type MissingRequired struct{ Name string }

func (e *MissingRequired) Error() string { return fmt.Sprintf("missing required input `%s`", e.Name) }

// UnknownField is a bag key that a closed interface (no :any or :dynamic input) does not declare.
type UnknownField struct{ Name string }

func (e *UnknownField) Error() string {
	return fmt.Sprintf("unknown input `%s` (no loose-fields slot declared)", e.Name)
}

// TypeMismatch is a bound value that fails its declared type; Cause is a *[TypeError].
type TypeMismatch struct {
	Name  string
	Cause error
}

func (e *TypeMismatch) Error() string {
	return fmt.Sprintf("type error on input `%s`: %s", e.Name, e.Cause)
}

// Unwrap returns the cause.
func (e *TypeMismatch) Unwrap() error { return e.Cause }

// Rejected is the error of a failed gate: every field error in order, summarized as upstream
// does ("interface `IFACE` rejected COUNT field(s): FIRST", only the first message shown).
type Rejected struct {
	Interface string
	// Errors holds *MissingRequired, *UnknownField and *TypeMismatch values, at least one.
	Errors []error
}

func (e *Rejected) Error() string {
	first := "unknown"
	if len(e.Errors) > 0 {
		first = e.Errors[0].Error()
	}
	return fmt.Sprintf("interface `%s` rejected %d field(s): %s", e.Interface, len(e.Errors), first)
}

// Unwrap returns the field errors, so errors.As finds a *MissingRequired and the others.
func (e *Rejected) Unwrap() []error { return e.Errors }

// Result is the outcome of [Validate].
type Result struct {
	// Interface is the gate's interface name.
	Interface string
	// Errors are the field errors in the order of the package documentation; empty on success.
	Errors []error
}

// OK reports whether the bag passed.
func (r *Result) OK() bool { return r == nil || len(r.Errors) == 0 }

// Err returns nil when the bag passed, otherwise a *[Rejected].
func (r *Result) Err() error {
	if r.OK() {
		return nil
	}
	return &Rejected{Interface: r.Interface, Errors: slices.Clone(r.Errors)}
}

// Validate checks b against iface's inputs with upstream's pass/fail rule (docs/dialect.md section 4.2,
// detailed in the package documentation) and returns every error found. A nil iface accepts
// everything.
func Validate(iface *arch.Interface, b Bag) *Result {
	if iface == nil {
		return &Result{}
	}
	res := &Result{Interface: iface.Name}
	for _, f := range iface.Inputs {
		if f.Required && f.Default == nil && !b.Has(f.Name) {
			res.Errors = append(res.Errors, &MissingRequired{Name: f.Name})
		}
	}
	open := slices.ContainsFunc(iface.Inputs, func(f arch.Field) bool { return f.Loose || f.Type.IsLoose() })
	for _, e := range b.entries() {
		f, ok := iface.Input(e.name)
		if !ok {
			if !open {
				res.Errors = append(res.Errors, &UnknownField{Name: e.name})
			}
			continue
		}
		if err := checkEntry(f.Type, e); err != nil {
			res.Errors = append(res.Errors, &TypeMismatch{Name: e.name, Cause: err})
		}
	}
	return res
}

func checkEntry(t arch.Type, e entry) error {
	if e.isRec {
		return checkRecords(t, e.records)
	}
	if t.Kind == arch.TypeListOf {
		var parts []string
		if e.value != "" {
			parts = strings.Split(e.value, ",")
		}
		return CheckList(t, parts)
	}
	return CheckValue(t, e.value)
}

// checkRecords validates a record-list binding (see the package documentation).
func checkRecords(t arch.Type, rows []map[string]string) error {
	if t.IsLoose() {
		return nil
	}
	if t.Kind == arch.TypeListOf {
		elem := arch.TypeAny
		if t.Elem != nil {
			elem = t.Elem.Kind
		}
		switch elem {
		case arch.TypeAny, arch.TypeDynamic, arch.TypeString:
			return checkCount(t, len(rows))
		}
		return typeErr(WrongValidator, "", "a record list cannot be checked as list-of %s", elem)
	}
	return typeErr(WrongValidator, "", "a record list cannot be checked as %s", t.Kind)
}
