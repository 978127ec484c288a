package main

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/natsauth"
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
			tp, err := measureThroughput(b.Context(), one(srv.JetStream()), "b", b.N, bc.publishers, 64, bc.batch)
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
	lat, err := measureLatency(b.Context(), one(srv.JetStream()), "b", 1000, time.Duration(n)*time.Millisecond)
	if err != nil {
		b.Fatal(err)
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(lat.P50), "p50-ms")
	b.ReportMetric(ms(lat.P99), "p99-ms")
	b.ReportMetric(0, "ns/op")
}

// startPlain is a server without TLS or authorization, and a publisher and a consumer
// connection of their own (as two services have), over loopback TCP.
func startPlain(b *testing.B) Conns {
	b.Helper()
	srv := startBench(b)
	conn := func(name string) jetstream.JetStream {
		nc, js, err := bus.Connect(bus.ConnectOptions{URL: srv.URL(), Name: name})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(nc.Close)
		return js
	}
	return Conns{Admin: srv.JetStream(), Pub: conn("plain-synth"), Sub: conn("plain-applier")}
}

// startSecure is a server with mutual TLS and the generated authorization (docs/security.md),
// the topology created by the bootstrap identity, and the synth (publisher) and applier
// (consumer) identities connected through bus.Connect as the services connect.
func startSecure(b *testing.B) Conns {
	b.Helper()
	pki := natstest.NewPKI(b)
	dir := b.TempDir()
	keys, err := natsauth.GenerateDir(dir)
	if err != nil {
		b.Fatal(err)
	}
	users, err := natsauth.Users(bus.Declare(bus.TopologyOptions{}), keys)
	if err != nil {
		b.Fatal(err)
	}
	seed := func(id string) string { return filepath.Join(dir, natsauth.SeedFileName(id)) }
	adminKey, err := nats.NkeyOptionFromSeed(seed(bus.IdentityBootstrap))
	if err != nil {
		b.Fatal(err)
	}
	srv := natstest.Run(b, natstest.Config{Nkeys: users, TLS: pki.ServerTLS(b, true), Client: []nats.Option{adminKey,
		nats.CustomInboxPrefix(bus.InboxPrefix(bus.IdentityBootstrap)), nats.RootCAs(pki.CAFile), nats.ClientCert(pki.ClientCert, pki.ClientKey)}})
	if err := bus.EnsureTopology(b.Context(), srv.JetStream(), bus.TopologyOptions{}); err != nil {
		b.Fatal(err)
	}
	conn := func(id string) jetstream.JetStream {
		nc, js, err := bus.Connect(bus.ConnectOptions{URL: srv.URL(), Name: "secure-" + id, Identity: id, NKeyFile: seed(id),
			CAFile: pki.CAFile, CertFile: pki.ClientCert, KeyFile: pki.ClientKey})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(nc.Close)
		return js
	}
	return Conns{Admin: srv.JetStream(), Pub: conn(bus.ServiceSynth), Sub: conn(bus.ServiceApplier)}
}

// secureRounds is how many times each side is measured; the best of each is compared, since
// load from other processes only ever slows a run down.
const secureRounds = 11

// secureTarget is the target: TLS and authorization cost at most 15% of the throughput. It is
// not reliably met on the 2-core machine (0.81 to 0.90 on an idle machine, bench/README.md): a
// run below it logs NOT MET. The throughput ratio swings with the load of the machine (0.60 to
// 1.21 at load 15 to 27), so it fails only below secureGuard, a collapse. The regression guard
// that does not depend on the load is secureExtraWrites: most of the secured side's extra CPU is
// the server writing each pooled 512-byte outbound buffer as its own TLS record and system call,
// and the secured side's write system calls per event beyond the plain side's (0.82 measured;
// bench/README.md, "BenchmarkSecureBus") fail the run above it.
const (
	secureTarget      = 0.85
	secureGuard       = 0.60
	secureExtraWrites = 1.5
)

