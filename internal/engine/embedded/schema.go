package embedded

import (
	"fmt"
	"sort"
	"sync"

	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/lava-operator/lava/internal/platform/contentcache"
)

// Nesting is how a nested block type (or an attribute with nested attributes) nests, as the
// plugin protocol's NestingMode enums define it.
type Nesting int

// The nesting modes of the plugin protocol.
const (
	NestingSingle Nesting = iota + 1
	NestingList
	NestingSet
	NestingMap
	NestingGroup
)

// Block is a configuration block of a provider, resource or data source schema.
type Block struct {
	// Attributes by name.
	Attributes map[string]*Attribute
	// BlockTypes are the nested block types by name.
	BlockTypes map[string]*NestedBlock
}

// Attribute is one attribute of a [Block].
type Attribute struct {
	// Type is the attribute's cty type; cty.NilType when NestedType is set.
	Type cty.Type
	// NestedType describes attributes with nested attributes (protocol 6 only).
	NestedType                                         *Object
	Required, Optional, Computed, Sensitive, WriteOnly bool
}

// Object is the nested attributes of an [Attribute] and how they nest.
type Object struct {
	Attributes map[string]*Attribute
	Nesting    Nesting
}

// NestedBlock is a nested block type.
type NestedBlock struct {
	Block
	Nesting            Nesting
	MinItems, MaxItems int64
}

// Schema is a versioned resource, data source or provider schema. A Schema is not changed
// once built, and is used by pointer (it holds the cache of [Schema.DecodeState]).
type Schema struct {
	// Version is the resource schema version recorded in state (schema_version).
	Version int64
	Block   *Block

	// states maps the JSON attributes of a state instance to their decoded value.
	states contentcache.Cache[cty.Value]
	ty     struct {
		once sync.Once
		t    cty.Type
	}
}

// Type is s.Block.ImpliedType(), computed once: a schema does not change after it is read.
func (s *Schema) Type() cty.Type {
	s.ty.once.Do(func() { s.ty.t = s.Block.ImpliedType() })
	return s.ty.t
}

// Bounds of a Schema's decoded-state cache: attributes larger than maxCachedState bytes are
// decoded every time; when the cached attributes reach maxStateCache bytes, the cache is
// emptied. The decoded values take several times their JSON's size, and every resource type
// has its own cache.
const (
	maxCachedState = 64 << 10
	maxStateCache  = 1 << 20
)

// DecodeState decodes the JSON attributes of a state instance written at this schema's
// version as the block's implied type (go-cty's JSON encoding), or fails if they do not decode
// as that type. The value of each distinct attributes document is decoded once and kept (cty
// values are immutable), so planning an unchanged state again decodes nothing.
func (s *Schema) DecodeState(attrs []byte) (cty.Value, error) {
	if v, ok := s.states.Get(attrs); ok {
		return v, nil
	}
	v, err := ctyjson.Unmarshal(attrs, s.Type())
	if err != nil {
		return v, err
	}
	s.states.Put(attrs, v, maxCachedState, maxStateCache)
	return v, nil
}

// keepState records v as the decoded value of attrs, v's go-cty JSON encoding as the schema's
// type, within the cache's bounds; the applier calls it with what it writes, so the plan after
// an apply decodes nothing either. Only a value that decoding its encoding gives back is kept
// (decodesAs).
func (s *Schema) keepState(attrs []byte, v cty.Value) {
	if !v.IsWhollyKnown() || v.ContainsMarked() || !decodesAs(s.Type(), v) || !decodedPrecision(v) {
		return
	}
	s.states.Put(attrs, v, maxCachedState, maxStateCache)
}

