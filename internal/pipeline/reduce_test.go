package pipeline

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lava-operator/lava/api/v1alpha1"
)

// t0 is the time of the first event in these tests; at(n) is n minutes later.
var t0 = time.Date(2026, 11, 30, 1, 0, 0, 0, time.UTC)

func at(n int) time.Time { return t0.Add(time.Duration(n) * time.Minute) }

// sample returns a well-formed event of type typ for generation gen at minute n.
func sample(typ EventType, gen int64, n int) Event {
	ev := Event{Type: typ, Generation: gen, Time: at(n)}
	switch typ {
	case EventSynthesized:
		ev.Render = &v1alpha1.RenderRecord{
			SourceKind: v1alpha1.SourceKindInline, ArchitectureName: "demo-vpc", ResourceCount: 1,
			Gate: "aws-vpc-network", SourceDigest: "aa", BindingsDigest: "bb", TerraformJSONDigest: "cc",
		}
	case EventPlanned, EventAwaitingApproval:
		ev.Plan = &v1alpha1.PlanSummary{ID: "p1", Add: 1}
	case EventApplied:
		ev.Outputs = map[string]apiextensionsv1.JSON{"vpc_id": {Raw: []byte(`"vpc-1"`)}}
	case EventFailed:
		ev.Stage, ev.Reason, ev.Message = StageApply, v1alpha1.ReasonProviderUnavailable, "provider aws not installed"
	case EventReceiptAppended:
		ev.Receipt = &v1alpha1.ReceiptHead{Sequence: int64(n), Hash: fmt.Sprintf("h%d", n)}
	}
	return ev
}

// mustReduce folds evs into st in order, failing the test on any error.
func mustReduce(t *testing.T, st v1alpha1.LavaArchitectureStatus, evs ...Event) v1alpha1.LavaArchitectureStatus {
	t.Helper()
	for _, ev := range evs {
		var err error
		st, _, err = Reduce(st, ev)
		if err != nil {
			t.Fatalf("Reduce(%s): %v", ev.Type, err)
		}
	}
	return st
}

// statusIn returns a status of generation 1 in phase p, built through legal events.
func statusIn(t *testing.T, p Phase) v1alpha1.LavaArchitectureStatus {
	t.Helper()
	paths := map[Phase][]EventType{
		Pending:      {EventObserved},
		Synthesized:  {EventObserved, EventSynthesized},
		Planned:      {EventObserved, EventSynthesized, EventPlanned},
		Applied:      {EventObserved, EventSynthesized, EventPlanned, EventApplied},
		Drifted:      {EventObserved, EventSynthesized, EventPlanned, EventApplied, EventDrifted},
		Reconverging: {EventObserved, EventSynthesized, EventPlanned, EventApplied, EventReconverging},
		Failed:       {EventObserved, EventFailed},
		Finalizing:   {EventObserved, EventDeletionRequested},
	}
	var st v1alpha1.LavaArchitectureStatus
	for i, typ := range paths[p] {
		st = mustReduce(t, st, sample(typ, 1, i))
	}
	if st.Phase != p {
		t.Fatalf("statusIn(%s) built phase %s", p, st.Phase)
	}
	return st
}

func cond(st v1alpha1.LavaArchitectureStatus, typ string) metav1.ConditionStatus {
	c := meta.FindStatusCondition(st.Conditions, typ)
	if c == nil {
		return ""
	}
	return c.Status
}

func TestReduce_everyEdge_sameEventTwiceIsNoop(t *testing.T) {
	t.Parallel()
	for _, e := range Table() {
		t.Run(fmt.Sprintf("%s_%s", e.From, e.Event), func(t *testing.T) {
			t.Parallel()
			in := statusIn(t, e.From)
			ev := sample(e.Event, 1, 100)
			if e.Event == EventObserved {
				ev.Force = true
			}
			once, tr, err := Reduce(in, ev)
			if err != nil {
				t.Fatalf("first Reduce: %v", err)
			}
			if once.Phase != e.To || tr.To != e.To || tr.From != e.From {
				t.Fatalf("phase %s, transition %s->%s; want %s->%s", once.Phase, tr.From, tr.To, e.From, e.To)
			}
			twice, tr2, err := Reduce(once, ev)
			if err != nil {
				t.Fatalf("second Reduce: %v", err)
			}
			if tr2.Changed || tr2.Publish {
				t.Errorf("second Reduce: Changed=%v Publish=%v, want a no-op", tr2.Changed, tr2.Publish)
			}
			if diff := cmp.Diff(once, twice); diff != "" {
				t.Errorf("second Reduce changed the status (-once +twice):\n%s", diff)
			}
		})
	}
}

