package applier

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/lava-operator/lava/api/v1alpha1"
	"github.com/lava-operator/lava/internal/engine"
	"github.com/lava-operator/lava/internal/engine/state"
	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/lang/planpolicy"
	"github.com/lava-operator/lava/internal/pipeline"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/eventid"
	"github.com/lava-operator/lava/internal/readmodel"
)

// classify maps an engine error to its Failed reason and retryability. The message is the
// error's text, whole: [work.classify] redacts it, then bounds it (cut first, a secret that
// straddles the cut would keep a fragment no form matches).
func classify(stage lavav1.Stage, err error) *pipeline.Failure {
	f := &pipeline.Failure{Kind: pipeline.FailureRetryable, Message: err.Error(), Err: err}
	switch {
	case errors.Is(err, engine.ErrProviderUnavailable):
		f.Reason, f.Kind = v1alpha1.ReasonProviderUnavailable, pipeline.FailureTerminal
	case errors.Is(err, engine.ErrEngineUnavailable):
		f.Reason, f.Kind = v1alpha1.ReasonEngineUnavailable, pipeline.FailureTerminal
	case errors.Is(err, engine.ErrProviderChecksumMismatch):
		f.Reason, f.Kind = v1alpha1.ReasonProviderChecksumMismatch, pipeline.FailureTerminal
	case errors.Is(err, engine.ErrProviderSignatureInvalid):
		f.Reason, f.Kind = v1alpha1.ReasonProviderSignatureInvalid, pipeline.FailureTerminal
	case errors.Is(err, engine.ErrProviderVersionNotFound):
		f.Reason, f.Kind = v1alpha1.ReasonProviderVersionNotFound, pipeline.FailureTerminal
	case errors.Is(err, engine.ErrProviderRegistryUnavailable):
		f.Reason = v1alpha1.ReasonProviderRegistryUnavailable
	case errors.Is(err, engine.ErrPlanStale):
		f.Reason = v1alpha1.ReasonPlanStale
	case errors.Is(err, engine.ErrLocked):
		f.Reason = v1alpha1.ReasonLocked
	case errors.Is(err, engine.ErrCreateInterrupted):
		f.Reason, f.Kind = v1alpha1.ReasonCreateInterrupted, pipeline.FailureTerminal
	case errors.Is(err, engine.ErrPolicyRejected):
		f.Reason, f.Kind = v1alpha1.ReasonPolicyRejected, pipeline.FailureTerminal
	case errors.As(err, new(*bus.QuotaExceededError)):
		f.Reason = v1alpha1.ReasonArtifactQuotaExceeded
	case errors.Is(err, engine.ErrStepTimeout):
		f.Reason = v1alpha1.ReasonStepTimeout
	case stage == lavav1.Stage_STAGE_PLAN:
		f.Reason = v1alpha1.ReasonPlanFailed
	case stage == lavav1.Stage_STAGE_APPLY:
		f.Reason = v1alpha1.ReasonApplyFailed
	default:
		f.Reason = v1alpha1.ReasonDestroyFailed
	}
	if errors.Is(err, engine.ErrEvaluationLimit) {
		f.Kind = pipeline.FailureTerminal // the same configuration exceeds the same limit again
	}
	return f
}

func truncate(s string) string {
	if len(s) <= maxMessageBytes {
		return s
	}
	return "…" + s[len(s)-maxMessageBytes:]
}

// envelope builds the envelope of an event caused by cause (trigger "cause:<event_id>",
// correlation copied).
func (w *work) envelope(cause *lavav1.Envelope, eventType string) *lavav1.Envelope {
	corr := cause.GetCorrelationId()
	if corr == "" {
		corr = cause.GetEventId()
	}
	trig := eventid.CauseTrigger(cause.GetEventId())
	res := proto.CloneOf(w.cause.GetResource())
	gen := cause.GetGeneration()
	return &lavav1.Envelope{
		EventId:       eventid.ID(res.GetUid(), gen, eventType, trig),
		OccurredAt:    timestamppb.New(w.s.cfg.Now().UTC()),
		Source:        bus.ServiceApplier,
		Resource:      res,
		Generation:    gen,
		CorrelationId: corr,
		Trigger:       trig,
	}
}

