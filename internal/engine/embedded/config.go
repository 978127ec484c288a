package embedded

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
)

// Config is a parsed Terraform JSON configuration (the subset synth renders: provider, locals,
// resource, data, output).
type Config struct {
	// Providers maps "local" or "local.alias" to the provider's configuration body.
	Providers map[string]map[string]any
	// Resources are the managed resources and data sources, ordered by address.
	Resources []*ResourceConfig
	// Locals are the local values' expressions.
	Locals map[string]any
	// Outputs are the output values' expressions and sensitivity.
	Outputs map[string]OutputConfig
}

// OutputConfig is one output block.
type OutputConfig struct {
	Value     any
	Sensitive bool
}

// ResourceConfig is one resource or data block.
type ResourceConfig struct {
	// Mode is "managed" or "data".
	Mode       string
	Type, Name string
	// Body is the block's arguments and nested blocks, meta-arguments removed.
	Body map[string]any
	// Count and ForEach are the meta-arguments' expressions (nil when absent).
	Count, ForEach any
	// ProviderKey is the provider configuration it uses: "local" or "local.alias".
	ProviderKey string
	// DependsOn are explicit dependencies (configuration addresses).
	DependsOn []string
	// CreateBeforeDestroy is lifecycle.create_before_destroy.
	CreateBeforeDestroy bool
	// IgnoreChanges are top-level attribute names under lifecycle.ignore_changes ("*" = all).
	IgnoreChanges []string
	// refs are every reference in Body, Count and ForEach.
	refs []*ref
}

// Address is "type.name" or "data.type.name".
func (r *ResourceConfig) Address() string {
	if r.Mode == "data" {
		return "data." + r.Type + "." + r.Name
	}
	return r.Type + "." + r.Name
}

// ProviderLocalName is the provider's local name ("local" for "local.alias").
func (r *ResourceConfig) ProviderLocalName() string {
	n, _, _ := strings.Cut(r.ProviderKey, ".")
	return n
}

// decodeJSON decodes with numbers kept as text.
func decodeJSON(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var x any
	if err := dec.Decode(&x); err != nil {
		return nil, err
	}
	return fixNumbers(x), nil
}

func fixNumbers(x any) any {
	switch t := x.(type) {
	case json.Number:
		return numberText(t)
	case []any:
		for i := range t {
			t[i] = fixNumbers(t[i])
		}
	case map[string]any:
		for k := range t {
			t[k] = fixNumbers(t[k])
		}
	}
	return x
}

// ParseConfig parses rendered Terraform JSON. Unknown top-level keys other than "terraform"
// (which engines add themselves) are errors, as are variable and module blocks.
func ParseConfig(rendered []byte) (*Config, error) {
	x, err := decodeJSON(rendered)
	if err != nil {
		return nil, fmt.Errorf("parse terraform json: %w", err)
	}
	doc, ok := x.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("parse terraform json: top level is not an object")
	}
	cfg := &Config{Providers: map[string]map[string]any{}, Locals: map[string]any{}, Outputs: map[string]OutputConfig{}}
	for _, key := range sortedKeys(doc) {
		val := doc[key]
		switch key {
		case "terraform":
		case "provider":
			if err := cfg.parseProviders(val); err != nil {
				return nil, err
			}
		case "locals":
			for _, l := range asObjects(val) {
				for k, v := range l {
					cfg.Locals[k] = v
				}
			}
		case "resource", "data":
			mode := "managed"
			if key == "data" {
				mode = "data"
			}
			if err := cfg.parseResources(mode, val); err != nil {
				return nil, err
			}
		case "output":
			for _, o := range asObjects(val) {
				for name, body := range o {
					ob, _ := body.(map[string]any)
					if ob == nil {
						return nil, fmt.Errorf("output %q: not an object", name)
					}
					sens, _ := ob["sensitive"].(bool)
					cfg.Outputs[name] = OutputConfig{Value: ob["value"], Sensitive: sens}
				}
			}
		default:
			return nil, fmt.Errorf("parse terraform json: %q blocks are not supported by the embedded engine", key)
		}
	}
	sort.Slice(cfg.Resources, func(i, j int) bool { return cfg.Resources[i].Address() < cfg.Resources[j].Address() })
	return cfg, nil
}