func TestReduce_illegalTransitions_typedError(t *testing.T) {
	t.Parallel()
	legal := map[[2]string]bool{}
	for _, e := range Table() {
		legal[[2]string{string(e.From), string(e.Event)}] = true
	}
	for _, p := range All() {
		for _, typ := range EventTypes() {
			if legal[[2]string{string(p), string(typ)}] {
				continue
			}
			t.Run(fmt.Sprintf("%s_%s", p, typ), func(t *testing.T) {
				t.Parallel()
				in := statusIn(t, p)
				ev := sample(typ, 1, 100)
				ev.Force = true
				out, tr, err := Reduce(in, ev)
				var ite *IllegalTransitionError
				if !errors.As(err, &ite) {
					t.Fatalf("Reduce(%s in %s) err = %v, want *IllegalTransitionError", typ, p, err)
				}
				if !errors.Is(err, ErrIllegalTransition) {
					t.Errorf("errors.Is(err, ErrIllegalTransition) = false")
				}
				if ite.From != p || ite.Event != typ || ite.Generation != 1 {
					t.Errorf("error = %+v", ite)
				}
				if !strings.Contains(err.Error(), string(typ)) || !strings.Contains(err.Error(), string(p)) {
					t.Errorf("message %q does not name the event and phase", err)
				}
				if diff := cmp.Diff(in, out); diff != "" || tr.Changed {
					t.Errorf("an illegal event changed the status:\n%s", diff)
				}
			})
		}
	}
}

func TestReduce_staleGenerationIgnored(t *testing.T) {
	t.Parallel()
	var st v1alpha1.LavaArchitectureStatus
	st = mustReduce(t, st, sample(EventObserved, 3, 0), sample(EventSynthesized, 3, 1))
	for _, typ := range EventTypes() {
		if typ == EventReceiptAppended {
			continue
		}
		t.Run(string(typ), func(t *testing.T) {
			t.Parallel()
			ev := sample(typ, 2, 5)
			ev.Force = true
			out, tr, err := Reduce(st, ev)
			if err != nil {
				t.Fatalf("Reduce: %v", err)
			}
			if !tr.Stale || tr.Changed || tr.Publish {
				t.Errorf("transition = %+v, want Stale and unchanged", tr)
			}
			if diff := cmp.Diff(st, out); diff != "" {
				t.Errorf("stale event changed the status:\n%s", diff)
			}
		})
	}
}

