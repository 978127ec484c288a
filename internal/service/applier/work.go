package applier

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lava-operator/lava/api/v1alpha1"
	"github.com/lava-operator/lava/internal/engine"
	"github.com/lava-operator/lava/internal/engine/state"
	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/lang/planpolicy"
	"github.com/lava-operator/lava/internal/pipeline"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/credentials"
	"github.com/lava-operator/lava/internal/platform/identity"
	"github.com/lava-operator/lava/internal/readmodel"
)

// maxMessageBytes bounds a Failed message.
const maxMessageBytes = 8 << 10

// work is the handling of one message for one resource, under its lease.
type work struct {
	s        *Service
	rec      *readmodel.Record
	ns, name string
	// cause is the envelope of the message handled.
	cause *lavav1.Envelope
	// holder names the state locks this work takes: its lease's bus.Lease.LockHolder.
	holder string
	log    *slog.Logger

	// redact holds the values of the Secrets the resource binds, read once per message; red
	// redacts them, built once per message (again when redSize, what it holds, grew).
	redact     []string
	redactRead bool
	// redactBytes counts the bytes of redact; secretsOver: the bound Secrets' values pass
	// engine.MaxSecretBytes (the rest were not kept) and the work fails.
	redactBytes int
	secretsOver bool
	red         *engine.Redactor
	redSize     int
	// obs is the resource's newest ResourceObserved, read once per message (obsRead).
	obs     *lavav1.ResourceObserved
	obsRead bool
	// creds are the resource's provider credentials, built once per message (credsRead).
	creds     *credentials.Provider
	credsErr  error
	credsRead bool
}

// credentials returns the resource's provider credentials (nil for none), built once per
// message: spec.providerEnvFrom read with the resource's identity ([work.kube]) and, when
// Config.Credentials is set and the resource acts as a ServiceAccount, that ServiceAccount's
// token (identity.Resolver.For, shared with drift). The error wraps
// identity.ErrProviderEnvForbidden, identity.ErrProviderEnvInvalid or
// identity.ErrNoServiceAccount, or is transient.
func (w *work) credentials(ctx context.Context) (*credentials.Provider, error) {
	if w.credsRead {
		return w.creds, w.credsErr
	}
	w.credsRead = true
	spec := w.observed(ctx).GetSpec()
	var refs []identity.SecretKeyRef
	for _, r := range spec.GetProviderEnvFrom() {
		refs = append(refs, identity.SecretKeyRef{Name: r.GetName(), Key: r.GetKey()})
	}
	w.creds, w.credsErr = w.s.resolver().For(ctx, w.ns, spec.GetServiceAccountName(), refs)
	if w.credsErr != nil {
		return w.creds, w.credsErr
	}
	all := append(w.secrets(ctx), w.creds.Secrets()...)
	if err := engine.CheckSecretBytes(all); err != nil || w.secretsOver {
		if err == nil {
			err = fmt.Errorf("%w: the values bound from Secrets total more than %d bytes", engine.ErrSecretsTooLarge, engine.MaxSecretBytes)
		}
		w.credsErr = err
		return w.creds, w.credsErr
	}
	w.redact = all
	return w.creds, w.credsErr
}

// resolver gives the applier's Kubernetes access and provider credentials per object.
func (s *Service) resolver() identity.Resolver {
	return identity.Resolver{Own: s.cfg.Kube, Service: "the applier", Identities: s.cfg.Identities, Credentials: s.cfg.Credentials}
}

// observed returns the resource's newest ResourceObserved (nil when there is none or it
// cannot be read, logged), read once per message.
func (w *work) observed(ctx context.Context) *lavav1.ResourceObserved {
	if w.obsRead {
		return w.obs
	}
	w.obsRead = true
	obs := &lavav1.ResourceObserved{}
	ok, err := lastEvent(ctx, w.s.cfg.JS, bus.StreamResources, bus.ResourceSubject(w.ns, w.name, bus.EventObserved), obs)
	if err != nil {
		w.log.Warn("cannot read the resource's ResourceObserved", "error", err)
	}
	if ok && err == nil {
		w.obs = obs
	}
	return w.obs
}

// kube returns the Kubernetes access the applier acts with for this resource: its
// ServiceAccount impersonated (spec.serviceAccountName, else the default) when
// Config.Identities is set, else Config.Kube (identity.Resolver.Access). The error wraps
// identity.ErrNoServiceAccount.
func (w *work) kube(ctx context.Context) (access, error) {
	c, who, err := w.s.resolver().Access(w.ns, w.observed(ctx).GetSpec().GetServiceAccountName())
	if err != nil {
		return access{}, err
	}
	return access{c: c, who: who}, nil
}

