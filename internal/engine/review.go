package engine

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	tfjson "github.com/hashicorp/terraform-json"
)

// MaxReviewBytes bounds a review body read back from the artifact store (`lava plan show`, the
// applier's plan rules), in bytes.
const MaxReviewBytes = 64 << 20

// ReviewBody is the reviewable body of a plan, what `lava plan show` prints and
// [PlanRecord.ReviewDigest] names in the artifact store: p in the JSON format of `tofu show
// -json` (terraform-json's Plan), reduced to format_version, terraform_version and
// resource_changes (variables, outputs, prior state and configuration are left out: they can
// hold values a reviewer must not see, and add nothing to the actions), with every value the
// plan marks sensitive (before_sensitive, after_sensitive) removed, and every string that
// contains one of redact (the values of the Secrets the object binds; shorter than 4 bytes
// ignored) removed and marked sensitive. The output is canonical (sorted keys), so the same
// plan always gives the same bytes.
func ReviewBody(p *tfjson.Plan, redact []string) ([]byte, error) {
	secrets := slices.DeleteFunc(slices.Clone(redact), func(s string) bool { return len(s) < 4 })
	secret := func(s string) bool {
		for _, v := range secrets {
			if strings.Contains(s, v) {
				return true
			}
		}
		return false
	}
	out := &tfjson.Plan{FormatVersion: p.FormatVersion, TerraformVersion: p.TerraformVersion}
	if out.FormatVersion == "" {
		out.FormatVersion = "1.2"
	}
	for _, rc := range p.ResourceChanges {
		if rc == nil || rc.Change == nil {
			continue
		}
		c := *rc.Change
		c.Before, c.BeforeSensitive = mask(c.Before, c.BeforeSensitive, secret)
		c.After, c.AfterSensitive = mask(c.After, c.AfterSensitive, secret)
		// after_unknown and replace_paths follow the value's structure, map keys included:
		// under a sensitive value (a map keyed by a value derived from a Secret) they keep no
		// keys (otherwise a Secret-derived map key would be readable in after_unknown).
		c.AfterUnknown = ReplaceSensitive(c.AfterUnknown, c.AfterSensitive, AnyUnknown)
		c.ReplacePaths = truncatePaths(c.ReplacePaths, c.BeforeSensitive, c.AfterSensitive)
		c.Importing, c.GeneratedConfig = nil, ""
		r := &tfjson.ResourceChange{Address: rc.Address, PreviousAddress: rc.PreviousAddress, ModuleAddress: rc.ModuleAddress,
			Mode: rc.Mode, Type: rc.Type, Name: rc.Name, Index: rc.Index, ProviderName: rc.ProviderName,
			DeposedKey: rc.DeposedKey, Change: &c, ActionReason: rc.ActionReason}
		out.ResourceChanges = append(out.ResourceChanges, r)
	}
	sort.SliceStable(out.ResourceChanges, func(i, j int) bool { return out.ResourceChanges[i].Address < out.ResourceChanges[j].Address })
	b, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("review body: %w", err)
	}
	// Through a generic value once more: encoding/json sorts map keys, so the bytes are
	// canonical whatever order the values were built in.
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("review body: %w", err)
	}
	return json.Marshal(v)
}

// ParseReviewBody decodes a [ReviewBody].
func ParseReviewBody(b []byte) (*tfjson.Plan, error) {
	p := &tfjson.Plan{}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(p); err != nil {
		return nil, fmt.Errorf("review body: %w", err)
	}
	return p, nil
}

// mask removes from v every value sens marks sensitive (true, or true at a path of nested
// objects and arrays) and every string secret reports, and returns the masked value with the
// sensitivity structure extended by the strings it removed.
func mask(v, sens any, secret func(string) bool) (any, any) {
	if b, ok := sens.(bool); ok && b {
		return nil, true
	}
	switch x := v.(type) {
	case map[string]any:
		sm, _ := sens.(map[string]any)
		out, outSens := map[string]any{}, map[string]any{}
		for k, e := range x {
			mv, ms := mask(e, sm[k], secret)
			out[k] = mv
			if ms != nil && ms != false {
				outSens[k] = ms
			}
		}
		return out, outSens
	case []any:
		sl, _ := sens.([]any)
		out, outSens := make([]any, len(x)), make([]any, len(x))
		for i, e := range x {
			var si any
			if i < len(sl) {
				si = sl[i]
			}
			out[i], outSens[i] = mask(e, si, secret)
			if outSens[i] == nil {
				outSens[i] = false
			}
		}
		return out, outSens
	case string:
		if secret(x) {
			return nil, true
		}
	}
	if b, ok := sens.(bool); ok && !b {
		return v, false
	}
	return v, sens
}

