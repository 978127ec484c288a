package readmodel

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
)

// ErrPayloadKind reports a payload that does not match the receipt kind (an OutcomePayload
// for [KindOutcome], an AnomalyPayload for [KindAnomaly]).
var ErrPayloadKind = errors.New("readmodel: payload does not match the receipt kind")

// NewReceipt builds the receipt that follows head (nil for an empty chain) as upstream's
// append does (docs/dialect.md section 8.2): sequence head+1 (or 0), prev_hash head's content hash (or
// [Genesis]), timestamp now in UTC (but never before head's, so the chain's time order holds
// even when replicas' clocks differ), encoding [EncodingV1], the content hash, and signer's
// signature (algo "none" for a nil signer). It changes neither head nor payload; the receipt
// shares payload.
func NewReceipt(head *lavav1.Receipt, kind string, payload *lavav1.ReceiptPayload, now time.Time, signer *Signer) (*lavav1.Receipt, error) {
	if err := CheckPayloadKind(kind, payload); err != nil {
		return nil, err
	}
	r := &lavav1.Receipt{Kind: kind, Payload: payload, EncodingVersion: EncodingV1, PrevHash: Genesis()}
	now = now.UTC()
	if head != nil {
		r.Sequence = head.GetSequence() + 1
		r.PrevHash = append([]byte(nil), head.GetContentHash()...)
		if prev := head.GetTimestamp().AsTime(); head.GetTimestamp() != nil && now.Before(prev) {
			now = prev
		}
	}
	r.Timestamp = timestamppb.New(now)
	h, err := ContentHash(r)
	if err != nil {
		return nil, err
	}
	r.ContentHash = h
	r.Signature = signer.Sign(h)
	return r, nil
}

// CheckPayloadKind returns nil when p is the payload kind's receipts carry (an OutcomePayload
// for [KindOutcome], an AnomalyPayload for [KindAnomaly]), else an error wrapping
// [ErrPayloadKind] naming the kind.
func CheckPayloadKind(kind string, p *lavav1.ReceiptPayload) error {
	switch kind {
	case KindOutcome:
		if p.GetOutcome() == nil {
			return fmt.Errorf("%w: %s needs an outcome payload", ErrPayloadKind, kind)
		}
	case KindAnomaly:
		if p.GetAnomaly() == nil {
			return fmt.Errorf("%w: %s needs an anomaly payload", ErrPayloadKind, kind)
		}
	default:
		return fmt.Errorf("%w: unknown kind %q", ErrPayloadKind, kind)
	}
	return nil
}

// OutcomeFromPhaseChanged is the payload of the receipt of a PhaseChanged: the resource and
// generation, the render digests, plan id, the phase reached, the reason, the change summary,
// the diagnostics (the transition's message first when it has one and the diagnostics do not
// already hold it) and the PhaseChanged's event_id. The bindings digest is left out: a keyed
// digest means nothing to a verifier. PhaseChanged never carries secret values, so neither
// does the payload.
func OutcomeFromPhaseChanged(pc *lavav1.PhaseChanged) *lavav1.ReceiptPayload {
	env := pc.GetEnvelope()
	diags := make([]string, 0, len(pc.GetDiagnostics())+1)
	if msg := pc.GetMessage(); msg != "" && !slices.Contains(pc.GetDiagnostics(), msg) {
		diags = append(diags, msg)
	}
	diags = append(diags, pc.GetDiagnostics()...)
	var summary *lavav1.ChangeSummary
	if cs := pc.GetChangeSummary(); cs != nil {
		summary = &lavav1.ChangeSummary{Add: cs.GetAdd(), Change: cs.GetChange(), Destroy: cs.GetDestroy()}
	}
	return &lavav1.ReceiptPayload{Kind: &lavav1.ReceiptPayload_Outcome{Outcome: &lavav1.OutcomePayload{
		Resource:            cloneRef(env.GetResource()),
		Generation:          env.GetGeneration(),
		SourceDigest:        pc.GetSourceDigest(),
		TerraformJsonDigest: pc.GetTerraformJsonDigest(),
		PlanId:              pc.GetPlanId(),
		Phase:               pc.GetTo(),
		Reason:              pc.GetReason(),
		ChangeSummary:       summary,
		Diagnostics:         diags,
		EventId:             env.GetEventId(),
	}}}
}

// OutcomeFromTick is the payload of the receipt of a TickReported (one viggy pass, docs/dialect.md
// section 8.6): the resource and generation, the phase the pass leaves it in, the decided plan id, the
// reason (the decided action in CamelCase, "AutoCorrect"; "Tick" when Decide did not run), one
// diagnostic per beat in upstream's form ("Observe=Ok", "Decide=Ok (AutoCorrect)",
// "Act=Failed (apply: timeout)", "Tick=Skipped") and the TickReported's event_id. A tick knows no
// render digests or change summary; those stay empty.
func OutcomeFromTick(tr *lavav1.TickReported) *lavav1.ReceiptPayload {
	env := tr.GetEnvelope()
	reason := "Tick"
	if d := tr.GetDecision(); d != nil {
		reason = camelCase(strings.TrimPrefix(d.GetAction().String(), "REMEDIATION_ACTION_"))
	}
	diags := make([]string, 0, len(tr.GetBeats()))
	for _, b := range tr.GetBeats() {
		d := camelCase(strings.TrimPrefix(b.GetBeat().String(), "BEAT_")) + "=" +
			camelCase(strings.TrimPrefix(b.GetStatus().String(), "BEAT_STATUS_"))
		if m := b.GetMessage(); m != "" {
			d += " (" + m + ")"
		}
		diags = append(diags, d)
	}
	return &lavav1.ReceiptPayload{Kind: &lavav1.ReceiptPayload_Outcome{Outcome: &lavav1.OutcomePayload{
		Resource:    cloneRef(env.GetResource()),
		Generation:  env.GetGeneration(),
		PlanId:      tr.GetDecision().GetPlanId(),
		Phase:       tr.GetFinalPhase(),
		Reason:      reason,
		Diagnostics: diags,
		EventId:     env.GetEventId(),
	}}}
}

// camelCase turns an UPPER_SNAKE enum name into CamelCase ("AUTO_CORRECT" -> "AutoCorrect").
func camelCase(s string) string {
	var b strings.Builder
	for _, w := range strings.Split(strings.ToLower(s), "_") {
		if w != "" {
			b.WriteString(strings.ToUpper(w[:1]) + w[1:])
		}
	}
	return b.String()
}

// AnomalyFromDetected is the payload of the receipt of an AnomalyDetected: the anomaly as
// published (it never carries secret values), the routed action and [AnomalyHash].
func AnomalyFromDetected(a *lavav1.AnomalyDetected) (*lavav1.ReceiptPayload, error) {
	h, err := AnomalyHash(a)
	if err != nil {
		return nil, err
	}
	return &lavav1.ReceiptPayload{Kind: &lavav1.ReceiptPayload_Anomaly{Anomaly: &lavav1.AnomalyPayload{
		Anomaly: a, Action: a.GetAction(), AnomalyHash: h,
	}}}, nil
}

func cloneRef(r *lavav1.ResourceRef) *lavav1.ResourceRef {
	if r == nil {
		return nil
	}
	return &lavav1.ResourceRef{Namespace: r.GetNamespace(), Name: r.GetName(), Uid: r.GetUid()}
}
