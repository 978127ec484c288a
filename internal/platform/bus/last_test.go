package bus_test

import (
	"errors"
	"testing"

	"google.golang.org/protobuf/proto"

	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/platform/bus"
)

func TestLastEvent_newestNoneAndUndecodable(t *testing.T) {
	t.Parallel()
	_, js := startBus(t, testTopology)
	ctx := t.Context()
	st, err := js.Stream(ctx, bus.StreamPhases)
	if err != nil {
		t.Fatal(err)
	}
	subject := bus.PhaseSubject("ns", "web", bus.EventSynthesized)
	got := &lavav1.Synthesized{}
	if found, err := bus.LastEvent(ctx, st, subject, got); found || err != nil {
		t.Fatalf("empty subject: found %v, err %v", found, err)
	}
	if m, err := bus.LastMsg(ctx, st, subject); m != nil || err != nil {
		t.Fatalf("empty subject: LastMsg %v, %v; want nil, nil", m, err)
	}
	for gen := int64(1); gen <= 2; gen++ {
		ev := synthesized("ns", "web", gen, genTrigger(gen))
		body, err := proto.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := js.Publish(ctx, subject, body); err != nil {
			t.Fatal(err)
		}
	}
	if found, err := bus.LastEvent(ctx, st, subject, got); !found || err != nil || got.GetEnvelope().GetGeneration() != 2 {
		t.Fatalf("LastEvent: found %v, err %v, generation %d; want the newest (2)", found, err, got.GetEnvelope().GetGeneration())
	}
	if _, err := js.Publish(ctx, subject, []byte{0xff, 0xff, 0xff}); err != nil {
		t.Fatal(err)
	}
	found, err := bus.LastEvent(ctx, st, subject, got)
	if found || !errors.Is(err, bus.ErrUndecodable) || !bus.IsPermanent(err) {
		t.Fatalf("undecodable newest: found %v, err %v; want ErrUndecodable, permanent", found, err)
	}
}