// asObjects accepts an object or an array of objects (Terraform JSON allows both).
func asObjects(x any) []map[string]any {
	switch t := x.(type) {
	case map[string]any:
		return []map[string]any{t}
	case []any:
		var out []map[string]any
		for _, e := range t {
			if m, ok := e.(map[string]any); ok {
				out = append(out, m)
			}
		}
		return out
	}
	return nil
}

func (c *Config) parseProviders(val any) error {
	for _, obj := range asObjects(val) {
		for name, body := range obj {
			for _, b := range asObjects(body) {
				key := name
				if alias, ok := b["alias"].(string); ok && alias != "" {
					key = name + "." + alias
				}
				clean := map[string]any{}
				for k, v := range b {
					if k != "alias" && k != "version" {
						clean[k] = v
					}
				}
				if _, dup := c.Providers[key]; dup {
					return fmt.Errorf("provider %q configured twice", key)
				}
				c.Providers[key] = clean
			}
		}
	}
	return nil
}

func (c *Config) parseResources(mode string, val any) error {
	for _, obj := range asObjects(val) {
		for typ, byName := range obj {
			for _, names := range asObjects(byName) {
				for name, body := range names {
					bodies := asObjects(body)
					if len(bodies) != 1 {
						return fmt.Errorf("%s.%s: want one object", typ, name)
					}
					rc, err := parseResource(mode, typ, name, bodies[0])
					if err != nil {
						return err
					}
					c.Resources = append(c.Resources, rc)
				}
			}
		}
	}
	return nil
}

// validName reports whether s is a valid Terraform identifier (type or resource name).
func validName(s string) bool {
	if s == "" || !isIdentStart(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if !isIdentChar(s[i]) {
			return false
		}
	}
	return true
}

func parseResource(mode, typ, name string, body map[string]any) (*ResourceConfig, error) {
	rc := &ResourceConfig{Mode: mode, Type: typ, Name: name, Body: map[string]any{}}
	if !validName(typ) || !validName(name) {
		return nil, fmt.Errorf("%s: invalid resource address: a type and name start with a letter or underscore and hold only letters, digits, underscores and dashes", rc.Address())
	}
	prov, _, _ := strings.Cut(typ, "_")
	rc.ProviderKey = prov
	for k, v := range body {
		switch k {
		case "count":
			rc.Count = v
		case "for_each":
			rc.ForEach = v
		case "provider":
			s, ok := v.(string)
			if !ok {
				return nil, fmt.Errorf("%s: provider must be a string", rc.Address())
			}
			rc.ProviderKey = strings.TrimSuffix(strings.TrimPrefix(s, "${"), "}")
		case "depends_on":
			list, _ := v.([]any)
			for _, d := range list {
				s, _ := d.(string)
				rc.DependsOn = append(rc.DependsOn, strings.TrimSuffix(strings.TrimPrefix(s, "${"), "}"))
			}
		case "lifecycle":
			for _, lc := range asObjects(v) {
				if cbd, ok := lc["create_before_destroy"].(bool); ok {
					rc.CreateBeforeDestroy = cbd
				}
				switch ic := lc["ignore_changes"].(type) {
				case string:
					if ic == "all" || ic == "${all}" {
						rc.IgnoreChanges = []string{"*"}
					}
				case []any:
					for _, e := range ic {
						if s, ok := e.(string); ok {
							rc.IgnoreChanges = append(rc.IgnoreChanges, strings.TrimSuffix(strings.TrimPrefix(s, "${"), "}"))
						}
					}
				}
			}
		case "//":
			// A comment, as Terraform's JSON syntax allows.
		case "connection", "provisioner":
			return nil, fmt.Errorf("%s: %s blocks are not supported by the embedded engine", rc.Address(), k)
		default:
			rc.Body[k] = v
		}
	}
	if rc.Count != nil && rc.ForEach != nil {
		return nil, fmt.Errorf("%s: count and for_each cannot both be set", rc.Address())
	}
	for _, x := range []any{rc.Body, rc.Count, rc.ForEach} {
		refs, err := collectRefs(x)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", rc.Address(), err)
		}
		rc.refs = append(rc.refs, refs...)
	}
	return rc, nil
}

