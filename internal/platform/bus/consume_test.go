package bus_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/platform/bus"
)

// fastNak makes transient-error redeliveries quick in tests.
var fastNak = bus.Backoff{Base: 5 * time.Millisecond, Max: 50 * time.Millisecond}

func applierPhases(extra func(*bus.ConsumeOptions)) bus.ConsumeOptions {
	o := bus.ConsumeOptions{Stream: bus.StreamPhases, Consumer: bus.ServiceApplier, NakBackoff: fastNak}
	if extra != nil {
		extra(&o)
	}
	return o
}

// A handler whose side effect committed but which failed afterwards is redelivered; the
// effect, keyed by event_id in a KV bucket, happens once.
func TestConsume_failureAfterEffectIsRedeliveredEffectOnce(t *testing.T) {
	t.Parallel()
	_, js := startBus(t, testTopology)
	ctx := t.Context()
	effects, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "test-effects"})
	if err != nil {
		t.Fatal(err)
	}
	var calls, applied atomic.Int32
	done := make(chan struct{})
	runConsume(t, js, applierPhases(nil), func(ctx context.Context, m *bus.Message) error {
		n := calls.Add(1)
		// The effect, made idempotent by its key: a second Create of the same id fails.
		_, err := effects.Create(ctx, m.Envelope.GetEventId(), []byte("done"))
		switch {
		case err == nil:
			applied.Add(1)
		case errors.Is(err, jetstream.ErrKeyExists):
		default:
			return err
		}
		if n == 1 {
			return errors.New("connection reset after the effect")
		}
		close(done)
		return nil
	})
	ev := synthesized("infra", "web", 1, genTrigger(1))
	if _, err := bus.NewPublisher(js).PublishEvent(ctx, ev); err != nil {
		t.Fatal(err)
	}
	<-done
	if calls.Load() != 2 || applied.Load() != 1 {
		t.Fatalf("handler ran %d times, effect applied %d times; want 2 and 1", calls.Load(), applied.Load())
	}
	keys, err := effects.Keys(ctx)
	if err != nil || len(keys) != 1 || keys[0] != ev.GetEnvelope().GetEventId() {
		t.Fatalf("effects %v, %v", keys, err)
	}
	cons, err := js.Consumer(ctx, bus.StreamPhases, bus.ServiceApplier)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the ack", func() bool {
		ci, err := cons.Info(ctx)
		return err == nil && ci.NumAckPending == 0 && ci.AckFloor.Stream == 1
	})
}