func TestReduce_happyPath_conditionsAndKstatus(t *testing.T) {
	t.Parallel()
	type want struct {
		phase                       Phase
		ready, reconciling, stalled metav1.ConditionStatus
	}
	steps := []struct {
		ev   Event
		want want
	}{
		{sample(EventObserved, 1, 0), want{Pending, "False", "True", "False"}},
		{sample(EventSynthesized, 1, 1), want{Synthesized, "False", "True", "False"}},
		{sample(EventPlanned, 1, 2), want{Planned, "False", "True", "False"}},
		{sample(EventApplied, 1, 3), want{Applied, "True", "False", "False"}},
		{sample(EventDriftClean, 1, 4), want{Applied, "True", "False", "False"}},
		// Drift the policy does not correct waits for a person: Stalled (kstatus Failed).
		{sample(EventDrifted, 1, 5), want{Drifted, "False", "False", "True"}},
		{sample(EventReconverging, 1, 6), want{Reconverging, "False", "True", "False"}},
		{sample(EventApplied, 1, 7), want{Applied, "True", "False", "False"}},
		{sample(EventObserved, 2, 8), want{Pending, "False", "True", "False"}},
		{Event{Type: EventFailed, Generation: 2, Time: at(9), Stage: StageSynthesis, Terminal: true, Message: "1:2: unexpected )"}, want{Failed, "False", "False", "True"}},
		{Event{Type: EventFailed, Generation: 2, Time: at(10), Stage: StageSynthesis, Message: "retrying"}, want{Failed, "False", "True", "False"}},
		{sample(EventDeletionRequested, 3, 11), want{Finalizing, "False", "True", "False"}},
		{sample(EventDestroyed, 3, 12), want{Finalizing, "False", "False", "False"}},
	}
	var st v1alpha1.LavaArchitectureStatus
	for i, s := range steps {
		var tr Transition
		var err error
		st, tr, err = Reduce(st, s.ev)
		if err != nil {
			t.Fatalf("step %d (%s): %v", i, s.ev.Type, err)
		}
		got := want{st.Phase, cond(st, v1alpha1.ConditionReady), cond(st, v1alpha1.ConditionReconciling), cond(st, v1alpha1.ConditionStalled)}
		if got != s.want {
			t.Errorf("step %d (%s): got %+v, want %+v", i, s.ev.Type, got, s.want)
		}
		if st.Phase == Applied && st.ObservedGeneration != s.ev.Generation {
			t.Errorf("step %d: Applied with observedGeneration %d, event generation %d", i, st.ObservedGeneration, s.ev.Generation)
		}
		if !tr.Publish && s.ev.Type != EventDriftClean {
			t.Errorf("step %d (%s): Publish = false for a status change", i, s.ev.Type)
		}
		if tr.RemoveFinalizer != (s.ev.Type == EventDestroyed) {
			t.Errorf("step %d (%s): RemoveFinalizer = %v", i, s.ev.Type, tr.RemoveFinalizer)
		}
	}
	if st.ObservedGeneration != 3 {
		t.Errorf("observedGeneration = %d, want 3", st.ObservedGeneration)
	}
	if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionSynthesized); c == nil || c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonSynthesisFailed || c.Message != "retrying" {
		t.Errorf("Synthesized condition = %+v, want False/SynthesisFailed/retrying", c)
	}
}

func TestReduce_lastTransitionTimeMovesOnlyOnFlip(t *testing.T) {
	t.Parallel()
	st := statusIn(t, Applied) // Ready flipped True at minute 3
	ready := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReady)
	if ready == nil || !ready.LastTransitionTime.Time.Equal(at(3)) {
		t.Fatalf("Ready = %+v, want True since minute 3", ready)
	}
	// A clean drift scan keeps Ready True: no flip, the time stays.
	st = mustReduce(t, st, sample(EventDriftClean, 1, 20))
	if got := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReady).LastTransitionTime.Time; !got.Equal(at(3)) {
		t.Errorf("Ready lastTransitionTime = %v after a non-flip, want %v", got, at(3))
	}
	// Two failures in a row: Ready flips False once, at the first.
	f1 := Event{Type: EventFailed, Generation: 1, Time: at(30), Stage: StageApply, Message: "first"}
	f2 := Event{Type: EventFailed, Generation: 1, Time: at(31), Stage: StageApply, Message: "second"}
	st = mustReduce(t, st, f1, f2)
	c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReady)
	if c.Status != metav1.ConditionFalse || !c.LastTransitionTime.Time.Equal(at(30)) || c.Message != "second" {
		t.Errorf("Ready = %+v, want False since minute 30 with the second message", c)
	}
}

