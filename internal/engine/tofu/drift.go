package tofu

import (
	"context"
	"time"

	"github.com/hashicorp/terraform-exec/tfexec"

	"github.com/lava-operator/lava/internal/engine"
)

// ScanDrift implements [engine.Engine] (docs/dialect.md section 6.2): `plan -refresh=true -out` without
// taking the state lock (a scan writes nothing), then `show -json`, and compares each
// resource's before and after attribute by attribute ([engine.PlanFindings], which the embedded
// engine's scan uses too).
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
	// tofu starts a process per provider configuration and keeps it for the whole command: a
	// plan or scan of too many fails before init (apply and destroy follow a plan).
	if err := engine.CheckProviderConfigurations(ws.rendered); err != nil {
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
	rep := &engine.DriftReport{Findings: engine.PlanFindings(plan, prefixes), StateSerial: serial, StateLineage: lineage,
		ScannedAt: time.Now().UTC()}
	rep.Finish()
	return rep, nil
}
