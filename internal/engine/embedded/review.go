package embedded

import (
	"encoding/json"
	"fmt"
	"slices"

	tfjson "github.com/hashicorp/terraform-json"
	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"
)

// reviewPlan is p in the JSON plan format of `tofu show -json` (terraform-json's Plan): one
// resource change per instance, as [summarize] lists them (no-ops included, data sources only
// when read at apply, forgotten instances left out), with before and after values, after_unknown
// for values known only after apply and before_sensitive/after_sensitive from the schema's
// sensitive attributes. engine.ReviewBody masks it.
func reviewPlan(p *Plan) (*tfjson.Plan, error) {
	out := &tfjson.Plan{FormatVersion: "1.2", TerraformVersion: TerraformVersion}
	for _, c := range p.Changes {
		if c.Action == Forget || (c.Mode == "data" && c.Action != Read) {
			continue
		}
		before, err := reviewValue(c.Prior)
		if err != nil {
			return nil, fmt.Errorf("review %s: %w", c.Addr, err)
		}
		after, err := reviewValue(c.Planned)
		if err != nil {
			return nil, fmt.Errorf("review %s: %w", c.Addr, err)
		}
		// Before is sensitive where the prior object was when written (its state's
		// sensitive_attributes), after where the planned one is; before keeps the planned
		// paths too, so nothing sensitive now shows in the old value either.
		ch := &tfjson.Change{Actions: reviewActions(c), Before: before, After: after, AfterUnknown: unknownStructure(c.Planned),
			BeforeSensitive: sensitiveStructure(append(slices.Clone(c.PriorSensitive), c.Sensitive...)),
			AfterSensitive:  sensitiveStructure(c.Sensitive)}
		for _, rp := range c.ReplacePaths {
			ch.ReplacePaths = append(ch.ReplacePaths, []any{rp})
		}
		out.ResourceChanges = append(out.ResourceChanges, &tfjson.ResourceChange{Address: c.Addr, ModuleAddress: c.Module, Mode: tfjson.ResourceMode(c.Mode),
			Type: c.Type, Name: c.Name, Index: c.Key, ProviderName: c.Provider, DeposedKey: c.Deposed, Change: ch})
	}
	return out, nil
}

// reviewActions is c's action as terraform-json's action list.
func reviewActions(c *Change) tfjson.Actions {
	switch c.Action {
	case Create:
		return tfjson.Actions{tfjson.ActionCreate}
	case Update:
		return tfjson.Actions{tfjson.ActionUpdate}
	case Delete:
		return tfjson.Actions{tfjson.ActionDelete}
	case Replace:
		if c.CreateBeforeDestroy {
			return tfjson.Actions{tfjson.ActionCreate, tfjson.ActionDelete}
		}
		return tfjson.Actions{tfjson.ActionDelete, tfjson.ActionCreate}
	case Read:
		return tfjson.Actions{tfjson.ActionRead}
	}
	return tfjson.Actions{tfjson.ActionNoop}
}

// reviewValue is v as a generic JSON value, unknowns as null (after_unknown says where);
// nil for a null or missing value.
func reviewValue(v cty.Value) (any, error) {
	if v == cty.NilVal || v.IsNull() {
		return nil, nil
	}
	v, _ = v.UnmarkDeep()
	v = cty.UnknownAsNull(v)
	b, err := ctyjson.Marshal(v, v.Type())
	if err != nil {
		return nil, err
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// unknownStructure is after_unknown of v: true for an unknown value, an object or array of
// the same shape for a known collection (only true leaves kept in objects), false otherwise.
func unknownStructure(v cty.Value) any {
	if v == cty.NilVal || v.IsNull() {
		return false
	}
	if !v.IsKnown() {
		return true
	}
	ty := v.Type()
	switch {
	case ty.IsObjectType() || ty.IsMapType():
		out := map[string]any{}
		for it := v.ElementIterator(); it.Next(); {
			k, e := it.Element()
			if u := unknownStructure(e); u != false {
				out[k.AsString()] = u
			}
		}
		return out
	case ty.IsListType() || ty.IsTupleType() || ty.IsSetType():
		out := []any{}
		for it := v.ElementIterator(); it.Next(); {
			_, e := it.Element()
			out = append(out, unknownStructure(e))
		}
		return out
	}
	return false
}

// sensitiveStructure is before_sensitive/after_sensitive of the sensitive paths: nested
// objects down to each path's attribute (or map key), true there. A path through a list or
// set element marks its whole collection attribute sensitive, which hides more, never less.
func sensitiveStructure(paths []cty.Path) any {
	out := map[string]any{}
	for _, p := range paths {
		cur := out
		for i, step := range p {
			var key string
			switch s := step.(type) {
			case cty.GetAttrStep:
				key = s.Name
			case cty.IndexStep:
				if s.Key.Type() != cty.String || !s.Key.IsKnown() || s.Key.IsNull() {
					key = ""
				} else {
					key = s.Key.AsString()
				}
			}
			last := i == len(p)-1
			if key == "" || last || (i+1 < len(p) && !isKeyStep(p[i+1])) {
				if key != "" {
					cur[key] = true
				}
				break
			}
			next, ok := cur[key].(map[string]any)
			if !ok {
				if cur[key] == true {
					break
				}
				next = map[string]any{}
				cur[key] = next
			}
			cur = next
		}
	}
	return out
}

// isKeyStep reports whether a path step names an attribute or a map key.
func isKeyStep(s cty.PathStep) bool {
	switch s := s.(type) {
	case cty.GetAttrStep:
		return true
	case cty.IndexStep:
		return s.Key.Type() == cty.String
	}
	return false
}
