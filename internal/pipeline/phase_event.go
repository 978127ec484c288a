package pipeline

import (
	"errors"
	"fmt"
	"regexp"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/lava-operator/lava/api/v1alpha1"
)

// EventType is what happened. Lifecycle events move the phase through the [Table];
// condition-only events (Suspended, Resumed, DependenciesBlocked, DependenciesSatisfied,
// DeletionBlocked, DeletionUnblocked) and
// ReceiptAppended keep the phase and change one condition or field.
type EventType string

// The event types. The comment names the bus event (docs/events.md, "Event catalogue") each one mirrors and
// the payload it needs.
const (
	// EventObserved: the watcher observed a new generation (or a forced pass: Force). Any phase
	// but Finalizing → Pending; sets status.observedGeneration. Mirrors ResourceObserved.
	EventObserved EventType = "Observed"
	// EventSynthesized: synth rendered and gated the source. Needs Render. Mirrors Synthesized.
	EventSynthesized EventType = "Synthesized"
	// EventPlanned: the applier computed a plan. Needs Plan. Mirrors Planned.
	EventPlanned EventType = "Planned"
	// EventAwaitingApproval: the plan waits for spec.approvePlan to name it. Needs Plan.
	// Mirrors Planned with its approval flag set.
	EventAwaitingApproval EventType = "AwaitingApproval"
	// EventApplied: the applier applied the plan. Optional Plan, Outputs (non-sensitive),
	// OutputsSecret. Sets lastAppliedAt to Time. Mirrors Applied.
	EventApplied EventType = "Applied"
	// EventFailed: a stage failed. Stage, Reason (CamelCase), Message (no secrets), Terminal.
	// Mirrors Failed.
	EventFailed EventType = "Failed"
	// EventDriftClean: a drift scan found nothing. Mirrors DriftScanned with no findings.
	EventDriftClean EventType = "DriftClean"
	// EventDrifted: viggy recorded or holds drift. Reason, Message (deterministic: no scan time).
	// Mirrors PhaseChanged to Drifted from viggy.
	EventDrifted EventType = "Drifted"
	// EventReconverging: viggy re-applies to correct drift. Mirrors ReapplyRequested.
	EventReconverging EventType = "Reconverging"
	// EventDeletionRequested: the object has a deletionTimestamp. Mirrors DeletionRequested.
	EventDeletionRequested EventType = "DeletionRequested"
	// EventDestroyed: the infrastructure was destroyed (or orphaned); the finalizer may go.
	// Mirrors Destroyed.
	EventDestroyed EventType = "Destroyed"
	// EventSuspended: spec.suspend became true (condition Suspended True).
	EventSuspended EventType = "Suspended"
	// EventResumed: spec.suspend became false (condition Suspended False).
	EventResumed EventType = "Resumed"
	// EventDependenciesBlocked: a dependency has not reached its phase, or the dependencies
	// form a cycle (Reason ReasonDependencyCycle). Message names what it waits for.
	EventDependenciesBlocked EventType = "DependenciesBlocked"
	// EventDependenciesSatisfied: every dependency reached its phase.
	EventDependenciesSatisfied EventType = "DependenciesSatisfied"
	// EventDeletionBlocked: the object is being deleted and waits for the objects that consume
	// it (spec.dependsOn, outputsRef, LavaArchitectureDependency) to be destroyed first
	// (condition DeletionBlocked True). Message names them and until when it waits.
	EventDeletionBlocked EventType = "DeletionBlocked"
	// EventDeletionUnblocked: the wait of a deletion ended (condition DeletionBlocked False):
	// Reason ReasonConsumersDestroyed, or ReasonDeletionWaitExpired with a Message naming the
	// consumers left.
	EventDeletionUnblocked EventType = "DeletionUnblocked"
	// EventReceiptAppended: attest appended a receipt. Needs Receipt. Only a newer sequence
	// moves status.receipt; the generation is not checked. Never published as PhaseChanged.
	// Mirrors ReceiptAppended.
	EventReceiptAppended EventType = "ReceiptAppended"
)

// EventTypes returns every event type.
func EventTypes() []EventType {
	return []EventType{
		EventObserved, EventSynthesized, EventPlanned, EventAwaitingApproval, EventApplied,
		EventFailed, EventDriftClean, EventDrifted, EventReconverging, EventDeletionRequested,
		EventDestroyed, EventSuspended, EventResumed, EventDependenciesBlocked,
		EventDependenciesSatisfied, EventDeletionBlocked, EventDeletionUnblocked, EventReceiptAppended,
	}
}

// conditionOnly reports whether t keeps the phase and sets only a condition.
func (t EventType) conditionOnly() bool {
	switch t {
	case EventSuspended, EventResumed, EventDependenciesBlocked, EventDependenciesSatisfied, EventDeletionBlocked,
		EventDeletionUnblocked:
		return true
	}
	return false
}

// Stage is the pipeline stage a Failed event comes from; it picks the condition set False.
type Stage string

