package watcher_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/lava-operator/lava/api/v1alpha1"
	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/pipeline"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/service/watcher"
)

// FuzzPhaseEvent decodes arbitrary bytes as every lava.v1 event and folds what decodes into a
// status the way the watcher does (watcher.PhaseEvent, then pipeline.Reduce on a fresh status
// and on one already Applied): nothing panics, and what Reduce accepts stays a known phase.
func FuzzPhaseEvent(f *testing.F) {
	var schemas []protoreflect.MessageType
	protoregistry.GlobalTypes.RangeMessages(func(mt protoreflect.MessageType) bool {
		if mt.Descriptor().ParentFile().Package() == "lava.v1" {
			if _, ok := mt.New().Interface().(bus.Event); ok {
				schemas = append(schemas, mt)
			}
		}
		return true
	})
	slices.SortFunc(schemas, func(a, b protoreflect.MessageType) int {
		return strings.Compare(string(a.Descriptor().FullName()), string(b.Descriptor().FullName()))
	})
	if len(schemas) < 14 {
		f.Fatalf("only %d event schemas registered", len(schemas))
	}
	for i, mt := range schemas {
		m := mt.New().Interface()
		env := &lavav1.Envelope{EventId: "e", Source: "fuzz", Generation: 2, OccurredAt: timestamppb.Now(),
			Resource: &lavav1.ResourceRef{Namespace: "ns", Name: "n", Uid: "u"}}
		m.ProtoReflect().Set(m.ProtoReflect().Descriptor().Fields().ByName("envelope"), protoreflect.ValueOfMessage(env.ProtoReflect()))
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(uint8(i), b)
	}
	applied := v1alpha1.LavaArchitectureStatus{}
	for _, ev := range []pipeline.Event{
		{Type: pipeline.EventObserved, Generation: 1, Time: time.Unix(1, 0)},
		{Type: pipeline.EventSynthesized, Generation: 1, Time: time.Unix(2, 0), Render: &v1alpha1.RenderRecord{SourceKind: v1alpha1.SourceKindInline}},
		{Type: pipeline.EventPlanned, Generation: 1, Time: time.Unix(3, 0), Plan: &v1alpha1.PlanSummary{ID: "p"}},
		{Type: pipeline.EventApplied, Generation: 1, Time: time.Unix(4, 0)},
	} {
		st, _, err := pipeline.Reduce(applied, ev)
		if err != nil {
			f.Fatal(err)
		}
		applied = st
	}
	f.Fuzz(func(t *testing.T, schema uint8, data []byte) {
		mt := schemas[int(schema)%len(schemas)]
		m := mt.New().Interface()
		if proto.Unmarshal(data, m) != nil {
			return
		}
		ev := m.(bus.Event)
		out, _, ok, err := watcher.PhaseEvent(ev, time.Unix(10, 0))
		if err != nil || !ok {
			return
		}
		for _, st := range []v1alpha1.LavaArchitectureStatus{{}, applied} {
			next, _, err := pipeline.Reduce(st, out)
			if err != nil {
				continue
			}
			if next.Phase != "" && !slices.Contains(pipeline.All(), next.Phase) {
				t.Fatalf("%s folded into unknown phase %q", mt.Descriptor().FullName(), next.Phase)
			}
		}
	})
}