// decodesAs reports whether go-cty's JSON decoding as want of v's encoding as want has v's
// type: v has exactly that type, or want is an object type and v differs only in attributes
// want types dynamically, where v holds a value that is not null (go-cty's JSON encoding writes
// such a value with its type, and decoding restores it; a null is written without one and
// decodes as a null of the dynamic pseudo-type).
func decodesAs(want cty.Type, v cty.Value) bool {
	vt := v.Type()
	if vt.Equals(want) {
		return true
	}
	if !want.IsObjectType() || !vt.IsObjectType() || v.IsNull() {
		return false
	}
	wat, vat := want.AttributeTypes(), vt.AttributeTypes()
	if len(wat) != len(vat) {
		return false
	}
	for name, wt := range wat {
		at, ok := vat[name]
		if !ok {
			return false
		}
		if at.Equals(wt) {
			continue
		}
		if !wt.Equals(cty.DynamicPseudoType) || v.GetAttr(name).IsNull() {
			return false
		}
	}
	return true
}

// decodedPrecision reports whether every number in v has the precision go-cty gives a number
// it parses from JSON (512 bits): a number a provider sent as a float64 has 53, and although
// it encodes to the same text, arithmetic on it rounds differently from the decoded value's.
func decodedPrecision(v cty.Value) bool {
	ok := true
	_ = cty.Walk(v, func(_ cty.Path, x cty.Value) (bool, error) {
		if ok && x.Type().Equals(cty.Number) && !x.IsNull() && x.AsBigFloat().Prec() != 512 {
			ok = false
		}
		return ok, nil
	})
	return ok
}

// ProviderSchema is everything GetProviderSchema returns that Lava uses.
type ProviderSchema struct {
	Provider    *Schema
	Resources   map[string]*Schema
	DataSources map[string]*Schema
	// PlanDestroy reports the provider wants PlanResourceChange before a destroy.
	PlanDestroy bool
}

// ImpliedType is the cty object type of values conforming to the block.
func (b *Block) ImpliedType() cty.Type {
	if b == nil {
		return cty.EmptyObject
	}
	atys := make(map[string]cty.Type, len(b.Attributes)+len(b.BlockTypes))
	for name, a := range b.Attributes {
		atys[name] = a.ImpliedType()
	}
	for name, nb := range b.BlockTypes {
		atys[name] = nb.ImpliedType()
	}
	return cty.Object(atys)
}

// ImpliedType is the attribute's type, derived from its nested attributes when it has them.
func (a *Attribute) ImpliedType() cty.Type {
	if a.NestedType == nil {
		// Optional-attribute markers only guide conversion of configuration; values on the
		// wire and in state have plain object types.
		return a.Type.WithoutOptionalAttributesDeep()
	}
	return a.NestedType.ImpliedType()
}

// configType is the type a configured value converts to: the implied type, except that nested
// attributes that are optional or computed may be left out (they become null).
func (a *Attribute) configType() cty.Type {
	if a.NestedType == nil {
		return a.Type
	}
	o := a.NestedType
	atys := make(map[string]cty.Type, len(o.Attributes))
	var optional []string
	for name, na := range o.Attributes {
		atys[name] = na.configType()
		if na.Optional || na.Computed {
			optional = append(optional, name)
		}
	}
	obj := cty.ObjectWithOptionalAttrs(atys, optional)
	switch o.Nesting {
	case NestingList:
		return cty.List(obj)
	case NestingSet:
		return cty.Set(obj)
	case NestingMap:
		return cty.Map(obj)
	default:
		return obj
	}
}

// ImpliedType is the type of an attribute with these nested attributes.
func (o *Object) ImpliedType() cty.Type {
	atys := make(map[string]cty.Type, len(o.Attributes))
	for name, a := range o.Attributes {
		atys[name] = a.ImpliedType()
	}
	obj := cty.Object(atys)
	switch o.Nesting {
	case NestingList:
		return cty.List(obj)
	case NestingSet:
		return cty.Set(obj)
	case NestingMap:
		return cty.Map(obj)
	default:
		return obj
	}
}

