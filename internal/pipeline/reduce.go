package pipeline

import (
	"fmt"
	"maps"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lava-operator/lava/api/v1alpha1"
)

// Transition describes what [Reduce] did with one event.
type Transition struct {
	// Event is the type of the event reduced.
	Event EventType
	// Generation is the event's generation.
	Generation int64
	// From and To are the phases before and after (equal for self-loops, condition-only
	// events and ignored events). The empty phase of a fresh status reads as Pending.
	From, To Phase
	// Stale is true when the event was ignored because its generation is older than
	// status.observedGeneration.
	Stale bool
	// Changed is true when the returned status differs from the input. Patch the status
	// subresource only then (and only if it also differs from the last value patched).
	Changed bool
	// Publish is true when the transition should be published as PhaseChanged (and so
	// receipted): the status changed and the event is not ReceiptAppended, whose own
	// bookkeeping must not produce another receipt.
	Publish bool
	// RemoveFinalizer is true after Destroyed: the watcher may remove
	// [v1alpha1.Finalizer].
	RemoveFinalizer bool
}

// Reduce folds ev into status and returns the new status and what happened. It is pure: it
// does not modify status, read the clock or do I/O.
//
// Rules, in order: a malformed event is an error wrapping [ErrInvalidEvent]. ReceiptAppended
// moves status.receipt forward only to a higher sequence. Any other event whose generation is
// older than status.observedGeneration is ignored (Stale). An Observed event for the current
// generation without Force is a no-op. A lifecycle event (not condition-only, not deletion)
// for a newer generation first observes that generation (as an Observed event would) and is
// then applied. The event must then be allowed in the current phase by [Table], otherwise the
// result is an [*IllegalTransitionError] and the input status unchanged.
func Reduce(status v1alpha1.LavaArchitectureStatus, ev Event) (v1alpha1.LavaArchitectureStatus, Transition, error) {
	from := current(status.Phase)
	tr := Transition{Event: ev.Type, Generation: ev.Generation, From: from, To: from}
	if err := ev.validate(); err != nil {
		return status, tr, fmt.Errorf("phase: reduce: %w", err)
	}
	out := *status.DeepCopy()
	r := reducer{out: &out, ev: ev, at: metav1.NewTime(ev.Time.UTC().Truncate(time.Second)), msg: truncate(ev.Message)}

	switch {
	case ev.Type == EventReceiptAppended:
		if status.Receipt == nil || ev.Receipt.Sequence > status.Receipt.Sequence {
			h := *ev.Receipt
			out.Receipt = &h
		}
		out.Phase = from
		return finish(status, out, tr)
	case ev.Generation < status.ObservedGeneration:
		tr.Stale = true
		return status, tr, nil
	case ev.Type == EventObserved && ev.Generation == status.ObservedGeneration && !ev.Force && status.Phase != "":
		return status, tr, nil
	}

	newer := ev.Generation > status.ObservedGeneration
	cur := from
	// A lifecycle event, or a dependency hold, for a newer generation first observes it: a
	// held generation is Pending (so dependents wait for it) with status.observedGeneration
	// advanced (so kstatus reads the hold from the conditions, not from a stale generation).
	if newer && ev.Type != EventObserved && (!ev.Type.conditionOnly() || ev.Type == EventDependenciesBlocked) &&
		ev.Type != EventDeletionRequested && ev.Type != EventDestroyed {
		if _, ok := Next(cur, EventObserved); !ok {
			return status, tr, &IllegalTransitionError{From: from, Event: ev.Type, Generation: ev.Generation}
		}
		r.observe()
		cur = Pending
	}
	to, ok := Next(cur, ev.Type)
	if !ok {
		return status, tr, &IllegalTransitionError{From: cur, Event: ev.Type, Generation: ev.Generation}
	}
	r.held = ev.Type == EventDependenciesBlocked && (newer || cur == Pending)
	r.apply(to)
	out.Phase = to
	tr.To = to
	tr.RemoveFinalizer = ev.Type == EventDestroyed
	return finish(status, out, tr)
}

