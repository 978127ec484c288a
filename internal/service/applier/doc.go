// Package applier is the applier service's logic (docs/architecture.md sections 2 and 5): it consumes
// Synthesized (LAVA_PHASES), ReapplyRequested and plan/apply/destroy RetryRequested
// (LAVA_COMMANDS) and DeletionRequested (LAVA_RESOURCES) with the durable consumer "applier",
// plans with the engine the event names, applies exactly the recorded plan when approvePlan
// allows it, and destroys or orphans on deletion.
//
// # Exclusion and idempotency
//
// Every handler runs under the resource's lease in lava-leases, taken without waiting: a lease
// held by another replica naks the message with delay, so two replicas never plan, apply or
// destroy one resource at once. Generations older than the applier's watermark are dropped,
// and a Synthesized older than the object's newest ResourceObserved is not planned (the newer
// generation's follows).
// Per resource the applier keeps a [readmodel.Record] in lava-state (key "applier.<ns>.<name>",
// written here with a compare-and-set under the lease; the type and its read live in
// internal/readmodel, which `lava state show` and `lava plan show` use): the plan held for
// approval, recent plan ids, the applied plan ids, the event ids already handled and what a
// later destroy needs (the last applied configuration's artifact digest, engine and
// providers, and the state serial, lineage and body the apply left). A redelivered message whose outcome was published is acknowledged without
// acting (its event id is among the handled ones, checked before anything is planned). State is
// never deleted because a spec changed; only a successful destroy forgets it
// (state.Store.Forget keeps history).
//
// An approval by plan id is spent by its apply: a plan approved by its id whose id was applied
// already is not applied again. The same plan comes back when the same drift is corrected
// twice: a correction restores the state body the last apply left at the same serial (the
// engines, as Terraform, write no new serial for an unchanged body), so the second correction
// is the same plan against the same state. Such a plan, one whose id is among the record's
// applied ids, gets an id of its own (engine.PlanRecord.OwnID: it carries the newest applied id
// as engine.Target.RepeatedAfter, and its id is engine.RepeatedPlanID of the two), so it is
// applied under auto and, under manual or a plan rule, held under an id the object can be
// approved by; under the applied id it was held under an approval spent already, and setting
// approvePlan to that id again changed nothing. A held plan is applied only while it still has
// that id (engine.PlanRecord.HasOwnID): one held since its id, or another plan after the one
// it repeats, was applied is planned again. Skipping every applied id, not only an approval's,
// would protect nothing more: the record that holds them is written together with the handled
// event ids, so a redelivery is caught by those first.
//
// # Approval
//
// approvePlan "auto" applies every plan; "manual" holds every plan that changes something
// (Planned with awaiting_approval, which the watcher turns into the AwaitingApproval
// condition naming the plan id); a plan id applies the plan with that id. A later Synthesized
// whose approvePlan equals the held plan's id applies the held plan itself, after checking
// that its inputs (rendered JSON, bindings, engine) and the state it was planned against are
// unchanged. When they changed the approved id is superseded: the applier publishes Planned
// (awaiting approval) for the new plan id and the object waits for it, as it does when the id
// of an applied plan is left in approvePlan. Only an id that never was a plan of the resource
// is refused: Failed (stage PLAN, reason PlanSuperseded, not retryable, plan_id the refused
// id, a message naming the new id). A plan that changes nothing is applied without approval
// (nothing can change). Under approvePlan other than auto a re-apply (a drift correction) is
// held for approval whatever the remediation policy says (readmodel.LastApplied.Manual).
//
// # Plan rules
//
// Every plan, whatever caused it, is judged by the plan rules of its namespace (the policy
// document's planRules, Config.Policy; internal/lang/planpolicy) before anything else decides:
// deny fails it (Failed, stage PLAN, reason PlanDenied, not retryable) and nothing is applied;
// requireApproval holds it as manual approval does, whatever approvePlan says, until
// approvePlan names its id; the rules that matched go out in Planned.plan_policy and stay on
// the held plan record (engine.PlanRecord.Policy) for `lava plan show`. The review body is
// asked for when a rule reads values, and a plan a rule holds is planned again with one if it
// had none. A destroy is judged as a plan deleting every object the state holds: a rule that
// matches refuses it (Failed, stage DESTROY, reason PlanDenied) and nothing is destroyed
// (docs/design/0037-plan-policies.md).
//
// # Speculative plans
//
// [PlanServer] serves PlanService (connect, --connect-addr, behind internal/platform/rpcauth:
// create on lavaarchitectures in the request's namespace). A preview renders the request's
// spec with synth's [synthesis.Renderer] (its artifact keyed with the installation's bindings key,
// --bindings-key-file, as synth keys it) and runs the applier's own steps of a plan on it as a
// work without a lease: the checks before planning ([work.planChecks]), the regression check,
// the engine's plan with a review body and engine.PlanRequest.Speculative (no state lock, no
// dependency-lock record, no recovery), and the plan rules. It writes no record, publishes
// nothing and applies nothing; its plan id is the one the object gets when spec.approvePlan
// names it and nothing else changed (docs/design/0039-speculative-plans.md).
//
// # A lost or regressed state
//
// Before planning, the state is compared with the last apply recorded (readmodel.LastApplied):
// a state that is gone, has another lineage, an older serial, or fewer resources at the same
// serial has regressed. The plan against it gets an id of its own (engine.RegressedPlanID),
// carries state_regressed on Planned (the watcher's StateRegressed condition), is reported once
// as the critical anomaly pipeline.StateRegressedAnomaly (on bus.StateRegressedAnomalySubject,
// which the applier's identity may publish), and is applied only when approvePlan names its id:
// under auto too, and even when it changes nothing (docs/design/0025-lost-or-regressed-state.md).
// LastApplied.StateDigest names the state body each apply left; the artifact collection keeps it,
// so `lava state restore` (state.Store.Restore) can put a lost state back. A state an operator
// pushed from a file (`lava state push`, state.Store.Push) that no apply has run against
// (state.Record.PushedUnapplied) is held the same way, with or without a last apply
// (docs/design/0035-state-pull-and-push.md).
//
// # Failures
//
// Engine failures are published as Failed with the stage (PLAN, APPLY, DESTROY), a CamelCase
// reason (ProviderUnavailable, PlanFailed, ApplyFailed, DestroyFailed, PlanStale, Locked,
// EngineUnavailable, StepTimeout: a step past --plan-timeout, --apply-timeout or
// --destroy-timeout, engine.ErrStepTimeout), the redacted output tail as message and whether a
// retry may succeed:
// each is a pipeline.Failure, whose kind (terminal, retryable, waiting) gives the event's
// retryable, as for synth.
// Infrastructure errors (NATS, KV) nak the message instead. Sensitive outputs go only to the
// Secret "<name>-lava-outputs" in the resource's namespace, never into events or logs.
package applier