// failed publishes Failed caused by the message handled.
func (w *work) failed(ctx context.Context, stage lavav1.Stage, f *pipeline.Failure, attempt int32, planID string) error {
	return w.failedCause(ctx, w.cause, stage, f, attempt, planID)
}

// failedCause publishes Failed caused by cause.
func (w *work) failedCause(ctx context.Context, cause *lavav1.Envelope, stage lavav1.Stage, f *pipeline.Failure, attempt int32, planID string) error {
	ev := &lavav1.Failed{
		Envelope:  w.envelope(cause, "lava.v1.Failed"),
		Stage:     stage,
		Reason:    f.Reason,
		Message:   f.Message,
		Retryable: f.Retryable(),
		Attempt:   attempt,
		PlanId:    planID,
	}
	if _, err := w.s.pub.PublishEvent(ctx, ev); err != nil {
		return err
	}
	w.log.Info("stage failed", "stage", stage.String(), "reason", f.Reason, "retryable", f.Retryable(), "message", f.Message)
	return nil
}

func summaryProto(s engine.Summary) *lavav1.ChangeSummary {
	return &lavav1.ChangeSummary{Add: int32(s.Add), Change: int32(s.Change), Destroy: int32(s.Destroy)}
}

// MaxEventChanges bounds Planned.changes: a plan of any size keeps its event small (the plan
// artifact, Planned.plan_artifact_digest, holds every change).
const MaxEventChanges = 1000

// publishPlanned publishes Planned for plan, with the plan rules' verdict, and returns its
// envelope.
func (w *work) publishPlanned(ctx context.Context, plan *engine.PlanRecord, in input, awaiting bool, verdict planpolicy.Result) (*lavav1.Envelope, error) {
	ev := &lavav1.Planned{
		Envelope:            w.envelope(w.cause, "lava.v1.Planned"),
		PlanId:              plan.PlanID,
		Engine:              pipeline.EngineProto(v1alpha1.Engine(in.engine)),
		Summary:             summaryProto(plan.Summary),
		PlanArtifactDigest:  plan.PlanDigest,
		StateSerial:         int64(plan.StateSerial),
		StateLineage:        plan.StateLineage,
		AwaitingApproval:    awaiting,
		TerraformJsonDigest: in.terraformJSONDigest,
		StateRegressed:      in.regressed,
	}
	// An address can hold a value a Terraform for_each took from a Secret binding: the
	// addresses go out redacted of the resource's Secret values, as failure messages do
	// (docs/security.md, "Rendering": a value Terraform derives from one is a known gap).
	red := w.redactor(ctx)
	ev.PlanPolicy = engine.Cut(red.Redact(verdict.String()))
	for i, r := range plan.Resources {
		if i == MaxEventChanges {
			ev.ChangesOmitted = int32(len(plan.Resources) - MaxEventChanges)
			break
		}
		ev.Changes = append(ev.Changes, &lavav1.ResourceChange{Address: red.Redact(r.Address), Action: pipeline.ChangeKind(r.Action)})
	}
	if _, err := w.s.pub.PublishEvent(ctx, ev); err != nil {
		return nil, err
	}
	w.log.Info("planned", "plan_id", plan.PlanID, "awaiting_approval", awaiting,
		"add", plan.Summary.Add, "change", plan.Summary.Change, "destroy", plan.Summary.Destroy)
	return ev.GetEnvelope(), nil
}

// stateRegressed reports a plan made against a regressed state: a warning in the log and the
// Custom anomaly pipeline.StateRegressedAnomaly (one per plan id). The Planned event carries
// the same words (state_regressed), from which the watcher sets the StateRegressed
// condition.
func (w *work) stateRegressed(ctx context.Context, plan *engine.PlanRecord, in input) error {
	w.log.Warn("state regressed since the last apply; planned with an id of its own", "plan_id", plan.PlanID,
		"last_applied_plan_id", in.regressedFrom, "regressed", in.regressed)
	an := pipeline.StateRegressedAnomaly(w.cause, bus.ServiceApplier, plan.PlanID, in.regressedFrom, in.regressed, w.s.cfg.Now())
	if _, err := w.s.pub.PublishEvent(ctx, an); err != nil {
		return err
	}
	return nil
}

