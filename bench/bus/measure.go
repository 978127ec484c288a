package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/types/known/timestamppb"

	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/eventid"
)

// resources spreads events over this many resources so no subject reaches LAVA_PHASES's
// per-subject limit while the consumer lags.
const resources = 10000

// event is the i-th benchmark event (a Synthesized with a unique event id) of run.
func event(run string, i int) *lavav1.Synthesized {
	name := "bench-" + strconv.Itoa(i%resources)
	uid := run + "-" + name
	gen := int64(i/resources + 1)
	return &lavav1.Synthesized{Envelope: &lavav1.Envelope{
		EventId:    eventid.ID(uid, gen, "lava.v1.Synthesized", strconv.Itoa(i)),
		Source:     bus.ServiceSynth,
		Resource:   &lavav1.ResourceRef{Namespace: "bench", Name: name, Uid: uid},
		Generation: gen,
		Trigger:    strconv.Itoa(i),
	}}
}

// Conns are the connections of a measurement: Admin resets the consumer, Pub publishes (as
// synth publishes Synthesized) and Sub consumes (as the applier). Without authorization they
// may all be one; with it each is its own identity.
type Conns struct {
	Admin, Pub, Sub jetstream.JetStream
}

// one is Conns over a single connection.
func one(js jetstream.JetStream) Conns { return Conns{Admin: js, Pub: js, Sub: js} }

// resetConsumer recreates the applier's LAVA_PHASES consumer at the end of the stream, so
// one measurement does not see the previous one's events.
func resetConsumer(ctx context.Context, js jetstream.JetStream) error {
	spec, ok := bus.Declare(bus.TopologyOptions{}).Consumer(bus.StreamPhases, bus.ServiceApplier)
	if !ok {
		return fmt.Errorf("no applier consumer on %s", bus.StreamPhases)
	}
	if err := js.DeleteConsumer(ctx, spec.Stream, spec.Config.Durable); err != nil {
		return fmt.Errorf("delete consumer: %w", err)
	}
	cfg := spec.Config
	cfg.DeliverPolicy = jetstream.DeliverNewPolicy
	if _, err := js.CreateConsumer(ctx, spec.Stream, cfg); err != nil {
		return fmt.Errorf("create consumer: %w", err)
	}
	return nil
}

// Throughput is the result of [measureThroughput].
type Throughput struct {
	Events   int
	Elapsed  time.Duration
	PerSec   float64
	Failures int
}

// measureThroughput publishes n events from publishers goroutines while one [bus.Consume] with
// the given concurrency consumes them, and reports events per second from the first publish to
// the last handled message. With batch 0 every publish waits for its ack
// ([bus.Publisher.PublishEvent]); otherwise events go out batch at a time
// ([bus.Publisher.PublishBatch]).
func measureThroughput(ctx context.Context, c Conns, run string, n, publishers, concurrency, batch int) (Throughput, error) {
	if err := resetConsumer(ctx, c.Admin); err != nil {
		return Throughput{}, err
	}
	var handled atomic.Int64
	done := make(chan struct{})
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	consumeErr := make(chan error, 1)
	go func() {
		consumeErr <- bus.Consume(cctx, c.Sub, bus.ConsumeOptions{Stream: bus.StreamPhases, Consumer: bus.ServiceApplier, Concurrency: concurrency},
			func(context.Context, *bus.Message) error {
				if handled.Add(1) == int64(n) {
					close(done)
				}
				return nil
			})
	}()

	pub := bus.NewPublisher(c.Pub)
	var failures atomic.Int64
	var next atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for range publishers {
		wg.Go(func() {
			if batch > 0 {
				evs := make([]bus.Event, 0, batch)
				for {
					first := int(next.Add(int64(batch))) - batch
					if first >= n {
						return
					}
					evs = evs[:0]
					for i := first; i < min(first+batch, n); i++ {
						evs = append(evs, event(run, i))
					}
					if _, err := pub.PublishBatch(ctx, evs); err != nil {
						failures.Add(1)
					}
				}
			}
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if _, err := pub.PublishEvent(ctx, event(run, i)); err != nil {
					failures.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if f := failures.Load(); f > 0 {
		return Throughput{}, fmt.Errorf("%d publishes failed", f)
	}
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		return Throughput{}, fmt.Errorf("only %d of %d events consumed", handled.Load(), n)
	}
	elapsed := time.Since(start)
	cancel()
	if err := <-consumeErr; err != nil {
		return Throughput{}, err
	}
	return Throughput{Events: n, Elapsed: elapsed, PerSec: float64(n) / elapsed.Seconds()}, nil
}

// Latency is the result of [measureLatency].
type Latency struct {
	Events              int
	Rate                int
	P50, P99, P999, Max time.Duration
}

// measureLatency publishes rate events per second for duration, on a fixed schedule, and
// measures for each the time from just before its publish to the start of its handler
// (publish, store, deliver, decode).
func measureLatency(ctx context.Context, c Conns, run string, rate int, duration time.Duration) (Latency, error) {
	if err := resetConsumer(ctx, c.Admin); err != nil {
		return Latency{}, err
	}
	n := int(duration.Seconds() * float64(rate))
	var mu sync.Mutex
	lat := make([]time.Duration, 0, n)
	done := make(chan struct{})
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	consumeErr := make(chan error, 1)
	go func() {
		consumeErr <- bus.Consume(cctx, c.Sub, bus.ConsumeOptions{Stream: bus.StreamPhases, Consumer: bus.ServiceApplier, Concurrency: 16},
			func(_ context.Context, m *bus.Message) error {
				d := time.Since(m.Envelope.GetOccurredAt().AsTime())
				mu.Lock()
				lat = append(lat, d)
				if len(lat) == n {
					close(done)
				}
				mu.Unlock()
				return nil
			})
	}()

	pub := bus.NewPublisher(c.Pub)
	interval := time.Second / time.Duration(rate)
	next := time.Now()
	for i := range n {
		if d := time.Until(next); d > 0 {
			time.Sleep(d)
		}
		next = next.Add(interval)
		ev := event(run, i)
		ev.Envelope.OccurredAt = timestamppb.Now()
		if _, err := pub.PublishEvent(ctx, ev); err != nil {
			return Latency{}, fmt.Errorf("publish %d: %w", i, err)
		}
	}
	select {
	case <-done:
	case <-time.After(time.Minute):
		return Latency{}, fmt.Errorf("only %d of %d events consumed", len(lat), n)
	}
	cancel()
	if err := <-consumeErr; err != nil {
		return Latency{}, err
	}
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(lat)
	q := func(p float64) time.Duration { return lat[min(len(lat)-1, int(p*float64(len(lat))))] }
	return Latency{Events: n, Rate: rate, P50: q(0.50), P99: q(0.99), P999: q(0.999), Max: lat[len(lat)-1]}, nil
}
