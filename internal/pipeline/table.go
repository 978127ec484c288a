package pipeline

import (
	"errors"
	"fmt"
)

// Edge is one allowed transition: in phase From, an event of type Event moves to phase To.
type Edge struct {
	From  Phase
	Event EventType
	To    Phase
}

// Table returns the transition table: every allowed (phase, event) pair and the phase it leads
// to. A pair that is not listed is an illegal transition. It is the only definition of the
// lifecycle; [Reduce] and the tests read it. Each call returns a fresh slice.
func Table() []Edge {
	// Every phase that is not Finalizing: the object is alive.
	alive := []Phase{Pending, Synthesized, Planned, Applied, Drifted, Reconverging, Failed}
	t := make([]Edge, 0, 96)
	t = append(t, []Edge{
		// The pipeline.
		{Pending, EventSynthesized, Synthesized},
		{Synthesized, EventSynthesized, Synthesized},
		{Synthesized, EventPlanned, Planned},
		{Planned, EventPlanned, Planned},
		{Synthesized, EventAwaitingApproval, Planned},
		{Planned, EventAwaitingApproval, Planned},
		{Planned, EventApplied, Applied},
		{Applied, EventApplied, Applied},

		// Retries out of Failed: the retried stage succeeds.
		{Failed, EventSynthesized, Synthesized},
		{Failed, EventPlanned, Planned},
		{Failed, EventAwaitingApproval, Planned},
		{Failed, EventApplied, Applied},

		// Drift after an apply.
		{Applied, EventDriftClean, Applied},
		{Drifted, EventDriftClean, Applied},
		{Reconverging, EventDriftClean, Applied},
		{Applied, EventDrifted, Drifted},
		{Drifted, EventDrifted, Drifted},
		{Reconverging, EventDrifted, Drifted},
		{Applied, EventReconverging, Reconverging},
		{Drifted, EventReconverging, Reconverging},
		{Reconverging, EventReconverging, Reconverging},
		// A re-apply plans (and may wait for approval) without leaving Reconverging.
		{Reconverging, EventPlanned, Reconverging},
		{Reconverging, EventAwaitingApproval, Reconverging},
		{Reconverging, EventApplied, Applied},
		// A drift held for approval (RequireApproval) plans and waits without leaving Drifted;
		// the approved plan's apply ends it.
		{Drifted, EventPlanned, Drifted},
		{Drifted, EventAwaitingApproval, Drifted},
		{Drifted, EventApplied, Applied},

		// Deletion: Destroyed ends it (the watcher removes the finalizer); a failed destroy
		// is Failed and a successful retry still ends in Destroyed.
		{Finalizing, EventDeletionRequested, Finalizing},
		{Finalizing, EventDestroyed, Finalizing},
		{Finalizing, EventFailed, Failed},
		{Failed, EventDestroyed, Finalizing},
	}...)
	for _, p := range alive {
		t = append(t,
			// A new generation (or a forced pass) restarts the pipeline.
			Edge{p, EventObserved, Pending},
			// Any stage may fail.
			Edge{p, EventFailed, Failed},
			// Deletion wins over everything.
			Edge{p, EventDeletionRequested, Finalizing},
		)
	}
	for _, p := range All() {
		for _, ev := range []EventType{EventSuspended, EventResumed, EventDependenciesBlocked, EventDependenciesSatisfied,
			EventDeletionBlocked, EventDeletionUnblocked, EventReceiptAppended} {
			t = append(t, Edge{p, ev, p})
		}
	}
	return t
}

// Next looks (from, ev) up in [Table]: the phase it leads to, or false when the transition is
// illegal. The empty phase reads as Pending.
func Next(from Phase, ev EventType) (Phase, bool) {
	from = current(from)
	for _, e := range Table() {
		if e.From == from && e.Event == ev {
			return e.To, true
		}
	}
	return "", false
}

// ErrIllegalTransition matches every [*IllegalTransitionError] with [errors.Is].
var ErrIllegalTransition = errors.New("illegal phase transition")

// IllegalTransitionError is returned by [Reduce] for an event the [Table] does not allow in
// the current phase. It is permanent: the same event in the same phase always fails, so a
// consumer drops it (with a log line) instead of retrying.
type IllegalTransitionError struct {
	// From is the phase the status was in.
	From Phase
	// Event is the type of the rejected event.
	Event EventType
	// Generation is the rejected event's generation.
	Generation int64
}

// Error reads "phase: illegal transition: <event> in phase <from> (generation <n>)".
func (e *IllegalTransitionError) Error() string {
	return fmt.Sprintf("phase: illegal transition: %s in phase %s (generation %d)", e.Event, e.From, e.Generation)
}

// Is reports whether target is [ErrIllegalTransition].
func (e *IllegalTransitionError) Is(target error) bool { return target == ErrIllegalTransition }