// credentialsFailure builds the resource's provider credentials and maps an error to its
// Failed outcome (RBACForbidden for a Secret or ServiceAccount the identity may not read,
// naming identity and object, never a value); a transient error is returned as such.
func (w *work) credentialsFailure(ctx context.Context) (*pipeline.Failure, error) {
	_, err := w.credentials(ctx)
	if err == nil {
		return nil, nil
	}
	if f, ok := kubeFailure(err); ok {
		return f, nil
	}
	return nil, err
}

// kubeFailure maps an outputs Secret error to its Failed outcome; ok is false for an error
// that is none of them (transient: nak).
func kubeFailure(err error) (*pipeline.Failure, bool) {
	switch {
	case errors.Is(err, ErrOutputsSecretNotOwned):
		return &pipeline.Failure{Reason: v1alpha1.ReasonOutputsSecretNotOwned, Message: err.Error()}, true
	case errors.Is(err, ErrForbidden):
		return &pipeline.Failure{Reason: v1alpha1.ReasonRBACForbidden, Message: err.Error(), Kind: pipeline.FailureRetryable}, true
	case errors.Is(err, identity.ErrNoServiceAccount):
		return &pipeline.Failure{Reason: v1alpha1.ReasonServiceAccountRequired, Message: err.Error()}, true
	case errors.Is(err, identity.ErrProviderEnvForbidden):
		return &pipeline.Failure{Reason: v1alpha1.ReasonRBACForbidden, Message: err.Error(), Kind: pipeline.FailureRetryable}, true
	case errors.Is(err, engine.ErrSecretsTooLarge):
		// A smaller Secret fixes it without a new generation: retryable.
		return &pipeline.Failure{Reason: v1alpha1.ReasonPlanFailed, Message: err.Error(), Kind: pipeline.FailureRetryable}, true
	case errors.Is(err, identity.ErrProviderEnvInvalid):
		// Creating the Secret or ServiceAccount fixes it: retryable.
		return &pipeline.Failure{Reason: v1alpha1.ReasonPlanFailed, Message: err.Error(), Kind: pipeline.FailureRetryable}, true
	}
	return nil, false
}

// minRedactBytes: Secret values shorter than this are not scrubbed by plain replacement (a
// one-letter value would mangle every message); synth never lets them into a message anyway.
const minRedactBytes = 4

// secrets returns the values of the Secrets behind the resource's spec.bindingsFrom (from its
// newest ResourceObserved), read with the applier's own access, so engine output that echoes
// one (a provider error naming a file, say) is redacted before it reaches an event or a log.
// Of a secretRef with a key only that key's value: the others are not bound, so they are not
// in the rendering (a Secret of 30,000 keys bound for one made every message redacted of all
// 30,000). Without Kubernetes access, or when they cannot be read, it returns none (logged).
func (w *work) secrets(ctx context.Context) []string {
	if w.redactRead {
		return w.redact
	}
	w.redactRead = true
	kube, err := w.kube(ctx)
	obs := w.observed(ctx)
	if err != nil || kube.c == nil || obs == nil {
		return nil
	}
	for _, ref := range obs.GetSpec().GetBindingsFrom() {
		sr := ref.GetSecretRef()
		if sr == nil {
			continue
		}
		sec := &corev1.Secret{}
		if err := kube.c.Get(ctx, client.ObjectKey{Namespace: w.ns, Name: sr.GetName()}, sec); err != nil {
			w.log.Warn("cannot read a bound Secret for redaction", "secret", sr.GetName(), "error", err)
			continue
		}
		for k, v := range sec.Data {
			if key := sr.GetKey(); key != "" && k != key {
				continue
			}
			if len(v) < minRedactBytes {
				continue
			}
			if w.redactBytes += len(v); w.redactBytes > engine.MaxSecretBytes {
				// The work fails before any engine call ([work.credentials]); what is kept
				// stays within the bound.
				w.secretsOver = true
				return w.redact
			}
			w.redact = append(w.redact, string(v))
		}
	}
	return w.redact
}

// redactor returns the Redactor of [work.secrets] (and of the provider credentials once they
// are read), built once per message, not once per text it redacts.
func (w *work) redactor(ctx context.Context) *engine.Redactor {
	secrets := w.secrets(ctx)
	if w.red == nil || w.redSize != len(secrets) {
		w.red, w.redSize = engine.NewRedactor(secrets...), len(secrets)
	}
	return w.red
}

// classify is [classify] with the message redacted of the resource's Secret values, then
// bounded.
func (w *work) classify(ctx context.Context, stage lavav1.Stage, err error) *pipeline.Failure {
	f := classify(stage, err)
	f.Message = redactThenCut(w.redactor(ctx), f.Message)
	return f
}

