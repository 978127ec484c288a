package tofu

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/hashicorp/terraform-exec/tfexec"
	tfjson "github.com/hashicorp/terraform-json"

	"github.com/lava-operator/lava/internal/engine"
)

// ScanDrift implements [engine.Engine] (docs/dialect.md section 6.2): `plan -refresh=true -out` without
// taking the state lock (a scan writes nothing), then `show -json`, and compares each
// resource's before and after attribute by attribute.
func (e *Engine) ScanDrift(ctx context.Context, req engine.DriftRequest) (*engine.DriftReport, error) {
	if err := req.Key.Validate(); err != nil {
		return nil, err
	}
	prior, secrets, err := e.stateOf(ctx, req.Key)
	if err != nil {
		return nil, err
	}
	serial, lineage := prior.Serial, prior.Lineage
	r, err := e.newRun("drift", req.Key, req.Holder, append(secrets, req.Redact...), req.Credentials, nil)
	if err != nil {
		return nil, err
	}
	defer r.close()
	ws, err := e.prepare(ctx, r, req.Target)
	if err != nil {
		return nil, err
	}
	if err := e.init(ctx, r, ws); err != nil {
		return nil, err
	}
	if err := e.checkFiles(ctx, r, ws, req.Target); err != nil {
		return nil, err
	}
	if err := r.step(ctx, "plan", e.cfg.Timeouts.Plan, func(ctx context.Context) error {
		_, err := r.tf.Plan(ctx, tfexec.Out(PlanFile), tfexec.Refresh(true), tfexec.Lock(false))
		return err
	}); err != nil {
		return nil, err
	}
	plan, err := e.showPlan(ctx, r)
	if err != nil {
		return nil, err
	}
	prefixes := req.CosmeticPrefixes
	if prefixes == nil {
		prefixes = engine.DefaultCosmeticPrefixes()
	}
	rep := &engine.DriftReport{Findings: Findings(plan, prefixes), StateSerial: serial, StateLineage: lineage,
		ScannedAt: time.Now().UTC()}
	rep.Finish()
	return rep, nil
}

// Findings compares a plan's resource changes attribute by attribute (docs/dialect.md section 6.2). A
// resource the refresh found deleted or changed out of band (resource_drift "delete") that the
// plan creates again is a replacement. Sensitive values are [engine.Redacted]; values known
// only after apply are not findings by themselves.
func Findings(p *tfjson.Plan, prefixes []string) []engine.Finding {
	if p == nil {
		return nil
	}
	goneOutOfBand := map[string]*tfjson.ResourceChange{}
	for _, d := range p.ResourceDrift {
		if d.Change != nil && d.Change.Actions.Delete() {
			goneOutOfBand[d.Address] = d
		}
	}
	var out []engine.Finding
	for _, rc := range p.ResourceChanges {
		if rc.Mode != tfjson.ManagedResourceMode || rc.Change == nil {
			continue
		}
		ch := rc.Change
		kind := engine.FoldActions(ch.Actions)
		if _, ok := goneOutOfBand[rc.Address]; ok && kind == engine.ActionCreate {
			// A new object replaces the whole one that is gone, as the embedded engine reports
			// it: comparing the gone object's state with the planned creation would list the
			// provider's empty-versus-null differences (an SDKv2 provider stores "" and {} for
			// unset attributes that a new plan leaves null) as changed attributes.
			out = append(out, engine.Finding{Address: rc.Address, Attribute: "*", Change: engine.ActionReplace,
				Severity: engine.Classify(engine.ActionReplace, "*", prefixes)})
			continue
		}
		before, beforeSens := ch.Before, ch.BeforeSensitive
		switch kind {
		case engine.ActionNoOp, engine.ActionRead:
			continue
		case engine.ActionCreate, engine.ActionDelete:
			out = append(out, engine.Finding{Address: rc.Address, Attribute: "*", Change: kind,
				Severity: engine.Classify(kind, "*", prefixes)})
			continue
		}
		fs := attributeFindings(rc.Address, kind, before, beforeSens, ch.After, ch.AfterSensitive, ch.AfterUnknown, prefixes)
		if len(fs) == 0 {
			fs = []engine.Finding{{Address: rc.Address, Attribute: "*", Change: kind,
				Severity: engine.Classify(kind, "*", prefixes)}}
		}
		out = append(out, fs...)
	}
	return out
}

func attributeFindings(addr string, kind engine.Action, before, beforeSens, after, afterSens, afterUnknown any,
	prefixes []string) []engine.Finding {
	b, a := map[string]any{}, map[string]any{}
	// A sensitive value is one leaf at its own path (sensitiveLeaf): below it a map's keys
	// would name parts of it (a map keyed by a value derived from a Secret would show the key
	// in a drift anomaly's metadata).
	flatten("", engine.ReplaceSensitive(before, beforeSens, sensitiveLeaf), b)
	flatten("", engine.ReplaceSensitive(after, afterSens, sensitiveLeaf), a)
	afterUnknown = engine.ReplaceSensitive(afterUnknown, afterSens, engine.AnyUnknown)
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
	var out []engine.Finding
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
		f := engine.Finding{Address: addr, Attribute: p, Change: kind, Severity: engine.Classify(kind, p, prefixes)}
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
// path ([engine.ReplaceSensitive]).
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
		s = engine.Redacted
	}
	return &s
}