func TestReduce_newerGenerationObservesImplicitly(t *testing.T) {
	t.Parallel()
	st := statusIn(t, Applied)
	// Synthesized for generation 2 arrives before the watcher folded Observed(2).
	out, tr, err := Reduce(st, sample(EventSynthesized, 2, 10))
	if err != nil {
		t.Fatal(err)
	}
	if out.Phase != Synthesized || out.ObservedGeneration != 2 || tr.From != Applied || tr.To != Synthesized {
		t.Errorf("phase %s gen %d transition %s->%s", out.Phase, out.ObservedGeneration, tr.From, tr.To)
	}
	if cond(out, v1alpha1.ConditionReady) != metav1.ConditionFalse {
		t.Errorf("Ready not False after a new generation")
	}
	// An Applied for a newer generation cannot skip synthesis and planning.
	if _, _, err := Reduce(st, sample(EventApplied, 2, 10)); !errors.Is(err, ErrIllegalTransition) {
		t.Errorf("Applied for a newer generation: err = %v, want illegal", err)
	}
	// Suspending a newer generation claims it (kstatus: observed and held) and keeps the
	// phase; Ready still describes generation 1 (its observedGeneration).
	out, _, err = Reduce(st, sample(EventSuspended, 2, 10))
	if err != nil {
		t.Fatal(err)
	}
	ready := meta.FindStatusCondition(out.Conditions, v1alpha1.ConditionReady)
	if out.ObservedGeneration != 2 || out.Phase != Applied || ready.Status != metav1.ConditionTrue || ready.ObservedGeneration != 1 {
		t.Errorf("Suspended(2): phase %s gen %d Ready %+v; want Applied, 2, Ready True of generation 1", out.Phase, out.ObservedGeneration, ready)
	}
	if c := meta.FindStatusCondition(out.Conditions, v1alpha1.ConditionReconciling); c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonSuspended {
		t.Errorf("Suspended(2): Reconciling = %+v, want False/Suspended", c)
	}
	// A dependency hold of a newer generation observes it: Pending, so dependents wait.
	blocked := sample(EventDependenciesBlocked, 2, 10)
	blocked.Reason, blocked.Message = v1alpha1.ReasonDependencyNotReady, "waiting for infra/net (Applied)"
	out, _, err = Reduce(st, blocked)
	if err != nil {
		t.Fatal(err)
	}
	if out.ObservedGeneration != 2 || out.Phase != Pending || cond(out, v1alpha1.ConditionReconciling) != metav1.ConditionTrue ||
		cond(out, v1alpha1.ConditionReady) != metav1.ConditionFalse || cond(out, v1alpha1.ConditionStalled) != metav1.ConditionFalse {
		t.Errorf("DependenciesBlocked(2): phase %s gen %d conditions %+v", out.Phase, out.ObservedGeneration, out.Conditions)
	}
	// A cycle cannot resolve without a spec change: Stalled.
	blocked.Reason = v1alpha1.ReasonDependencyCycle
	out, _, err = Reduce(st, blocked)
	if err != nil {
		t.Fatal(err)
	}
	if cond(out, v1alpha1.ConditionStalled) != metav1.ConditionTrue || cond(out, v1alpha1.ConditionReconciling) != metav1.ConditionFalse {
		t.Errorf("DependenciesBlocked(2) by a cycle: conditions %+v, want Stalled True, Reconciling False", out.Conditions)
	}
	// A dependency that goes unready after generation 1 was applied changes only its condition.
	blocked.Generation, blocked.Reason = 1, v1alpha1.ReasonDependencyNotReady
	out, _, err = Reduce(st, blocked)
	if err != nil {
		t.Fatal(err)
	}
	if out.Phase != Applied || cond(out, v1alpha1.ConditionReady) != metav1.ConditionTrue || cond(out, v1alpha1.ConditionDependenciesReady) != metav1.ConditionFalse {
		t.Errorf("DependenciesBlocked(1) after Applied(1): phase %s conditions %+v", out.Phase, out.Conditions)
	}
}

func TestReduce_observedSameGeneration(t *testing.T) {
	t.Parallel()
	st := statusIn(t, Applied)
	out, tr, err := Reduce(st, sample(EventObserved, 1, 10))
	if err != nil || tr.Changed || out.Phase != Applied {
		t.Errorf("unforced Observed of the current generation: phase %s changed %v err %v; want a no-op", out.Phase, tr.Changed, err)
	}
	ev := sample(EventObserved, 1, 10)
	ev.Force = true
	out, tr, err = Reduce(st, ev)
	if err != nil || !tr.Changed || out.Phase != Pending {
		t.Errorf("forced Observed: phase %s changed %v err %v; want Pending", out.Phase, tr.Changed, err)
	}
}

