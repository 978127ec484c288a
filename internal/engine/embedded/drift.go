package embedded

import (
	"context"
	"strings"

	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/lava-operator/lava/internal/engine"
)

// ScanDrift implements [engine.Engine]: it refreshes every object (ReadResource) and plans
// the configuration against what it found, without saving anything; every change is drift.
// Updates are reported per attribute (observed = the refreshed value, declared = the
// planned one); creations, deletions and replacements of whole objects as "*". Sensitive
// values are [engine.Redacted].
func (e *Engine) ScanDrift(ctx context.Context, req engine.DriftRequest) (*engine.DriftReport, error) {
	secrets := map[string]bool{}
	rep, err := e.scanDrift(withCredentials(withProviderLock(ctx, e.opts.Store, req.Key), req.Credentials), req, secrets)
	return rep, stepError("drift", err, req.Redact, secrets)
}

func (e *Engine) scanDrift(ctx context.Context, req engine.DriftRequest, secrets map[string]bool) (*engine.DriftReport, error) {
	if err := req.Key.Validate(); err != nil {
		return nil, err
	}
	cfg, err := e.loadConfig(ctx, req.RenderedDigest)
	if err != nil {
		return nil, err
	}
	prior, err := e.loadState(ctx, req.Key)
	if err != nil {
		return nil, err
	}
	p, err := e.runner.Plan(withFileCheck(ctx, e.opts.FileAccess, req.Key.Namespace, cfg.doc), cfg, prior, req.ProviderSources, false, secrets)
	if err != nil {
		return nil, err
	}
	prefixes := req.CosmeticPrefixes
	if prefixes == nil {
		prefixes = engine.DefaultCosmeticPrefixes()
	}
	rep := &engine.DriftReport{ScannedAt: e.opts.Now().UTC()}
	if prior != nil {
		rep.StateSerial, rep.StateLineage = prior.Serial, prior.Lineage
	}
	rep.Findings = driftFindings(p, prefixes)
	rep.Finish()
	return rep, nil
}

func driftFindings(p *Plan, prefixes []string) []engine.Finding {
	var out []engine.Finding
	for _, c := range p.Changes {
		act := engine.Action(c.Action)
		if c.Action == Create && c.Gone {
			// Deleted out of band: creating it again makes a new object (a new id), as the
			// tofu engine reports it (tofu.Findings).
			act = engine.ActionReplace
		}
		switch c.Action {
		case Create, Delete:
			out = append(out, engine.Finding{Address: c.Addr, Attribute: "*", Change: act, Severity: engine.Classify(act, "*", prefixes)})
		case Replace:
			if len(c.ReplacePaths) == 0 {
				out = append(out, engine.Finding{Address: c.Addr, Attribute: "*", Change: act, Severity: engine.Classify(act, "*", prefixes)})
				continue
			}
			for _, d := range diffValues(c.Prior, c.Planned, nil, c.Sensitive) {
				out = append(out, engine.Finding{Address: c.Addr, Attribute: d.path, Change: act, Observed: d.observed,
					Declared: d.declared, Severity: engine.Classify(act, d.path, prefixes)})
			}
		case Update:
			for _, d := range diffValues(c.Prior, c.Planned, nil, c.Sensitive) {
				out = append(out, engine.Finding{Address: c.Addr, Attribute: d.path, Change: act, Observed: d.observed,
					Declared: d.declared, Severity: engine.Classify(act, d.path, prefixes)})
			}
		}
	}
	return out
}

type attrDiff struct {
	path               string
	observed, declared *string
}

// diffValues lists the leaf paths where observed and declared differ, in dotted form
// ("tags.Owner", "rule.0.port"). Objects and maps are descended; lists, sets and tuples are
// compared whole. Values under a sensitive path are redacted.
func diffValues(observed, declared cty.Value, path cty.Path, sensitive []cty.Path) []attrDiff {
	if valuesEqual(observed, declared) {
		return nil
	}
	ot, dt := observed.Type(), declared.Type()
	// A sensitive value is one finding at its own path: below it a map's keys would name
	// parts of it (a map keyed by a value derived from a Secret would show the key in a drift
	// anomaly's metadata).
	descend := observed.IsKnown() && declared.IsKnown() && !observed.IsNull() && !declared.IsNull() &&
		((ot.IsObjectType() && dt.IsObjectType()) || (ot.IsMapType() && dt.IsMapType())) &&
		!isSensitive(path, sensitive)
	if descend {
		keys := map[string]bool{}
		for it := observed.ElementIterator(); it.Next(); {
			k, _ := it.Element()
			keys[k.AsString()] = true
		}
		for it := declared.ElementIterator(); it.Next(); {
			k, _ := it.Element()
			keys[k.AsString()] = true
		}
		var out []attrDiff
		for _, k := range setKeys(keys) {
			ov := elementOrNull(observed, k)
			dv := elementOrNull(declared, k)
			out = append(out, diffValues(ov, dv, append(path.Copy(), cty.GetAttrStep{Name: k}), sensitive)...)
		}
		return out
	}
	sens := isSensitive(path, sensitive)
	return []attrDiff{{path: dottedPath(path), observed: render(observed, sens), declared: render(declared, sens)}}
}

func elementOrNull(v cty.Value, k string) cty.Value {
	if v.Type().IsObjectType() {
		if v.Type().HasAttribute(k) {
			return v.GetAttr(k)
		}
		return cty.NullVal(cty.DynamicPseudoType)
	}
	kv := cty.StringVal(k)
	if v.HasIndex(kv).True() {
		return v.Index(kv)
	}
	return cty.NullVal(v.Type().ElementType())
}

func isSensitive(p cty.Path, sensitive []cty.Path) bool {
	ps := dottedPath(p)
	for _, s := range sensitive {
		sp := dottedPath(s)
		if ps == sp || strings.HasPrefix(ps, sp+".") {
			return true
		}
	}
	return false
}

// dottedPath renders a path as Lava's findings do: "tags.Owner", "rule.0.port".
func dottedPath(p cty.Path) string {
	var parts []string
	for _, st := range p {
		switch s := st.(type) {
		case cty.GetAttrStep:
			parts = append(parts, s.Name)
		case cty.IndexStep:
			if s.Key.Type() == cty.String {
				parts = append(parts, s.Key.AsString())
			} else if s.Key.Type() == cty.Number {
				parts = append(parts, s.Key.AsBigFloat().Text('f', -1))
			}
		}
	}
	if len(parts) == 0 {
		return "*"
	}
	return strings.Join(parts, ".")
}

// render gives a finding's value text: strings as they are, other values as compact JSON,
// nil when null, placeholders for sensitive and unknown values.
func render(v cty.Value, sensitive bool) *string {
	s := ""
	switch {
	case v == cty.NilVal || (v.IsKnown() && v.IsNull()):
		return nil
	case sensitive:
		s = engine.Redacted
	case !v.IsWhollyKnown():
		s = engine.Unknown
	case v.Type() == cty.String:
		s = v.AsString()
	default:
		b, err := ctyjson.Marshal(v, v.Type())
		if err != nil {
			return nil
		}
		s = string(b)
	}
	return &s
}
