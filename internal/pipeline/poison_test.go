package pipeline_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/pipeline"
	"github.com/lava-operator/lava/internal/platform/bus"
)

func TestPoisonAnomaly(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 30, 1, 0, 0, 0, time.UTC)
	env := &lavav1.Envelope{EventId: "e1", Resource: &lavav1.ResourceRef{Namespace: "infra", Name: "vpc", Uid: "uid-vpc"},
		Generation: 4, CorrelationId: "c1"}
	base := bus.PoisonReport{Stream: bus.StreamPhases, Consumer: bus.ServiceApplier, Subject: bus.PhaseSubject("infra", "vpc", bus.EventSynthesized),
		StreamSeq: 42, NumDelivered: 10, Reason: bus.PoisonMaxDeliveries, Err: errors.New("engine: token=abc123 refused"),
		Schema: "lava.v1.Synthesized", Envelope: env}
	tests := []struct {
		name          string
		mut           func(*bus.PoisonReport)
		wantNamespace string
		wantName      string
		wantUID       string
	}{
		{"decoded envelope", func(*bus.PoisonReport) {}, "infra", "vpc", "uid-vpc"},
		{"undecodable: resource from the subject", func(r *bus.PoisonReport) { r.Envelope = nil }, "infra", "vpc", ""},
		{"undecodable anomaly: the subject", func(r *bus.PoisonReport) {
			r.Envelope, r.Stream, r.Subject = nil, bus.StreamAnomalies, bus.AnomalySubject("critical", "apply_failure")
		}, "", "lava.anomaly.critical.apply_failure", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := base
			tt.mut(&r)
			an := pipeline.PoisonAnomaly("applier", r, now)
			src := an.GetSource()
			if src.GetNamespace() != tt.wantNamespace || src.GetName() != tt.wantName || src.GetUid() != tt.wantUID {
				t.Errorf("source %v, want %s/%s uid %q", src, tt.wantNamespace, tt.wantName, tt.wantUID)
			}
			if an.GetKind() != lavav1.AnomalyKind_ANOMALY_KIND_CUSTOM || an.GetExtensionKind() != pipeline.ExtensionPoisonMessage ||
				an.GetSeverity() != lavav1.Severity_SEVERITY_FUNCTIONAL {
				t.Errorf("kind %v/%s severity %v", an.GetKind(), an.GetExtensionKind(), an.GetSeverity())
			}
			subject, err := bus.SubjectFor(an)
			if err != nil || subject != "lava.anomaly.functional.poison_message" {
				t.Errorf("subject %q, %v", subject, err)
			}
			if strings.Contains(an.GetMessage(), "abc123") || !strings.Contains(an.GetMessage(), "max_deliveries") {
				t.Errorf("message %q: want the reason, scrubbed", an.GetMessage())
			}
			if an.GetMetadata()["deliveries"] != "10" || an.GetMetadata()["stream_seq"] != "42" || an.GetMetadata()["subject"] != r.Subject {
				t.Errorf("metadata %v", an.GetMetadata())
			}
			again := pipeline.PoisonAnomaly("applier", r, now.Add(time.Minute))
			if again.GetEnvelope().GetEventId() != an.GetEnvelope().GetEventId() || again.GetFingerprint() != an.GetFingerprint() {
				t.Error("a second report of the same message has another event id or fingerprint")
			}
			next := r
			next.StreamSeq++
			if pipeline.PoisonAnomaly("applier", next, now).GetEnvelope().GetEventId() == an.GetEnvelope().GetEventId() {
				t.Error("another message has the same event id")
			}
		})
	}
}

// Vectors shared with internal/service/anomaly (TestFingerprint_vectors).
func TestFingerprint(t *testing.T) {
	t.Parallel()
	got := pipeline.Fingerprint(lavav1.AnomalyKind_ANOMALY_KIND_DRIFT_DETECTED, "", "uid-1", lavav1.Severity_SEVERITY_FUNCTIONAL, "abc")
	if want := "538909d5243ff244eefb74aabe8f04059704cb70c796d2631001cef9b7fb25e6"; got != want {
		t.Errorf("Fingerprint = %s, want %s", got, want)
	}
}
