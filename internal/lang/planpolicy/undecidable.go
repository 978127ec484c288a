package planpolicy

import (
	"maps"
	"slices"

	"github.com/google/cel-go/common/types"
)

// Why a value of a change cannot be read by the rules ([Undecidable]).
const (
	// WhyUnknown: the plan does not know it; it is known only after the apply.
	WhyUnknown = "the value is known only after apply"
	// WhySensitive: the review body hides it.
	WhySensitive = "the value is sensitive"
)

// Undecidable is a value of a change the rules cannot read, for why: has() finds it, and any
// other use of it (a comparison, a method, a conversion) is an error, so a rule that reads it
// cannot decide and counts as matching. A value left out of `after` because it is known only
// after apply, or null because it is sensitive, let the plan's author pass a rule written as
// the documentation advises (`has(change.after.acl) && change.after.acl == ...`): the value
// was unknown or null at plan, and what it became was applied.
func Undecidable(why string) any { return types.NewErr("%s", why) }

// Overlay returns v, a change's before or after value (JSON-decoded), with every path that
// marks (its after_unknown, before_sensitive or after_sensitive structure) marks true
// replaced with [Undecidable](why), present even where v leaves it out. v is not modified.
func Overlay(v, marks any, why string) any {
	switch m := marks.(type) {
	case bool:
		if m {
			return Undecidable(why)
		}
	case map[string]any:
		obj, ok := v.(map[string]any)
		if !ok || !marked(m) {
			return v
		}
		out := maps.Clone(obj)
		for k, mk := range m {
			if marked(mk) {
				out[k] = Overlay(obj[k], mk, why)
			}
		}
		return out
	case []any:
		list, ok := v.([]any)
		if !ok || !marked(m) {
			return v
		}
		out := slices.Clone(list)
		for i, mk := range m {
			if i < len(out) && marked(mk) {
				out[i] = Overlay(out[i], mk, why)
			}
		}
		return out
	}
	return v
}

// marked reports whether a marks structure holds a true.
func marked(m any) bool {
	switch x := m.(type) {
	case bool:
		return x
	case map[string]any:
		for _, e := range x {
			if marked(e) {
				return true
			}
		}
	case []any:
		for _, e := range x {
			if marked(e) {
				return true
			}
		}
	}
	return false
}
