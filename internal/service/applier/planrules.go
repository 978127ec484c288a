package applier

import (
	"context"
	"fmt"
	"io"

	"github.com/lava-operator/lava/api/v1alpha1"
	"github.com/lava-operator/lava/internal/engine"
	"github.com/lava-operator/lava/internal/engine/state"
	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/lang/planpolicy"
	"github.com/lava-operator/lava/internal/pipeline"
	"github.com/lava-operator/lava/internal/platform/bus"
)

// planRules returns the plan rules of the object's namespace (the policy document's
// planRules, else the built-in ones). Errors: the document cannot be read or its rules do not
// compile; the work is retried, and nothing is applied without its rules.
func (w *work) planRules() (*planpolicy.Set, error) {
	cfg, err := w.s.cfg.Policy.Load()
	if err != nil {
		return nil, fmt.Errorf("applier: plan rules: %w", err)
	}
	set, err := cfg.PlanRules(w.ns)
	if err != nil {
		return nil, fmt.Errorf("applier: plan rules: %w", err)
	}
	return set, nil
}

// verdict evaluates rules on plan (docs/design/0037-plan-policies.md): each resource change
// with its address, type, mode and actions, and, when a rule reads them and the plan has a
// review body, its before and after values from that body (sensitive values and the values of
// the Secrets the object binds already removed: engine.ReviewBody). Errors: reading the
// review body.
func (w *work) verdict(ctx context.Context, plan *engine.PlanRecord, in input, rules *planpolicy.Set) (planpolicy.Result, error) {
	pin := planpolicy.Input{Namespace: w.ns, Name: w.name, Engine: in.engine,
		Add: plan.Summary.Add, ChangeCount: plan.Summary.Change, Destroy: plan.Summary.Destroy}
	var values map[string][2]any
	if rules.UsesValues() && plan.ReviewDigest != "" {
		var err error
		if values, err = w.reviewValues(ctx, plan); err != nil {
			return planpolicy.Result{}, err
		}
		pin.Values = true
	}
	for _, r := range plan.Resources {
		c := planpolicy.Change{Address: r.Address, Type: r.Type, Mode: r.Mode, Actions: tofuActions(r.Action)}
		if v, ok := values[r.Address]; ok {
			c.Before, c.After = v[0], v[1]
		}
		pin.Changes = append(pin.Changes, c)
	}
	return rules.Evaluate(ctx, pin)
}

// reviewValues reads a plan's review body and returns each address's before and after
// values, sensitive and unknown ones [planpolicy.Undecidable]. Errors: [work.reviewBody]'s, a
// body that does not decode.
func (w *work) reviewValues(ctx context.Context, plan *engine.PlanRecord) (map[string][2]any, error) {
	body, err := w.reviewBody(ctx, plan)
	if err != nil {
		return nil, err
	}
	p, err := engine.ParseReviewBody(body)
	if err != nil {
		return nil, err
	}
	out := make(map[string][2]any, len(p.ResourceChanges))
	for _, rc := range p.ResourceChanges {
		if rc != nil && rc.Change != nil {
			// What the rules cannot read (unknown until apply, sensitive) makes a rule that
			// reads it undecided, never a missing or null value a guarded rule passes over.
			c := rc.Change
			after := planpolicy.Overlay(planpolicy.Overlay(c.After, c.AfterSensitive, planpolicy.WhySensitive), c.AfterUnknown, planpolicy.WhyUnknown)
			out[rc.Address] = [2]any{planpolicy.Overlay(c.Before, c.BeforeSensitive, planpolicy.WhySensitive), after}
		}
	}
	return out, nil
}

// reviewBody is a plan's review body: a speculative plan's, in memory, else read from the
// artifact store. Errors: the artifact store's, a body over engine.MaxReviewBytes.
func (w *work) reviewBody(ctx context.Context, plan *engine.PlanRecord) ([]byte, error) {
	if plan.ReviewBody != nil {
		if len(plan.ReviewBody) > engine.MaxReviewBytes {
			return nil, fmt.Errorf("applier: the review body exceeds %d bytes", engine.MaxReviewBytes)
		}
		return plan.ReviewBody, nil
	}
	arts, err := bus.NewArtifacts(ctx, w.s.cfg.JS)
	if err != nil {
		return nil, err
	}
	rc, err := arts.Get(ctx, plan.ReviewDigest)
	if err != nil {
		return nil, fmt.Errorf("applier: read the review body: %w", err)
	}
	defer rc.Close()
	body, err := io.ReadAll(io.LimitReader(rc, engine.MaxReviewBytes+1))
	if err != nil {
		return nil, fmt.Errorf("applier: read the review body: %w", err)
	}
	if len(body) > engine.MaxReviewBytes {
		return nil, fmt.Errorf("applier: the review body exceeds %d bytes", engine.MaxReviewBytes)
	}
	return body, nil
}

// tofuActions are a folded action's actions as `tofu show -json` lists them (a replace as
// delete then create, whichever order the engine runs it in).
func tofuActions(a engine.Action) []string {
	if a == engine.ActionReplace {
		return []string{"delete", "create"}
	}
	return []string{string(a)}
}

// judgeDestroy holds a destroy of the object's state to the namespace's plan rules, as a plan
// that deletes every managed object the state holds (actions ["delete"], before and after
// null: a destroy reads no values). A rule that matches refuses the destroy, deny or
// requireApproval alike (a destroy has no plan id to approve): Failed, stage DESTROY, reason
// PlanDenied, not retried; nothing is destroyed and the finalizer stays (deletionPolicy
// Orphan, or other rules for the namespace, let the object go). stop is true when it was
// refused (err is then the publish's). Errors: reading the rules or the state.
func (w *work) judgeDestroy(ctx context.Context, eng string, attempt int32) (stop bool, err error) {
	rules, err := w.planRules()
	if err != nil || rules.Len() == 0 {
		return false, err
	}
	_, body, err := w.s.cfg.Store.Body(ctx, w.key())
	if err != nil {
		return false, err
	}
	objs, err := state.ManagedObjects(body)
	if err != nil {
		return false, err
	}
	pin := planpolicy.Input{Namespace: w.ns, Name: w.name, Engine: eng, Destroy: len(objs), Values: true}
	for _, o := range objs {
		pin.Changes = append(pin.Changes, planpolicy.Change{Address: o.Address, Type: o.Type, Mode: "managed", Actions: []string{"delete"}})
	}
	verdict, err := rules.Evaluate(ctx, pin)
	if err != nil || verdict.Verdict == planpolicy.Allow {
		return false, err
	}
	return true, w.failed(ctx, lavav1.Stage_STAGE_DESTROY, &pipeline.Failure{Reason: v1alpha1.ReasonPlanDenied,
		Message: fmt.Sprintf("the destroy of %s is refused by the plan rules of namespace %s (a destroy cannot be approved: set spec.deletionPolicy to Orphan to keep the resources, or have the rules changed): %s",
			w.key(), w.ns, engine.Cut(w.redactor(ctx).Redact(verdict.String())))}, attempt, "")
}
