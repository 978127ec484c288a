package bus

import (
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/timestamppb"

	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
)

// eventSchemas lists every lava.v1 message that is an [Event] (carries an envelope), sorted:
// the schemas consumers decode.
func eventSchemas(tb testing.TB) []protoreflect.MessageType {
	tb.Helper()
	var out []protoreflect.MessageType
	protoregistry.GlobalTypes.RangeMessages(func(mt protoreflect.MessageType) bool {
		if mt.Descriptor().ParentFile().Package() == "lava.v1" {
			if _, ok := mt.New().Interface().(Event); ok {
				out = append(out, mt)
			}
		}
		return true
	})
	slices.SortFunc(out, func(a, b protoreflect.MessageType) int {
		return strings.Compare(string(a.Descriptor().FullName()), string(b.Descriptor().FullName()))
	})
	if len(out) < 14 { // the events of docs/events.md
		tb.Fatalf("only %d event schemas registered", len(out))
	}
	return out
}

// FuzzDecodeEvent feeds arbitrary bytes, as binary protobuf and as protojson, to the decoder
// every consumer uses (decodeBody), under every event schema: it never panics, and what it
// accepts is an event with an envelope and an event id that encodes again.
func FuzzDecodeEvent(f *testing.F) {
	schemas := eventSchemas(f)
	for i, mt := range schemas {
		m := mt.New().Interface()
		env := &lavav1.Envelope{EventId: "e", Source: "fuzz", Generation: 1, OccurredAt: timestamppb.Now(),
			Resource: &lavav1.ResourceRef{Namespace: "ns", Name: "n", Uid: "u"}}
		fd := m.ProtoReflect().Descriptor().Fields().ByName("envelope")
		m.ProtoReflect().Set(fd, protoreflect.ValueOfMessage(env.ProtoReflect()))
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		j, err := protojson.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(uint8(i), false, b)
		f.Add(uint8(i), true, j)
	}
	f.Add(uint8(0), false, []byte{0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Add(uint8(1), true, []byte(`{"envelope":{"eventId":1}}`))
	c := &consumer{opts: ConsumeOptions{}.withDefaults(&jetstream.ConsumerInfo{})}
	f.Fuzz(func(t *testing.T, schema uint8, json bool, data []byte) {
		mt := schemas[int(schema)%len(schemas)]
		msg := &Message{Subject: "lava.v1.phase.ns.n.x", Header: nats.Header{}, Data: data}
		msg.Header.Set(HeaderSchema, string(mt.Descriptor().FullName()))
		if json {
			msg.Header.Set(HeaderContentType, ContentTypeJSON)
		}
		if err := c.decodeBody(msg); err != nil {
			return
		}
		if msg.Event == nil || msg.Envelope == nil || msg.Envelope.GetEventId() == "" {
			t.Fatalf("decoded %s without an event id: %v", mt.Descriptor().FullName(), msg.Event)
		}
		if _, err := proto.Marshal(msg.Event); err != nil {
			t.Fatalf("a decoded %s does not encode again: %v", mt.Descriptor().FullName(), err)
		}
	})
}