func TestConsume_poison(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		handlerErr error
		garbage    bool
		forged     bool // a body naming another resource than its subject
		wantReason bus.PoisonReason
		wantCalls  int32
		wantResult string
	}{
		{"transient until MaxDeliver", errors.New("always down"), false, false, bus.PoisonMaxDeliveries, 4, bus.ResultTermMaxDeliveries},
		{"permanent", bus.Permanent(errors.New("malformed spec")), false, false, bus.PoisonPermanent, 1, bus.ResultTermPermanent},
		{"undecodable body", nil, true, false, bus.PoisonUndecodable, 0, bus.ResultTermUndecodable},
		{"payload names another resource", nil, false, true, bus.PoisonSubjectMismatch, 0, bus.ResultTermSubjectMismatch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, js := startBus(t, testTopology) // MaxDeliver 4
			ctx := t.Context()
			reg := prometheus.NewRegistry()
			metrics, err := bus.NewMetrics(reg)
			if err != nil {
				t.Fatal(err)
			}
			var calls atomic.Int32
			reports := make(chan bus.PoisonReport, 4)
			runConsume(t, js, applierPhases(func(o *bus.ConsumeOptions) {
				o.Metrics = metrics
				o.OnPoison = func(_ context.Context, r bus.PoisonReport) { reports <- r }
			}), func(context.Context, *bus.Message) error {
				calls.Add(1)
				return tt.handlerErr
			})
			ev := synthesized("infra", "web.prod", 2, genTrigger(2))
			switch {
			case tt.forged:
				// Published on infra/web.prod's subject, naming victim/db in the body.
				forged := synthesized("victim", "db", 2, genTrigger(2))
				m, err := bus.Encode(bus.PhaseSubject("infra", "web.prod", bus.EventSynthesized), forged)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := js.PublishMsg(ctx, m); err != nil {
					t.Fatal(err)
				}
				ev = forged
			case tt.garbage:
				m := nats.NewMsg(bus.PhaseSubject("infra", "web.prod", bus.EventSynthesized))
				m.Header.Set(bus.HeaderSchema, "lava.v1.Synthesized")
				m.Data = []byte{0xff, 0xff, 0xff}
				if _, err := js.PublishMsg(ctx, m); err != nil {
					t.Fatal(err)
				}
			default:
				if _, err := bus.NewPublisher(js).PublishEvent(ctx, ev); err != nil {
					t.Fatal(err)
				}
			}
			r := <-reports
			if r.Reason != tt.wantReason || r.Subject != "lava.v1.phase.infra.web_prod.synthesized" || r.Consumer != bus.ServiceApplier || r.Err == nil {
				t.Fatalf("report %+v", r)
			}
			if !tt.garbage && r.Envelope.GetEventId() != ev.GetEnvelope().GetEventId() {
				t.Errorf("report envelope %v", r.Envelope)
			}
			if calls.Load() != tt.wantCalls || r.NumDelivered != uint64(max(tt.wantCalls, 1)) {
				t.Fatalf("handler ran %d times, report at delivery %d; want %d", calls.Load(), r.NumDelivered, tt.wantCalls)
			}
			// Terminated: the ack floor passed it, so it is never delivered again.
			cons, err := js.Consumer(ctx, bus.StreamPhases, bus.ServiceApplier)
			if err != nil {
				t.Fatal(err)
			}
			eventually(t, 5*time.Second, "the term", func() bool {
				ci, err := cons.Info(ctx)
				return err == nil && ci.NumAckPending == 0 && ci.AckFloor.Stream == r.StreamSeq
			})
			if calls.Load() != tt.wantCalls || len(reports) != 0 {
				t.Fatalf("after the term: %d calls, %d more reports", calls.Load(), len(reports))
			}
			if got := metricValue(t, reg, "lava_bus_messages_total", map[string]string{"result": tt.wantResult}); got != 1 {
				t.Errorf("lava_bus_messages_total{result=%q} = %v, want 1", tt.wantResult, got)
			}
		})
	}
}

// Cancelling Consume lets the running handler finish (and acks it) and naks what was
// buffered, so another replica gets it at once. A message the server sent in answer to a pull
// request still open when the drain unsubscribed never reaches the draining replica: it comes
// back after the ack wait (3s here), so every message is handled, and the in-flight one once.
func TestConsume_drainFinishesInFlightAndNaksTheRest(t *testing.T) {
	t.Parallel()
	const ackWait = 3 * time.Second
	js := startBusAckWait(t, ackWait)
	ctx := t.Context()
	pub := bus.NewPublisher(js)
	for i := range 3 {
		if _, err := pub.PublishEvent(ctx, synthesized("infra", "r"+itoa(i), 1, genTrigger(1))); err != nil {
			t.Fatal(err)
		}
	}
	started, release := make(chan string, 3), make(chan struct{})
	var finished atomic.Int32
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- bus.Consume(cctx, js, applierPhases(func(o *bus.ConsumeOptions) { o.Concurrency = 1 }), func(_ context.Context, m *bus.Message) error {
			started <- m.Envelope.GetResource().GetName()
			<-release
			finished.Add(1)
			return nil
		})
	}()
	first := <-started
	cancel() // shutdown begins while the only worker is busy
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("Consume: %v", err)
	}
	if finished.Load() != 1 {
		t.Fatalf("%d handlers finished, want the 1 in flight", finished.Load())
	}

	// A second replica gets the two others: those naked at once, one lost in transit after
	// the ack wait.
	got := make(chan string, 3)
	runConsume(t, js, applierPhases(nil), func(_ context.Context, m *bus.Message) error {
		got <- m.Envelope.GetResource().GetName()
		return nil
	})
	seen := map[string]bool{first: true}
	timeout := time.After(ackWait + 10*time.Second)
	for len(seen) < 3 {
		select {
		case n := <-got:
			if n == first {
				t.Fatalf("%s was acked during the drain but delivered again", n)
			}
			seen[n] = true
		case <-timeout:
			t.Fatalf("only %v delivered after the drain", seen)
		}
	}
}

