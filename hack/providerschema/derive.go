package main

import (
	"maps"
	"regexp"
	"slices"
	"strings"
	"unicode"
)

// assemblyDoc is the part of a jsii assembly the derivation reads.
type assemblyDoc struct {
	Name  string               `json:"name"`
	Types map[string]*jsiiType `json:"types"`
}

type jsiiType struct {
	Kind        string          `json:"kind"`
	Base        string          `json:"base"`
	Datatype    bool            `json:"datatype"`
	Docs        jsiiDocs        `json:"docs"`
	Initializer *jsiiCallable   `json:"initializer"`
	Properties  []*jsiiProperty `json:"properties"`
}

type jsiiDocs struct {
	Summary string `json:"summary"`
	Remarks string `json:"remarks"`
}

type jsiiCallable struct {
	Parameters []struct {
		Name string  `json:"name"`
		Type typeRef `json:"type"`
	} `json:"parameters"`
}

type jsiiProperty struct {
	Name     string   `json:"name"`
	Optional bool     `json:"optional"`
	Static   bool     `json:"static"`
	Docs     jsiiDocs `json:"docs"`
	Type     typeRef  `json:"type"`
}

// typeRef is a jsii type reference: a primitive, a named type, a collection or a union.
type typeRef struct {
	Primitive  string `json:"primitive,omitempty"`
	FQN        string `json:"fqn,omitempty"`
	Collection *struct {
		Kind        string  `json:"kind"`
		ElementType typeRef `json:"elementtype"`
	} `json:"collection,omitempty"`
	Union *struct {
		Types []typeRef `json:"types"`
	} `json:"union,omitempty"`
}

// Output shapes: a subset of `tofu providers schema -json`, plus a "lava" record of where it
// came from and every type name.

type schemaDoc struct {
	FormatVersion   string                     `json:"format_version"`
	Lava            lavaMeta                   `json:"lava"`
	ProviderSchemas map[string]*providerSchema `json:"provider_schemas"`
}

type lavaMeta struct {
	Package         string   `json:"package"`
	PackageVersion  string   `json:"package_version"`
	ProviderVersion string   `json:"provider_version"`
	ResourceTypes   []string `json:"resource_types"`
	DataSourceTypes []string `json:"data_source_types"`
}

type providerSchema struct {
	Provider          *schema            `json:"provider,omitempty"`
	ResourceSchemas   map[string]*schema `json:"resource_schemas"`
	DataSourceSchemas map[string]*schema `json:"data_source_schemas"`
}

type schema struct {
	Version int    `json:"version"`
	Block   *block `json:"block"`
}

type block struct {
	Attributes map[string]*attribute `json:"attributes,omitempty"`
	BlockTypes map[string]*blockType `json:"block_types,omitempty"`
}

type attribute struct {
	Type       any         `json:"type,omitempty"`
	NestedType *nestedType `json:"nested_type,omitempty"`
	Required   bool        `json:"required,omitempty"`
	Optional   bool        `json:"optional,omitempty"`
}

type nestedType struct {
	Attributes  map[string]*attribute `json:"attributes"`
	NestingMode string                `json:"nesting_mode"`
}

type blockType struct {
	NestingMode string `json:"nesting_mode"`
	Block       *block `json:"block"`
	MinItems    int    `json:"min_items,omitempty"`
	MaxItems    int    `json:"max_items,omitempty"`
}

const (
	baseResource   = "cdktf.TerraformResource"
	baseDataSource = "cdktf.TerraformDataSource"
	baseProvider   = "cdktf.TerraformProvider"
	resolvable     = "cdktf.IResolvable"
)

var (
	linkName   = regexp.MustCompile(`\{@link \S+ ([A-Za-z0-9_]+)\}`)
	anchorName = regexp.MustCompile(`Docs at Terraform Registry: \{@link \S+#([A-Za-z0-9_]+) `)
	blockDoc   = regexp.MustCompile(`^[A-Za-z0-9_]+ block\.$`)
)

// derive builds the schema document of asm for the types want selects (all when nil); it
// returns the document and the selected types the assembly lacks.
func derive(asm *assemblyDoc, meta packageMeta, want *selection) (*schemaDoc, []string) {
	ps := &providerSchema{ResourceSchemas: map[string]*schema{}, DataSourceSchemas: map[string]*schema{}}
	doc := &schemaDoc{
		FormatVersion: "1.0",
		Lava: lavaMeta{Package: meta.Name, PackageVersion: meta.Version, ProviderVersion: meta.CDKTF.Provider.Version,
			ResourceTypes: []string{}, DataSourceTypes: []string{}},
		ProviderSchemas: map[string]*providerSchema{meta.CDKTF.Provider.Name: ps},
	}
	d := &deriver{types: asm.Types}
	for _, fqn := range slices.Sorted(maps.Keys(asm.Types)) {
		t := asm.Types[fqn]
		if t.Kind != "class" {
			continue
		}
		name := ""
		if m := linkName.FindStringSubmatch(t.Docs.Summary); m != nil {
			name = m[1]
		}
		switch t.Base {
		case baseResource:
			doc.Lava.ResourceTypes = append(doc.Lava.ResourceTypes, name)
			if want == nil || want.resources[name] {
				ps.ResourceSchemas[name] = &schema{Block: d.config(t)}
			}
		case baseDataSource:
			doc.Lava.DataSourceTypes = append(doc.Lava.DataSourceTypes, name)
			if want == nil || want.data[name] {
				ps.DataSourceSchemas[name] = &schema{Block: d.config(t)}
			}
		case baseProvider:
			if want == nil || want.provider {
				ps.Provider = &schema{Block: d.config(t)}
			}
		}
	}
	slices.Sort(doc.Lava.ResourceTypes)
	slices.Sort(doc.Lava.DataSourceTypes)
	var missing []string
	if want != nil {
		for _, line := range want.order {
			kind, name, _ := strings.Cut(line, " ")
			name = strings.TrimSpace(name)
			if (kind == "resource" && ps.ResourceSchemas[name] == nil) ||
				(kind == "data" && ps.DataSourceSchemas[name] == nil) ||
				(kind == "provider" && ps.Provider == nil) {
				missing = append(missing, line)
			}
		}
	}
	return doc, missing
}

