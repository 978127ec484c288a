package bus_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/google/go-cmp/cmp"

	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/eventid"
	"github.com/lava-operator/lava/internal/platform/testutil/natstest"
)

func TestPublish_duplicateStoredOnce(t *testing.T) {
	t.Parallel()
	_, js := startBus(t, testTopology)
	ctx := t.Context()
	pub := bus.NewPublisher(js)
	ev := synthesized("infra", "web.prod", 3, genTrigger(3))

	first, err := pub.PublishEvent(ctx, ev)
	if err != nil {
		t.Fatal(err)
	}
	again, err := pub.PublishEvent(ctx, proto.Clone(ev).(*lavav1.Synthesized))
	if err != nil {
		t.Fatal(err)
	}
	if first.Duplicate || !again.Duplicate || again.Sequence != first.Sequence {
		t.Fatalf("acks %+v then %+v: want the second to be a duplicate of the first", first, again)
	}
	// A new trigger is a new fact.
	if ack, err := pub.PublishEvent(ctx, synthesized("infra", "web.prod", 3, eventid.ReconcileTrigger("now"))); err != nil || ack.Duplicate {
		t.Fatalf("new trigger: %+v, %v", ack, err)
	}
	s, err := js.Stream(ctx, bus.StreamPhases)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 2 {
		t.Fatalf("LAVA_PHASES holds %d messages, want 2", info.State.Msgs)
	}

	raw, err := s.GetMsg(ctx, first.Sequence)
	if err != nil {
		t.Fatal(err)
	}
	if raw.Subject != "lava.v1.phase.infra.web_prod.synthesized" {
		t.Errorf("subject %q", raw.Subject)
	}
	if got := raw.Header.Get(bus.HeaderSchema); got != "lava.v1.Synthesized" {
		t.Errorf("Lava-Schema %q", got)
	}
	if got := raw.Header.Get(jetstream.MsgIDHeader); got != ev.GetEnvelope().GetEventId() {
		t.Errorf("Nats-Msg-Id %q, want the event id", got)
	}
	var back lavav1.Synthesized
	if err := proto.Unmarshal(raw.Data, &back); err != nil {
		t.Fatalf("body is not binary protobuf: %v", err)
	}
	if diff := cmp.Diff(ev, &back, protocmp.Transform()); diff != "" {
		t.Errorf("body (-want +got):\n%s", diff)
	}
}

