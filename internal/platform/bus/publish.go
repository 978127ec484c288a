package bus

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
)

// Header names and values Lava sets on every message.
const (
	// HeaderSchema names the message's protobuf full name ("lava.v1.Applied").
	HeaderSchema = "Lava-Schema"
	// HeaderContentType is ContentTypeProto on internal streams and ContentTypeJSON on the
	// anomaly subjects.
	HeaderContentType = "Content-Type"
	// ContentTypeProto is binary protobuf.
	ContentTypeProto = "application/protobuf"
	// ContentTypeJSON is protojson.
	ContentTypeJSON = "application/json"
)

// ErrNoEventID reports an event without an envelope or an envelope without an event_id: such
// an event cannot be de-duplicated, so it is never published.
var ErrNoEventID = errors.New("bus: event has no envelope.event_id")

// Event is a Lava event or command: every one carries its [lavav1.Envelope] as field 1.
type Event interface {
	proto.Message
	GetEnvelope() *lavav1.Envelope
}

// Publisher publishes typed events to JetStream.
type Publisher struct {
	js jetstream.JetStream
}

// NewPublisher returns a Publisher on js.
func NewPublisher(js jetstream.JetStream) *Publisher { return &Publisher{js: js} }

// Encode returns the NATS message Lava publishes ev as on subject: [EncodeMessage] with the
// envelope's event_id as the message id. Errors: [ErrNoEventID], and those of EncodeMessage.
func Encode(subject string, ev Event) (*nats.Msg, error) {
	m, err := eventHeaders(subject, ev)
	if err != nil {
		return nil, err
	}
	return m, marshalBody(m, ev)
}

// eventHeaders is [Encode]'s message without its body.
func eventHeaders(subject string, ev Event) (*nats.Msg, error) {
	id := ev.GetEnvelope().GetEventId()
	if id == "" {
		return nil, fmt.Errorf("%w (%s on %s)", ErrNoEventID, ev.ProtoReflect().Descriptor().FullName(), subject)
	}
	return encodeHeaders(subject, ev, id)
}

// EncodeMessage returns the NATS message for any protobuf message: protojson on
// "lava.anomaly." subjects, binary protobuf elsewhere; [HeaderSchema] and [HeaderContentType]
// always; "Nats-Msg-Id" set to msgID. It fails for an invalid subject (wrapping
// [ErrInvalidSubject]), an empty msgID (wrapping [ErrNoEventID]) or a marshal failure.
func EncodeMessage(subject string, msg proto.Message, msgID string) (*nats.Msg, error) {
	m, err := encodeHeaders(subject, msg, msgID)
	if err != nil {
		return nil, err
	}
	return m, marshalBody(m, msg)
}

// encodeHeaders is [EncodeMessage]'s message without its body: its subject and headers, after
// the subject and msgID checks.
func encodeHeaders(subject string, msg proto.Message, msgID string) (*nats.Msg, error) {
	if _, err := ParseSubject(subject); err != nil {
		return nil, err
	}
	name := msg.ProtoReflect().Descriptor().FullName()
	if msgID == "" {
		return nil, fmt.Errorf("%w: no message id for %s on %s", ErrNoEventID, name, subject)
	}
	m := nats.NewMsg(subject)
	m.Header.Set(HeaderSchema, string(name))
	m.Header.Set(jetstream.MsgIDHeader, msgID)
	if isJSON(subject) {
		m.Header.Set(HeaderContentType, ContentTypeJSON)
	} else {
		m.Header.Set(HeaderContentType, ContentTypeProto)
	}
	return m, nil
}

// marshalBody sets m's body to msg, protojson or binary protobuf as m's subject calls for.
func marshalBody(m *nats.Msg, msg proto.Message) error {
	var err error
	if isJSON(m.Subject) {
		m.Data, err = protojson.Marshal(msg)
	} else {
		m.Data, err = proto.Marshal(msg)
	}
	if err != nil {
		return fmt.Errorf("bus: marshal %s: %w", msg.ProtoReflect().Descriptor().FullName(), err)
	}
	return nil
}

// isJSON reports whether messages on subject are protojson (the anomaly subjects), not binary
// protobuf.
func isJSON(subject string) bool { return strings.HasPrefix(subject, PrefixAnomaly) }