// redactThenCut redacts msg, then keeps its tail within maxMessageBytes: cut first, a secret
// that straddled the cut would keep a fragment no form of it matches.
func redactThenCut(red *engine.Redactor, msg string) string { return truncate(red.Redact(msg)) }

// input is what a plan needs, from a Synthesized or from the last applied configuration.
type input struct {
	generation          int64
	engine              string
	artifactDigest      string
	terraformJSONDigest string
	bindingsDigest      string
	providers           []engine.ProviderRequirement
	approve             string
	// manual: the object's spec.approvePlan is not auto, so a re-apply of this configuration
	// (a drift correction) waits for approval too.
	manual bool
	// regressedFrom is the last applied plan id when the state regressed since that apply
	// (engine.Target.RegressedFrom); regressed says what regressed.
	regressedFrom, regressed string
	// speculative: a preview's plan (engine.PlanRequest.Speculative), of the rendered JSON
	// rendered (engine.Target.Rendered), which is not stored.
	speculative bool
	rendered    []byte
}

func inputOf(ev *lavav1.Synthesized) input {
	in := input{
		generation:          ev.GetEnvelope().GetGeneration(),
		engine:              pipeline.EngineName(ev.GetEngine()),
		artifactDigest:      ev.GetArtifactDigest(),
		terraformJSONDigest: ev.GetRender().GetTerraformJsonDigest(),
		bindingsDigest:      ev.GetRender().GetBindingsDigest(),
		approve:             ev.GetApprovePlan(),
	}
	in.providers = requirements(ev.GetProviders())
	if in.approve == "" {
		in.approve = v1alpha1.ApprovePlanAuto
	}
	in.manual = in.approve != v1alpha1.ApprovePlanAuto
	return in
}

// requirements converts a Synthesized's provider requirements (name, source, version pin).
func requirements(ps []*lavav1.ProviderRequirement) []engine.ProviderRequirement {
	var out []engine.ProviderRequirement
	for _, p := range ps {
		out = append(out, engine.ProviderRequirement{Name: p.GetName(), Source: p.GetSource(), Version: p.GetVersion()})
	}
	return out
}

func (in input) target(ctx context.Context, w *work) engine.Target {
	src, pins := engine.SourcesAndConstraints(in.providers)
	creds, _ := w.credentials(ctx) // its error has failed the work before any engine call
	return engine.Target{Key: state.Key{Namespace: w.ns, Name: w.name}, RenderedDigest: in.artifactDigest, Rendered: in.rendered,
		ProviderSources: src, ProviderConstraints: pins, RegressedFrom: in.regressedFrom, Holder: w.holder, Redact: w.secrets(ctx), Credentials: creds}
}

func (w *work) key() state.Key { return state.Key{Namespace: w.ns, Name: w.name} }

// synthesized plans a rendered generation and applies it when approved.
func (w *work) synthesized(ctx context.Context, ev *lavav1.Synthesized, attempt int32) error {
	if !bus.ValidDigest(ev.GetArtifactDigest()) {
		return bus.Permanent(fmt.Errorf("applier: Synthesized without a valid artifact digest"))
	}
	return w.planAndApply(ctx, inputOf(ev), attempt)
}

// reapply re-plans the last applied configuration against the current state and applies it
// (or holds the plan when the command requires approval).
func (w *work) reapply(ctx context.Context, ev *lavav1.ReapplyRequested) error {
	last := w.rec.Last
	if last == nil {
		w.log.Warn("reapply requested but nothing was applied; ignored")
		return nil
	}
	in := input{generation: ev.GetEnvelope().GetGeneration(), engine: last.Engine, artifactDigest: last.ArtifactDigest,
		terraformJSONDigest: last.TerraformJSONDigest, bindingsDigest: last.BindingsDigest, providers: last.Providers, approve: v1alpha1.ApprovePlanAuto,
		manual: last.Manual}
	switch {
	case ev.GetPlanId() != "":
		in.approve = ev.GetPlanId()
	case ev.GetRequireApproval(), last.Manual:
		// Under approvePlan other than auto nothing is applied without an approval of its
		// plan id, a drift correction included.
		in.approve = v1alpha1.ApprovePlanManual
	}
	return w.planAndApply(ctx, in, 1)
}