// A handler running longer than the ack wait is not redelivered, nor is the message waiting
// for the busy worker: InProgress heartbeats keep resetting the server's timer.
func TestConsume_longHandlerHeartbeats(t *testing.T) {
	t.Parallel()
	opts := testTopology
	opts.BackOff = []time.Duration{time.Second} // ack wait
	_, js := startBus(t, opts)
	ctx := t.Context()
	var calls atomic.Int32
	done := make(chan uint64, 4)
	runConsume(t, js, applierPhases(func(o *bus.ConsumeOptions) { o.Concurrency = 1 }), func(ctx context.Context, m *bus.Message) error {
		calls.Add(1)
		time.Sleep(2 * time.Second) // two ack waits
		done <- m.NumDelivered
		return nil
	})
	pub := bus.NewPublisher(js)
	for _, name := range []string{"a", "b"} {
		if _, err := pub.PublishEvent(ctx, synthesized("infra", name, 1, genTrigger(1))); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		if n := <-done; n != 1 {
			t.Fatalf("a completion was delivery %d, want 1", n)
		}
	}
	cons, err := js.Consumer(ctx, bus.StreamPhases, bus.ServiceApplier)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the acks", func() bool {
		ci, err := cons.Info(ctx)
		return err == nil && ci.AckFloor.Stream == 2 && ci.NumAckPending == 0
	})
	ci, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if calls.Load() != 2 || ci.NumRedelivered != 0 {
		t.Fatalf("handler ran %d times, %d redelivered; want 2 and 0", calls.Load(), ci.NumRedelivered)
	}
}

// Two replicas share one durable. Every resource's generations arrive shuffled (older after
// newer). Under the resource's lease and the watermark, the effects per resource are applied
// in non-decreasing generation order, the newest generation is applied, and no two handlers
// ever act on one resource at once.
func TestConsume_twoReplicasOlderGenerationNeverWins(t *testing.T) {
	t.Parallel()
	_, js := startBus(t, testTopology)
	ctx := t.Context()
	const resources, gens = 4, 12

	type state struct {
		mu      sync.Mutex
		active  int
		applied []int64
	}
	world := map[string]*state{}
	for r := range resources {
		world["r"+itoa(r)] = &state{}
	}
	var overlap atomic.Bool
	var stale atomic.Int32

	replica := func(holder string) {
		_, rjs := natsConnect(t, js)
		reg := prometheus.NewRegistry()
		m, err := bus.NewMetrics(reg)
		if err != nil {
			t.Fatal(err)
		}
		leases, err := bus.NewLeases(ctx, rjs, holder, m)
		if err != nil {
			t.Fatal(err)
		}
		wm, err := bus.NewWatermarks(ctx, rjs, bus.ServiceApplier, m)
		if err != nil {
			t.Fatal(err)
		}
		runConsume(t, rjs, applierPhases(func(o *bus.ConsumeOptions) { o.Concurrency = 4; o.Metrics = m }),
			func(ctx context.Context, msg *bus.Message) error {
				res := msg.Envelope.GetResource()
				return leases.Hold(ctx, res.GetNamespace(), res.GetName(), func(ctx context.Context) error {
					ok, err := wm.Advance(ctx, res.GetNamespace(), res.GetName(), msg.Envelope.GetGeneration())
					if err != nil {
						return err
					}
					if !ok {
						stale.Add(1)
						return nil
					}
					st := world[res.GetName()]
					st.mu.Lock()
					st.active++
					if st.active > 1 {
						overlap.Store(true)
					}
					st.mu.Unlock()
					time.Sleep(time.Duration(rand.IntN(3)) * time.Millisecond) // the "apply"
					st.mu.Lock()
					st.active--
					st.applied = append(st.applied, msg.Envelope.GetGeneration())
					st.mu.Unlock()
					return nil
				})
			})
	}
	replica("replica-a")
	replica("replica-b")

	pub := bus.NewPublisher(js)
	var last uint64
	for r := range resources {
		order := rand.Perm(gens)
		order = append(order, gens-1, 0, gens/2) // the newest again, then older ones after it
		for i, g := range order {
			ev := synthesized("infra", "r"+itoa(r), int64(g+1), genTrigger(int64(g+1)))
			if i >= gens {
				ev = synthesized("infra", "r"+itoa(r), int64(g+1), "redelivered:"+itoa(i))
			}
			ack, err := pub.PublishEvent(ctx, ev)
			if err != nil {
				t.Fatal(err)
			}
			last = max(last, ack.Sequence)
		}
	}
	cons, err := js.Consumer(ctx, bus.StreamPhases, bus.ServiceApplier)
	if err != nil {
		t.Fatal(err)
	}
	// The ack floor against the last publish, not NumPending alone: right after the last
	// publish, NumPending and NumAckPending can both read 0 with most events not yet handled
	// (on a loaded machine).
	eventually(t, 30*time.Second, "every message acked", func() bool {
		ci, err := cons.Info(ctx)
		return err == nil && ci.AckFloor.Stream >= last && ci.NumAckPending == 0
	})
	if overlap.Load() {
		t.Fatal("two handlers acted on one resource at once")
	}
	for name, st := range world {
		st.mu.Lock()
		if len(st.applied) == 0 || st.applied[len(st.applied)-1] != gens {
			t.Errorf("%s: applied %v, want the newest generation %d last", name, st.applied, gens)
		}
		for i := 1; i < len(st.applied); i++ {
			if st.applied[i] < st.applied[i-1] {
				t.Errorf("%s: generation %d applied after %d: %v", name, st.applied[i], st.applied[i-1], st.applied)
			}
		}
		st.mu.Unlock()
	}
	if stale.Load() == 0 {
		t.Error("no stale event was dropped; the test did not exercise the watermark")
	}
}

