package tlisp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/lava-operator/lava/internal/lang/arch"
)

// mapJSON renders m as compact JSON in insertion order, a reference as its "${type.name.attr}"
// string: the evaluated values as Terraform JSON writes them, for the tests to compare. (The
// renderer, internal/lang/render, imports this package, so the tests cannot call it.)
func mapJSON(m *arch.Map) ([]byte, error) {
	var buf bytes.Buffer
	if err := appendMap(&buf, m); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func appendMap(buf *bytes.Buffer, m *arch.Map) error {
	buf.WriteByte('{')
	i := 0
	for k, v := range m.All() {
		if i > 0 {
			buf.WriteByte(',')
		}
		i++
		appendJSONString(buf, k)
		buf.WriteByte(':')
		if err := appendValue(buf, v); err != nil {
			return err
		}
	}
	buf.WriteByte('}')
	return nil
}

func appendValue(buf *bytes.Buffer, v arch.Value) error {
	switch v.Kind {
	case arch.KindNull:
		buf.WriteString("null")
	case arch.KindBool:
		buf.WriteString(strconv.FormatBool(v.Bool))
	case arch.KindInt:
		buf.WriteString(strconv.FormatInt(v.Int, 10))
	case arch.KindFloat:
		b, err := json.Marshal(v.Float)
		if err != nil {
			return fmt.Errorf("float %v: %w", v.Float, err)
		}
		buf.Write(b)
	case arch.KindString:
		appendJSONString(buf, v.Str)
	case arch.KindRef:
		appendJSONString(buf, "${"+v.Ref.Type+"."+v.Ref.Name+"."+v.Ref.Attribute+"}")
	case arch.KindList:
		buf.WriteByte('[')
		for i, e := range v.List {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := appendValue(buf, e); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	case arch.KindMap:
		return appendMap(buf, v.Map)
	default:
		return fmt.Errorf("unknown value kind %d", int(v.Kind))
	}
	return nil
}

// appendJSONString writes s as a JSON string without HTML escaping, as the renderer does.
func appendJSONString(buf *bytes.Buffer, s string) {
	var tmp bytes.Buffer
	enc := json.NewEncoder(&tmp)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a Go string always encodes
	buf.Write(bytes.TrimSuffix(tmp.Bytes(), []byte("\n")))
}