// BenchmarkSecureBus runs the same throughput measurement (8 publishers each waiting for every
// ack, one Consume with concurrency 64, max(b.N, 5000) events) on a plain server and on one
// with mutual TLS and the generated per-service authorization, interleaved secureRounds times,
// the side measured first alternating between rounds (best of each kept: load from other
// processes only slows a run down), then the latency run (1,000 events/s for 300ms) on both. It
// reports both throughputs, their ratio and both p99s, and for each side the median of its
// rounds' CPU time and write system calls per event ([processCost]); it logs NOT MET when the
// secured throughput is below secureTarget (85%) of the plain one, and fails below secureGuard
// (60%) or when the secured side makes more than secureExtraWrites (1.5) write system calls per
// event beyond the plain side's.
func BenchmarkSecureBus(b *testing.B) {
	plain, secure := startPlain(b), startSecure(b)
	n := max(b.N, 5000)
	b.ResetTimer()
	best := map[string]float64{}
	cpu, writes := map[string][]float64{}, map[string][]float64{}
	_, costErr := processCost()
	type side struct {
		name string
		c    Conns
	}
	for round := range secureRounds {
		sides := []side{{"plain", plain}, {"secure", secure}}
		if round%2 == 1 {
			sides[0], sides[1] = sides[1], sides[0]
		}
		for _, m := range sides {
			before, _ := processCost()
			tp, err := measureThroughput(b.Context(), m.c, fmt.Sprintf("%s-%d", m.name, round), n, 8, 64, 0)
			if err != nil {
				b.Fatalf("%s: %v", m.name, err)
			}
			after, _ := processCost()
			best[m.name] = max(best[m.name], tp.PerSec)
			cpu[m.name] = append(cpu[m.name], float64(after.CPU-before.CPU)/float64(time.Microsecond)/float64(n))
			writes[m.name] = append(writes[m.name], float64(after.Writes-before.Writes)/float64(n))
		}
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	for _, m := range []struct {
		name string
		c    Conns
	}{{"plain", plain}, {"secure", secure}} {
		lat, err := measureLatency(b.Context(), m.c, m.name+"-latency", 1000, 300*time.Millisecond)
		if err != nil {
			b.Fatalf("%s latency: %v", m.name, err)
		}
		b.ReportMetric(ms(lat.P99), m.name+"-p99-ms")
	}
	ratio := best["secure"] / best["plain"]
	b.ReportMetric(best["plain"], "plain-events/s")
	b.ReportMetric(best["secure"], "secure-events/s")
	b.ReportMetric(ratio, "secure/plain")
	if costErr != nil {
		b.Logf("no CPU and write-syscall figures: %v", costErr)
	} else {
		for _, side := range []string{"plain", "secure"} {
			b.ReportMetric(median(cpu[side]), side+"-cpu-us/event")
			b.ReportMetric(median(writes[side]), side+"-writes/event")
		}
		if extra := median(writes["secure"]) - median(writes["plain"]); extra > secureExtraWrites {
			b.Errorf("TLS and authorization: %.2f write system calls per event beyond the plain side's %.2f; want at most %.1f",
				extra, median(writes["plain"]), secureExtraWrites)
		}
	}
	b.ReportMetric(0, "ns/op")
	if ratio < secureTarget {
		b.Logf("NOT MET: TLS and authorization: %.0f events/s, %.0f%% of the plain %.0f events/s; the target is at least %.0f%% (guard %.0f%%)",
			best["secure"], 100*ratio, best["plain"], 100*secureTarget, 100*secureGuard)
	}
	if ratio < secureGuard {
		b.Fatalf("TLS and authorization: %.0f events/s, %.0f%% of the plain %.0f events/s; want at least %.0f%% (target %.0f%%)",
			best["secure"], 100*ratio, best["plain"], 100*secureGuard, 100*secureTarget)
	}
}
