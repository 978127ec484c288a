package embedded

import (
	"github.com/zclconf/go-cty/cty"
)

// proposedNew is the proposed new state Terraform core gives PlanResourceChange: the
// configuration, with the prior value kept for every computed attribute the configuration
// leaves null, recursively through nested blocks (correlated by index for lists, by key for
// maps, by equal non-computed attributes for sets). A null prior stands for a create.
func proposedNew(b *Block, prior, config cty.Value) cty.Value {
	if config.IsNull() && prior.IsNull() {
		return prior
	}
	if prior.IsNull() {
		prior = allNull(b)
	}
	return proposedNewBlock(b, prior, config)
}

func allNull(b *Block) cty.Value {
	vals := map[string]cty.Value{}
	for name, a := range b.Attributes {
		vals[name] = cty.NullVal(a.ImpliedType())
	}
	for name, nb := range b.BlockTypes {
		vals[name] = cty.NullVal(nb.ImpliedType())
	}
	return cty.ObjectVal(vals)
}

func proposedNewBlock(b *Block, prior, config cty.Value) cty.Value {
	if config.IsNull() || !config.IsKnown() {
		return prior
	}
	vals := proposedNewAttrs(b.Attributes, prior, config)
	for name, nb := range b.BlockTypes {
		vals[name] = proposedNewNested(nb, prior.GetAttr(name), config.GetAttr(name))
	}
	return cty.ObjectVal(vals)
}

func proposedNewAttrs(attrs map[string]*Attribute, prior, config cty.Value) map[string]cty.Value {
	vals := make(map[string]cty.Value, len(attrs))
	for name, a := range attrs {
		var priorV cty.Value
		if prior.IsNull() || !prior.IsKnown() {
			priorV = cty.NullVal(a.ImpliedType())
		} else {
			priorV = prior.GetAttr(name)
		}
		configV := config.GetAttr(name)
		switch {
		case a.WriteOnly:
			vals[name] = cty.NullVal(a.ImpliedType())
		case !a.Computed:
			vals[name] = configV
		case configV.IsNull():
			vals[name] = priorV
		case a.NestedType != nil && a.NestedType.Nesting == NestingSingle && priorV.IsKnown() && !priorV.IsNull() && configV.IsKnown():
			vals[name] = cty.ObjectVal(proposedNewAttrs(a.NestedType.Attributes, priorV, configV))
		default:
			vals[name] = configV
		}
	}
	return vals
}

func proposedNewNested(nb *NestedBlock, prior, config cty.Value) cty.Value {
	switch nb.Nesting {
	case NestingSingle, NestingGroup:
		if config.IsNull() {
			return config
		}
		if prior.IsNull() || !prior.IsKnown() {
			prior = allNull(&nb.Block)
		}
		return proposedNewBlock(&nb.Block, prior, config)
	case NestingList:
		if !config.IsKnown() || config.IsNull() || config.LengthInt() == 0 {
			return config
		}
		var out []cty.Value
		for it := config.ElementIterator(); it.Next(); {
			idx, cv := it.Element()
			if prior.IsKnown() && !prior.IsNull() && prior.HasIndex(idx).True() {
				out = append(out, proposedNewBlock(&nb.Block, prior.Index(idx), cv))
			} else {
				out = append(out, proposedNewBlock(&nb.Block, allNull(&nb.Block), cv))
			}
		}
		return cty.ListVal(out)
	case NestingMap:
		if !config.IsKnown() || config.IsNull() || config.LengthInt() == 0 {
			return config
		}
		out := map[string]cty.Value{}
		for it := config.ElementIterator(); it.Next(); {
			k, cv := it.Element()
			if prior.IsKnown() && !prior.IsNull() && prior.HasIndex(k).True() {
				out[k.AsString()] = proposedNewBlock(&nb.Block, prior.Index(k), cv)
			} else {
				out[k.AsString()] = proposedNewBlock(&nb.Block, allNull(&nb.Block), cv)
			}
		}
		return cty.MapVal(out)
	case NestingSet:
		if !config.IsKnown() || config.IsNull() || config.LengthInt() == 0 {
			return config
		}
		var priors []cty.Value
		if prior.IsKnown() && !prior.IsNull() {
			priors = prior.AsValueSlice()
		}
		used := make([]bool, len(priors))
		var out []cty.Value
		for it := config.ElementIterator(); it.Next(); {
			_, cv := it.Element()
			match := cty.NilVal
			for i, pv := range priors {
				if !used[i] && sameConfigured(&nb.Block, pv, cv) {
					used[i], match = true, pv
					break
				}
			}
			if match == cty.NilVal {
				match = allNull(&nb.Block)
			}
			out = append(out, proposedNewBlock(&nb.Block, match, cv))
		}
		return cty.SetVal(out)
	}
	return config
}

// sameConfigured reports whether a prior set element corresponds to a configured one: every
// non-computed attribute is equal.
func sameConfigured(b *Block, prior, config cty.Value) bool {
	if !prior.IsKnown() || prior.IsNull() || !config.IsKnown() || config.IsNull() {
		return false
	}
	for name, a := range b.Attributes {
		if a.Computed {
			continue
		}
		eq := prior.GetAttr(name).Equals(config.GetAttr(name))
		if !eq.IsKnown() || eq.False() {
			return false
		}
	}
	return true
}

// applyIgnoreChanges replaces the ignored paths of config (lifecycle.ignore_changes) by
// their prior values; with all, config becomes prior. A path absent from prior keeps the
// configured value.
func applyIgnoreChanges(rc *ResourceConfig, prior, config cty.Value) cty.Value {
	if (!rc.IgnoreAll && len(rc.IgnoreChanges) == 0) || prior.IsNull() || !prior.IsKnown() || config.IsNull() {
		return config
	}
	if rc.IgnoreAll {
		return prior
	}
	out, err := cty.Transform(config, func(path cty.Path, v cty.Value) (cty.Value, error) {
		for _, p := range rc.IgnoreChanges {
			if !path.Equals(p) {
				continue
			}
			if pv, err := p.Apply(prior); err == nil && pv.Type().Equals(v.Type()) {
				return pv, nil
			}
		}
		return v, nil
	})
	if err != nil {
		return config
	}
	return out
}

// changedReplacePaths keeps the requires-replace paths whose value differs between prior and
// planned (an unknown planned value counts as different).
func changedReplacePaths(paths []cty.Path, prior, planned cty.Value) []cty.Path {
	var out []cty.Path
	for _, p := range paths {
		pv, perr := p.Apply(prior)
		nv, nerr := p.Apply(planned)
		if perr != nil && nerr != nil {
			continue
		}
		if perr != nil || nerr != nil {
			out = append(out, p)
			continue
		}
		eq := pv.Equals(nv)
		if !eq.IsKnown() || eq.False() {
			out = append(out, p)
		}
	}
	return out
}

// valuesEqual reports whether two values are equal and wholly known.
func valuesEqual(a, b cty.Value) bool {
	if a.RawEquals(b) {
		// Identical values (the usual case of an unchanged object) are equal when known;
		// Equals decides the rest (numbers of equal value written differently, say).
		return a.IsWhollyKnown()
	}
	eq := a.Equals(b)
	return eq.IsKnown() && eq.True()
}