func TestReduce_awaitingApproval(t *testing.T) {
	t.Parallel()
	st := statusIn(t, Planned)
	ev := sample(EventAwaitingApproval, 1, 10)
	planned := []v1alpha1.PlannedResource{{Address: "a.x", Action: "create"}, {Address: "a.y", Action: "update"}}
	ev.Plan = &v1alpha1.PlanSummary{ID: "blake3:abc", Add: 2, Change: 1, Resources: planned, ResourcesOmitted: 1}
	st = mustReduce(t, st, ev)
	c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionAwaitingApproval)
	if c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "spec.approvePlan to blake3:abc") {
		t.Fatalf("AwaitingApproval = %+v", c)
	}
	if st.Plan.ID != "blake3:abc" || st.Plan.Change != 1 {
		t.Errorf("plan = %+v", st.Plan)
	}
	// Applied names the plan without its actions (the Applied event has none): those of the
	// plan it applied stay in status.plan.
	applied := sample(EventApplied, 1, 11)
	applied.Plan = &v1alpha1.PlanSummary{ID: "blake3:abc", Add: 2, Change: 1}
	st = mustReduce(t, st, applied)
	if diff := cmp.Diff(planned, st.Plan.Resources); diff != "" || st.Plan.ResourcesOmitted != 1 {
		t.Errorf("status.plan.resources after Applied (-want +got):\n%s (omitted %d)", diff, st.Plan.ResourcesOmitted)
	}
	if cond(st, v1alpha1.ConditionAwaitingApproval) != metav1.ConditionFalse {
		t.Errorf("AwaitingApproval still %s after Applied", cond(st, v1alpha1.ConditionAwaitingApproval))
	}
	if st.Plan.ID != "blake3:abc" || st.LastAppliedAt == nil || !st.LastAppliedAt.Time.Equal(at(11)) {
		t.Errorf("plan %+v lastAppliedAt %v", st.Plan, st.LastAppliedAt)
	}
	if string(st.Outputs["vpc_id"].Raw) != `"vpc-1"` {
		t.Errorf("outputs = %v", st.Outputs)
	}
}

// TestReduce_stateRegressed: a plan against a regressed state sets StateRegressed True with
// what regressed, the plan held for approval still names its own id, and the next Applied
// sets the condition False.
func TestReduce_stateRegressed(t *testing.T) {
	t.Parallel()
	st := statusIn(t, Planned)
	if meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionStateRegressed) != nil {
		t.Fatal("StateRegressed present before any regression")
	}
	ev := sample(EventAwaitingApproval, 1, 10)
	ev.Plan = &v1alpha1.PlanSummary{ID: "p2", Add: 1}
	ev.StateRegressed = "the state is gone; the last apply (plan p1) left serial 3 of lineage L"
	st = mustReduce(t, st, ev)
	c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionStateRegressed)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.ReasonStateRegressed ||
		!strings.Contains(c.Message, "the state is gone") || !strings.Contains(c.Message, "plan p2") {
		t.Fatalf("StateRegressed = %+v", c)
	}
	if a := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionAwaitingApproval); a == nil || !strings.Contains(a.Message, "spec.approvePlan to p2") {
		t.Fatalf("AwaitingApproval = %+v, want it to name the new plan p2", a)
	}
	st = mustReduce(t, st, sample(EventApplied, 1, 11))
	if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionStateRegressed); c == nil || c.Status != metav1.ConditionFalse ||
		c.Reason != v1alpha1.ReasonApplySucceeded {
		t.Errorf("StateRegressed after Applied = %+v, want False", c)
	}
}

// TestReduce_failedDestroyKeepsFinalizer: a retryable Failed of the destroy stage while
// finalizing keeps the finalizer (only Destroyed removes it), reports DestroyFailed with the
// reason and marks a retry coming; the Destroyed after the retry removes it.
func TestReduce_failedDestroyKeepsFinalizer(t *testing.T) {
	t.Parallel()
	st := statusIn(t, Finalizing)
	ev := sample(EventFailed, 1, 10)
	ev.Stage, ev.Reason, ev.Message = StageDestroy, v1alpha1.ReasonDestroyFailed, "testkit: fail-delete: delete failed on purpose"
	out, tr, err := Reduce(st, ev)
	if err != nil {
		t.Fatal(err)
	}
	if tr.RemoveFinalizer {
		t.Fatal("a failed destroy removes the finalizer")
	}
	if r := meta.FindStatusCondition(out.Conditions, v1alpha1.ConditionReady); r == nil || r.Reason != v1alpha1.ReasonDestroyFailed ||
		!strings.Contains(r.Message, "fail-delete") {
		t.Errorf("Ready = %+v, want DestroyFailed with the provider's reason", r)
	}
	if c := meta.FindStatusCondition(out.Conditions, v1alpha1.ConditionReconciling); c == nil || c.Status != metav1.ConditionTrue ||
		c.Reason != v1alpha1.ReasonProgressingWithRetry {
		t.Errorf("Reconciling = %+v, want True with a retry coming", c)
	}
	_, tr, err = Reduce(out, sample(EventDestroyed, 1, 11))
	if err != nil || !tr.RemoveFinalizer {
		t.Fatalf("Destroyed after the failed destroy: %+v, %v; want the finalizer removed", tr, err)
	}
}

