package protocheck_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/lava-operator/lava/internal/platform/protocheck"
)

// wantEvents is the catalogue of docs/events.md ("Event catalogue"): every event and command. The test fails when
// the protos and this list disagree in either direction.
var wantEvents = []string{
	"AnomalyDetected", "Applied", "DeletionRequested", "Destroyed", "DriftScanned", "Failed",
	"PhaseChanged", "Planned", "ReapplyRequested", "ReceiptAppended", "ResourceObserved",
	"RetryRequested", "Synthesized", "TickReported",
}

func TestEventsCatalogue(t *testing.T) {
	var got []string
	for _, mt := range protocheck.Events() {
		got = append(got, string(mt.Descriptor().Name()))
	}
	if strings.Join(got, ",") != strings.Join(wantEvents, ",") {
		t.Errorf("events with an Envelope field:\n got %v\nwant %v", got, wantEvents)
	}
}

// TestEnvelopeIsFieldOne: every event carries `Envelope envelope = 1`, not in a oneof, not
// repeated, and no other field of any message is an Envelope.
func TestEnvelopeIsFieldOne(t *testing.T) {
	for _, name := range wantEvents {
		t.Run(name, func(t *testing.T) {
			mt, err := protoregistry.GlobalTypes.FindMessageByName(protocheck.Package.Append(protoreflect.Name(name)))
			if err != nil {
				t.Fatalf("event %s is not a registered message: %v", name, err)
			}
			f := mt.Descriptor().Fields().ByNumber(1)
			switch {
			case f == nil:
				t.Fatalf("%s has no field 1", name)
			case f.Name() != "envelope":
				t.Errorf("%s field 1 is named %q, want envelope", name, f.Name())
			case f.Message() == nil || f.Message().FullName() != "lava.v1.Envelope":
				t.Errorf("%s field 1 is not a lava.v1.Envelope", name)
			case f.Cardinality() == protoreflect.Repeated || f.ContainingOneof() != nil:
				t.Errorf("%s field 1 must be a singular Envelope outside any oneof", name)
			}
		})
	}
	for _, md := range protocheck.Messages() {
		fields := md.Fields()
		for i := range fields.Len() {
			f := fields.Get(i)
			if f.Message() != nil && f.Message().FullName() == "lava.v1.Envelope" && f.Number() != 1 {
				t.Errorf("%s: Envelope in field %d (%s), want only field 1", md.FullName(), f.Number(), f.Name())
			}
		}
	}
}

// TestRoundTrip: every message, with every field set (each oneof member in one variant),
// survives protojson and binary encoding unchanged.
func TestRoundTrip(t *testing.T) {
	for _, md := range protocheck.Messages() {
		t.Run(string(md.Name()), func(t *testing.T) {
			mt, err := protoregistry.GlobalTypes.FindMessageByName(md.FullName())
			if err != nil {
				t.Fatalf("find %s: %v", md.FullName(), err)
			}
			for variant := range protocheck.MaxOneofMembers() {
				m := mt.New().Interface()
				if err := protocheck.Fill(m, variant); err != nil {
					t.Fatalf("fill: %v", err)
				}
				if unset := unsetFields(m.ProtoReflect()); len(unset) > 0 {
					t.Fatalf("Fill left fields unset: %v", unset)
				}

				js, err := protojson.Marshal(m)
				if err != nil {
					t.Fatalf("protojson.Marshal: %v", err)
				}
				back := mt.New().Interface()
				if err := protojson.Unmarshal(js, back); err != nil {
					t.Fatalf("protojson.Unmarshal(%s): %v", js, err)
				}
				if !proto.Equal(m, back) {
					t.Errorf("protojson round trip changed the message:\n in %v\nout %v", m, back)
				}

				bin, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
				if err != nil {
					t.Fatalf("proto.Marshal: %v", err)
				}
				back = mt.New().Interface()
				if err := proto.Unmarshal(bin, back); err != nil {
					t.Fatalf("proto.Unmarshal: %v", err)
				}
				if !proto.Equal(m, back) {
					t.Errorf("binary round trip changed the message:\n in %v\nout %v", m, back)
				}
			}
		})
	}
}