// ReplaceSensitive returns v, a JSON value of a plan (a value, or its after_unknown
// structure), with each part that the sensitivity structure sens (terraform-json's
// before_sensitive/after_sensitive: true, or objects and arrays of them) marks sensitive
// replaced by leaf(part), so nothing inside it (a map's keys included) stays in the result.
func ReplaceSensitive(v, sens any, leaf func(any) any) any {
	if b, ok := sens.(bool); ok && b {
		return leaf(v)
	}
	switch x := v.(type) {
	case map[string]any:
		sm, _ := sens.(map[string]any)
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = ReplaceSensitive(e, sm[k], leaf)
		}
		return out
	case []any:
		sl, _ := sens.([]any)
		out := make([]any, len(x))
		for i, e := range x {
			var si any
			if i < len(sl) {
				si = sl[i]
			}
			out[i] = ReplaceSensitive(e, si, leaf)
		}
		return out
	}
	return v
}

// AnyUnknown is a [ReplaceSensitive] leaf for an after_unknown structure: true when anything
// in u is unknown.
func AnyUnknown(u any) any { return anyTrue(u) }

// anyTrue reports whether the unknown-value structure u holds a true.
func anyTrue(u any) bool {
	switch x := u.(type) {
	case bool:
		return x
	case map[string]any:
		for _, e := range x {
			if anyTrue(e) {
				return true
			}
		}
	case []any:
		for _, e := range x {
			if anyTrue(e) {
				return true
			}
		}
	}
	return false
}

// truncatePaths returns the replace paths with each one cut after its first step that either
// sensitivity structure marks sensitive, so a path names no key or index inside a sensitive
// value; duplicates that the cut makes are dropped.
func truncatePaths(paths []any, sens ...any) []any {
	if len(paths) == 0 {
		return paths
	}
	var out []any
	seen := map[string]bool{}
	for _, p := range paths {
		steps, ok := p.([]any)
		if !ok {
			continue
		}
		cut := len(steps)
		for _, s := range sens {
			cur := s
			for i, st := range steps {
				if i >= cut {
					break
				}
				switch x := cur.(type) {
				case map[string]any:
					k, _ := st.(string)
					cur = x[k]
				case []any:
					var idx int
					switch n := st.(type) {
					case float64:
						idx = int(n)
					case json.Number:
						v, _ := n.Int64()
						idx = int(v)
					case int:
						idx = n
					}
					cur = nil
					if idx >= 0 && idx < len(x) {
						cur = x[idx]
					}
				default:
					cur = nil
				}
				if b, ok := cur.(bool); ok && b {
					cut = i + 1
					break
				}
			}
		}
		steps = steps[:cut]
		key, _ := json.Marshal(steps)
		if !seen[string(key)] {
			seen[string(key)] = true
			out = append(out, steps)
		}
	}
	return out
}

// Symbols and phrases of `tofu show`'s human output, per folded action.
var (
	actionSymbol = map[Action]string{ActionCreate: "+", ActionUpdate: "~", ActionDelete: "-", ActionReplace: "-/+", ActionRead: "<="}
	actionPhrase = map[Action]string{ActionCreate: "will be created", ActionUpdate: "will be updated in-place",
		ActionDelete: "will be destroyed", ActionReplace: "must be replaced", ActionRead: "will be read during apply"}
)

// FoldActions folds a terraform-json action list into one [Action].
func FoldActions(a tfjson.Actions) Action {
	switch {
	case a.Replace():
		return ActionReplace
	case a.Create():
		return ActionCreate
	case a.Update():
		return ActionUpdate
	case a.Delete():
		return ActionDelete
	case a.Read():
		return ActionRead
	}
	return ActionNoOp
}