// deriver turns datatype interfaces into blocks, guarding against recursive types.
type deriver struct {
	types map[string]*jsiiType
	stack []string
}

// config is the block of a resource, data source or provider class: its initializer's
// "config" parameter's datatype.
func (d *deriver) config(t *jsiiType) *block {
	if t.Initializer != nil {
		for _, p := range t.Initializer.Parameters {
			if p.Name == "config" && p.Type.FQN != "" {
				return d.block(p.Type.FQN)
			}
		}
	}
	return &block{}
}

// block derives the block of the datatype fqn (empty for an unknown or recursive one).
func (d *deriver) block(fqn string) *block {
	b := &block{Attributes: map[string]*attribute{}, BlockTypes: map[string]*blockType{}}
	t := d.types[fqn]
	if t == nil || slices.Contains(d.stack, fqn) {
		return b
	}
	d.stack = append(d.stack, fqn)
	defer func() { d.stack = d.stack[:len(d.stack)-1] }()
	for _, p := range t.Properties {
		if p.Static {
			continue
		}
		name := propertyName(p)
		if name == "alias" && t.Kind == "interface" && strings.HasSuffix(fqn, "ProviderConfig") {
			continue // the provider meta-argument, not a schema attribute
		}
		if elem, mode, ok := d.nested(p.Type); ok {
			if blockDoc.MatchString(p.Docs.Summary) {
				bt := &blockType{NestingMode: "list", Block: d.block(elem)}
				if mode == "single" {
					bt.MaxItems = 1
				}
				if !p.Optional {
					bt.MinItems = 1
				}
				b.BlockTypes[name] = bt
				continue
			}
			inner := d.block(elem)
			b.Attributes[name] = &attribute{NestedType: &nestedType{Attributes: inner.Attributes, NestingMode: mode},
				Required: !p.Optional, Optional: p.Optional}
			continue
		}
		b.Attributes[name] = &attribute{Type: ctyType(p.Type), Required: !p.Optional, Optional: p.Optional}
	}
	return b
}

// nested reports whether r is a datatype of this assembly, an array or a map of one (possibly
// in a union with IResolvable), with the element's fqn and the nesting mode.
func (d *deriver) nested(r typeRef) (string, string, bool) {
	r = unresolvable(r)
	if r.FQN != "" {
		if t := d.types[r.FQN]; t != nil && t.Datatype {
			return r.FQN, "single", true
		}
		return "", "", false
	}
	if r.Collection != nil {
		e := unresolvable(r.Collection.ElementType)
		if t := d.types[e.FQN]; e.FQN != "" && t != nil && t.Datatype {
			if r.Collection.Kind == "map" {
				return e.FQN, "map", true
			}
			return e.FQN, "list", true
		}
	}
	return "", "", false
}

// unresolvable drops cdktf.IResolvable from a two-member union.
func unresolvable(r typeRef) typeRef {
	if r.Union == nil {
		return r
	}
	var rest []typeRef
	for _, u := range r.Union.Types {
		if u.FQN != resolvable {
			rest = append(rest, u)
		}
	}
	if len(rest) == 1 {
		return rest[0]
	}
	return r
}

// ctyType is the cty type JSON of an attribute's jsii type ("dynamic" when not derivable).
func ctyType(r typeRef) any {
	r = unresolvable(r)
	switch {
	case r.Primitive == "string":
		return "string"
	case r.Primitive == "number":
		return "number"
	case r.Primitive == "boolean":
		return "bool"
	case r.Collection != nil && r.Collection.Kind == "array":
		return []any{"list", ctyType(r.Collection.ElementType)}
	case r.Collection != nil && r.Collection.Kind == "map":
		elem := ctyType(r.Collection.ElementType)
		if elem == "dynamic" {
			return "dynamic"
		}
		return []any{"map", elem}
	}
	return "dynamic"
}

// propertyName is the Terraform name of p: the anchor of its registry docs link, else its
// camelCase name in snake_case.
func propertyName(p *jsiiProperty) string {
	if m := anchorName.FindStringSubmatch(p.Docs.Remarks); m != nil {
		return m[1]
	}
	if m := anchorName.FindStringSubmatch(p.Docs.Summary); m != nil {
		return m[1]
	}
	var sb strings.Builder
	for i, r := range p.Name {
		if unicode.IsUpper(r) {
			if i > 0 {
				sb.WriteByte('_')
			}
			r = unicode.ToLower(r)
		}
		sb.WriteRune(r)
	}
	return sb.String()
}