// The stages.
const (
	// StageSynthesis: resolving or rendering the source (condition Synthesized).
	StageSynthesis Stage = "Synthesis"
	// StageGate: the typed Interface gate (conditions Gated and Synthesized).
	StageGate Stage = "Gate"
	// StagePlan: planning (condition Planned).
	StagePlan Stage = "Plan"
	// StageApply: applying (condition Applied).
	StageApply Stage = "Apply"
	// StageDestroy: destroying on deletion (no stage condition; the finalizer stays).
	StageDestroy Stage = "Destroy"
)

// Event is one fact folded into a status by [Reduce]: a plain Go value the watcher builds from a
// bus message (or from what it observed itself). Fields that do not apply to Type are ignored.
type Event struct {
	// Type is what happened.
	Type EventType
	// Generation is the metadata.generation the event is about (≥ 1; ignored for
	// ReceiptAppended). Older than status.observedGeneration means stale: ignored.
	Generation int64
	// Time is when it happened (the envelope's occurred_at). Required: Reduce never reads the
	// clock. Stored at second precision, as the API server does.
	Time time.Time
	// Reason is a CamelCase condition reason overriding the event's default (v1alpha1
	// Reason* constants); it must match metav1.Condition's reason pattern.
	Reason string
	// Message is a human-readable condition message, without secrets, truncated to 32768
	// bytes. Keep it deterministic (no timestamps) so a repeated event changes nothing.
	Message string
	// Force makes an Observed event for the current generation start a new pass (the
	// reconcile-requested-at annotation, an edited RemediationPolicy). Without it such an
	// event is a no-op.
	Force bool
	// Stage is the stage a Failed event comes from.
	Stage Stage
	// Terminal marks a Failed event that will not be retried until the spec changes
	// (Stalled True). Otherwise a retry is scheduled (Reconciling True,
	// ReasonProgressingWithRetry).
	Terminal bool
	// Render is the RenderRecord of a Synthesized event.
	Render *v1alpha1.RenderRecord
	// Plan is the plan summary of a Planned or AwaitingApproval event (optional on Applied).
	Plan *v1alpha1.PlanSummary
	// StateRegressed, on a Planned or AwaitingApproval event, says how the state regressed
	// since the last apply (Planned.state_regressed): StateRegressed True with it.
	StateRegressed string
	// PlanPolicy, on a Planned or AwaitingApproval event, names the plan rules that matched
	// the plan (Planned.plan_policy): the AwaitingApproval condition says which rule holds it.
	PlanPolicy string
	// Outputs are the non-sensitive Terraform outputs of an Applied event.
	Outputs map[string]apiextensionsv1.JSON
	// OutputsSecret names the Secret holding the sensitive outputs of an Applied event.
	OutputsSecret string
	// Receipt is the new chain head of a ReceiptAppended event.
	Receipt *v1alpha1.ReceiptHead
}

// ErrInvalidEvent is wrapped by the error Reduce returns for a malformed [Event]: an unknown
// type, a zero Time, a generation below 1, a bad reason or a missing payload.
var ErrInvalidEvent = errors.New("invalid phase event")

// reasonPattern is metav1.Condition's reason validation.
var reasonPattern = regexp.MustCompile(`^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$`)

// maxReasonLen and maxMessageLen are metav1.Condition's limits.
const (
	maxReasonLen  = 1024
	maxMessageLen = 32768
)

// validate checks ev's shape for its type.
func (ev Event) validate() error {
	known := false
	for _, t := range EventTypes() {
		if ev.Type == t {
			known = true
			break
		}
	}
	switch {
	case !known:
		return fmt.Errorf("%w: unknown type %q", ErrInvalidEvent, ev.Type)
	case ev.Time.IsZero():
		return fmt.Errorf("%w: %s: zero time", ErrInvalidEvent, ev.Type)
	case ev.Type != EventReceiptAppended && ev.Generation < 1:
		return fmt.Errorf("%w: %s: generation %d < 1", ErrInvalidEvent, ev.Type, ev.Generation)
	case ev.Reason != "" && (len(ev.Reason) > maxReasonLen || !reasonPattern.MatchString(ev.Reason)):
		return fmt.Errorf("%w: %s: reason %q is not CamelCase", ErrInvalidEvent, ev.Type, ev.Reason)
	case ev.Type == EventSynthesized && ev.Render == nil:
		return fmt.Errorf("%w: %s: no render record", ErrInvalidEvent, ev.Type)
	case (ev.Type == EventPlanned || ev.Type == EventAwaitingApproval) && ev.Plan == nil:
		return fmt.Errorf("%w: %s: no plan summary", ErrInvalidEvent, ev.Type)
	case ev.Type == EventReceiptAppended && ev.Receipt == nil:
		return fmt.Errorf("%w: %s: no receipt head", ErrInvalidEvent, ev.Type)
	}
	if ev.Type == EventFailed {
		switch ev.Stage {
		case "", StageSynthesis, StageGate, StagePlan, StageApply, StageDestroy:
		default:
			return fmt.Errorf("%w: %s: unknown stage %q", ErrInvalidEvent, ev.Type, ev.Stage)
		}
	}
	return nil
}