// RenderReview writes p (a [ReviewBody]) as `tofu show` prints a saved plan: per changing
// resource instance a "# ADDRESS will be created" header and its attributes ("+" added, "-"
// removed, "~" changed, old -> new), "(known after apply)" for unknown values and "(sensitive
// value)" for masked ones (an attribute masked on both sides of an update is always listed:
// the body cannot tell whether it changes), unchanged attributes counted, not listed; then the
// "Plan: N to add, N to change, N to destroy." line. Values print as compact JSON.
func RenderReview(w io.Writer, p *tfjson.Plan) error {
	var sum Summary
	var b strings.Builder
	changed := 0
	for _, rc := range p.ResourceChanges {
		if rc.Change == nil {
			continue
		}
		act := FoldActions(rc.Change.Actions)
		if act == ActionNoOp || (rc.Mode == tfjson.DataResourceMode && act != ActionRead) {
			continue
		}
		if rc.Mode == tfjson.ManagedResourceMode {
			switch act {
			case ActionCreate:
				sum.Add++
			case ActionUpdate:
				sum.Change++
			case ActionDelete:
				sum.Destroy++
			case ActionReplace:
				sum.Add++
				sum.Destroy++
			}
		}
		if changed == 0 {
			b.WriteString("Lava will perform the following actions:\n")
		}
		changed++
		kind := "resource"
		if rc.Mode == tfjson.DataResourceMode {
			kind = "data"
		}
		fmt.Fprintf(&b, "\n  # %s %s\n", rc.Address, actionPhrase[act])
		fmt.Fprintf(&b, "%s %s %q %q {\n", pad(actionSymbol[act]), kind, rc.Type, rc.Name)
		renderAttributes(&b, act, rc.Change)
		b.WriteString("    }\n")
	}
	if changed == 0 {
		b.WriteString("No changes. Your infrastructure matches the configuration.\n")
	} else {
		fmt.Fprintf(&b, "\nPlan: %d to add, %d to change, %d to destroy.\n", sum.Add, sum.Change, sum.Destroy)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// pad right-aligns an action symbol in the three columns `tofu show` gives it.
func pad(s string) string { return strings.Repeat(" ", max(0, 3-len(s))) + s }

func renderAttributes(b *strings.Builder, act Action, c *tfjson.Change) {
	before, _ := c.Before.(map[string]any)
	after, _ := c.After.(map[string]any)
	unknown, _ := c.AfterUnknown.(map[string]any)
	bs, _ := c.BeforeSensitive.(map[string]any)
	as, _ := c.AfterSensitive.(map[string]any)
	forces := map[string]bool{}
	for _, p := range c.ReplacePaths {
		if steps, ok := p.([]any); ok && len(steps) > 0 {
			if k, ok := steps[0].(string); ok {
				forces[k] = true
			}
		}
	}
	keys := map[string]bool{}
	for k := range before {
		keys[k] = true
	}
	for k := range after {
		keys[k] = true
	}
	for k := range unknown {
		keys[k] = true
	}
	names := make([]string, 0, len(keys))
	for k := range keys {
		names = append(names, k)
	}
	sort.Strings(names)
	type line struct{ sym, name, text string }
	var lines []line
	hidden, width := 0, 0
	for _, k := range names {
		bv, av := before[k], after[k]
		unk := unknown[k] == true
		bText, aText := valueText(bv, bs[k]), valueText(av, as[k])
		if unk {
			aText = "(known after apply)"
		}
		sym, text := "", ""
		switch {
		case act == ActionCreate || act == ActionRead:
			if av == nil && !unk && as[k] == nil {
				continue
			}
			sym, text = "+", aText
		case act == ActionDelete:
			if bv == nil && bs[k] == nil {
				continue
			}
			sym, text = "-", bText
		case sensitiveAnywhere(bs[k]) && sensitiveAnywhere(as[k]) && !unk:
			// Both sides masked: whether it changes is not in the body (a digest of a
			// secret would reveal a guessable one), so it is always listed.
			sym, text = "~", "(sensitive value)"
		case bText == aText && !unk:
			hidden++
			continue
		case bv == nil && bs[k] == nil:
			sym, text = "+", aText
		case av == nil && !unk && as[k] == nil:
			sym, text = "-", bText+" -> null"
		default:
			sym, text = "~", bText+" -> "+aText
		}
		if forces[k] {
			text += " # forces replacement"
		}
		lines = append(lines, line{sym, k, text})
		width = max(width, len(k))
	}
	for _, l := range lines {
		fmt.Fprintf(b, "      %s %-*s = %s\n", l.sym, width, l.name, l.text)
	}
	if hidden > 0 {
		fmt.Fprintf(b, "        # (%d unchanged attributes hidden)\n", hidden)
	}
}

// valueText prints a value as compact JSON, "(sensitive value)" when sens marks it (or any
// part of it) sensitive.
func valueText(v, sens any) string {
	if sensitiveAnywhere(sens) {
		return "(sensitive value)"
	}
	if v == nil {
		return "null"
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func sensitiveAnywhere(s any) bool {
	switch x := s.(type) {
	case bool:
		return x
	case map[string]any:
		for _, e := range x {
			if sensitiveAnywhere(e) {
				return true
			}
		}
	case []any:
		for _, e := range x {
			if sensitiveAnywhere(e) {
				return true
			}
		}
	}
	return false
}