func TestReduce_gateAndDependencyConditions(t *testing.T) {
	t.Parallel()
	st := statusIn(t, Synthesized)
	if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionGated); c == nil || c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.ReasonGatePassed {
		t.Errorf("Gated = %+v", c)
	}
	st = mustReduce(t, st, Event{Type: EventObserved, Generation: 2, Time: at(10)},
		Event{Type: EventFailed, Generation: 2, Time: at(11), Stage: StageGate, Terminal: true, Message: "cidr: not a CIDR"})
	if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionGated); c == nil || c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonGateRejected {
		t.Errorf("Gated after rejection = %+v", c)
	}
	st = mustReduce(t, st, Event{Type: EventDependenciesBlocked, Generation: 2, Time: at(12), Reason: v1alpha1.ReasonDependencyCycle, Message: "infra/a -> infra/b -> infra/a"})
	if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionDependenciesReady); c == nil || c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonDependencyCycle {
		t.Errorf("DependenciesReady = %+v", c)
	}
	if st.Phase != Failed {
		t.Errorf("a condition-only event moved the phase to %s", st.Phase)
	}
	// Resumed without a prior Suspended adds nothing.
	out, tr, err := Reduce(st, Event{Type: EventResumed, Generation: 2, Time: at(13)})
	if err != nil || tr.Changed || meta.FindStatusCondition(out.Conditions, v1alpha1.ConditionSuspended) != nil {
		t.Errorf("Resumed without Suspended: changed %v err %v", tr.Changed, err)
	}
}

func TestReduce_receiptHeadOnlyMovesForward(t *testing.T) {
	t.Parallel()
	st := statusIn(t, Applied)
	st, tr, err := Reduce(st, sample(EventReceiptAppended, 0, 7))
	if err != nil || !tr.Changed || tr.Publish || st.Receipt.Sequence != 7 {
		t.Fatalf("receipt 7: changed %v publish %v err %v receipt %+v", tr.Changed, tr.Publish, err, st.Receipt)
	}
	out, tr, err := Reduce(st, sample(EventReceiptAppended, 0, 5))
	if err != nil || tr.Changed || out.Receipt.Sequence != 7 {
		t.Errorf("older receipt: changed %v err %v receipt %+v", tr.Changed, err, out.Receipt)
	}
}

func TestReduce_doesNotModifyInput(t *testing.T) {
	t.Parallel()
	in := statusIn(t, Applied)
	before := in.DeepCopy()
	for _, typ := range EventTypes() {
		ev := sample(typ, 1, 50)
		ev.Force = true
		_, _, _ = Reduce(in, ev)
	}
	if diff := cmp.Diff(*before, in); diff != "" {
		t.Errorf("Reduce modified its input:\n%s", diff)
	}
}

func TestReduce_invalidEvents(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		ev   Event
	}{
		{"unknown type", Event{Type: "Exploded", Generation: 1, Time: t0}},
		{"zero time", Event{Type: EventObserved, Generation: 1}},
		{"generation 0", Event{Type: EventObserved, Time: t0}},
		{"bad reason", Event{Type: EventFailed, Generation: 1, Time: t0, Reason: "not camel case"}},
		{"unknown stage", Event{Type: EventFailed, Generation: 1, Time: t0, Stage: "Lunch"}},
		{"synthesized without render", Event{Type: EventSynthesized, Generation: 1, Time: t0}},
		{"planned without plan", Event{Type: EventPlanned, Generation: 1, Time: t0}},
		{"receipt without head", Event{Type: EventReceiptAppended, Time: t0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			in := statusIn(t, Pending)
			out, _, err := Reduce(in, tt.ev)
			if !errors.Is(err, ErrInvalidEvent) {
				t.Fatalf("err = %v, want ErrInvalidEvent", err)
			}
			if diff := cmp.Diff(in, out); diff != "" {
				t.Errorf("status changed on error:\n%s", diff)
			}
		})
	}
}

func TestReduce_longMessageTruncated(t *testing.T) {
	t.Parallel()
	ev := Event{Type: EventFailed, Generation: 1, Time: t0, Stage: StageSynthesis, Message: strings.Repeat("é", maxMessageLen)}
	st := mustReduce(t, v1alpha1.LavaArchitectureStatus{}, ev)
	c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionSynthesized)
	if len(c.Message) > maxMessageLen || !strings.HasPrefix(c.Message, "éé") || strings.ContainsRune(c.Message, '\uFFFD') {
		t.Errorf("message length %d, want at most %d valid UTF-8", len(c.Message), maxMessageLen)
	}
}