// Publish encodes ev as [Encode] does and publishes it, waiting for the stream's ack. A
// re-publish of the same event_id inside the stream's duplicate window is stored once
// (the returned ack has Duplicate set). opts pass through (for example
// jetstream.WithExpectLastSequencePerSubject for receipt chains). An event larger than the
// server's max_payload is a [PayloadTooLargeError].
func (p *Publisher) Publish(ctx context.Context, subject string, ev Event, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	m, err := Encode(subject, ev)
	if err != nil {
		return nil, err
	}
	return p.publish(ctx, m, opts)
}

// publish publishes m and waits for the stream's ack; a message over the server's
// max_payload is a [PayloadTooLargeError].
func (p *Publisher) publish(ctx context.Context, m *nats.Msg, opts []jetstream.PublishOpt) (*jetstream.PubAck, error) {
	ack, err := p.js.PublishMsg(ctx, m, opts...)
	if errors.Is(err, nats.ErrMaxPayload) {
		return nil, &PayloadTooLargeError{Subject: m.Subject, Size: payloadSize(m), Max: p.js.Conn().MaxPayload()}
	}
	if err != nil {
		return nil, fmt.Errorf("bus: publish %s: %w", m.Subject, err)
	}
	return ack, nil
}

// Fits reports whether ev, encoded for subject as [Publisher.Publish] would publish it, fits
// the max_payload of the server the connection is on (nats.Conn.MaxPayload, in bytes): nil
// when it does (or while the connection has not learnt the limit yet), else a
// [PayloadTooLargeError] with the message's size and the limit. A caller that must not act
// before knowing the event can be published (the watcher folds Observed first) asks this
// before publishing. Errors: those of [Encode].
func (p *Publisher) Fits(subject string, ev Event) error {
	m, err := eventHeaders(subject, ev)
	if err != nil {
		return err
	}
	size := payloadSize(m)
	if isJSON(subject) {
		if err := marshalBody(m, ev); err != nil {
			return err
		}
		size = payloadSize(m)
	} else {
		size += int64(proto.Size(ev)) // a binary body's size without marshalling it
	}
	if limit := p.js.Conn().MaxPayload(); limit > 0 && size > limit {
		return &PayloadTooLargeError{Subject: subject, Size: size, Max: limit}
	}
	return nil
}

// payloadSize is what the server's max_payload applies to for m: its body and its encoded
// headers, in bytes (nats.Msg.Size without the subject and reply).
func payloadSize(m *nats.Msg) int64 {
	return int64(m.Size() - len(m.Subject) - len(m.Reply))
}

// PublishEvent publishes ev on [SubjectFor](ev), as [Publisher.Publish] does.
func (p *Publisher) PublishEvent(ctx context.Context, ev Event, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	subject, err := SubjectFor(ev)
	if err != nil {
		return nil, err
	}
	return p.Publish(ctx, subject, ev, opts...)
}

// PublishMessage publishes a message that has no envelope (a lava.v1.Receipt on
// [ReceiptSubject]) as [EncodeMessage] encodes it, with msgID as its de-duplication id, and
// waits for the stream's ack. opts pass through (attest appends with
// jetstream.WithExpectLastSequencePerSubject so a chain never forks).
func (p *Publisher) PublishMessage(ctx context.Context, subject string, msg proto.Message, msgID string, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	m, err := EncodeMessage(subject, msg, msgID)
	if err != nil {
		return nil, err
	}
	return p.publish(ctx, m, opts)
}

// PublishBatch publishes events (each on [SubjectFor]) without waiting between them, then
// waits for every ack: many events cost one round trip instead of one each (the watcher's
// start-up sweep, benchmarks). It returns the acks in order, or the first error; on error some
// events may have been stored, and publishing the batch again is safe (event ids de-duplicate).
func (p *Publisher) PublishBatch(ctx context.Context, events []Event) ([]*jetstream.PubAck, error) {
	futures := make([]jetstream.PubAckFuture, len(events))
	for i, ev := range events {
		subject, err := SubjectFor(ev)
		if err != nil {
			return nil, err
		}
		m, err := Encode(subject, ev)
		if err != nil {
			return nil, err
		}
		if futures[i], err = p.js.PublishMsgAsync(m); err != nil {
			return nil, fmt.Errorf("bus: publish %s: %w", subject, err)
		}
	}
	acks := make([]*jetstream.PubAck, len(events))
	for i, f := range futures {
		select {
		case ack := <-f.Ok():
			acks[i] = ack
		case err := <-f.Err():
			return nil, fmt.Errorf("bus: publish %s: %w", f.Msg().Subject, err)
		case <-ctx.Done():
			return nil, fmt.Errorf("bus: publish batch: %w", ctx.Err())
		}
	}
	return acks, nil
}
