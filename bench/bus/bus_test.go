package main

import (
	"testing"
	"time"

	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/testutil/natstest"
)

func startBench(b *testing.B) *natstest.Server {
	b.Helper()
	srv := natstest.RunJetStream(b)
	if err := bus.EnsureTopology(b.Context(), srv.JetStream(), bus.TopologyOptions{}); err != nil {
		b.Fatal(err)
	}
	return srv
}

// BenchmarkThroughput publishes b.N events and consumes them with one Consume (concurrency
// 64); it reports events/s from the first publish to the last handled message. "sync": 8
// publishers each waiting for every ack; "batch": 2 publishers with PublishBatch of 256.
func BenchmarkThroughput(b *testing.B) {
	for _, bc := range []struct {
		name              string
		publishers, batch int
	}{{"sync", 8, 0}, {"batch", 2, 256}} {
		b.Run(bc.name, func(b *testing.B) {
			srv := startBench(b)
			b.ResetTimer()
			tp, err := measureThroughput(b.Context(), srv.JetStream(), "b", b.N, bc.publishers, 64, bc.batch)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(tp.PerSec, "events/s")
		})
	}
}

// BenchmarkLatency1000 publishes max(b.N, 200) events at a steady 1,000 events/s and reports
// the publish-to-handler latency percentiles in milliseconds.
func BenchmarkLatency1000(b *testing.B) {
	srv := startBench(b)
	n := max(b.N, 200)
	b.ResetTimer()
	lat, err := measureLatency(b.Context(), srv.JetStream(), "b", 1000, time.Duration(n)*time.Millisecond)
	if err != nil {
		b.Fatal(err)
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(lat.P50), "p50-ms")
	b.ReportMetric(ms(lat.P99), "p99-ms")
	b.ReportMetric(0, "ns/op")
}