func TestPublish_anomalyIsProtojsonWithSchema(t *testing.T) {
	t.Parallel()
	_, js := startBus(t, testTopology)
	ctx := t.Context()
	ev := &lavav1.AnomalyDetected{
		Envelope: &lavav1.Envelope{EventId: eventid.ID("u", 1, "lava.v1.AnomalyDetected", "anomaly:f:1"),
			Resource: &lavav1.ResourceRef{Namespace: "infra", Name: "prod-vpc", Uid: "u"}, Generation: 1},
		Kind:     lavav1.AnomalyKind_ANOMALY_KIND_APPLY_FAILURE,
		Severity: lavav1.Severity_SEVERITY_CRITICAL,
		Message:  "apply failed",
	}
	ack, err := bus.NewPublisher(js).PublishEvent(ctx, ev)
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(ctx, bus.StreamAnomalies)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := s.GetMsg(ctx, ack.Sequence)
	if err != nil {
		t.Fatal(err)
	}
	if raw.Subject != "lava.anomaly.critical.apply_failure" {
		t.Errorf("subject %q", raw.Subject)
	}
	if raw.Header.Get(bus.HeaderSchema) != "lava.v1.AnomalyDetected" || raw.Header.Get(bus.HeaderContentType) != bus.ContentTypeJSON {
		t.Errorf("headers %v", raw.Header)
	}
	var plain map[string]any
	if err := json.Unmarshal(raw.Data, &plain); err != nil {
		t.Fatalf("body is not JSON: %v: %s", err, raw.Data)
	}
	if plain["kind"] != "ANOMALY_KIND_APPLY_FAILURE" {
		t.Errorf("kind field %v in %s", plain["kind"], raw.Data)
	}
	var back lavav1.AnomalyDetected
	if err := protojson.Unmarshal(raw.Data, &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(ev, &back, protocmp.Transform()); diff != "" {
		t.Errorf("body (-want +got):\n%s", diff)
	}

	// attest consumes it back, decoded through the header.
	got := make(chan *bus.Message, 1)
	runConsume(t, js, bus.ConsumeOptions{Stream: bus.StreamAnomalies, Consumer: bus.ServiceAttest}, func(_ context.Context, m *bus.Message) error {
		got <- m
		return nil
	})
	m := <-got
	if diff := cmp.Diff(ev, m.Event, protocmp.Transform()); diff != "" {
		t.Errorf("consumed event (-want +got):\n%s", diff)
	}
}

func TestPublish_refusesWhatCannotBeDeduplicatedOrRouted(t *testing.T) {
	t.Parallel()
	_, js := startBus(t, testTopology)
	pub := bus.NewPublisher(js)
	noID := synthesized("a", "b", 1, "x")
	noID.Envelope.EventId = ""
	if _, err := pub.PublishEvent(t.Context(), noID); !errors.Is(err, bus.ErrNoEventID) {
		t.Errorf("no event id: %v, want ErrNoEventID", err)
	}
	if _, err := pub.Publish(t.Context(), "lava.v1.phase.a.b.*", synthesized("a", "b", 1, "x")); !errors.Is(err, bus.ErrInvalidSubject) {
		t.Errorf("wildcard subject: %v, want ErrInvalidSubject", err)
	}
	noRes := synthesized("a", "b", 1, "x")
	noRes.Envelope.Resource = nil
	if _, err := pub.PublishEvent(t.Context(), noRes); !errors.Is(err, bus.ErrInvalidSubject) {
		t.Errorf("no resource: %v, want ErrInvalidSubject", err)
	}
}

func TestSubjectFor(t *testing.T) {
	t.Parallel()
	env := &lavav1.Envelope{EventId: "x", Resource: &lavav1.ResourceRef{Namespace: "infra", Name: "web.prod"}}
	tests := []struct {
		ev   bus.Event
		want string
	}{
		{&lavav1.ResourceObserved{Envelope: env}, "lava.v1.resource.infra.web_prod.observed"},
		{&lavav1.DeletionRequested{Envelope: env}, "lava.v1.resource.infra.web_prod.deletion_requested"},
		{&lavav1.Synthesized{Envelope: env}, "lava.v1.phase.infra.web_prod.synthesized"},
		{&lavav1.Planned{Envelope: env}, "lava.v1.phase.infra.web_prod.planned"},
		{&lavav1.Applied{Envelope: env}, "lava.v1.phase.infra.web_prod.applied"},
		{&lavav1.Failed{Envelope: env}, "lava.v1.phase.infra.web_prod.failed"},
		{&lavav1.Destroyed{Envelope: env}, "lava.v1.phase.infra.web_prod.destroyed"},
		{&lavav1.DriftScanned{Envelope: env}, "lava.v1.phase.infra.web_prod.drift_scanned"},
		{&lavav1.PhaseChanged{Envelope: env}, "lava.v1.phase.infra.web_prod.phase_changed"},
		{&lavav1.TickReported{Envelope: env}, "lava.v1.phase.infra.web_prod.tick_reported"},
		{&lavav1.ReapplyRequested{Envelope: env}, "lava.v1.command.plan.infra.web_prod.reapply"},
		{&lavav1.RetryRequested{Envelope: env, Target: lavav1.Stage_STAGE_SYNTH}, "lava.v1.command.synth.infra.web_prod.retry"},
		{&lavav1.RetryRequested{Envelope: env, Target: lavav1.Stage_STAGE_DESTROY}, "lava.v1.command.destroy.infra.web_prod.retry"},
		{&lavav1.ReceiptAppended{Envelope: env}, "lava.v1.phase.infra.web_prod.receipt_appended"},
		{&lavav1.AnomalyDetected{Envelope: env, Kind: lavav1.AnomalyKind_ANOMALY_KIND_DRIFT_DETECTED, Severity: lavav1.Severity_SEVERITY_COSMETIC}, "lava.anomaly.cosmetic.drift_detected"},
		{&lavav1.AnomalyDetected{Envelope: env, Kind: lavav1.AnomalyKind_ANOMALY_KIND_CUSTOM, ExtensionKind: "quota_exceeded", Severity: lavav1.Severity_SEVERITY_FUNCTIONAL}, "lava.anomaly.functional.quota_exceeded"},
	}
	for _, tt := range tests {
		got, err := bus.SubjectFor(tt.ev)
		if err != nil || got != tt.want {
			t.Errorf("SubjectFor(%T) = %q, %v; want %q", tt.ev, got, err, tt.want)
		}
	}
	for _, bad := range []bus.Event{
		&lavav1.RetryRequested{Envelope: env},
		&lavav1.AnomalyDetected{Envelope: env, Kind: lavav1.AnomalyKind_ANOMALY_KIND_STALLED},
		&lavav1.AnomalyDetected{Envelope: env, Kind: lavav1.AnomalyKind_ANOMALY_KIND_CUSTOM, ExtensionKind: "Bad Kind", Severity: lavav1.Severity_SEVERITY_CRITICAL},
	} {
		if got, err := bus.SubjectFor(bad); !errors.Is(err, bus.ErrInvalidSubject) {
			t.Errorf("SubjectFor(%v) = %q, %v; want ErrInvalidSubject", bad, got, err)
		}
	}
}

// A receipt has no envelope: PublishMessage takes the id, and the expected-last-subject-
// sequence option refuses a forked chain.
func TestPublishMessage_receiptChainNeverForks(t *testing.T) {
	t.Parallel()
	_, js := startBus(t, testTopology)
	ctx := t.Context()
	pub := bus.NewPublisher(js)
	subject := bus.ReceiptSubject("infra", "web.prod")
	r0 := &lavav1.Receipt{Sequence: 0, Kind: "lava.outcome"}
	if _, err := pub.PublishMessage(ctx, subject, r0, "infra/web.prod/0", jetstream.WithExpectLastSequencePerSubject(0)); err != nil {
		t.Fatal(err)
	}
	// A second attest replica that also saw an empty chain loses.
	fork := &lavav1.Receipt{Sequence: 0, Kind: "lava.anomaly"}
	if _, err := pub.PublishMessage(ctx, subject, fork, "infra/web.prod/0-fork", jetstream.WithExpectLastSequencePerSubject(0)); err == nil {
		t.Fatal("a forked receipt was appended")
	}
	if _, err := pub.PublishMessage(ctx, subject, r0, ""); !errors.Is(err, bus.ErrNoEventID) {
		t.Fatalf("empty id: %v", err)
	}
	s, err := js.Stream(ctx, bus.StreamReceipts)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := s.GetLastMsgForSubject(ctx, subject)
	if err != nil {
		t.Fatal(err)
	}
	var got lavav1.Receipt
	if err := proto.Unmarshal(raw.Data, &got); err != nil || got.GetKind() != "lava.outcome" || raw.Header.Get(bus.HeaderSchema) != "lava.v1.Receipt" {
		t.Fatalf("head %v (%v), header %v", &got, err, raw.Header)
	}
	// Receipts cannot be deleted.
	if err := s.DeleteMsg(ctx, raw.Sequence); err == nil {
		t.Fatal("deleted a receipt from LAVA_RECEIPTS")
	}
}

// Publisher.Fits answers as the publish does, to the byte: an event whose body and headers are
// exactly the server's max_payload fits and is published; one byte more is a
// PayloadTooLargeError from both, with the same size and the connection's limit.
func TestPublisher_Fits(t *testing.T) {
	t.Parallel()
	const limit = 4096
	srv := natstest.Run(t, natstest.Config{MaxPayload: limit})
	js := srv.JetStream()
	if err := bus.EnsureTopology(t.Context(), js, testTopology); err != nil {
		t.Fatal(err)
	}
	pub := bus.NewPublisher(js)
	event := func(n int) (*lavav1.Applied, string, int) {
		ev := &lavav1.Applied{Envelope: synthesized("infra", "fits", 1, genTrigger(1)).GetEnvelope(), Outputs: map[string]string{"blob": strings.Repeat("x", n)}}
		ev.Envelope.EventId = eventid.ID("uid-infra-fits", 1, "lava.v1.Applied", genTrigger(1)+fmt.Sprintf(":%06d", n))
		subject, err := bus.SubjectFor(ev)
		if err != nil {
			t.Fatal(err)
		}
		m, err := bus.Encode(subject, ev)
		if err != nil {
			t.Fatal(err)
		}
		return ev, subject, m.Size() - len(m.Subject) // body and headers
	}
	n := 100
	ev, subject, size := event(n)
	for range 3 { // the lengths' varints grow with n
		n += limit - size
		ev, subject, size = event(n)
	}
	if size != limit {
		t.Fatalf("an output of %d bytes makes %d bytes, want %d", n, size, limit)
	}
	if err := pub.Fits(subject, ev); err != nil {
		t.Errorf("Fits at the limit: %v", err)
	}
	if _, err := pub.PublishEvent(t.Context(), ev); err != nil {
		t.Errorf("publish at the limit: %v", err)
	}
	ev, subject, _ = event(n + 1)
	for what, err := range map[string]error{"Fits": pub.Fits(subject, ev), "publish": func() error { _, err := pub.PublishEvent(t.Context(), ev); return err }()} {
		var big *bus.PayloadTooLargeError
		if !errors.As(err, &big) || big.Size != limit+1 || big.Max != limit || big.Subject != subject {
			t.Errorf("%s one byte over the limit: %v (%+v), want a PayloadTooLargeError of %d bytes, limit %d", what, err, big, limit+1, limit)
		}
	}
}

// An event over the server's max_payload (1 MiB by default) is a PayloadTooLargeError naming
// its size and the server's limit, so a caller can fail what it reports instead of retrying a
// publish that can never succeed.
func TestPublish_payloadTooLarge(t *testing.T) {
	t.Parallel()
	_, js := startBus(t, testTopology)
	ev := &lavav1.Applied{Envelope: synthesized("infra", "big", 1, genTrigger(1)).GetEnvelope(),
		Outputs: map[string]string{"blob": strings.Repeat("x", 2<<20)}}
	ev.Envelope.EventId = eventid.ID("uid-infra-big", 1, "lava.v1.Applied", genTrigger(1))
	_, err := bus.NewPublisher(js).PublishEvent(t.Context(), ev)
	var big *bus.PayloadTooLargeError
	if !errors.As(err, &big) || !errors.Is(err, nats.ErrMaxPayload) {
		t.Fatalf("err = %v, want a PayloadTooLargeError", err)
	}
	if big.Max != js.Conn().MaxPayload() || big.Size < 2<<20 || big.Subject != "lava.v1.phase.infra.big.applied" {
		t.Errorf("error %+v", big)
	}
}
