package synth

import (
	"encoding/json"
	"testing"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/pipeline/synthesis"
	"github.com/lava-operator/lava/internal/platform/bus"
)

// FuzzObservedToSynthesized decodes arbitrary bytes as a ResourceObserved the way synth's
// consumer does (bus.DecodeBody) and runs what synth does with it before any write: the render
// (synthesis.Renderer.Render, here without Kubernetes access, so bindingsFrom fails cleanly:
// the input, render.Synthesize and the policy gate), the gate verdict, the render record and
// the provider list of the Synthesized it would publish. A Flux source is dropped
// (fetching it is HTTP, not decoding). Nothing panics; a synthesis is valid JSON; a failed one
// has a message; the Synthesized built from it encodes.
func FuzzObservedToSynthesized(f *testing.F) {
	env := &lavav1.Envelope{EventId: "e", Source: "watcher", Generation: 1,
		Resource: &lavav1.ResourceRef{Namespace: "ns", Name: "n", Uid: "u"}}
	seeds := []*lavav1.ResourceObserved{
		{Envelope: env, Spec: &lavav1.ArchitectureSpec{Source: &lavav1.Source{Kind: &lavav1.Source_Inline{Inline: `(deflava-architecture kit
  :inputs ((:dir "/tmp") (:rev "0"))
  :resources ((terraform-data "marker" :input "{rev}")))`}}, Bindings: map[string]string{"dir": "/x", "rev": "1"}}},
		{Envelope: env, Spec: &lavav1.ArchitectureSpec{Source: &lavav1.Source{Kind: &lavav1.Source_Name{Name: "aws-vpc-network"}},
			Bindings: map[string]string{"name": "prod", "cidr": "10.42.0.0/16"}, Gate: "aws-vpc-network"}},
		{Envelope: env, Spec: &lavav1.ArchitectureSpec{Source: &lavav1.Source{Kind: &lavav1.Source_Inline{Inline: "(deflava-architecture"}},
			BindingsFrom: []*lavav1.BindingsFromRef{{Ref: &lavav1.BindingsFromRef_ConfigMapRef{ConfigMapRef: &lavav1.ObjectKeyRef{Name: "cm"}}}}}},
	}
	for _, s := range seeds {
		b, err := proto.Marshal(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	j, err := protojson.Marshal(seeds[0])
	if err != nil {
		f.Fatal(err)
	}
	f.Add(j) // not binary protobuf: refused by the decoder
	r := synthesis.Renderer{}
	f.Fuzz(func(t *testing.T, data []byte) {
		msg := &bus.Message{Subject: bus.ResourceSubject("ns", "n", bus.EventObserved), Header: nats.Header{}, Data: data}
		msg.Header.Set(bus.HeaderSchema, "lava.v1.ResourceObserved")
		if bus.DecodeBody(nil, msg) != nil {
			return
		}
		obs, ok := msg.Event.(*lavav1.ResourceObserved)
		if !ok {
			t.Fatalf("decoded %T", msg.Event)
		}
		if obs.GetSpec().GetSource().GetFlux() != nil {
			obs.Spec.Source = nil
		}
		rd, fail, err := r.Render(t.Context(), obs.GetSpec(), obs.GetEnvelope().GetResource().GetNamespace())
		if err != nil || fail != nil {
			if fail != nil && (fail.Reason == "" || fail.Message == "") {
				t.Fatalf("a failure without reason or message: %+v", fail)
			}
			return
		}
		in, out, diags := rd.In, rd.Out, rd.Diags
		if !json.Valid(out.JSON) {
			t.Fatalf("synthesized JSON is not valid: %q", out.JSON)
		}
		ev := &lavav1.Synthesized{Envelope: env, Render: RecordProto(out.Record), Gate: Verdict(in, diags), Providers: rd.Providers()}
		if _, err := proto.Marshal(ev); err != nil {
			t.Fatalf("the Synthesized does not encode: %v", err)
		}
	})
}