// finish fills in Changed and Publish by comparing in and out.
func finish(in, out v1alpha1.LavaArchitectureStatus, tr Transition) (v1alpha1.LavaArchitectureStatus, Transition, error) {
	tr.Changed = !equality.Semantic.DeepEqual(in, out)
	tr.Publish = tr.Changed && tr.Event != EventReceiptAppended
	if !tr.Changed {
		return in, tr, nil
	}
	return out, tr, nil
}

// reducer applies one event's effects to out.
type reducer struct {
	out *v1alpha1.LavaArchitectureStatus
	ev  Event
	at  metav1.Time
	msg string
	// held is true for a dependency hold of a generation no pass has started for (a newer
	// one, observed by this event, or the current one while Pending).
	held bool
}

// set sets condition typ with the event's generation and time.
func (r reducer) set(typ string, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(&r.out.Conditions, metav1.Condition{
		Type:               typ,
		Status:             status,
		Reason:             reason,
		Message:            message,
		ObservedGeneration: r.ev.Generation,
		LastTransitionTime: r.at,
	})
}

// clear sets condition typ False, but only if it is present: conditions that never applied
// stay absent.
func (r reducer) clear(typ, reason, message string) {
	if meta.FindStatusCondition(r.out.Conditions, typ) != nil {
		r.set(typ, metav1.ConditionFalse, reason, message)
	}
}

// reason is the event's reason, or def when it has none.
func (r reducer) reason(def string) string {
	if r.ev.Reason != "" {
		return r.ev.Reason
	}
	return def
}

// message is the event's message, or def when it has none.
func (r reducer) message(def string) string {
	if r.msg != "" {
		return r.msg
	}
	return def
}

// progressing marks work in progress: Reconciling True, Ready False, Stalled False.
func (r reducer) progressing(reason, message string) {
	r.set(v1alpha1.ConditionReconciling, metav1.ConditionTrue, reason, message)
	r.set(v1alpha1.ConditionReady, metav1.ConditionFalse, reason, message)
	r.set(v1alpha1.ConditionStalled, metav1.ConditionFalse, reason, "")
}

// observe starts a pass for the event's generation: phase Pending's conditions.
func (r reducer) observe() {
	r.out.ObservedGeneration = r.ev.Generation
	r.progressing(v1alpha1.ReasonProgressing, fmt.Sprintf("reconciling generation %d", r.ev.Generation))
	r.clear(v1alpha1.ConditionAwaitingApproval, v1alpha1.ReasonProgressing, "")
}

// apply sets the status fields and conditions of the event, which leads to phase to.
func (r reducer) apply(to Phase) {
	switch r.ev.Type {
	case EventObserved:
		r.observe()
	case EventSynthesized:
		r.synthesized()
	case EventPlanned, EventAwaitingApproval:
		r.planned(to)
	case EventApplied:
		r.applied()
	case EventFailed:
		r.failed()
	case EventDriftClean:
		// A clean scan of a resource that is not drifted (Drifted False or absent) changes
		// nothing (no write, no PhaseChanged): only the end of a drift is news.
		if meta.IsStatusConditionTrue(r.out.Conditions, v1alpha1.ConditionDrifted) {
			r.set(v1alpha1.ConditionDrifted, metav1.ConditionFalse, r.reason(v1alpha1.ReasonNoDrift), r.message("no drift"))
		}
		r.ready(fmt.Sprintf("applied generation %d", r.out.ObservedGeneration))
	case EventDrifted:
		r.drifted()
	case EventReconverging:
		reason, msg := r.reason(v1alpha1.ReasonReconverging), r.message("re-applying to correct drift")
		r.set(v1alpha1.ConditionDrifted, metav1.ConditionTrue, reason, msg)
		r.progressing(reason, msg)
	case EventDeletionRequested:
		r.catchUpGeneration()
		r.progressing(v1alpha1.ReasonFinalizing, r.message("deleting"))
	case EventDestroyed:
		r.destroyed()
	case EventSuspended:
		r.suspended()
	case EventResumed:
		r.clear(v1alpha1.ConditionSuspended, v1alpha1.ReasonResumed, r.message("spec.suspend is false"))
	case EventDependenciesBlocked:
		r.dependenciesBlocked()
	case EventDependenciesSatisfied:
		r.set(v1alpha1.ConditionDependenciesReady, metav1.ConditionTrue,
			r.reason(v1alpha1.ReasonDependenciesSatisfied), r.message("every dependency reached its phase"))
	case EventDeletionBlocked:
		r.set(v1alpha1.ConditionDeletionBlocked, metav1.ConditionTrue, r.reason(v1alpha1.ReasonConsumersExist),
			r.message("waiting for the objects that consume this one to be destroyed first"))
	case EventDeletionUnblocked:
		r.clear(v1alpha1.ConditionDeletionBlocked, r.reason(v1alpha1.ReasonConsumersDestroyed), r.message("no object consumes this one"))
	}
}