// orphanLimit is the failure of an Orphan deletion in a namespace that keeps
// Config.MaxOrphanedStates orphaned states already (this object's own, orphaned by an earlier
// delivery, is not counted), or nil when the state may be orphaned.
func (w *work) orphanLimit(ctx context.Context) (*pipeline.Failure, error) {
	n, err := w.s.cfg.Store.OrphanedIn(ctx, w.ns, w.cause.GetResource().GetUid())
	if err != nil || n < w.s.cfg.MaxOrphanedStates {
		return nil, err
	}
	if _, err := w.s.cfg.Store.Get(ctx, w.key()); errors.Is(err, state.ErrNotFound) {
		return nil, nil // no state to keep
	}
	return &pipeline.Failure{Reason: v1alpha1.ReasonOrphanLimitReached, Kind: pipeline.FailureRetryable, Message: fmt.Sprintf(
		"namespace %s already keeps %d orphaned states, the most this applier keeps (--max-orphaned-states-per-namespace): "+
			"the deletion waits until one is adopted (a new object of its name, then lava state adopt NAMESPACE/NAME) or this object's deletionPolicy is Destroy",
		w.ns, n)}, nil
}

// deletion destroys the resource's infrastructure (DESTROY) or leaves it and its state
// (ORPHAN), then publishes Destroyed.
func (w *work) deletion(ctx context.Context, policy lavav1.DeletionPolicy, eng lavav1.Engine, attempt int32) error {
	destroyed := &lavav1.Destroyed{Envelope: w.envelope(w.cause, "lava.v1.Destroyed")}
	if policy == lavav1.DeletionPolicy_DELETION_POLICY_ORPHAN {
		// The state and the infrastructure stay, marked with the deleted object's uid: a new
		// object of the same name does not plan against them until adopted. An orphaned state
		// is kept for good, so a namespace keeps at most MaxOrphanedStates of them.
		if f, err := w.orphanLimit(ctx); err != nil || f != nil {
			if err != nil {
				return err
			}
			return w.failed(ctx, lavav1.Stage_STAGE_DESTROY, f, attempt, "")
		}
		if err := w.s.cfg.Store.Orphan(ctx, w.key(), w.cause.GetResource().GetUid()); err != nil {
			return err
		}
		destroyed.Orphaned = true
		w.rec.Held = nil
		return w.publishDestroyed(ctx, destroyed)
	}
	rec, err := w.s.cfg.Store.Get(ctx, w.key())
	if err != nil && !errors.Is(err, state.ErrNotFound) {
		return err
	}
	if rec.OrphanedBy != "" && rec.OrphanedBy != w.cause.GetResource().GetUid() {
		// The state belongs to an earlier object that orphaned it; this object never adopted
		// it, so deleting this object destroys nothing of it.
		w.log.Info("state orphaned by an earlier object left in place", "orphaned_by", rec.OrphanedBy)
		w.rec.Last, w.rec.Held = nil, nil
		return w.publishDestroyed(ctx, destroyed)
	}
	if rec.HasState() {
		last := w.rec.Last
		if last == nil {
			// No apply recorded (e.g. a failed first apply left partial state): destroy with
			// the newest rendered configuration.
			syn := &lavav1.Synthesized{}
			ok, err := lastEvent(ctx, w.s.cfg.JS, bus.StreamPhases, bus.PhaseSubject(w.ns, w.name, bus.EventSynthesized), syn)
			if err != nil {
				return err
			}
			if !ok {
				return w.failed(ctx, lavav1.Stage_STAGE_DESTROY, &pipeline.Failure{Reason: v1alpha1.ReasonDestroyFailed,
					Message: "the resource has state but no rendered configuration is known to destroy it with"}, attempt, "")
			}
			in := inputOf(syn)
			last = &readmodel.LastApplied{Engine: in.engine, ArtifactDigest: in.artifactDigest, Providers: in.providers}
		}
		name := last.Engine
		if eng != lavav1.Engine_ENGINE_UNSPECIFIED {
			name = pipeline.EngineName(eng)
		}
		e := w.s.cfg.Engines[name]
		if e == nil {
			return w.failed(ctx, lavav1.Stage_STAGE_DESTROY, &pipeline.Failure{Reason: v1alpha1.ReasonEngineUnavailable,
				Message: fmt.Sprintf("engine %q is not available in this applier", name)}, attempt, "")
		}
		in := input{engine: name, artifactDigest: last.ArtifactDigest, providers: last.Providers}
		if f, err := w.credentialsFailure(ctx); err != nil || f != nil {
			if err != nil {
				return err
			}
			return w.failed(ctx, lavav1.Stage_STAGE_DESTROY, f, attempt, "")
		}
		if stop, err := w.judgeDestroy(ctx, name, attempt); stop || err != nil {
			return err
		}
		start := w.s.cfg.Now()
		res, err := e.Destroy(ctx, engine.DestroyRequest{Target: in.target(ctx, w)})
		w.observe(OpDestroy, start, err)
		if err != nil {
			if ctx.Err() != nil {
				return err
			}
			return w.failed(ctx, lavav1.Stage_STAGE_DESTROY, w.classify(ctx, lavav1.Stage_STAGE_DESTROY, err), attempt, "")
		}
		// Success must leave no managed object in the state. An engine that reports success
		// with objects left (a provider whose Read or Delete failed without failing the
		// run) must never make Lava forget them: the state and the finalizer stay.
		left, err := w.remaining(ctx)
		if err != nil {
			return err
		}
		if len(left) > 0 {
			return w.failed(ctx, lavav1.Stage_STAGE_DESTROY, &pipeline.Failure{Reason: v1alpha1.ReasonDestroyFailed, Kind: pipeline.FailureRetryable,
				Message: fmt.Sprintf("destroy reported success but the state still holds %d resource(s) (%s); the state and the finalizer are kept",
					len(left), listAddrs(left))}, attempt, "")
		}
		destroyed.DestroyedCount = int32(res.Destroyed)
		if err := w.s.cfg.Store.Forget(ctx, w.key()); err != nil {
			return err
		}
	}
	w.rec.Last, w.rec.Held = nil, nil
	return w.publishDestroyed(ctx, destroyed)
}

