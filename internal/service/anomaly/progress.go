package anomaly

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lava-operator/lava/api/v1alpha1"
	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/eventid"
)

// BucketProgress is the KV bucket of resources in a working phase (Pending, Synthesized,
// Planned, Reconverging, Finalizing): per resource ([bus.ResourceKey]) the phase and when it
// was entered, as JSON [Progress]. A resource that stays longer than the stuck-after deadline
// raises a Stalled anomaly (reason ProgressDeadlineExceeded). Resting phases (Applied,
// Drifted, Failed) and holds (dependencies, suspension, approval) remove the entry. It is
// declared with the topology ([bus.Declare], history 1).
const BucketProgress = bus.BucketAnomalyProgress

// ReasonProgressDeadlineExceeded is the metadata reason of a Stalled anomaly raised because a
// resource stayed in a working phase past the deadline.
const ReasonProgressDeadlineExceeded = "ProgressDeadlineExceeded"

// DefaultStuckAfter is the progress deadline when the configuration sets none.
const DefaultStuckAfter = 30 * time.Minute

// DefaultApprovalAfter is how long a plan may wait for approval, when the configuration sets
// no approvalAfter, before it raises [ExtensionApprovalOverdue].
const DefaultApprovalAfter = 24 * time.Hour

// ExtensionApprovalOverdue is the extension kind of the Custom anomaly a plan held for approval
// past approvalAfter raises (functional; subject lava.anomaly.functional.approval_overdue).
const ExtensionApprovalOverdue = "approval_overdue"

// Progress is one resource's working phase.
type Progress struct {
	// Namespace, Name and UID name the resource; Generation is its newest known generation.
	Namespace  string `json:"namespace"`
	Name       string `json:"name"`
	UID        string `json:"uid"`
	Generation int64  `json:"generation"`
	// Phase is the working phase (the Phase enum name, "PHASE_PENDING").
	Phase string `json:"phase"`
	// Since is when the resource entered Phase (UTC).
	Since time.Time `json:"since"`
	// Raised is true once the anomaly for this stay was routed.
	Raised bool `json:"raised,omitempty"`
	// Awaiting: the resource waits for the approval of a plan (the clock is approvalAfter's,
	// not the progress deadline's).
	Awaiting bool `json:"awaiting,omitempty"`
}

// working reports whether a PhaseChanged leaves the resource in a phase that must make
// progress on its own: not a resting phase, and not held by dependencies, suspension or an
// approval.
func working(pc *lavav1.PhaseChanged) bool {
	switch pc.GetReason() {
	case v1alpha1.ReasonDependencyNotReady, v1alpha1.ReasonDependencyCycle, v1alpha1.ReasonSuspended, v1alpha1.ReasonApprovalRequired:
		return false
	}
	switch pc.GetTo() {
	case lavav1.Phase_PHASE_PENDING, lavav1.Phase_PHASE_SYNTHESIZED, lavav1.Phase_PHASE_PLANNED,
		lavav1.Phase_PHASE_RECONVERGING, lavav1.Phase_PHASE_FINALIZING:
		return true
	}
	return false
}

// progress tracks working phases in [BucketProgress].
type progress struct {
	kv jetstream.KeyValue
}

// openProgress gets [BucketProgress]; bus.EnsureTopology creates it.
func openProgress(ctx context.Context, js jetstream.JetStream) (*progress, error) {
	kv, err := js.KeyValue(ctx, BucketProgress)
	if err != nil {
		return nil, fmt.Errorf("anomaly: kv bucket %s (create it with bus.EnsureTopology): %w", BucketProgress, err)
	}
	return &progress{kv: kv}, nil
}

// track folds a PhaseChanged: a transition into a working phase (a new phase, or a new
// generation) starts the clock; a condition change within the phase keeps it; anything else
// removes the entry. Older generations are ignored.
func (p *progress) track(ctx context.Context, pc *lavav1.PhaseChanged, now time.Time) error {
	env := pc.GetEnvelope()
	res := env.GetResource()
	key := bus.ResourceKey(res.GetNamespace(), res.GetName())
	for range casAttempts {
		e, err := p.kv.Get(ctx, key)
		var cur *Progress
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
		case err != nil:
			return fmt.Errorf("anomaly: get progress %s: %w", key, err)
		default:
			cur = &Progress{}
			if json.Unmarshal(e.Value(), cur) != nil || cur.UID != res.GetUid() {
				cur = nil
			}
		}
		if cur != nil && env.GetGeneration() < cur.Generation {
			return nil
		}
		awaiting := pc.GetReason() == v1alpha1.ReasonApprovalRequired
		if !working(pc) && !awaiting {
			if e == nil {
				return nil
			}
			err = p.kv.Delete(ctx, key, jetstream.LastRevision(e.Revision()))
		} else {
			next := Progress{Namespace: res.GetNamespace(), Name: res.GetName(), UID: res.GetUid(), Generation: env.GetGeneration(),
				Phase: pc.GetTo().String(), Since: now.UTC(), Awaiting: awaiting}
			if cur != nil && cur.Phase == next.Phase && cur.Generation == next.Generation && cur.Awaiting == next.Awaiting &&
				pc.GetFrom() == pc.GetTo() {
				next.Since, next.Raised = cur.Since, cur.Raised
			}
			b, _ := json.Marshal(next)
			if e == nil {
				_, err = p.kv.Create(ctx, key, b)
			} else {
				_, err = p.kv.Update(ctx, key, b, e.Revision())
			}
		}
		if err == nil {
			return nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) && !isWrongSequence(err) {
			return fmt.Errorf("anomaly: write progress %s: %w", key, err)
		}
	}
	return fmt.Errorf("anomaly: progress %s: too much contention", key)
}