// retry runs a failed stage again from the newest Synthesized (plan, apply) or
// DeletionRequested (destroy) of the resource's generation.
func (w *work) retry(ctx context.Context, ev *lavav1.RetryRequested) error {
	// A retry after a lock wait repeats the failed attempt (viggy's lock waits do not spend
	// the retry budget); one without an attempt is the second.
	attempt := ev.GetAttempt()
	if attempt < 1 {
		attempt = 2
	}
	switch ev.GetTarget() {
	case lavav1.Stage_STAGE_PLAN, lavav1.Stage_STAGE_APPLY:
		syn := &lavav1.Synthesized{}
		ok, err := lastEvent(ctx, w.s.cfg.JS, bus.StreamPhases, bus.PhaseSubject(w.ns, w.name, bus.EventSynthesized), syn)
		if err != nil {
			return err
		}
		if !ok || syn.GetEnvelope().GetResource().GetUid() != w.cause.GetResource().GetUid() ||
			syn.GetEnvelope().GetGeneration() != ev.GetEnvelope().GetGeneration() {
			w.log.Info("retry is obsolete: no Synthesized of that generation")
			return nil
		}
		return w.planAndApply(ctx, inputOf(syn), attempt)
	case lavav1.Stage_STAGE_DESTROY:
		del := &lavav1.DeletionRequested{}
		ok, err := lastEvent(ctx, w.s.cfg.JS, bus.StreamResources, bus.ResourceSubject(w.ns, w.name, bus.EventDeletionRequested), del)
		if err != nil {
			return err
		}
		if !ok || del.GetEnvelope().GetResource().GetUid() != w.cause.GetResource().GetUid() {
			w.log.Info("destroy retry is obsolete: no DeletionRequested of that object")
			return nil
		}
		if err := w.s.confirmDeletion(ctx, del.GetEnvelope().GetResource()); err != nil {
			return err
		}
		return w.deletion(ctx, del.GetDeletionPolicy(), del.GetEngine(), attempt)
	}
	return bus.Permanent(fmt.Errorf("applier: retry of stage %v is not the applier's", ev.GetTarget()))
}

// planAndApply is the heart of the applier: apply the held plan when approved and still
// valid, else plan; then apply or hold.
func (w *work) planAndApply(ctx context.Context, in input, attempt int32) error {
	eng := w.s.cfg.Engines[in.engine]
	if eng == nil {
		return w.failed(ctx, lavav1.Stage_STAGE_PLAN, &pipeline.Failure{Reason: v1alpha1.ReasonEngineUnavailable,
			Message: fmt.Sprintf("engine %q is not available in this applier (configured: %s)", in.engine, strings.Join(w.engineNames(), ", "))}, attempt, "")
	}
	for _, check := range w.planChecks() {
		if f, err := check(ctx); err != nil || f != nil {
			if err != nil {
				return err
			}
			return w.failed(ctx, lavav1.Stage_STAGE_PLAN, f, attempt, "")
		}
	}
	var err error
	if in.regressed, in.regressedFrom, err = w.regression(ctx); err != nil {
		return err
	}
	plan, verdict, stop, err := w.judgedPlan(ctx, eng, in, attempt)
	if stop || err != nil {
		return err
	}
	if in.regressed != "" && !slices.Contains(w.rec.Plans, plan.PlanID) {
		// Reported once per plan id: a plan id already recorded was reported when it was made
		// (the record is written only after its handling published everything).
		if err := w.stateRegressed(ctx, plan, in); err != nil {
			return err
		}
	}
	plan.Policy = nil
	if len(verdict.Matches) > 0 {
		plan.Policy = &verdict
	}
	w.rec.Plans = push(w.rec.Plans, plan.PlanID, maxPlans)
	approved := approvedPlan(in, plan, verdict.Verdict)
	planned, err := w.publishPlanned(ctx, plan, in, !approved, verdict)
	if err != nil {
		return err
	}
	if !approved {
		w.rec.Held, w.rec.HeldGeneration = plan, in.generation
		w.s.metrics.awaiting.Inc()
		w.log.Info("plan held for approval", "plan_id", plan.PlanID, "approve_plan", in.approve, "state_regressed", in.regressed != "")
		// An id that was a plan of this resource (applied, or superseded by a change) is no
		// approval of this one and no error either: the object waits for the new id. Only an
		// id that never was one of its plans is refused.
		if engine.IsPlanID(in.approve) && !slices.Contains(w.rec.Plans, in.approve) && !slices.Contains(w.rec.Applied, in.approve) {
			return w.failed(ctx, lavav1.Stage_STAGE_PLAN, &pipeline.Failure{Reason: v1alpha1.ReasonPlanSuperseded,
				Message: fmt.Sprintf("spec.approvePlan %s is not a plan of this resource; the current plan is %s (%d to add, %d to change, %d to destroy): set spec.approvePlan to %s to apply it",
					in.approve, plan.PlanID, plan.Summary.Add, plan.Summary.Change, plan.Summary.Destroy, plan.PlanID)}, attempt, in.approve)
		}
		return nil
	}
	return w.apply(ctx, eng, plan, in, planned, attempt)
}

