package pipeline_test

import (
	"context"
	"testing"
	"time"

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
