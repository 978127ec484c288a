package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"

	tfjson "github.com/hashicorp/terraform-json"
)

// PlanFindings compares a plan's resource changes attribute by attribute (docs/dialect.md section 6.2):
// the drift classification both engines share, the tofu engine over `show -json` of its plan,
// the embedded engine over its plan in the same format. Values are flattened to dotted leaf
// paths through objects, maps, lists and sets alike ("metadata.0.labels.app"), so a cosmetic
// prefix matches inside a nested block. A
// resource the refresh found deleted or changed out of band (resource_drift "delete") that the
// plan creates again is a replacement. Sensitive values are [Redacted]; values known
// only after apply are not findings by themselves.
func PlanFindings(p *tfjson.Plan, prefixes []string) []Finding {
	if p == nil {
		return nil
	}
	goneOutOfBand := map[string]*tfjson.ResourceChange{}
	for _, d := range p.ResourceDrift {
		if d.Change != nil && d.Change.Actions.Delete() {
			goneOutOfBand[d.Address] = d
		}
	}
	var out []Finding
	for _, rc := range p.ResourceChanges {
		if rc.Mode != tfjson.ManagedResourceMode || rc.Change == nil {
			continue
		}
		ch := rc.Change
		kind := FoldActions(ch.Actions)
		if _, ok := goneOutOfBand[rc.Address]; ok && kind == ActionCreate {
			// A new object replaces the whole one that is gone, as the embedded engine reports
			// it: comparing the gone object's state with the planned creation would list the
			// provider's empty-versus-null differences (an SDKv2 provider stores "" and {} for
			// unset attributes that a new plan leaves null) as changed attributes.
			out = append(out, Finding{Address: rc.Address, Attribute: "*", Change: ActionReplace,
				Severity: Classify(ActionReplace, "*", prefixes)})
			continue
		}
		before, beforeSens := ch.Before, ch.BeforeSensitive
		switch kind {
		case ActionNoOp, ActionRead:
			continue
		case ActionCreate, ActionDelete:
			out = append(out, Finding{Address: rc.Address, Attribute: "*", Change: kind,
				Severity: Classify(kind, "*", prefixes)})
			continue
		}
		fs := attributeFindings(rc.Address, kind, before, beforeSens, ch.After, ch.AfterSensitive, ch.AfterUnknown, prefixes)
		if len(fs) == 0 {
			fs = []Finding{{Address: rc.Address, Attribute: "*", Change: kind,
				Severity: Classify(kind, "*", prefixes)}}
		}
		out = append(out, fs...)
	}
	return out
}

func attributeFindings(addr string, kind Action, before, beforeSens, after, afterSens, afterUnknown any,
	prefixes []string) []Finding {
	b, a := map[string]any{}, map[string]any{}
	// A sensitive value is one leaf at its own path (sensitiveLeaf): below it a map's keys
	// would name parts of it (a map keyed by a value derived from a Secret would show the key
	// in a drift anomaly's metadata).
	flatten("", ReplaceSensitive(before, beforeSens, sensitiveLeaf), b)
	flatten("", ReplaceSensitive(after, afterSens, sensitiveLeaf), a)
	afterUnknown = ReplaceSensitive(afterUnknown, afterSens, AnyUnknown)
	bs, as, au := map[string]bool{}, map[string]bool{}, map[string]bool{}
	flattenMarks("", beforeSens, bs)
	flattenMarks("", afterSens, as)
	flattenMarks("", afterUnknown, au)
	paths := map[string]bool{}
	for p := range b {
		paths[p] = true
	}
	for p := range a {
		paths[p] = true
	}
	for p := range au {
		paths[p] = true
	}
	sorted := make([]string, 0, len(paths))
	for p := range paths {
		sorted = append(sorted, p)
	}
	sort.Strings(sorted)
	var out []Finding
	for _, p := range sorted {
		if marked(au, p) {
			continue // known after apply: a consequence, not a drifted value
		}
		bv, inB := b[p]
		av, inA := a[p]
		if inB && inA && render(bv) == render(av) {
			continue
		}
		if !inB && !inA {
			continue
		}
		f := Finding{Address: addr, Attribute: p, Change: kind, Severity: Classify(kind, p, prefixes)}
		if inB {
			f.Observed = value(bv, marked(bs, p))
		}
		if inA {
			f.Declared = value(av, marked(as, p))
		}
		out = append(out, f)
	}
	return out
}

// sensitiveLeaf stands for a sensitive value in a drift comparison: an opaque string, the
// SHA-256 of its JSON, so a change inside it is still a change and no key inside it becomes a
// path ([ReplaceSensitive]).
func sensitiveLeaf(v any) any {
	if v == nil {
		return nil
	}
	j, _ := json.Marshal(v)
	sum := sha256.Sum256(j)
	return "(sensitive " + hex.EncodeToString(sum[:8]) + ")"
}

// flatten maps each leaf of v to its dotted path ("tags.Owner", "ingress.0.cidr"). Empty
// objects and lists are leaves; nulls are absent.
func flatten(prefix string, v any, out map[string]any) {
	switch t := v.(type) {
	case nil:
	case map[string]any:
		if len(t) == 0 && prefix != "" {
			out[prefix] = t
		}
		for k, e := range t {
			flatten(join(prefix, k), e, out)
		}
	case []any:
		if len(t) == 0 && prefix != "" {
			out[prefix] = t
		}
		for i, e := range t {
			flatten(join(prefix, strconv.Itoa(i)), e, out)
		}
	default:
		if prefix != "" {
			out[prefix] = t
		}
	}
}

// flattenMarks collects the paths marked true in a sensitivity or unknown structure.
func flattenMarks(prefix string, v any, out map[string]bool) {
	switch t := v.(type) {
	case bool:
		if t {
			out[prefix] = true
		}
	case map[string]any:
		for k, e := range t {
			flattenMarks(join(prefix, k), e, out)
		}
	case []any:
		for i, e := range t {
			flattenMarks(join(prefix, strconv.Itoa(i)), e, out)
		}
	}
}

// marked reports whether p or one of its ancestors is marked ("" marks the whole object).
func marked(m map[string]bool, p string) bool {
	if m[""] || m[p] {
		return true
	}
	for i := len(p) - 1; i > 0; i-- {
		if p[i] == '.' && m[p[:i]] {
			return true
		}
	}
	return false
}

func join(prefix, k string) string {
	if prefix == "" {
		return k
	}
	return prefix + "." + k
}

func render(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func value(v any, sensitive bool) *string {
	s := render(v)
	if sensitive {
		s = Redacted
	}
	return &s
}