// TestReduce_randomWalk_invariants folds long random event sequences and checks the invariants
// every status must keep, whatever arrives in whatever order.
func TestReduce_randomWalk_invariants(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(4, 2))
	types := EventTypes()
	for walk := range 200 {
		var st v1alpha1.LavaArchitectureStatus
		gen := int64(1)
		for step := range 60 {
			if rng.IntN(10) == 0 {
				gen++
			}
			ev := sample(types[rng.IntN(len(types))], max(1, gen-int64(rng.IntN(2))), walk*100+step)
			ev.Force = rng.IntN(2) == 0
			ev.Terminal = rng.IntN(2) == 0
			out, tr, err := Reduce(st, ev)
			if err != nil {
				if !errors.Is(err, ErrIllegalTransition) {
					t.Fatalf("walk %d step %d: %v", walk, step, err)
				}
				if diff := cmp.Diff(st, out); diff != "" {
					t.Fatalf("walk %d step %d: error changed the status", walk, step)
				}
				continue
			}
			if !Valid(out.Phase) {
				t.Fatalf("walk %d step %d: phase %q", walk, step, out.Phase)
			}
			if out.ObservedGeneration < st.ObservedGeneration {
				t.Fatalf("walk %d step %d: observedGeneration went back %d -> %d", walk, step, st.ObservedGeneration, out.ObservedGeneration)
			}
			if cond(out, v1alpha1.ConditionReady) == metav1.ConditionTrue && out.Phase != Applied {
				t.Fatalf("walk %d step %d: Ready True in phase %s", walk, step, out.Phase)
			}
			if cond(out, v1alpha1.ConditionReconciling) == metav1.ConditionTrue && cond(out, v1alpha1.ConditionStalled) == metav1.ConditionTrue {
				t.Fatalf("walk %d step %d: Reconciling and Stalled both True", walk, step)
			}
			if tr.Changed == cmp.Equal(st, out) {
				t.Fatalf("walk %d step %d: Changed=%v disagrees with the diff", walk, step, tr.Changed)
			}
			again, tr2, err := Reduce(out, ev)
			if err != nil || tr2.Changed || !cmp.Equal(out, again) {
				t.Fatalf("walk %d step %d: %s twice is not a no-op (err %v)", walk, step, ev.Type, err)
			}
			st = out
		}
	}
}

// A critical drift held for approval: viggy records Drifted, the applier's re-plan waits for
// approval without leaving Drifted, and the approved apply returns to Applied.
func TestReduce_driftHeldForApproval(t *testing.T) {
	st := statusIn(t, Applied)
	st = mustReduce(t, st, sample(EventDrifted, 1, 10))
	st = mustReduce(t, st, sample(EventAwaitingApproval, 1, 11))
	if st.Phase != Drifted {
		t.Fatalf("phase after the held plan = %s, want Drifted", st.Phase)
	}
	if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionAwaitingApproval); c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("AwaitingApproval = %+v, want True", c)
	}
	st = mustReduce(t, st, sample(EventApplied, 1, 12))
	if st.Phase != Applied {
		t.Fatalf("phase after the approved apply = %s, want Applied", st.Phase)
	}
}

// TestReduce_cleanScanOfCleanResourceChangesNothing: a clean drift scan of a resource that is
// not drifted is no change (so the watcher writes nothing and publishes no PhaseChanged);
// the clean scan that ends a drift is one.
func TestReduce_cleanScanOfCleanResourceChangesNothing(t *testing.T) {
	t.Parallel()
	st := statusIn(t, Applied)
	for i := range 1000 {
		next, tr, err := Reduce(st, sample(EventDriftClean, 1, 10+i))
		if err != nil || tr.Changed || tr.Publish {
			t.Fatalf("clean scan %d of an applied resource: changed %v publish %v err %v", i, tr.Changed, tr.Publish, err)
		}
		st = next
	}
	drifted := statusIn(t, Drifted)
	next, tr, err := Reduce(drifted, sample(EventDriftClean, 1, 20))
	if err != nil || !tr.Changed || !tr.Publish || next.Phase != Applied {
		t.Fatalf("clean scan of a drifted resource: phase %s changed %v publish %v err %v", next.Phase, tr.Changed, tr.Publish, err)
	}
	if c := meta.FindStatusCondition(next.Conditions, v1alpha1.ConditionDrifted); c == nil || c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonNoDrift {
		t.Errorf("Drifted after the clean scan = %+v, want False/NoDrift", c)
	}
}