// natsConnect opens a second connection to the server js is connected to.
func natsConnect(t *testing.T, js jetstream.JetStream) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(js.Conn().ConnectedUrl())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	rjs, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, rjs
}

// A replica that crashes on a message's last allowed delivery cannot terminate it; the server's
// max-deliveries advisory reaches one running replica, which reports it as poison.
func TestConsume_lastDeliveryLostToACrashIsReported(t *testing.T) {
	t.Parallel()
	opts := testTopology
	opts.MaxDeliver = 2
	opts.BackOff = []time.Duration{200 * time.Millisecond}
	_, js := startBus(t, opts)
	ctx := t.Context()
	ev := synthesized("infra", "crashy", 1, genTrigger(1))
	if _, err := bus.NewPublisher(js).PublishEvent(ctx, ev); err != nil {
		t.Fatal(err)
	}
	// A "replica" takes both allowed deliveries and dies without acking either.
	cons, err := js.Consumer(ctx, bus.StreamPhases, bus.ServiceApplier)
	if err != nil {
		t.Fatal(err)
	}
	for want := uint64(1); want <= 2; want++ {
		batch, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		var got uint64
		for m := range batch.Messages() {
			md, _ := m.Metadata()
			got = md.NumDelivered
		}
		if got != want {
			t.Fatalf("crashing replica got delivery %d, want %d", got, want)
		}
	}
	reports := make(chan bus.PoisonReport, 2)
	var calls atomic.Int32
	runConsume(t, js, applierPhases(func(o *bus.ConsumeOptions) {
		o.OnPoison = func(_ context.Context, r bus.PoisonReport) { reports <- r }
	}), func(context.Context, *bus.Message) error {
		calls.Add(1)
		return nil
	})
	select {
	case r := <-reports:
		if r.Reason != bus.PoisonMaxDeliveries || r.StreamSeq != 1 || r.Envelope.GetEventId() != ev.GetEnvelope().GetEventId() ||
			r.Subject != "lava.v1.phase.infra.crashy.synthesized" {
			t.Fatalf("report %+v", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no poison report for the message lost to the crash")
	}
	if calls.Load() != 0 {
		t.Fatalf("the handler ran %d times on a message past MaxDeliver", calls.Load())
	}
}

// lava_bus_consumer_pending is the consumer's lag: it holds each delivery's own num_pending,
// messages published before the consumer catches up are pending while it works through them,
// and none are once it has caught up. nats-server computes num_pending itself and now and then
// (about 1 run in 100 here) reports 0 for a whole backlog, so the lag is looked for in up to
// three runs on fresh servers; every run must keep the gauge equal to the server's figure.
func TestConsume_pendingGaugeIsTheLag(t *testing.T) {
	t.Parallel()
	const n = 6
	var runs []string
	for attempt := range 3 {
		maxPending := pendingGaugeRun(t, n)
		if maxPending >= 1 && maxPending <= n-1 {
			return
		}
		runs = append(runs, fmt.Sprintf("run %d: highest pending %v", attempt+1, maxPending))
	}
	t.Errorf("no run saw the backlog as pending (want between 1 and %d of %d): %v", n-1, n, runs)
}

// pendingGaugeRun publishes n events, consumes them with one worker and returns the highest
// lava_bus_consumer_pending seen in a handler; it fails t when the gauge differs from the
// delivery's num_pending or is not 0 after the last one.
func pendingGaugeRun(t *testing.T, n int) float64 {
	t.Helper()
	_, js := startBus(t, testTopology)
	reg := prometheus.NewRegistry()
	m, err := bus.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	pub := bus.NewPublisher(js)
	for i := range n {
		if _, err := pub.PublishEvent(t.Context(), synthesized("infra", "lag", int64(i+1), genTrigger(int64(i+1)))); err != nil {
			t.Fatal(err)
		}
	}
	labels := map[string]string{"stream": bus.StreamPhases, "consumer": bus.ServiceApplier}
	// With one worker nothing is decoded between a delivery and its handler.
	var mu sync.Mutex
	var mismatches []string
	var maxPending float64
	var seen atomic.Int32
	stop := runConsume(t, js, applierPhases(func(o *bus.ConsumeOptions) { o.Metrics, o.Concurrency = m, 1 }), func(ctx context.Context, msg *bus.Message) error {
		got := metricValue(t, reg, "lava_bus_consumer_pending", labels)
		mu.Lock()
		defer mu.Unlock()
		if got != float64(msg.NumPending) {
			mismatches = append(mismatches, fmt.Sprintf("stream seq %d: gauge %v, num_pending %d", msg.StreamSeq, got, msg.NumPending))
		}
		maxPending = max(maxPending, got)
		seen.Add(1)
		return nil
	})
	eventually(t, 10*time.Second, "every message handled", func() bool { return seen.Load() == int32(n) })
	stop()
	mu.Lock()
	defer mu.Unlock()
	if len(mismatches) > 0 {
		t.Errorf("the gauge is not the delivery's num_pending: %v", mismatches)
	}
	if got := metricValue(t, reg, "lava_bus_consumer_pending", labels); got != 0 {
		t.Errorf("pending after catching up = %v, want 0", got)
	}
	return maxPending
}

// A handler that ignores its context (wedged: an uncancellable computation, a call without a
// deadline) holds its worker only until its deadline and grace: the message is then
// terminated and reported as poison (handler_timeout), its run abandoned, and the messages
// behind it flow on the same single worker. Shutting down with a handler wedged returns
// after the drain timeout and the grace instead of waiting for it.
func TestConsume_wedgedHandlerIsTerminatedOthersFlow(t *testing.T) {
	t.Parallel()
	_, js := startBus(t, testTopology)
	ctx := t.Context()
	reg := prometheus.NewRegistry()
	metrics, err := bus.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{}) // the wedged runs end with the test
	t.Cleanup(func() { close(release) })
	var wedged atomic.Int32
	handled := make(chan string, 8)
	reports := make(chan bus.PoisonReport, 4)
	stop := runConsume(t, js, applierPhases(func(o *bus.ConsumeOptions) {
		o.Concurrency = 1
		o.HandlerTimeout = 300 * time.Millisecond
		o.HandlerGrace = 200 * time.Millisecond
		o.DrainTimeout = 200 * time.Millisecond
		o.Metrics = metrics
		o.OnPoison = func(_ context.Context, r bus.PoisonReport) { reports <- r }
	}), func(_ context.Context, m *bus.Message) error {
		name := m.Envelope.GetResource().GetName()
		if name == "wedge" || name == "wedge-at-shutdown" {
			wedged.Add(1)
			<-release // ignores its context
			return nil
		}
		handled <- name
		return nil
	})
	pub := bus.NewPublisher(js)
	wedge := synthesized("infra", "wedge", 1, genTrigger(1))
	for _, ev := range []*lavav1.Synthesized{wedge, synthesized("infra", "a", 1, genTrigger(1)),
		synthesized("infra", "b", 1, genTrigger(1)), synthesized("infra", "c", 1, genTrigger(1))} {
		if _, err := pub.PublishEvent(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case r := <-reports:
		if r.Reason != bus.PoisonHandlerTimeout || r.Envelope.GetEventId() != wedge.GetEnvelope().GetEventId() ||
			r.NumDelivered != 1 || r.Err == nil {
			t.Fatalf("report %+v", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the wedged message was not reported")
	}
	got := map[string]bool{}
	for range 3 {
		select {
		case name := <-handled:
			got[name] = true
		case <-time.After(10 * time.Second):
			t.Fatalf("the messages behind the wedged one did not flow; handled %v", got)
		}
	}
	cons, err := js.Consumer(ctx, bus.StreamPhases, bus.ServiceApplier)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "every message settled", func() bool {
		ci, err := cons.Info(ctx)
		return err == nil && ci.AckFloor.Stream == 4 && ci.NumAckPending == 0
	})
	if n := wedged.Load(); n != 1 {
		t.Errorf("the wedging message ran %d times; want 1 (terminated, never redelivered)", n)
	}
	if got := metricValue(t, reg, "lava_bus_messages_total", map[string]string{"result": bus.ResultTermHandlerTimeout}); got != 1 {
		t.Errorf("lava_bus_messages_total{result=%q} = %v, want 1", bus.ResultTermHandlerTimeout, got)
	}

	// Shutdown with a wedged handler running: Consume returns once the drain timeout and the
	// grace are over.
	if _, err := pub.PublishEvent(ctx, synthesized("infra", "wedge-at-shutdown", 1, genTrigger(1))); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the second wedge", func() bool { return wedged.Load() == 2 })
	start := time.Now()
	stop()
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("Consume took %v to return with a wedged handler; want about the drain timeout and the grace", took)
	}
}

// A JetStream request made by a handler whose reply is lost (sent just before a server
// restart, say) fails at the jetstream package's DefaultTimeout and the handler returns, rather
// than waiting for all of HandlerTimeout: the handler's context carries no deadline, which
// would replace that default (nats.go jetstream applies it only to a context without one).
// The lost reply is real: the requests go to an API prefix a core subscriber swallows.
func TestConsume_lostJetStreamReplyDoesNotHoldTheHandler(t *testing.T) {
	t.Parallel()
	srv, js := startBus(t, testTopology)
	ctx := t.Context()
	nc := srv.Conn()
	sink, err := nc.Subscribe("blackhole.API.>", func(*nats.Msg) {}) // never answers
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sink.Unsubscribe() })
	lost, err := jetstream.NewWithAPIPrefix(nc, "blackhole.API", jetstream.WithDefaultTimeout(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	results := make(chan error, 4)
	stop := runConsume(t, js, applierPhases(func(o *bus.ConsumeOptions) {
		o.HandlerTimeout = time.Hour
	}), func(hctx context.Context, _ *bus.Message) error {
		if d, ok := hctx.Deadline(); ok {
			results <- fmt.Errorf("the handler's context has a deadline (%v)", d)
			return nil
		}
		_, err := lost.AccountInfo(hctx)
		results <- err
		return nil
	})
	defer stop()
	if _, err := bus.NewPublisher(js).PublishEvent(ctx, synthesized("infra", "lost-reply", 1, genTrigger(1))); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-results:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("the request with a lost reply: got %v, want the jetstream default timeout", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a request whose reply was lost held the handler past the jetstream default timeout")
	}
}