// remaining lists the managed objects left in the resource's state (none without a state).
func (w *work) remaining(ctx context.Context) ([]string, error) {
	_, left, err := w.stateAfter(ctx)
	return left, err
}

// stateAfter returns the resource's state record and the managed objects its body holds (a
// zero record and none without a state).
func (w *work) stateAfter(ctx context.Context) (state.Record, []string, error) {
	rec, body, err := w.s.cfg.Store.Body(ctx, w.key())
	if errors.Is(err, state.ErrNotFound) {
		return state.Record{}, nil, nil
	}
	if err != nil {
		return state.Record{}, nil, err
	}
	left, err := state.ManagedInstances(body)
	return rec, left, err
}

// listAddrs joins at most 10 addresses, then "and N more".
func listAddrs(addrs []string) string {
	const show = 10
	if len(addrs) <= show {
		return strings.Join(addrs, ", ")
	}
	return strings.Join(addrs[:show], ", ") + fmt.Sprintf(" and %d more", len(addrs)-show)
}

func (w *work) publishDestroyed(ctx context.Context, ev *lavav1.Destroyed) error {
	if _, err := w.s.pub.PublishEvent(ctx, ev); err != nil {
		return err
	}
	// The object is gone: a new object of the same name starts from generation 1, so the
	// generation watermarks of synth and the applier are reset. This record's Deleted flag
	// keeps late events of the old object out.
	w.rec.Deleted = true
	for _, svc := range []string{bus.ServiceSynth, bus.ServiceApplier} {
		if err := w.s.wmKV.Delete(ctx, bus.WatermarkKey(svc, w.ns, w.name)); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
			return fmt.Errorf("applier: reset %s watermark of %s/%s: %w", svc, w.ns, w.name, err)
		}
	}
	w.log.Info("destroyed", "orphaned", ev.GetOrphaned(), "destroyed_count", ev.GetDestroyedCount())
	return nil
}
