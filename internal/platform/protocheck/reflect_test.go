package protocheck

import (
	"fmt"
	"sort"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
)

// Package is the protobuf package of Lava's protocol.
const Package protoreflect.FullName = "lava.v1"

// envelopeName is the full name of lava.v1.Envelope.
var envelopeName = (&lavav1.Envelope{}).ProtoReflect().Descriptor().FullName()

// Files returns the file descriptors of package lava.v1 registered by the generated code,
// sorted by path.
func Files() []protoreflect.FileDescriptor {
	var fds []protoreflect.FileDescriptor
	protoregistry.GlobalFiles.RangeFilesByPackage(Package, func(fd protoreflect.FileDescriptor) bool {
		fds = append(fds, fd)
		return true
	})
	sort.Slice(fds, func(i, j int) bool { return fds[i].Path() < fds[j].Path() })
	return fds
}

// Messages returns every message of package lava.v1, nested ones included (map entries
// excluded), sorted by full name.
func Messages() []protoreflect.MessageDescriptor {
	var out []protoreflect.MessageDescriptor
	var walk func(protoreflect.MessageDescriptors)
	walk = func(mds protoreflect.MessageDescriptors) {
		for i := range mds.Len() {
			md := mds.Get(i)
			if md.IsMapEntry() {
				continue
			}
			out = append(out, md)
			walk(md.Messages())
		}
	}
	for _, fd := range Files() {
		walk(fd.Messages())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].FullName() < out[j].FullName() })
	return out
}

// Enums returns every enum of package lava.v1, sorted by full name.
func Enums() []protoreflect.EnumDescriptor {
	var out []protoreflect.EnumDescriptor
	for _, fd := range Files() {
		for i := range fd.Enums().Len() {
			out = append(out, fd.Enums().Get(i))
		}
	}
	for _, md := range Messages() {
		for i := range md.Enums().Len() {
			out = append(out, md.Enums().Get(i))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].FullName() < out[j].FullName() })
	return out
}

// Services returns every service of package lava.v1, sorted by full name.
func Services() []protoreflect.ServiceDescriptor {
	var out []protoreflect.ServiceDescriptor
	for _, fd := range Files() {
		for i := range fd.Services().Len() {
			out = append(out, fd.Services().Get(i))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].FullName() < out[j].FullName() })
	return out
}

// IsEvent reports whether md is an event or command: a message with a field of type
// lava.v1.Envelope.
func IsEvent(md protoreflect.MessageDescriptor) bool {
	fields := md.Fields()
	for i := range fields.Len() {
		if f := fields.Get(i); f.Message() != nil && f.Message().FullName() == envelopeName {
			return true
		}
	}
	return false
}

// Events returns the message types of every event and command of package lava.v1 (see
// [IsEvent]), sorted by full name.
func Events() []protoreflect.MessageType {
	var out []protoreflect.MessageType
	for _, md := range Messages() {
		if !IsEvent(md) {
			continue
		}
		mt, err := protoregistry.GlobalTypes.FindMessageByName(md.FullName())
		if err != nil {
			continue // every generated message is registered; unreachable
		}
		out = append(out, mt)
	}
	return out
}

// Fill sets every field of m, recursively, to a non-default value: strings, bytes and numbers
// derived from the field number, the last value of each enum, two entries in each list and map,
// and valid google.protobuf.Timestamp and Duration values. In each oneof it sets the member at
// index variant modulo the number of members, so calling Fill with variant 0 ..
// [MaxOneofMembers]-1 covers every member. It returns an error for a message nested deeper than
// 16 levels (a recursive type).
func Fill(m proto.Message, variant int) error {
	return fill(m.ProtoReflect(), variant, 0)
}

// MaxOneofMembers returns the largest number of members of any oneof of package lava.v1.
func MaxOneofMembers() int {
	n := 1
	for _, md := range Messages() {
		for i := range md.Oneofs().Len() {
			n = max(n, md.Oneofs().Get(i).Fields().Len())
		}
	}
	return n
}

func fill(m protoreflect.Message, variant, depth int) error {
	if depth > 16 {
		return fmt.Errorf("fill %s: nesting deeper than 16", m.Descriptor().FullName())
	}
	md := m.Descriptor()
	switch md.FullName() {
	case "google.protobuf.Timestamp", "google.protobuf.Duration":
		m.Set(md.Fields().ByName("seconds"), protoreflect.ValueOfInt64(1_780_000_000+int64(depth)))
		m.Set(md.Fields().ByName("nanos"), protoreflect.ValueOfInt32(123_456_789))
		return nil
	}
	fields := md.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if od := fd.ContainingOneof(); od != nil && !od.IsSynthetic() {
			if od.Fields().Get(variant%od.Fields().Len()) != fd {
				continue
			}
		}
		switch {
		case fd.IsMap():
			mp := m.Mutable(fd).Map()
			for k := range 2 {
				key := scalar(fd.MapKey(), k).MapKey()
				if fd.MapValue().Message() != nil {
					v := mp.NewValue()
					if err := fill(v.Message(), variant, depth+1); err != nil {
						return err
					}
					mp.Set(key, v)
				} else {
					mp.Set(key, scalar(fd.MapValue(), k))
				}
			}
		case fd.IsList():
			l := m.Mutable(fd).List()
			for k := range 2 {
				if fd.Message() != nil {
					v := l.NewElement()
					if err := fill(v.Message(), variant, depth+1); err != nil {
						return err
					}
					l.Append(v)
				} else {
					l.Append(scalar(fd, k))
				}
			}
		case fd.Message() != nil:
			if err := fill(m.Mutable(fd).Message(), variant, depth+1); err != nil {
				return err
			}
		default:
			m.Set(fd, scalar(fd, 0))
		}
	}
	return nil
}

// scalar returns the k-th distinct non-default value for a scalar or enum field.
func scalar(fd protoreflect.FieldDescriptor, k int) protoreflect.Value {
	n := int64(fd.Number())*10 + int64(k) + 1
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(true)
	case protoreflect.EnumKind:
		vals := fd.Enum().Values()
		return protoreflect.ValueOfEnum(vals.Get(vals.Len() - 1 - k%max(1, vals.Len()-1)).Number())
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(int32(-n))
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(-n << 40)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(uint32(n))
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64(uint64(n) << 40)
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32(float32(n) + 0.5)
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64(float64(n) + 0.25)
	case protoreflect.StringKind:
		return protoreflect.ValueOfString(fmt.Sprintf("%s-%d \"ü\" \x00.", fd.Name(), k))
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes([]byte{0, byte(n), 0xff, byte(k)})
	}
	return protoreflect.Value{}
}