// catchUpGeneration advances status.observedGeneration to the event's generation when the
// event is for a newer one, without starting a pass (no condition changes).
func (r reducer) catchUpGeneration() {
	if r.ev.Generation > r.out.ObservedGeneration {
		r.out.ObservedGeneration = r.ev.Generation
	}
}

// synthesized records a Synthesized event: the render, Synthesized True, Gated True when the
// render passed an interface gate (absent otherwise), and work in progress towards a plan.
func (r reducer) synthesized() {
	rec := *r.ev.Render
	r.out.Render = &rec
	r.set(v1alpha1.ConditionSynthesized, metav1.ConditionTrue, r.reason(v1alpha1.ReasonSynthesisSucceeded),
		r.message(fmt.Sprintf("rendered %s: %d resources", nameOr(rec.ArchitectureName, "architecture"), rec.ResourceCount)))
	if rec.Gate != "" {
		r.set(v1alpha1.ConditionGated, metav1.ConditionTrue, v1alpha1.ReasonGatePassed,
			fmt.Sprintf("bindings satisfy interface %s", rec.Gate))
	} else {
		meta.RemoveStatusCondition(&r.out.Conditions, v1alpha1.ConditionGated)
	}
	r.progressing(v1alpha1.ReasonProgressing, "synthesized; planning")
}

// planned records a Planned or AwaitingApproval event, which leads to phase to: the plan,
// Planned True, StateRegressed True when the plan was made against a regressed state, and
// AwaitingApproval True for a plan held for approval.
func (r reducer) planned(to Phase) {
	ev := r.ev
	p := *ev.Plan.DeepCopy()
	r.out.Plan = &p
	r.set(v1alpha1.ConditionPlanned, metav1.ConditionTrue, v1alpha1.ReasonPlanSucceeded, planMessage(p))
	reason, msg := v1alpha1.ReasonProgressing, "planned; applying"
	if to == Reconverging {
		reason, msg = v1alpha1.ReasonReconverging, "planned; re-applying to correct drift"
	}
	if ev.StateRegressed != "" {
		r.set(v1alpha1.ConditionStateRegressed, metav1.ConditionTrue, v1alpha1.ReasonStateRegressed,
			truncate(ev.StateRegressed+"; plan "+p.ID+" was made against it"))
	}
	if ev.Type == EventAwaitingApproval {
		reason = v1alpha1.ReasonApprovalRequired
		held := ""
		if ev.PlanPolicy != "" {
			held = " (" + ev.PlanPolicy + ")"
		}
		msg = r.message(truncate(fmt.Sprintf("plan %s awaits approval%s: set spec.approvePlan to %s", p.ID, held, p.ID)))
		r.set(v1alpha1.ConditionAwaitingApproval, metav1.ConditionTrue, reason, msg)
	}
	r.progressing(reason, msg)
}

