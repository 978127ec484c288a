// Package receipttest holds the fixtures of the receipt tests of internal/readmodel and
// internal/service/attest: fixed signing keys, the events of a resource's lifecycle and their
// payloads, and the failure messages of a verification.
package receipttest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/readmodel"
)

// PayloadEventID returns the event_id a receipt payload attests (OutcomePayload.event_id, or
// the anomaly's envelope event_id).
func PayloadEventID(p *lavav1.ReceiptPayload) string {
	if o := p.GetOutcome(); o != nil {
		return o.GetEventId()
	}
	return p.GetAnomaly().GetAnomaly().GetEnvelope().GetEventId()
}

// T0 is the clock of the pure tests.
var T0 = time.Date(2026, 11, 30, 1, 2, 3, 400000000, time.UTC)

// Signer is a fixed key (seed 0x01 0x02 ... 0x20).
func Signer(t testing.TB) *readmodel.Signer {
	t.Helper()
	seed := make([]byte, 32)
	for i := range seed {
		seed[i] = byte(i + 1)
	}
	s, err := readmodel.NewSigner(seed)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// OtherSigner is a second fixed key (seed 0xab repeated).
func OtherSigner(t testing.TB) *readmodel.Signer {
	t.Helper()
	s, err := readmodel.ParseSigner(strings.Repeat("ab", 32))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Outcome is the payload of a PhaseChanged to phase.
func Outcome(ns, name string, phase lavav1.Phase, n int) *lavav1.ReceiptPayload {
	return readmodel.OutcomeFromPhaseChanged(PhaseChanged(ns, name, lavav1.Phase_PHASE_UNSPECIFIED, phase, n))
}

// PhaseChanged builds the n-th PhaseChanged of a resource.
func PhaseChanged(ns, name string, from, to lavav1.Phase, n int) *lavav1.PhaseChanged {
	pc := &lavav1.PhaseChanged{
		Envelope: &lavav1.Envelope{
			EventId:    fmt.Sprintf("%064x", n+1),
			Source:     "watcher",
			Resource:   &lavav1.ResourceRef{Namespace: ns, Name: name, Uid: "uid-" + name},
			Generation: 1,
			Trigger:    fmt.Sprintf("cause:%064x", n+1000),
		},
		From:         from,
		To:           to,
		Reason:       strings.TrimPrefix(to.String(), "PHASE_"),
		SourceDigest: strings.Repeat("a", 64),
	}
	if to >= lavav1.Phase_PHASE_SYNTHESIZED {
		pc.TerraformJsonDigest = strings.Repeat("b", 64)
	}
	if to >= lavav1.Phase_PHASE_PLANNED {
		pc.PlanId = strings.Repeat("c", 64)
		pc.ChangeSummary = &lavav1.ChangeSummary{Add: 2, Change: 1}
	}
	if to == lavav1.Phase_PHASE_FAILED {
		pc.Message = "plan: provider unavailable"
		pc.Diagnostics = []string{"Observe=Ok", "Act=Failed"}
	}
	return pc
}

// Lifecycle is the phases of a full lifecycle.
var Lifecycle = []lavav1.Phase{
	lavav1.Phase_PHASE_PENDING, lavav1.Phase_PHASE_SYNTHESIZED, lavav1.Phase_PHASE_PLANNED,
	lavav1.Phase_PHASE_APPLIED, lavav1.Phase_PHASE_FINALIZING,
}

// Messages are the failure messages of res, in order.
func Messages(res readmodel.Result) []string {
	var out []string
	for _, f := range res.Failures {
		out = append(out, f.Message)
	}
	return out
}

// Anomaly builds the n-th AnomalyDetected of a resource.
func Anomaly(ns, name string, n int) *lavav1.AnomalyDetected {
	ref := &lavav1.ResourceRef{Namespace: ns, Name: name, Uid: "uid-" + name}
	return &lavav1.AnomalyDetected{
		Envelope: &lavav1.Envelope{
			EventId: fmt.Sprintf("%064x", n+5000), Source: "anomaly", Resource: ref, Generation: 1,
			Trigger: fmt.Sprintf("anomaly:%s:%d", strings.Repeat("f", 64), n), OccurredAt: timestamppb.New(T0),
		},
		Kind: lavav1.AnomalyKind_ANOMALY_KIND_APPLY_FAILURE, Severity: lavav1.Severity_SEVERITY_CRITICAL,
		Source: ref, Message: "apply failed", Metadata: map[string]string{"stage": "apply"},
		Fingerprint: strings.Repeat("f", 64), Count: int64(n), FirstSeen: timestamppb.New(T0), LastSeen: timestamppb.New(T0),
		Action: lavav1.RemediationAction_REMEDIATION_ACTION_REQUIRE_APPROVAL,
	}
}

// Tick builds the n-th TickReported of a resource: a clean pass, a functional drift under
// AutoCorrect, or a critical one held for approval.
func Tick(ns, name string, n int, final lavav1.Phase, action lavav1.RemediationAction, diff string) *lavav1.TickReported {
	beats := []*lavav1.BeatReport{
		{Beat: lavav1.Beat_BEAT_OBSERVE, Status: lavav1.BeatStatus_BEAT_STATUS_OK},
		{Beat: lavav1.Beat_BEAT_DIFF, Status: lavav1.BeatStatus_BEAT_STATUS_OK, Message: diff},
		{Beat: lavav1.Beat_BEAT_CLASSIFY, Status: lavav1.BeatStatus_BEAT_STATUS_OK},
		{Beat: lavav1.Beat_BEAT_DECIDE, Status: lavav1.BeatStatus_BEAT_STATUS_OK},
		{Beat: lavav1.Beat_BEAT_ACT, Status: lavav1.BeatStatus_BEAT_STATUS_OK},
		{Beat: lavav1.Beat_BEAT_ATTEST, Status: lavav1.BeatStatus_BEAT_STATUS_OK},
		{Beat: lavav1.Beat_BEAT_TICK, Status: lavav1.BeatStatus_BEAT_STATUS_OK},
	}
	tr := &lavav1.TickReported{
		Envelope: &lavav1.Envelope{
			EventId: fmt.Sprintf("%064x", n+9000), Source: "viggy", Generation: 1,
			Resource: &lavav1.ResourceRef{Namespace: ns, Name: name, Uid: "uid-" + name},
		},
		Beats: beats, FinalPhase: final,
	}
	if action != lavav1.RemediationAction_REMEDIATION_ACTION_UNSPECIFIED {
		tr.Decision = &lavav1.Decision{Action: action}
		beats[3].Message = strings.TrimPrefix(action.String(), "REMEDIATION_ACTION_")
		if action == lavav1.RemediationAction_REMEDIATION_ACTION_REQUIRE_APPROVAL {
			tr.Decision.PlanId = strings.Repeat("d", 64)
		}
	}
	return tr
}