// ImpliedType is the type of the nested block type's value in its parent object.
func (nb *NestedBlock) ImpliedType() cty.Type {
	obj := nb.Block.ImpliedType()
	switch nb.Nesting {
	case NestingList:
		return cty.List(obj)
	case NestingSet:
		return cty.Set(obj)
	case NestingMap:
		return cty.Map(obj)
	default:
		return obj
	}
}

// SensitivePaths lists the paths of val (a value of the block's type) that the schema marks
// sensitive, in a stable order. Collections are walked, so a sensitive attribute inside a
// list block yields one path per element.
func (b *Block) SensitivePaths(val cty.Value) []cty.Path {
	var out []cty.Path
	b.sensitivePaths(val, nil, &out)
	return out
}

func (b *Block) sensitivePaths(val cty.Value, prefix cty.Path, out *[]cty.Path) {
	if b == nil || val.IsNull() || !val.IsKnown() {
		return
	}
	for _, name := range sortedKeys(b.Attributes) {
		a := b.Attributes[name]
		// The path is built only for an attribute that is or may hold one: most are neither.
		if a.Sensitive {
			*out = append(*out, append(prefix.Copy(), cty.GetAttrStep{Name: name}))
			continue
		}
		if a.NestedType != nil && val.Type().HasAttribute(name) {
			a.NestedType.sensitivePaths(val.GetAttr(name), append(prefix.Copy(), cty.GetAttrStep{Name: name}), out)
		}
	}
	for _, name := range sortedKeys(b.BlockTypes) {
		nb := b.BlockTypes[name]
		if !val.Type().HasAttribute(name) {
			continue
		}
		v := val.GetAttr(name)
		p := append(prefix.Copy(), cty.GetAttrStep{Name: name})
		switch nb.Nesting {
		case NestingSingle, NestingGroup:
			nb.Block.sensitivePaths(v, p, out)
		default:
			forEachElement(v, p, func(ev cty.Value, ep cty.Path) { nb.Block.sensitivePaths(ev, ep, out) })
		}
	}
}

func (o *Object) sensitivePaths(val cty.Value, prefix cty.Path, out *[]cty.Path) {
	each := func(v cty.Value, p cty.Path) {
		if v.IsNull() || !v.IsKnown() {
			return
		}
		for _, name := range sortedKeys(o.Attributes) {
			a := o.Attributes[name]
			if a.Sensitive {
				*out = append(*out, append(p.Copy(), cty.GetAttrStep{Name: name}))
			} else if a.NestedType != nil {
				a.NestedType.sensitivePaths(v.GetAttr(name), append(p.Copy(), cty.GetAttrStep{Name: name}), out)
			}
		}
	}
	if o.Nesting == NestingSingle {
		each(val, prefix)
		return
	}
	forEachElement(val, prefix, each)
}

// forEachElement calls fn for every element of a known, non-null collection with its path.
func forEachElement(v cty.Value, p cty.Path, fn func(cty.Value, cty.Path)) {
	if v.IsNull() || !v.IsKnown() || !v.CanIterateElements() {
		return
	}
	for it := v.ElementIterator(); it.Next(); {
		k, ev := it.Element()
		var step cty.PathStep
		if v.Type().IsSetType() {
			step = cty.IndexStep{Key: ev}
		} else {
			step = cty.IndexStep{Key: k}
		}
		fn(ev, append(p.Copy(), step))
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// pathString renders a cty path in Lava's dotted form: "tags.Owner", "rule[0].port".
func pathString(p cty.Path) string {
	s := ""
	for _, step := range p {
		switch st := step.(type) {
		case cty.GetAttrStep:
			if s != "" {
				s += "."
			}
			s += st.Name
		case cty.IndexStep:
			switch {
			case st.Key.IsNull() || !st.Key.IsKnown():
				s += "[?]"
			case st.Key.Type() == cty.String:
				s += fmt.Sprintf("[%q]", st.Key.AsString())
			case st.Key.Type() == cty.Number:
				s += "[" + st.Key.AsBigFloat().Text('f', -1) + "]"
			default:
				s += "[?]"
			}
		}
	}
	return s
}
