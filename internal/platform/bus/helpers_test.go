package bus_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/eventid"
	"github.com/lava-operator/lava/internal/platform/testutil/natstest"
)

// testTopology is the topology the tests run with: short redelivery and lease times.
var testTopology = bus.TopologyOptions{
	MaxDeliver: 4,
	BackOff:    []time.Duration{30 * time.Second},
	LeaseTTL:   2 * time.Second,
}

// startBusAckWait is [startBus] with testTopology whose ack wait (the first redelivery delay)
// is ackWait.
func startBusAckWait(t *testing.T, ackWait time.Duration) jetstream.JetStream {
	t.Helper()
	topo := testTopology
	topo.BackOff = []time.Duration{ackWait}
	_, js := startBus(t, topo)
	return js
}

// startBus starts an in-process server and creates the topology.
func startBus(t *testing.T, opts bus.TopologyOptions) (*natstest.Server, jetstream.JetStream) {
	t.Helper()
	srv := natstest.RunJetStream(t)
	if err := bus.EnsureTopology(t.Context(), srv.JetStream(), opts); err != nil {
		t.Fatalf("EnsureTopology: %v", err)
	}
	return srv, srv.JetStream()
}

// synthesized builds a Synthesized event with a real event id.
func synthesized(ns, name string, gen int64, trigger string) *lavav1.Synthesized {
	uid := "uid-" + ns + "-" + name
	return &lavav1.Synthesized{Envelope: &lavav1.Envelope{
		EventId:    eventid.ID(uid, gen, "lava.v1.Synthesized", trigger),
		Source:     bus.ServiceSynth,
		Resource:   &lavav1.ResourceRef{Namespace: ns, Name: name, Uid: uid},
		Generation: gen,
		Trigger:    trigger,
	}}
}

func genTrigger(gen int64) string { return eventid.GenerationTrigger(gen) }

// eventually polls cond every 10ms until it holds or the deadline passes.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// runConsume runs bus.Consume in the background until the test ends (or stop is called) and
// returns a stop function that cancels it and waits for it to return.
func runConsume(t *testing.T, js jetstream.JetStream, opts bus.ConsumeOptions, h bus.Handler) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- bus.Consume(ctx, js, opts, h) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Consume: %v", err)
		}
	}
	t.Cleanup(stop)
	return stop
}

// metricValue sums the samples of one metric family (all label sets) in reg.
func metricValue(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if v, ok := labels[lp.GetName()]; ok && v != lp.GetValue() {
					continue next
				}
			}
			switch {
			case m.GetCounter() != nil:
				sum += m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				sum += m.GetGauge().GetValue()
			}
		}
	}
	return sum
}

func itoa(i int) string { return strconv.Itoa(i) }