// decodeBlock turns a block body into a value of the block's implied type, evaluating
// expressions in sc. Absent attributes are null; absent list, set and map blocks are empty.
func decodeBlock(b *Block, body map[string]any, sc scope, where string) (cty.Value, error) {
	vals := make(map[string]cty.Value, len(b.Attributes)+len(b.BlockTypes))
	for k := range body {
		_, isAttr := b.Attributes[k]
		_, isBlock := b.BlockTypes[k]
		if !isAttr && !isBlock {
			return cty.NilVal, fmt.Errorf("%s: unsupported argument %q", where, k)
		}
	}
	for name, a := range b.Attributes {
		ty := a.ImpliedType()
		x, ok := body[name]
		if !ok || x == nil {
			vals[name] = cty.NullVal(ty)
			continue
		}
		v, err := evalJSON(x, sc)
		if err != nil {
			return cty.NilVal, fmt.Errorf("%s.%s: %w", where, name, err)
		}
		cv, err := convert.Convert(v, a.configType())
		if err == nil && !cv.Type().Equals(ty) {
			cv, err = convert.Convert(cv, ty)
		}
		if err != nil {
			return cty.NilVal, fmt.Errorf("%s.%s: want %s: %w", where, name, ty.FriendlyName(), err)
		}
		vals[name] = cv
	}
	for name, nb := range b.BlockTypes {
		v, err := decodeNested(nb, body[name], sc, where+"."+name)
		if err != nil {
			return cty.NilVal, err
		}
		vals[name] = v
	}
	return cty.ObjectVal(vals), nil
}

func decodeNested(nb *NestedBlock, x any, sc scope, where string) (cty.Value, error) {
	ety := nb.Block.ImpliedType()
	items := asObjects(x)
	switch nb.Nesting {
	case NestingSingle, NestingGroup:
		if len(items) > 1 {
			return cty.NilVal, fmt.Errorf("%s: at most one block allowed", where)
		}
		if len(items) == 0 {
			if nb.Nesting == NestingGroup {
				return decodeBlock(&nb.Block, map[string]any{}, sc, where)
			}
			return cty.NullVal(ety), nil
		}
		return decodeBlock(&nb.Block, items[0], sc, where)
	case NestingList, NestingSet:
		var vals []cty.Value
		for i, it := range items {
			v, err := decodeBlock(&nb.Block, it, sc, fmt.Sprintf("%s[%d]", where, i))
			if err != nil {
				return cty.NilVal, err
			}
			vals = append(vals, v)
		}
		if nb.Nesting == NestingList {
			if len(vals) == 0 {
				return cty.ListValEmpty(ety), nil
			}
			return cty.ListVal(vals), nil
		}
		if len(vals) == 0 {
			return cty.SetValEmpty(ety), nil
		}
		return cty.SetVal(vals), nil
	case NestingMap:
		vals := map[string]cty.Value{}
		for _, it := range items {
			for label, inner := range it {
				body, ok := inner.(map[string]any)
				if !ok {
					return cty.NilVal, fmt.Errorf("%s[%q]: not an object", where, label)
				}
				v, err := decodeBlock(&nb.Block, body, sc, fmt.Sprintf("%s[%q]", where, label))
				if err != nil {
					return cty.NilVal, err
				}
				vals[label] = v
			}
		}
		if len(vals) == 0 {
			return cty.MapValEmpty(ety), nil
		}
		return cty.MapVal(vals), nil
	}
	return cty.NilVal, fmt.Errorf("%s: unsupported nesting mode %d", where, nb.Nesting)
}
