package applier

import (
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	"github.com/lava-operator/lava/api/v1alpha1"
	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/pipeline"
	"github.com/lava-operator/lava/internal/platform/bus"
)

// FuzzSynthesizedInput decodes arbitrary bytes as a Synthesized the way the applier's consumer
// does (bus.DecodeBody) and derives the plan input from it (inputOf), as every plan does:
// nothing panics; the engine is one the applier runs (its name maps back to a known engine,
// never UNSPECIFIED); an unset approvePlan is "auto"; every provider requirement is kept.
func FuzzSynthesizedInput(f *testing.F) {
	env := &lavav1.Envelope{EventId: "e", Source: "synth", Generation: 3,
		Resource: &lavav1.ResourceRef{Namespace: "ns", Name: "n", Uid: "u"}}
	for _, ev := range []*lavav1.Synthesized{
		{Envelope: env, Render: &lavav1.RenderRecord{TerraformJsonDigest: strings.Repeat("c", 64), BindingsDigest: strings.Repeat("b", 64)},
			ArtifactDigest: strings.Repeat("d", 64), Engine: lavav1.Engine_ENGINE_TOFU, ApprovePlan: v1alpha1.ApprovePlanManual,
			Providers: []*lavav1.ProviderRequirement{{Name: "testkit", Source: "example/testkit"}}},
		{Envelope: env, Engine: lavav1.Engine(42)},
	} {
		b, err := proto.Marshal(ev)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		msg := &bus.Message{Subject: bus.PhaseSubject("ns", "n", bus.EventSynthesized), Header: nats.Header{}, Data: data}
		msg.Header.Set(bus.HeaderSchema, "lava.v1.Synthesized")
		if bus.DecodeBody(nil, msg) != nil {
			return
		}
		ev, ok := msg.Event.(*lavav1.Synthesized)
		if !ok {
			t.Fatalf("decoded %T", msg.Event)
		}
		in := inputOf(ev)
		if e := pipeline.EngineProto(v1alpha1.Engine(in.engine)); e == lavav1.Engine_ENGINE_UNSPECIFIED {
			t.Fatalf("engine %v became %q, which the applier does not run", ev.GetEngine(), in.engine)
		}
		if in.approve == "" || (ev.GetApprovePlan() == "" && in.approve != v1alpha1.ApprovePlanAuto) {
			t.Fatalf("approvePlan %q became %q", ev.GetApprovePlan(), in.approve)
		}
		if len(in.providers) != len(ev.GetProviders()) || in.generation != ev.GetEnvelope().GetGeneration() {
			t.Fatalf("input %+v lost part of %v", in, ev)
		}
	})
}
