package watcher

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/lava-operator/lava/api/v1alpha1"
	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/pipeline"
	"github.com/lava-operator/lava/internal/platform/bus"
)

// phaseConsumer folds LAVA_PHASES into status through the [Core]. It is a manager runnable
// that needs leader election: only the leader consumes.
type phaseConsumer struct {
	js          jetstream.JetStream
	consumer    string
	concurrency int
	core        *Core
	busMetrics  *bus.Metrics
	log         *slog.Logger
}

var (
	_ manager.Runnable               = (*phaseConsumer)(nil)
	_ manager.LeaderElectionRunnable = (*phaseConsumer)(nil)
)

// NeedLeaderElection implements [manager.LeaderElectionRunnable]: only the leader folds phase
// events.
func (p *phaseConsumer) NeedLeaderElection() bool { return true }

// Start consumes until ctx is done, then drains (see [bus.Consume]).
func (p *phaseConsumer) Start(ctx context.Context) error {
	p.log.Info("watcher: consuming phase events", slog.String("stream", bus.StreamPhases), slog.String("consumer", p.consumer))
	return p.core.Consume(ctx, p.js, ConsumeOptions{Consumer: p.consumer, Concurrency: p.concurrency, Metrics: p.busMetrics})
}

// PhaseEvent maps a consumed bus event onto the reducer's [pipeline.Event]. ok is false for
// events that do not touch status (PhaseChanged, TickReported of phase Applied or Failed,
// DriftScanned with findings, which viggy decides on, and any other type). diagnostics are the
// lines a PhaseChanged for it carries. published (the stream's timestamp) is the event time
// when the envelope has no occurred_at. It fails for an event whose payload is malformed for
// its type (an output that is not JSON).
func PhaseEvent(ev bus.Event, published time.Time) (out pipeline.Event, diagnostics []string, ok bool, err error) {
	env := ev.GetEnvelope()
	out.Generation = env.GetGeneration()
	out.Time = published
	if t := env.GetOccurredAt(); t != nil {
		out.Time = t.AsTime()
	}
	switch e := ev.(type) {
	case *lavav1.Synthesized:
		out.Type = pipeline.EventSynthesized
		out.Render = renderRecord(e.GetRender(), e.GetGate().GetGate())
		diagnostics = e.GetGate().GetWarnings()
	case *lavav1.Planned:
		out.Type = pipeline.EventPlanned
		if e.GetAwaitingApproval() {
			out.Type = pipeline.EventAwaitingApproval
		}
		out.Plan = planSummary(e.GetPlanId(), e.GetSummary())
		out.Plan.Resources, out.Plan.ResourcesOmitted = plannedResources(e)
		out.StateRegressed, out.PlanPolicy = e.GetStateRegressed(), e.GetPlanPolicy()
	case *lavav1.Applied:
		out.Type = pipeline.EventApplied
		if e.GetPlanId() != "" {
			out.Plan = planSummary(e.GetPlanId(), e.GetSummary())
		}
		out.OutputsSecret = e.GetOutputsSecret()
		for k, v := range e.GetOutputs() {
			if !json.Valid([]byte(v)) {
				return out, nil, false, fmt.Errorf("watcher: Applied output %q is not JSON", k)
			}
			if out.Outputs == nil {
				out.Outputs = map[string]apiextensionsv1.JSON{}
			}
			out.Outputs[k] = apiextensionsv1.JSON{Raw: []byte(v)}
		}
	case *lavav1.Failed:
		out.Type = pipeline.EventFailed
		out.Stage = stage(e.GetStage(), e.GetReason())
		out.Reason = e.GetReason()
		out.Message = e.GetMessage()
		out.Terminal = !e.GetRetryable()
		if e.GetMessage() != "" {
			diagnostics = []string{e.GetMessage()}
		}
	case *lavav1.Destroyed:
		out.Type = pipeline.EventDestroyed
		out.Message = fmt.Sprintf("destroyed %d resources", e.GetDestroyedCount())
		if e.GetOrphaned() {
			out.Message = "infrastructure orphaned (deletionPolicy Orphan)"
		}
	case *lavav1.DriftScanned:
		if e.GetMaxSeverity() != lavav1.Severity_SEVERITY_UNSPECIFIED || len(e.GetFindings()) > 0 {
			return out, nil, false, nil
		}
		out.Type = pipeline.EventDriftClean
	case *lavav1.TickReported:
		d := e.GetDecision()
		switch e.GetFinalPhase() {
		case lavav1.Phase_PHASE_DRIFTED:
			out.Type = pipeline.EventDrifted
			out.Message = fmt.Sprintf("drift of severity %s: %s", enumWord(d.GetSeverity().String(), "SEVERITY_"),
				enumWord(d.GetAction().String(), "REMEDIATION_ACTION_"))
			if d.GetPlanId() != "" {
				out.Message += ", plan " + d.GetPlanId() + " awaits approval"
			}
		case lavav1.Phase_PHASE_RECONVERGING:
			out.Type = pipeline.EventReconverging
		default:
			return out, nil, false, nil
		}
	case *lavav1.ReceiptAppended:
		out.Type = pipeline.EventReceiptAppended
		out.Receipt = &v1alpha1.ReceiptHead{Sequence: int64(e.GetSequence()), Hash: hex.EncodeToString(e.GetContentHash())}
	default:
		return out, nil, false, nil
	}
	return out, diagnostics, true, nil
}