// TestReduce_lastAppliedRevision: an apply records the Flux artifact revision of the render it
// applied; a newer render alone does not move it, and a render without a revision clears it
// on the next apply.
func TestReduce_lastAppliedRevision(t *testing.T) {
	t.Parallel()
	synthesized := func(n int, rev string) Event {
		ev := sample(EventSynthesized, 1, n)
		ev.Render.SourceKind, ev.Render.SourceRevision = v1alpha1.SourceKindSourceRef, rev
		return ev
	}
	st := mustReduce(t, v1alpha1.LavaArchitectureStatus{}, sample(EventObserved, 1, 0), synthesized(1, "main@sha1:aaa"),
		sample(EventPlanned, 1, 2), sample(EventApplied, 1, 3))
	if st.LastAppliedRevision != "main@sha1:aaa" {
		t.Fatalf("lastAppliedRevision = %q after applying main@sha1:aaa", st.LastAppliedRevision)
	}
	forced := sample(EventObserved, 1, 4)
	forced.Force = true
	st = mustReduce(t, st, forced, synthesized(5, "main@sha1:bbb"))
	if st.LastAppliedRevision != "main@sha1:aaa" || st.Render.SourceRevision != "main@sha1:bbb" {
		t.Errorf("rendered, not applied: lastAppliedRevision %q render.sourceRevision %q", st.LastAppliedRevision, st.Render.SourceRevision)
	}
	st = mustReduce(t, st, sample(EventPlanned, 1, 6), sample(EventApplied, 1, 7))
	if st.LastAppliedRevision != "main@sha1:bbb" {
		t.Errorf("lastAppliedRevision = %q after applying main@sha1:bbb", st.LastAppliedRevision)
	}
	st = mustReduce(t, st, sample(EventObserved, 2, 8), sample(EventSynthesized, 2, 9), sample(EventPlanned, 2, 10), sample(EventApplied, 2, 11))
	if st.LastAppliedRevision != "" {
		t.Errorf("lastAppliedRevision = %q after applying an inline source, want empty", st.LastAppliedRevision)
	}
}

// TestReduce_deletionBlocked: DeletionBlocked sets its condition True with the consumers named
// and keeps the phase; DeletionUnblocked sets it False with its reason; without a prior
// DeletionBlocked it adds nothing.
func TestReduce_deletionBlocked(t *testing.T) {
	t.Parallel()
	st := statusIn(t, Applied)
	out, tr, err := Reduce(st, Event{Type: EventDeletionUnblocked, Generation: 1, Time: at(9)})
	if err != nil || tr.Changed || meta.FindStatusCondition(out.Conditions, v1alpha1.ConditionDeletionBlocked) != nil {
		t.Errorf("DeletionUnblocked without DeletionBlocked: changed %v err %v", tr.Changed, err)
	}
	st = mustReduce(t, st, Event{Type: EventDeletionBlocked, Generation: 1, Time: at(10), Message: "waiting for infra/app"})
	c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionDeletionBlocked)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.ReasonConsumersExist || c.Message != "waiting for infra/app" {
		t.Errorf("DeletionBlocked = %+v", c)
	}
	if st.Phase != Applied || cond(st, v1alpha1.ConditionReady) != metav1.ConditionTrue {
		t.Errorf("a condition-only event moved the phase to %s (Ready %s)", st.Phase, cond(st, v1alpha1.ConditionReady))
	}
	st = mustReduce(t, st, Event{Type: EventDeletionUnblocked, Generation: 1, Time: at(11), Reason: v1alpha1.ReasonDeletionWaitExpired,
		Message: "infra/app still consumes it"}, sample(EventDeletionRequested, 1, 12))
	c = meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionDeletionBlocked)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonDeletionWaitExpired {
		t.Errorf("DeletionBlocked after the wait = %+v", c)
	}
	if st.Phase != Finalizing {
		t.Errorf("phase %s after DeletionRequested", st.Phase)
	}
}
