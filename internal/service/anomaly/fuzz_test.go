package anomaly_test

import (
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/service/anomaly"
)

// FuzzAnomalyFromEvents decodes arbitrary bytes the way the anomaly service's consumer does
// (bus.DecodeBody: binary protobuf on LAVA_PHASES, protojson on the public lava.anomaly.>
// subjects) as each event the service reads (Failed, DriftScanned, PhaseChanged and a foreign
// AnomalyDetected) and builds the anomaly from what decodes (anomaly.FromFailed,
// FromDriftScanned, FromPhaseChanged, FromDetected). Nothing panics; a built anomaly has a
// 64-hex-digit fingerprint; a valid one encodes, is read back by FromDetected with the same
// fingerprint, kind and severity, and makes an Alertmanager alert.
func FuzzAnomalyFromEvents(f *testing.F) {
	env := &lavav1.Envelope{EventId: "e1", Source: "fuzz", Generation: 2, OccurredAt: timestamppb.New(time.Unix(1700000000, 0)),
		Resource: &lavav1.ResourceRef{Namespace: "ns", Name: "n", Uid: "u"}}
	seeds := []proto.Message{
		&lavav1.Failed{Envelope: env, Stage: lavav1.Stage_STAGE_APPLY, Reason: "ApplyFailed", Message: "boom", Attempt: 2, Retryable: true, PlanId: "p"},
		&lavav1.DriftScanned{Envelope: env, TerraformJsonDigest: strings.Repeat("c", 64), MaxSeverity: lavav1.Severity_SEVERITY_FUNCTIONAL,
			Findings: []*lavav1.DriftFinding{{Address: "terraform_data.a", Attribute: "input", Severity: lavav1.Severity_SEVERITY_CRITICAL}}},
		&lavav1.PhaseChanged{Envelope: env, From: lavav1.Phase_PHASE_PENDING, To: lavav1.Phase_PHASE_FAILED, Reason: "DependencyNotReady", Message: "waiting"},
		&lavav1.AnomalyDetected{Envelope: env, Kind: lavav1.AnomalyKind_ANOMALY_KIND_CUSTOM, ExtensionKind: "cost_spike",
			Severity: lavav1.Severity_SEVERITY_COSMETIC, Message: "m", Metadata: map[string]string{"k": "v"}, Fingerprint: strings.Repeat("a", 64)},
	}
	for i, m := range seeds {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		j, err := protojson.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(uint8(i), b)
		f.Add(uint8(i), j)
	}
	f.Add(uint8(3), []byte(`{"envelope":{"eventId":"x"},"kind":"ANOMALY_KIND_CUSTOM","extensionKind":"A B"}`))
	now := time.Unix(1800000000, 0)
	am := anomaly.NewAlertmanagerSink(anomaly.SinkConfig{Name: "am", Type: anomaly.SinkAlertmanager, URL: "http://127.0.0.1:1"}, nil)
	f.Fuzz(func(t *testing.T, which uint8, data []byte) {
		schema := seeds[int(which)%len(seeds)].ProtoReflect().Descriptor().FullName()
		subject := bus.PrefixPhase + "ns.n.x"
		if schema == "lava.v1.AnomalyDetected" {
			subject = bus.PrefixAnomaly + "ns.n.x"
		}
		msg := &bus.Message{Subject: subject, Header: nats.Header{}, Data: data}
		msg.Header.Set(bus.HeaderSchema, string(schema))
		if bus.DecodeBody(nil, msg) != nil {
			return
		}
		var (
			a  anomaly.LavaAnomaly
			ok bool
		)
		switch ev := msg.Event.(type) {
		case *lavav1.Failed:
			a, ok = anomaly.FromFailed(ev, "c", now)
		case *lavav1.DriftScanned:
			a, ok = anomaly.FromDriftScanned(ev, "c", now)
		case *lavav1.PhaseChanged:
			a, ok = anomaly.FromPhaseChanged(ev, "c", now)
		case *lavav1.AnomalyDetected:
			var err error
			a, err = anomaly.FromDetected(ev, now)
			ok = err == nil
		default:
			t.Fatalf("decoded %T for schema %s", msg.Event, schema)
		}
		if !ok {
			return
		}
		if len(a.Fingerprint) != 64 || strings.Trim(a.Fingerprint, "0123456789abcdef") != "" {
			t.Fatalf("fingerprint %q, want 64 hex digits", a.Fingerprint)
		}
		if a.Validate() != nil {
			return // an event without a resource: the service drops it
		}
		p := a.Proto()
		if _, err := proto.Marshal(p); err != nil {
			t.Fatalf("the anomaly does not encode: %v", err)
		}
		back, err := anomaly.FromDetected(p, now)
		if err != nil {
			t.Fatalf("FromDetected refuses the anomaly it is given: %v (%v)", err, p)
		}
		if back.Fingerprint != a.Fingerprint || back.Kind != a.Kind || back.Severity != a.Severity {
			t.Fatalf("read back as %s/%s/%s, built %s/%s/%s", back.Kind, back.Severity, back.Fingerprint, a.Kind, a.Severity, a.Fingerprint)
		}
		if _, err := am.Alert(p); err != nil {
			t.Fatalf("no Alertmanager alert for a valid anomaly: %v", err)
		}
	})
}