func enumWord(name, prefix string) string {
	if len(name) > len(prefix) && name[:len(prefix)] == prefix {
		return name[len(prefix):]
	}
	return name
}

func stage(s lavav1.Stage, reason string) pipeline.Stage {
	switch s {
	case lavav1.Stage_STAGE_SYNTH:
		if reason == v1alpha1.ReasonGateRejected {
			return pipeline.StageGate
		}
		return pipeline.StageSynthesis
	case lavav1.Stage_STAGE_PLAN:
		return pipeline.StagePlan
	case lavav1.Stage_STAGE_APPLY:
		return pipeline.StageApply
	case lavav1.Stage_STAGE_DESTROY:
		return pipeline.StageDestroy
	}
	return ""
}

func planSummary(id string, s *lavav1.ChangeSummary) *v1alpha1.PlanSummary {
	return &v1alpha1.PlanSummary{ID: id, Add: s.GetAdd(), Change: s.GetChange(), Destroy: s.GetDestroy()}
}

// plannedResources is status.plan.resources of a Planned: the changing resources (no-ops
// left out) in the event's address order, at most v1alpha1.MaxStatusPlanResources, and how
// many changing resources are left out (those of the event beyond the bound plus the event's
// own changes_omitted).
func plannedResources(e *lavav1.Planned) ([]v1alpha1.PlannedResource, int32) {
	var out []v1alpha1.PlannedResource
	omitted := e.GetChangesOmitted()
	for _, c := range e.GetChanges() {
		action := pipeline.ChangeAction(c.GetAction())
		if action == "" {
			continue
		}
		if len(out) == v1alpha1.MaxStatusPlanResources {
			omitted++
			continue
		}
		out = append(out, v1alpha1.PlannedResource{Address: c.GetAddress(), Action: action})
	}
	return out, omitted
}

func renderRecord(r *lavav1.RenderRecord, gate string) *v1alpha1.RenderRecord {
	out := &v1alpha1.RenderRecord{
		SourceDigest:        r.GetSourceDigest(),
		SourceRevision:      r.GetSourceRevision(),
		BindingsDigest:      r.GetBindingsDigest(),
		Gate:                r.GetGate(),
		ArchitectureName:    r.GetArchitectureName(),
		ResourceCount:       r.GetResourceCount(),
		TerraformJSONDigest: r.GetTerraformJsonDigest(),
		EvaluatorVersion:    r.GetEvaluatorVersion(),
	}
	if out.Gate == "" {
		out.Gate = gate
	}
	switch r.GetSourceKind() {
	case lavav1.SourceKind_SOURCE_KIND_INLINE:
		out.SourceKind = v1alpha1.SourceKindInline
	case lavav1.SourceKind_SOURCE_KIND_NAME:
		out.SourceKind = v1alpha1.SourceKindName
	case lavav1.SourceKind_SOURCE_KIND_SOURCE_REF:
		out.SourceKind = v1alpha1.SourceKindSourceRef
	}
	return out
}