// applied records an Applied event: the applied plan, the outputs, the applied time and
// revision, Applied True, the end of any approval hold, drift or state regression, and Ready.
func (r reducer) applied() {
	ev := r.ev
	if ev.Plan != nil {
		p := *ev.Plan.DeepCopy()
		// Applied carries no per-resource actions: those of the plan it applied stay.
		if prev := r.out.Plan; prev != nil && prev.ID == p.ID && p.Resources == nil {
			p.Resources, p.ResourcesOmitted = prev.Resources, prev.ResourcesOmitted
		}
		r.out.Plan = &p
	}
	r.out.Outputs = maps.Clone(ev.Outputs)
	for k, v := range r.out.Outputs {
		r.out.Outputs[k] = *v.DeepCopy()
	}
	r.out.OutputsSecret = ev.OutputsSecret
	at := r.at
	r.out.LastAppliedAt = &at
	// The applier applies what synth rendered last: the render's source revision (a Flux
	// artifact's; empty for other sources) is the applied one.
	r.out.LastAppliedRevision = ""
	if r.out.Render != nil {
		r.out.LastAppliedRevision = r.out.Render.SourceRevision
	}
	planID := ""
	if r.out.Plan != nil {
		planID = r.out.Plan.ID
	}
	r.set(v1alpha1.ConditionApplied, metav1.ConditionTrue, r.reason(v1alpha1.ReasonApplySucceeded),
		r.message(strings.TrimSpace("applied plan "+planID)))
	r.clear(v1alpha1.ConditionAwaitingApproval, v1alpha1.ReasonApproved, "")
	r.clear(v1alpha1.ConditionDrifted, v1alpha1.ReasonNoDrift, "applied")
	r.clear(v1alpha1.ConditionStateRegressed, v1alpha1.ReasonApplySucceeded,
		strings.TrimSpace("the state was rebuilt by applying plan "+planID))
	r.ready(fmt.Sprintf("applied generation %d", ev.Generation))
}

// failed records a Failed event: the failed stage's condition False, Ready False, and either
// Stalled True (a terminal failure) or Reconciling True (a failure that is retried).
func (r reducer) failed() {
	ev := r.ev
	reason := r.reason(defaultFailReason(ev.Stage))
	msg := r.message(strings.ToLower(nameOr(string(ev.Stage), "reconcile")) + " failed")
	switch ev.Stage {
	case StageSynthesis:
		r.set(v1alpha1.ConditionSynthesized, metav1.ConditionFalse, reason, msg)
	case StageGate:
		r.set(v1alpha1.ConditionGated, metav1.ConditionFalse, reason, msg)
		r.set(v1alpha1.ConditionSynthesized, metav1.ConditionFalse, reason, msg)
	case StagePlan:
		r.set(v1alpha1.ConditionPlanned, metav1.ConditionFalse, reason, msg)
	case StageApply:
		r.set(v1alpha1.ConditionApplied, metav1.ConditionFalse, reason, msg)
	}
	r.set(v1alpha1.ConditionReady, metav1.ConditionFalse, reason, msg)
	if ev.Terminal {
		r.set(v1alpha1.ConditionStalled, metav1.ConditionTrue, reason, msg)
		r.set(v1alpha1.ConditionReconciling, metav1.ConditionFalse, reason, "")
	} else {
		r.set(v1alpha1.ConditionReconciling, metav1.ConditionTrue, v1alpha1.ReasonProgressingWithRetry, msg)
		r.set(v1alpha1.ConditionStalled, metav1.ConditionFalse, v1alpha1.ReasonProgressingWithRetry, "")
	}
}

// drifted records a Drifted event: Drifted True, Ready False, Reconciling False, Stalled True.
func (r reducer) drifted() {
	reason, msg := r.reason(v1alpha1.ReasonDriftDetected), r.message("drift detected")
	r.set(v1alpha1.ConditionDrifted, metav1.ConditionTrue, reason, msg)
	r.set(v1alpha1.ConditionReady, metav1.ConditionFalse, reason, msg)
	r.set(v1alpha1.ConditionReconciling, metav1.ConditionFalse, reason, "")
	// Drift the policy does not correct (Alert, NoOp, a RequireApproval hold) waits for a
	// person: Stalled, so kstatus reports Failed instead of InProgress forever. A re-apply
	// (Reconverging) or a clean scan clears it.
	r.set(v1alpha1.ConditionStalled, metav1.ConditionTrue, reason, msg)
}