// planChecks are what must hold before anything is planned, in order; each returns the
// Failed outcome when it does not hold, or a transient error: the outputs Secret, if it
// exists, is this object's and readable by the identity the object acts with (without an
// identity nothing is checked: only sensitive outputs need one, and their write refuses
// then); the provider credentials can be read ([work.credentialsFailure]); the state was not
// left by a deleted object ([work.orphaned]).
func (w *work) planChecks() []func(context.Context) (*pipeline.Failure, error) {
	outputs := func(ctx context.Context) (*pipeline.Failure, error) {
		kube, kerr := w.kube(ctx)
		if kerr != nil {
			return nil, nil
		}
		if err := outputsSecretOwned(ctx, kube, w.cause.GetResource()); err != nil {
			if f, ok := kubeFailure(err); ok {
				return f, nil
			}
			return nil, err
		}
		return nil, nil
	}
	return []func(context.Context) (*pipeline.Failure, error){outputs, w.credentialsFailure, w.orphaned}
}

// judgedPlan returns the plan to act on, the approved held plan while it is still valid, else
// a new one, and the verdict of the namespace's plan rules on it (docs/design/0037-plan-policies.md);
// a plan a rule holds that has no review body is planned again with one. stop is true when the
// work ends here: the plan failed, or the rules denied it (both published as Failed, whose
// error err then is). Errors: reading the rules or the held plan's state, a transient one.
func (w *work) judgedPlan(ctx context.Context, eng engine.Engine, in input, attempt int32) (plan *engine.PlanRecord, verdict planpolicy.Result, stop bool, err error) {
	rules, err := w.planRules()
	if err != nil {
		return nil, verdict, false, err
	}
	if held := w.rec.Held; held != nil && held.PlanID == in.approve && w.sameInputs(held, in) {
		fresh, err := w.fresh(ctx, held)
		if err != nil {
			return nil, verdict, false, err
		}
		if fresh {
			plan = held
		}
	}
	review := in.approve != v1alpha1.ApprovePlanAuto || in.regressed != "" || rules.UsesValues()
	if plan == nil {
		if plan, err = w.plan(ctx, eng, in, review); err != nil {
			return nil, verdict, true, w.planFailed(ctx, err, attempt)
		}
	}
	if verdict, err = w.verdict(ctx, plan, in, rules); err != nil {
		return nil, verdict, false, err
	}
	if verdict.Verdict == planpolicy.RequireApproval && in.approve != plan.PlanID && plan.ReviewDigest == "" {
		// Held by a rule under auto: plan again with the body `lava plan show` prints (its id
		// covers the body, so this is the id an approval names).
		if plan, err = w.plan(ctx, eng, in, true); err != nil {
			return nil, verdict, true, w.planFailed(ctx, err, attempt)
		}
		if verdict, err = w.verdict(ctx, plan, in, rules); err != nil {
			return nil, verdict, false, err
		}
	}
	if verdict.Verdict == planpolicy.Deny {
		w.rec.Plans = push(w.rec.Plans, plan.PlanID, maxPlans)
		w.rec.Held = nil
		return nil, verdict, true, w.failed(ctx, lavav1.Stage_STAGE_PLAN, &pipeline.Failure{Reason: v1alpha1.ReasonPlanDenied,
			Message: fmt.Sprintf("plan %s is denied by the plan rules of namespace %s and is not applied: %s", plan.PlanID, w.ns, engine.Cut(w.redactor(ctx).Redact(verdict.String())))}, attempt, plan.PlanID)
	}
	return plan, verdict, false, nil
}

// planFailed publishes the Failed of a plan that failed with err, or returns err when the
// work's context ended.
func (w *work) planFailed(ctx context.Context, err error, attempt int32) error {
	if ctx.Err() != nil {
		return err
	}
	return w.failed(ctx, lavav1.Stage_STAGE_PLAN, w.classify(ctx, lavav1.Stage_STAGE_PLAN, err), attempt, "")
}

// approvedPlan reports whether plan, whose plan rules gave verdict (never deny here), may be
// applied now: spec.approvePlan names its id, or the state did not regress, no rule requires
// an approval and either the policy is auto or the plan changes nothing. A plan against a lost
// or regressed state (in.regressed) is applied only when approved by its id, even under auto
// and even when it changes nothing: it would recreate what the lost state recorded, or make a
// state Lava did not write the baseline of every later plan
// (docs/design/0025-lost-or-regressed-state.md); so is a plan a rule requires an approval of
// (docs/design/0037-plan-policies.md).
func approvedPlan(in input, plan *engine.PlanRecord, verdict planpolicy.Verdict) bool {
	if in.approve == plan.PlanID {
		return true
	}
	return in.regressed == "" && verdict == planpolicy.Allow && (in.approve == v1alpha1.ApprovePlanAuto || !plan.HasChanges)
}

