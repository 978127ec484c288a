// Package phase is the LavaArchitecture lifecycle: the [Phase] enum, the one pure transition
// table between phases ([Table]) and the reducer [Reduce] that folds an [Event] into a
// [v1alpha1.LavaArchitectureStatus].
//
// # Model
//
// The happy path is Pending → Synthesized → Planned → Applied; after an apply, drift scans move
// Applied → Drifted (recorded or held) or Reconverging (being corrected) and back to Applied;
// any phase may fail (Failed, with exits: a retry that succeeds, a new generation, deletion);
// deletion moves any phase to Finalizing, and Destroyed ends it (the watcher then removes the
// finalizer). UPSTREAM.md section 5.4 has the diagram this table encodes.
//
// # Conditions
//
// Reduce sets conditions with [meta.SetStatusCondition], stamping each with the event's
// generation and time, so lastTransitionTime moves only when a condition's status flips.
// Ready, Reconciling and Stalled follow kstatus: Ready is True only in Applied for the current
// generation; Reconciling is True while work (or a scheduled retry) is in progress; Stalled is
// True after a terminal failure. See api/v1alpha1/condition_types.go for every type and reason.
//
// # Idempotence and ordering
//
// Reduce is pure: it never reads the clock, never mutates its input and returns the same output
// for the same input. Events for a generation older than status.observedGeneration are ignored
// ([Transition].Stale); applying the same event twice leaves the status unchanged the second
// time ([Transition].Changed is false); an event the table does not allow in the current phase
// is an [*IllegalTransitionError], which a consumer should log and drop, never retry.
//
// The package does not depend on the protobuf events: the watcher maps each consumed message
// onto an [Event].
package phase
