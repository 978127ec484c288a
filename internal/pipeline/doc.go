// Package pipeline is the vocabulary the pipeline's services share, so that no service imports
// another: the LavaArchitecture lifecycle (phases, the transition table and the status reducer),
// the remediation policy in the form the services carry it, the engine names, the anomaly
// fingerprint and sanitizer, the consumer every service runs ([Consumer]: its durable on the
// bus with the poison-message reporter every consumer uses and, for the applier, drift and
// viggy, the envelope guard that terminates an event naming no resource before the service's
// handler sees it), and the typed stage failures synth
// and the applier publish as Failed ([Failure]: [FailureTerminal], [FailureRetryable],
// [FailureWaiting], after the error kinds of Flux's controllers).
//
// # Lifecycle
//
// The phases are the [Phase] enum, the one pure transition table between them is [Table], and
// the reducer [Reduce] folds an [Event] into a [v1alpha1.LavaArchitectureStatus].
//
// # Lifecycle model
//
// The happy path is Pending → Synthesized → Planned → Applied; after an apply, drift scans move
// Applied → Drifted (recorded or held) or Reconverging (being corrected) and back to Applied;
// any phase may fail (Failed, with exits: a retry that succeeds, a new generation, deletion);
// deletion moves any phase to Finalizing, and Destroyed ends it (the watcher then removes the
// finalizer). docs/dialect.md section 5.4 has the diagram this table encodes.
//
// # Lifecycle conditions
//
// Reduce sets conditions with [meta.SetStatusCondition], stamping each with the event's
// generation and time, so lastTransitionTime moves only when a condition's status flips.
// Ready, Reconciling and Stalled follow kstatus: Ready is True only in Applied for the current
// generation; Reconciling is True while work (or a scheduled retry) is in progress; Stalled is
// True after a terminal failure. See api/v1alpha1/condition_types.go for every type and reason.
//
// # Reducer idempotence and ordering
//
// Reduce is pure: it never reads the clock, never mutates its input and returns the same output
// for the same input. Events for a generation older than status.observedGeneration are ignored
// ([Transition].Stale); applying the same event twice leaves the status unchanged the second
// time ([Transition].Changed is false); an event the table does not allow in the current phase
// is an [*IllegalTransitionError], which a consumer should log and drop, never retry.
//
// The package does not depend on the protobuf events: the watcher maps each consumed message
// onto an [Event].
//
// # Using the reducer from a controller
//
//   - Fold an Observed event when metadata.generation is newer than status.observedGeneration
//     (or with Force for a reconcile-requested-at change or an edited RemediationPolicy), never
//     for an object that has a deletionTimestamp: fold DeletionRequested instead, with the
//     object's generation (the API server bumps it when it sets deletionTimestamp).
//   - Hold-backs are conditions, not phases: fold Suspended / Resumed and DependenciesBlocked /
//     DependenciesSatisfied next to Observed; the phase stays Pending until work is published.
//     Both are kstatus-correct (sigs.k8s.io/cli-utils/pkg/kstatus, tested in
//     kstatus_integration_test.go): Suspended for a newer generation advances
//     status.observedGeneration, keeps the phase, Ready and Stalled (whose own
//     observedGeneration still names the pass they describe) and sets Reconciling False
//     (kstatus Current when the last pass applied, Failed after a terminal failure);
//     DependenciesBlocked for a generation no pass has started for observes it (phase
//     Pending, Reconciling True: InProgress), a dependency cycle sets Stalled True (Failed).
//     Drifted (drift the policy does not correct) is Stalled too (Failed); Reconverging is
//     InProgress.
//   - Patch the status subresource only when [Transition].Changed and the result differs from
//     the last status patched (compare with equality.Semantic: times round-trip through the API
//     server at second precision and in another location).
//   - Publish PhaseChanged when [Transition].Publish; remove the finalizer when
//     [Transition].RemoveFinalizer.
//   - A stale event (Transition.Stale) and an [*IllegalTransitionError] are final: acknowledge
//     the message and log it at debug level; retrying cannot change the answer. An error
//     wrapping [ErrInvalidEvent] is a producer bug: terminate the message.
//
// # Remediation policy
//
// [DefaultRemediation] is the policy of a resource that configures none
// (api/v1alpha1.DefaultDriftRemediation, its one declaration, in the proto form
// lavav1.RemediationPolicy that ResourceObserved.remediation carries); [ActionProto] and
// [ActionName] map the CRD's actions to the proto enum and to metric labels. The watcher
// resolves a resource's policy; viggy and the anomaly service fall back to the default.
//
// # Anomalies every service reports
//
// The parts of the anomaly contract every service shares without the anomaly service's
// dependencies (no Kubernetes client): the fingerprint ([Fingerprint]), the sanitizer
// ([Sanitize]), the poison-message reporter ([PoisonReporter]) that turns a message
// bus.Consume terminated into an AnomalyDetected, and the state-regression anomaly
// ([StateRegressedAnomaly]).
package pipeline
