package pipeline_test

import (
	"context"
	"strings"
	"testing"
	"time"

	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/pipeline"
	"github.com/lava-operator/lava/internal/platform/bus"
)

// Consumer.Options carries the service's settings into bus.ConsumeOptions, names the durable
// after the service unless told otherwise, and reports poison through PoisonReporter, chained
// with the caller's callback.
func TestConsumer_Options(t *testing.T) {
	t.Parallel()
	var got []bus.PoisonReport
	metrics := &bus.Metrics{}
	c := pipeline.Consumer{Service: bus.ServiceApplier, Concurrency: 3, DrainTimeout: 7 * time.Second,
		NakBackoff: bus.Backoff{Base: 2 * time.Second, Max: time.Minute}, OrderKey: bus.ResourceOrderKey, Metrics: metrics,
		OnPoison: func(_ context.Context, r bus.PoisonReport) { got = append(got, r) }}
	o := c.Options(bus.StreamCommands)
	if o.Stream != bus.StreamCommands || o.Consumer != bus.ServiceApplier || o.Concurrency != 3 || o.DrainTimeout != 7*time.Second ||
		o.NakBackoff != c.NakBackoff || o.OrderKey == nil || o.Metrics != metrics {
		t.Errorf("options %+v", o)
	}
	if o.OnPoison == nil {
		t.Fatal("no poison reporter")
	}
	// A poison-message anomaly is only logged by the reporter (no publish), then chained.
	r := bus.PoisonReport{Stream: bus.StreamAnomalies, Consumer: bus.ServiceApplier,
		Subject: bus.AnomalySubject("functional", pipeline.ExtensionPoisonMessage), StreamSeq: 9, Reason: bus.PoisonPermanent}
	o.OnPoison(t.Context(), r)
	if len(got) != 1 || got[0].StreamSeq != 9 {
		t.Errorf("chained callback got %v, want the one report", got)
	}

	c.Durable = "watcher-team-a"
	if o := c.Options(bus.StreamPhases); o.Consumer != "watcher-team-a" {
		t.Errorf("durable %q, want watcher-team-a", o.Consumer)
	}
}

// The envelope guard (Consumer.Resource) keeps a message whose envelope names no resource
// (namespace, name and uid) from the handler: a permanent error naming the service and the
// schema, which bus.Consume terminates and reports as poison. Without Resource the handler
// sees every message.
func TestConsumer_Handler_envelopeGuard(t *testing.T) {
	t.Parallel()
	calls := 0
	h := func(context.Context, *bus.Message) error { calls++; return nil }
	msg := func(res *lavav1.ResourceRef) *bus.Message {
		return &bus.Message{Schema: "lava.v1.Synthesized", Envelope: &lavav1.Envelope{EventId: "e", Resource: res}}
	}
	guarded := pipeline.Consumer{Service: bus.ServiceApplier, Resource: true}.Handler(h)
	for _, res := range []*lavav1.ResourceRef{nil, {Namespace: "infra", Name: "vpc"}, {Name: "vpc", Uid: "u"}, {Namespace: "infra", Uid: "u"}} {
		err := guarded(t.Context(), msg(res))
		if !bus.IsPermanent(err) || !strings.HasSuffix(err.Error(), "applier: lava.v1.Synthesized without resource") {
			t.Errorf("resource %v: error %v, want the permanent \"applier: lava.v1.Synthesized without resource\"", res, err)
		}
	}
	if calls != 0 {
		t.Fatalf("the handler ran %d times for messages without a resource", calls)
	}
	if err := guarded(t.Context(), msg(&lavav1.ResourceRef{Namespace: "infra", Name: "vpc", Uid: "u"})); err != nil || calls != 1 {
		t.Errorf("a message with a resource: error %v, %d calls; want nil, 1", err, calls)
	}
	if err := (pipeline.Consumer{Service: bus.ServiceSynth}).Handler(h)(t.Context(), msg(nil)); err != nil || calls != 2 {
		t.Errorf("without Resource: error %v, %d calls; want nil, 2", err, calls)
	}
}