// TestFillCoversEveryOneofMember: across the variants, every member of every oneof is set once.
func TestFillCoversEveryOneofMember(t *testing.T) {
	for _, md := range protocheck.Messages() {
		oneofs := md.Oneofs()
		if oneofs.Len() == 0 {
			continue
		}
		mt, err := protoregistry.GlobalTypes.FindMessageByName(md.FullName())
		if err != nil {
			t.Fatalf("find %s: %v", md.FullName(), err)
		}
		seen := map[protoreflect.FullName]bool{}
		for variant := range protocheck.MaxOneofMembers() {
			m := mt.New().Interface()
			if err := protocheck.Fill(m, variant); err != nil {
				t.Fatalf("fill %s: %v", md.FullName(), err)
			}
			for i := range oneofs.Len() {
				if f := m.ProtoReflect().WhichOneof(oneofs.Get(i)); f != nil {
					seen[f.FullName()] = true
				}
			}
		}
		for i := range oneofs.Len() {
			fields := oneofs.Get(i).Fields()
			for j := range fields.Len() {
				if !seen[fields.Get(j).FullName()] {
					t.Errorf("oneof member %s never set", fields.Get(j).FullName())
				}
			}
		}
	}
}

// unsetFields lists the fields of m and its sub-messages that are not set; a oneof counts as
// set when one member is.
func unsetFields(m protoreflect.Message) []string {
	var out []string
	md := m.Descriptor()
	if md.FullName() == "google.protobuf.Timestamp" || md.FullName() == "google.protobuf.Duration" {
		return nil
	}
	fields := md.Fields()
	for i := range fields.Len() {
		f := fields.Get(i)
		if od := f.ContainingOneof(); od != nil {
			if m.WhichOneof(od) == nil {
				out = append(out, string(od.FullName()))
			}
			if m.WhichOneof(od) != f {
				continue
			}
		}
		if !m.Has(f) {
			out = append(out, string(f.FullName()))
			continue
		}
		switch {
		case f.IsMap():
			if f.MapValue().Message() != nil {
				m.Get(f).Map().Range(func(_ protoreflect.MapKey, v protoreflect.Value) bool {
					out = append(out, unsetFields(v.Message())...)
					return true
				})
			}
		case f.IsList():
			if f.Message() != nil {
				l := m.Get(f).List()
				for k := range l.Len() {
					out = append(out, unsetFields(l.Get(k).Message())...)
				}
			}
		case f.Message() != nil:
			out = append(out, unsetFields(m.Get(f).Message())...)
		}
	}
	return out
}

// TestEnumsHaveUnspecifiedZero: buf STANDARD already requires it; this also holds generated code
// built from an older buf.yaml to it.
func TestEnumsHaveUnspecifiedZero(t *testing.T) {
	for _, ed := range protocheck.Enums() {
		v := ed.Values().ByNumber(0)
		if v == nil || !strings.HasSuffix(string(v.Name()), "_UNSPECIFIED") {
			t.Errorf("enum %s: value 0 must be *_UNSPECIFIED", ed.FullName())
		}
	}
}

// TestDocsCatalogue: docs/events.md names every message, enum and service in backquotes, and
// has a catalogue row (a table line starting with | `Name` |) for every event and command.
func TestDocsCatalogue(t *testing.T) {
	b, err := os.ReadFile("../../../docs/events.md")
	if err != nil {
		t.Fatalf("read docs/events.md: %v", err)
	}
	doc := string(b)
	var names []string
	for _, md := range protocheck.Messages() {
		names = append(names, string(md.Name()))
	}
	for _, ed := range protocheck.Enums() {
		names = append(names, string(ed.Name()))
	}
	for _, sd := range protocheck.Services() {
		names = append(names, string(sd.Name()))
		for i := range sd.Methods().Len() {
			names = append(names, string(sd.Name())+"."+string(sd.Methods().Get(i).Name()))
		}
	}
	if len(names) < 40 {
		t.Fatalf("only %d names found in the lava.v1 descriptors; is the generated code registered?", len(names))
	}
	for _, n := range names {
		if !strings.Contains(doc, "`"+n+"`") {
			t.Errorf("docs/events.md does not mention `%s`", n)
		}
	}
	for _, n := range wantEvents {
		row := regexp.MustCompile("(?m)^\\| `" + n + "` \\|.*lava\\.")
		if !row.MatchString(doc) {
			t.Errorf("docs/events.md has no catalogue row for %s naming its subject", n)
		}
	}
}
