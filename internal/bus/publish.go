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

// Encode returns the body and headers Lava publishes ev with on subject: protojson on
// "lava.anomaly." subjects, binary protobuf elsewhere; [HeaderSchema] and [HeaderContentType]
// always; "Nats-Msg-Id" set to the envelope's event_id. Errors: [ErrNoEventID], an invalid
// subject (wrapping [ErrInvalidSubject]), or a marshal failure.
func Encode(subject string, ev Event) (*nats.Msg, error) {
	if _, err := ParseSubject(subject); err != nil {
		return nil, err
	}
	id := ev.GetEnvelope().GetEventId()
	if id == "" {
		return nil, fmt.Errorf("%w (%s on %s)", ErrNoEventID, ev.ProtoReflect().Descriptor().FullName(), subject)
	}
	m := nats.NewMsg(subject)
	m.Header.Set(HeaderSchema, string(ev.ProtoReflect().Descriptor().FullName()))
	m.Header.Set(jetstream.MsgIDHeader, id)
	var err error
	if strings.HasPrefix(subject, PrefixAnomaly) {
		m.Header.Set(HeaderContentType, ContentTypeJSON)
		m.Data, err = protojson.Marshal(ev)
	} else {
		m.Header.Set(HeaderContentType, ContentTypeProto)
		m.Data, err = proto.Marshal(ev)
	}
	if err != nil {
		return nil, fmt.Errorf("bus: marshal %s: %w", ev.ProtoReflect().Descriptor().FullName(), err)
	}
	return m, nil
}

// Publish encodes ev as [Encode] does and publishes it, waiting for the stream's ack. A
// re-publish of the same event_id inside the stream's duplicate window is stored once
// (the returned ack has Duplicate set). opts pass through (for example
// jetstream.WithExpectLastSequencePerSubject for receipt chains).
func (p *Publisher) Publish(ctx context.Context, subject string, ev Event, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	m, err := Encode(subject, ev)
	if err != nil {
		return nil, err
	}
	ack, err := p.js.PublishMsg(ctx, m, opts...)
	if err != nil {
		return nil, fmt.Errorf("bus: publish %s: %w", subject, err)
	}
	return ack, nil
}

// PublishEvent publishes ev on [SubjectFor](ev), as [Publisher.Publish] does.
func (p *Publisher) PublishEvent(ctx context.Context, ev Event, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	subject, err := SubjectFor(ev)
	if err != nil {
		return nil, err
	}
	return p.Publish(ctx, subject, ev, opts...)
}
