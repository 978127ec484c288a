//go:build integration

package pipeline_test

import (
	"context"
	"testing"

	"github.com/lava-operator/lava/internal/pipeline"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/testutil/natstest"
)

// The same message reported twice (the max-deliveries advisory redelivered, two replicas) is
// one anomaly; a poison-message anomaly that is itself poison is not reported again.
func TestPoisonReporter_onceAndNoLoop(t *testing.T) {
	t.Parallel()
	srv := natstest.RunJetStream(t)
	js := srv.JetStream()
	ctx := t.Context()
	if err := bus.EnsureTopology(ctx, js, bus.TopologyOptions{}); err != nil {
		t.Fatal(err)
	}
	calls := 0
	onPoison := pipeline.PoisonReporter(bus.NewPublisher(js), bus.ServiceDrift, nil, nil, func(_ context.Context, _ bus.PoisonReport) { calls++ })
	r := bus.PoisonReport{Stream: bus.StreamPhases, Consumer: bus.ServiceDrift, Subject: bus.PhaseSubject("infra", "vpc", bus.EventApplied),
		StreamSeq: 7, NumDelivered: 10, Reason: bus.PoisonMaxDeliveries}
	onPoison(ctx, r)
	onPoison(ctx, r)
	loop := bus.PoisonReport{Stream: bus.StreamAnomalies, Consumer: bus.ServiceAttest, Subject: bus.AnomalySubject("functional", pipeline.ExtensionPoisonMessage),
		StreamSeq: 1, NumDelivered: 1, Reason: bus.PoisonPermanent}
	onPoison(ctx, loop)
	st, err := js.Stream(ctx, bus.StreamAnomalies)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 1 {
		t.Errorf("LAVA_ANOMALIES holds %d messages, want 1", info.State.Msgs)
	}
	if calls != 3 {
		t.Errorf("the chained callback ran %d times, want 3", calls)
	}
}
