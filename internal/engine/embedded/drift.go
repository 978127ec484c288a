package embedded

import (
	"context"

	tfjson "github.com/hashicorp/terraform-json"

	"github.com/lava-operator/lava/internal/engine"
)

// ScanDrift implements [engine.Engine]: it refreshes every object (ReadResource) and plans
// the configuration against what it found, without saving anything; every change is drift.
// Updates and replacements are reported per attribute (observed = the refreshed value,
// declared = the planned one); creations, deletions and objects deleted out of band as "*".
// Sensitive values are [engine.Redacted]. The tofu engine classifies its plan the same way
// (one [engine.PlanFindings]). The scan is bounded by Options.Timeouts.Plan.
func (e *Engine) ScanDrift(ctx context.Context, req engine.DriftRequest) (*engine.DriftReport, error) {
	return bounded(ctx, "drift", e.opts.Timeouts.Plan, func(ctx context.Context) (*engine.DriftReport, error) {
		secrets := map[string]bool{}
		rep, err := e.scanDrift(withCredentials(withProviderLock(ctx, e.opts.Store, req.Key, false), req.Credentials), req, secrets)
		return rep, stepError("drift", err, req.Redact, secrets)
	})
}

func (e *Engine) scanDrift(ctx context.Context, req engine.DriftRequest, secrets map[string]bool) (*engine.DriftReport, error) {
	if err := req.Key.Validate(); err != nil {
		return nil, err
	}
	cfg, err := e.pinnedConfig(ctx, req.RenderedDigest, nil, req.ProviderConstraints)
	if err != nil {
		return nil, err
	}
	// Each provider configuration is a provider process held for the whole operation: a
	// plan or scan of too many fails before any starts (apply and destroy follow a plan).
	if err := engine.CheckProviderConfigurations(cfg.doc); err != nil {
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
	if rep.Findings, err = driftFindings(p, prefixes); err != nil {
		return nil, err
	}
	rep.Finish()
	return rep, nil
}

// driftFindings classifies p's changes as the tofu engine classifies its plan's: p in tofu's
// plan JSON format ([reviewPlan]), an instance the refresh found deleted out of band
// (Gone) in its resource_drift, through [engine.PlanFindings].
func driftFindings(p *Plan, prefixes []string) ([]engine.Finding, error) {
	tp, err := reviewPlan(p)
	if err != nil {
		return nil, err
	}
	for _, c := range p.Changes {
		if c.Action == Create && c.Gone {
			tp.ResourceDrift = append(tp.ResourceDrift, &tfjson.ResourceChange{Address: c.Addr, ModuleAddress: c.Module,
				Mode: tfjson.ResourceMode(c.Mode), Type: c.Type, Name: c.Name, Index: c.Key, ProviderName: c.Provider,
				Change: &tfjson.Change{Actions: tfjson.Actions{tfjson.ActionDelete}}})
		}
	}
	return engine.PlanFindings(tp, prefixes), nil
}