func (w *work) engineNames() []string {
	var names []string
	for n := range w.s.cfg.Engines {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// sameInputs reports whether a held plan was made from in's configuration, and after the
// applies of the record (engine.PlanRecord.HasOwnID): a held plan whose id was applied since,
// or that repeats an applied plan and was made before another apply, is planned again.
func (w *work) sameInputs(held *engine.PlanRecord, in input) bool {
	return held.Target.RenderedDigest == in.artifactDigest && held.BindingsDigest == in.bindingsDigest && held.Engine == in.engine &&
		held.Target.RegressedFrom == in.regressedFrom && held.HasOwnID(w.rec.Applied)
}

// orphaned refuses to plan against a state a deleted object of the same name left with
// deletionPolicy Orphan (state.Record.OrphanedBy another uid): its infrastructure belongs to
// nobody until an operator adopts it. nil when the state is this object's or unmarked.
func (w *work) orphaned(ctx context.Context) (*pipeline.Failure, error) {
	rec, err := w.s.cfg.Store.Get(ctx, w.key())
	if errors.Is(err, state.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	uid := w.cause.GetResource().GetUid()
	if rec.OrphanedBy == "" || rec.OrphanedBy == uid {
		return nil, nil
	}
	return &pipeline.Failure{Reason: v1alpha1.ReasonStateOrphaned, Message: fmt.Sprintf(
		"the state of %s (serial %d) was left by a deleted object (uid %s) with deletionPolicy Orphan on %s; this object (uid %s) will not plan against it: "+
			"run `lava state adopt %s` to manage that infrastructure with this object, or delete and recreate this object under another name",
		w.key(), rec.Serial, rec.OrphanedBy, rec.OrphanedAt.UTC().Format(time.RFC3339), uid, w.key())}, nil
}

// regression says how the resource's state regressed since the last apply recorded
// (w.rec.Last), "" when it did not: no state at all, another lineage, an older serial, or
// fewer managed resources at the same or an older serial (a later serial with fewer resources
// is a later operation's work, such as a failed apply that removed some); or that the state is
// a body an operator pushed (`lava state push`) that no apply has run against yet, whatever
// the last apply (there may be none).
//
// It also says so after an apply whose CLI was stopped before it saved its state
// (w.rec.Interrupted), until an apply succeeds. from is the plan id the plan against such a
// state carries as engine.Target.RegressedFrom: the interrupted plan's, else the last applied
// one's ("" for none).
func (w *work) regression(ctx context.Context) (why, from string, err error) {
	if in := w.rec.Interrupted; in != nil {
		return fmt.Sprintf("the apply of plan %s was stopped on %s before it saved its state (%s)", shortID(in.PlanID),
			in.At.UTC().Format(time.RFC3339), in.Message), in.PlanID, nil
	}
	if why, err = w.stateRegression(ctx); why != "" && w.rec.Last != nil {
		from = w.rec.Last.PlanID
	}
	return why, from, err
}

// stateRegression is [work.regression] of the stored state alone.
func (w *work) stateRegression(ctx context.Context) (string, error) {
	rec, err := w.s.cfg.Store.Get(ctx, w.key())
	if err != nil && !errors.Is(err, state.ErrNotFound) {
		return "", err
	}
	last := w.rec.Last
	if last == nil || (last.StateSerial == 0 && last.StateLineage == "") {
		return pushed(rec, ""), nil
	}
	applied := fmt.Sprintf("the last apply (plan %s) left serial %d of lineage %s", shortID(last.PlanID), last.StateSerial, last.StateLineage)
	switch {
	case !rec.HasState():
		return "the state is gone; " + applied, nil
	case rec.Lineage != last.StateLineage:
		return fmt.Sprintf("the state has lineage %s; %s", rec.Lineage, applied), nil
	case rec.Serial < last.StateSerial:
		return fmt.Sprintf("the state has serial %d, older than the %d the last apply (plan %s) left", rec.Serial, last.StateSerial, shortID(last.PlanID)), nil
	}
	if last.Resources > 0 && rec.Serial == last.StateSerial {
		// Only then is the body read: the same serial with fewer resources is a body replaced
		// out of band.
		_, body, err := w.s.cfg.Store.Body(ctx, w.key())
		if errors.Is(err, state.ErrNotFound) {
			return "the state is gone; " + applied, nil
		}
		if err != nil {
			return "", err
		}
		addrs, err := state.ManagedInstances(body)
		if err != nil {
			return "", err
		}
		if len(addrs) < last.Resources {
			return fmt.Sprintf("the state holds %d resources at serial %d; the last apply (plan %s) left %d", len(addrs), rec.Serial,
				shortID(last.PlanID), last.Resources), nil
		}
	}
	return pushed(rec, last.StateDigest), nil
}

// pushed says that rec holds a body pushed with `lava state push` that no apply has run
// against (appliedDigest: the body the last apply left), "" otherwise.
func pushed(rec state.Record, appliedDigest string) string {
	if !rec.PushedUnapplied(appliedDigest) {
		return ""
	}
	return fmt.Sprintf("the state (serial %d of lineage %s) was pushed with lava state push on %s and no apply has run against it",
		rec.Serial, rec.Lineage, rec.Pushed.At.UTC().Format(time.RFC3339))
}

// shortID is the first 12 hex digits of a plan id, as status and logs show it.
func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// fresh reports whether the state is still the one plan was made against.
func (w *work) fresh(ctx context.Context, plan *engine.PlanRecord) (bool, error) {
	rec, err := w.s.cfg.Store.Get(ctx, w.key())
	if err != nil && !errors.Is(err, state.ErrNotFound) {
		return false, err
	}
	return engine.Stale(plan, rec) == nil, nil
}

// plan runs the engine's plan, observed; review asks for its reviewable body (`lava plan
// show`, and the values plan rules read): every plan unless the policy is auto, every plan
// against a regressed state, every plan whose rules read values, and a plan a rule holds.
// A plan whose id was applied already gets an id of its own (engine.PlanRecord.OwnID of the
// record's applied plan ids): the same drift corrected again is the same plan against the
// same state, and the approval of its id was spent by the first apply.
func (w *work) plan(ctx context.Context, eng engine.Engine, in input, review bool) (*engine.PlanRecord, error) {
	start := w.s.cfg.Now()
	p, err := eng.Plan(ctx, engine.PlanRequest{Target: in.target(ctx, w), BindingsDigest: in.bindingsDigest, Review: review,
		Speculative: in.speculative})
	w.observe(OpPlan, start, err)
	if err != nil {
		return nil, err
	}
	p.OwnID(w.rec.Applied)
	return p, nil
}

// observe records an engine operation in the metrics and the Observe hook.
func (w *work) observe(op string, start time.Time, err error) {
	end := w.s.cfg.Now()
	result := ResultSuccess
	if err != nil {
		result = ResultFailure
	}
	w.s.metrics.ops.WithLabelValues(op, result).Inc()
	w.s.metrics.duration.WithLabelValues(op).Observe(end.Sub(start).Seconds())
	if w.s.cfg.Observe != nil {
		w.s.cfg.Observe(Operation{Op: op, Namespace: w.ns, Name: w.name, Holder: w.s.cfg.Holder, Start: start, End: end, Err: err})
	}
}

// apply applies a recorded, approved plan and publishes Applied; planned is the Planned event's
// envelope. A plan approved by its id whose id was applied already is not applied again
// ([spentApproval]).
func (w *work) apply(ctx context.Context, eng engine.Engine, plan *engine.PlanRecord, in input, planned *lavav1.Envelope, attempt int32) error {
	if spentApproval(in, plan, w.rec.Applied) {
		w.log.Info("plan already applied under its approval; not applying it again", "plan_id", plan.PlanID)
		return nil
	}
	start := w.s.cfg.Now()
	creds, _ := w.credentials(ctx) // read (and checked) before the plan
	res, err := eng.Apply(ctx, engine.ApplyRequest{Plan: plan, Holder: w.holder, Redact: w.secrets(ctx), Credentials: creds})
	w.observe(OpApply, start, err)
	if err != nil {
		if ctx.Err() != nil {
			return err
		}
		if w.rec.Held != nil && w.rec.Held.PlanID == plan.PlanID {
			w.rec.Held = nil
		}
		f := w.classify(ctx, lavav1.Stage_STAGE_APPLY, err)
		if errors.Is(err, engine.ErrApplyInterrupted) {
			w.rec.Interrupted = &readmodel.Interruption{PlanID: plan.PlanID, Message: f.Message, At: w.s.cfg.Now().UTC()}
			w.log.Warn("apply stopped before it saved its state; the next plan is held for approval", "plan_id", plan.PlanID)
		}
		return w.failedCause(ctx, planned, lavav1.Stage_STAGE_APPLY, f, attempt, plan.PlanID)
	}
	kube, err := w.kube(ctx)
	secretName := ""
	if err == nil {
		secretName, err = writeOutputs(ctx, kube, w.cause.GetResource(), res.Outputs, w.log)
	} else if res.Outputs == nil || len(res.Outputs.Sensitive) == 0 {
		err = nil // no identity, and nothing to write with one
	}
	if f, ok := kubeFailure(err); ok {
		// The plan is applied (recorded: an approval of its id is spent); the outputs Secret is not
		// written: someone else's Secret holds its name (created since the check before
		// planning), or the object's identity may not write it.
		w.rec.Applied = push(w.rec.Applied, plan.PlanID, maxApplied)
		return w.failedCause(ctx, planned, lavav1.Stage_STAGE_APPLY, f, attempt, plan.PlanID)
	}
	if err != nil {
		return err
	}
	after, left, err := w.stateAfter(ctx)
	if err != nil {
		return err
	}
	w.rec.Applied = push(w.rec.Applied, plan.PlanID, maxApplied)
	w.rec.Held, w.rec.HeldGeneration, w.rec.Interrupted = nil, 0, nil
	w.rec.Last = &readmodel.LastApplied{PlanID: plan.PlanID, Engine: in.engine, ArtifactDigest: in.artifactDigest,
		TerraformJSONDigest: in.terraformJSONDigest, BindingsDigest: in.bindingsDigest, Providers: in.providers,
		Generation: in.generation, StateSerial: res.StateSerial, StateLineage: res.StateLineage, Resources: len(left),
		AppliedAt: w.s.cfg.Now().UTC(), Manual: in.manual}
	if after.Serial == res.StateSerial && after.Lineage == res.StateLineage {
		// The body this apply left, which `lava state restore` puts back after a loss; kept
		// from the artifact collection while it is the last applied one (LiveArtifacts).
		w.rec.Last.StateDigest = after.Digest
	}
	ev := &lavav1.Applied{
		Envelope:            w.envelope(planned, "lava.v1.Applied"),
		PlanId:              plan.PlanID,
		Outputs:             map[string]string{},
		OutputsSecret:       secretName,
		StateSerial:         int64(res.StateSerial),
		StateLineage:        res.StateLineage,
		Summary:             summaryProto(res.Summary),
		Engine:              pipeline.EngineProto(v1alpha1.Engine(in.engine)),
		TerraformJsonDigest: in.terraformJSONDigest,
		ArtifactDigest:      in.artifactDigest,
	}
	for _, p := range in.providers {
		ev.Providers = append(ev.Providers, &lavav1.ProviderRequirement{Name: p.Name, Source: p.Source, Version: p.Version})
	}
	if res.Outputs != nil {
		for k, v := range res.Outputs.Values {
			ev.Outputs[k] = compactJSON(v)
		}
	}
	if _, err := w.s.pub.PublishEvent(ctx, ev); err != nil {
		if big := (*bus.PayloadTooLargeError)(nil); errors.As(err, &big) {
			return w.failedCause(ctx, planned, lavav1.Stage_STAGE_APPLY, outputsTooLarge(ev.GetOutputs(), big), attempt, plan.PlanID)
		}
		return err
	}
	w.log.Info("applied", "plan_id", plan.PlanID, "state_serial", res.StateSerial,
		"add", res.Summary.Add, "change", res.Summary.Change, "destroy", res.Summary.Destroy)
	return nil
}

// spentApproval reports whether plan is approved by its id (in.approve) and that id is among
// applied (the record's applied plan ids): an approval by id applies its plan once. A plan the
// applier makes never has an applied id ([work.plan] gives a repetition an id of its own) and a
// held plan whose id was applied since it was made is planned again ([work.sameInputs]); this
// is the check at the apply itself. A plan applied without an approval of its id is made by the
// handling that applies it, against the infrastructure as it is then. A redelivered message
// never reaches a plan: its event id is among the record's handled ones ([Service.Handle]).
func spentApproval(in input, plan *engine.PlanRecord, applied []string) bool {
	return in.approve == plan.PlanID && slices.Contains(applied, plan.PlanID)
}

// outputsTooLarge is the failure of an apply whose Applied event (its non-sensitive outputs)
// is larger than the bus takes: the plan is applied and recorded, but nothing can report it, so
// the object fails (not retried: the same outputs fail again) naming the largest output and
// the sizes, never a value.
func outputsTooLarge(outputs map[string]string, big *bus.PayloadTooLargeError) *pipeline.Failure {
	largest := ""
	for k, v := range outputs {
		if largest == "" || len(v) > len(outputs[largest]) || len(v) == len(outputs[largest]) && k < largest {
			largest = k
		}
	}
	return &pipeline.Failure{Reason: v1alpha1.ReasonApplyFailed, Message: fmt.Sprintf(
		"applied, but the Applied event is %d bytes, more than the bus's maximum message size of %d bytes (the NATS server's max_payload); "+
			"the largest output is %q (%d bytes of JSON): make the outputs smaller, or mark large ones sensitive (they then go only to the outputs Secret)",
		big.Size, big.Max, largest, len(outputs[largest]))}
}

// compactJSON is v as compact JSON text.
func compactJSON(v json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, v); err != nil {
		return string(v)
	}
	return b.String()
}