// destroyed records a Destroyed event: Ready, Reconciling and Stalled False with reason
// Destroyed.
func (r reducer) destroyed() {
	r.catchUpGeneration()
	msg := r.message("infrastructure released")
	r.set(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonDestroyed, msg)
	r.set(v1alpha1.ConditionReconciling, metav1.ConditionFalse, v1alpha1.ReasonDestroyed, "")
	r.set(v1alpha1.ConditionStalled, metav1.ConditionFalse, v1alpha1.ReasonDestroyed, "")
}

// suspended records a Suspended event: Suspended True and Reconciling False.
func (r reducer) suspended() {
	msg := r.message("spec.suspend is true: no new work is started")
	r.set(v1alpha1.ConditionSuspended, metav1.ConditionTrue, v1alpha1.ReasonSuspended, msg)
	// The controller has observed the suspended generation and holds it: nothing is
	// reconciling. Ready and Stalled keep what they say about the last pass (their own
	// observedGeneration names its generation), so kstatus reads a suspended applied
	// object as Current and a suspended terminal failure as Failed, never InProgress
	// because of a stale status.observedGeneration.
	r.catchUpGeneration()
	r.set(v1alpha1.ConditionReconciling, metav1.ConditionFalse, v1alpha1.ReasonSuspended, msg)
}

// dependenciesBlocked records a DependenciesBlocked event: DependenciesReady False and, for a
// held generation, Ready False with Reconciling True (waiting) or Stalled True (a cycle).
func (r reducer) dependenciesBlocked() {
	reason, msg := r.reason(v1alpha1.ReasonDependencyNotReady), r.message("waiting for dependencies")
	r.set(v1alpha1.ConditionDependenciesReady, metav1.ConditionFalse, reason, msg)
	if !r.held {
		return
	}
	// The held generation: waiting is progress (kstatus InProgress); a cycle cannot
	// resolve without a spec change (Stalled: kstatus Failed).
	r.set(v1alpha1.ConditionReady, metav1.ConditionFalse, reason, msg)
	if reason == v1alpha1.ReasonDependencyCycle {
		r.set(v1alpha1.ConditionStalled, metav1.ConditionTrue, reason, msg)
		r.set(v1alpha1.ConditionReconciling, metav1.ConditionFalse, reason, "")
	} else {
		r.set(v1alpha1.ConditionReconciling, metav1.ConditionTrue, reason, msg)
		r.set(v1alpha1.ConditionStalled, metav1.ConditionFalse, reason, "")
	}
}

// ready marks the resource current: Ready True when the event is for status.observedGeneration,
// Reconciling and Stalled False.
func (r reducer) ready(message string) {
	if r.ev.Generation == r.out.ObservedGeneration {
		r.set(v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonSucceeded, message)
	}
	r.set(v1alpha1.ConditionReconciling, metav1.ConditionFalse, v1alpha1.ReasonSucceeded, "")
	r.set(v1alpha1.ConditionStalled, metav1.ConditionFalse, v1alpha1.ReasonSucceeded, "")
}

// defaultFailReason is the reason of a Failed event without one.
func defaultFailReason(s Stage) string {
	switch s {
	case StageSynthesis:
		return v1alpha1.ReasonSynthesisFailed
	case StageGate:
		return v1alpha1.ReasonGateRejected
	case StagePlan:
		return v1alpha1.ReasonPlanFailed
	case StageApply:
		return v1alpha1.ReasonApplyFailed
	case StageDestroy:
		return v1alpha1.ReasonDestroyFailed
	}
	return "Failed"
}

// planMessage summarizes a plan like Terraform: "plan ID: 1 to add, 0 to change, 0 to destroy".
func planMessage(p v1alpha1.PlanSummary) string {
	return fmt.Sprintf("plan %s: %d to add, %d to change, %d to destroy", p.ID, p.Add, p.Change, p.Destroy)
}

// nameOr returns s, or def when s is empty.
func nameOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// truncate cuts s to metav1.Condition's message limit without splitting a UTF-8 sequence.
func truncate(s string) string {
	if len(s) <= maxMessageLen {
		return s
	}
	return strings.ToValidUTF8(s[:maxMessageLen], "")
}