// scanProgress raises, for every resource past its deadline that has none yet, a Stalled
// anomaly (a working phase past stuckAfter) or an approval_overdue one (a plan held past
// approvalAfter); a negative deadline raises nothing.
func (s *Service) scanProgress(ctx context.Context) error {
	lister, err := s.progress.kv.ListKeys(ctx)
	if err != nil {
		if errors.Is(err, jetstream.ErrNoKeysFound) {
			return nil
		}
		return fmt.Errorf("anomaly: list progress: %w", err)
	}
	var keys []string
	for k := range lister.Keys() {
		keys = append(keys, k)
	}
	now := s.cfg.Now().UTC()
	var errs []error
	for _, key := range keys {
		e, err := s.progress.kv.Get(ctx, key)
		if err != nil {
			continue
		}
		pr := &Progress{}
		if json.Unmarshal(e.Value(), pr) != nil || pr.Raised {
			continue
		}
		deadline, raise := s.routing.StuckAfter.Duration, stalled
		if pr.Awaiting {
			deadline, raise = s.routing.ApprovalAfter.Duration, approvalOverdue
		}
		if deadline < 0 || now.Sub(pr.Since) < deadline {
			continue
		}
		a, cause := raise(pr, s.routing.Cluster, now)
		if err := s.Process(ctx, a, cause, nil); err != nil {
			errs = append(errs, err)
			continue
		}
		pr.Raised = true
		b, _ := json.Marshal(pr)
		// A conflict means the resource moved on (or another replica marked it): fine.
		_, _ = s.progress.kv.Update(ctx, key, b, e.Revision())
	}
	return errors.Join(errs...)
}

// stalled is the Stalled anomaly of a resource stuck in pr.Phase, and the envelope of the
// synthetic fact that caused it (event id from the resource, phase and entry time, so every
// replica and every scan agree).
func stalled(pr *Progress, cluster string, now time.Time) (LavaAnomaly, *lavav1.Envelope) {
	since := pr.Since.UTC().Format(time.RFC3339Nano)
	res := &lavav1.ResourceRef{Namespace: pr.Namespace, Name: pr.Name, Uid: pr.UID}
	id := eventid.ID(pr.UID, pr.Generation, "lava.anomaly.ProgressDeadline", "progress:"+pr.Phase+":"+since)
	cause := &lavav1.Envelope{EventId: id, Resource: res, Generation: pr.Generation, CorrelationId: id}
	phase := lavav1.Phase(lavav1.Phase_value[pr.Phase])
	a := base(cause, cluster, now)
	a.Kind, a.Severity = KindStalled, SeverityCritical
	a.Message = fmt.Sprintf("no progress for %s in phase %s (since %s)", now.Sub(pr.Since).Round(time.Second),
		phaseWord(phase), since)
	a.Metadata["reason"] = ReasonProgressDeadlineExceeded
	a.Metadata["phase"] = phaseWord(phase)
	a.Metadata["since"] = since
	return finish(a), cause
}

// approvalOverdue is the approval_overdue anomaly of a resource whose plan has waited for
// approval since pr.Since, and the envelope of the synthetic fact that caused it (as
// [stalled]'s).
func approvalOverdue(pr *Progress, cluster string, now time.Time) (LavaAnomaly, *lavav1.Envelope) {
	since := pr.Since.UTC().Format(time.RFC3339Nano)
	res := &lavav1.ResourceRef{Namespace: pr.Namespace, Name: pr.Name, Uid: pr.UID}
	id := eventid.ID(pr.UID, pr.Generation, "lava.anomaly.ApprovalOverdue", "approval:"+since)
	cause := &lavav1.Envelope{EventId: id, Resource: res, Generation: pr.Generation, CorrelationId: id}
	a := base(cause, cluster, now)
	a.Kind, a.ExtensionKind, a.Severity = KindCustom, ExtensionApprovalOverdue, SeverityFunctional
	a.Message = fmt.Sprintf("a plan has waited for approval for %s (since %s): review it with `lava plan show %s/%s`",
		now.Sub(pr.Since).Round(time.Second), since, pr.Namespace, pr.Name)
	a.Metadata["since"] = since
	return finish(a), cause
}

func phaseWord(p lavav1.Phase) string {
	n := p.String()
	if len(n) > len("PHASE_") {
		return n[len("PHASE_"):]
	}
	return n
}
