package bus_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lava-operator/lava/internal/platform/bus"
)

// An attack: one namespace's messages whose handlers never end (a tenant's provider calls
// that sleep for an hour) come first in the stream and would hold every worker. With
// FairKey, that namespace holds at most MaxPerKey workers; another namespace's message,
// published after them, runs at once while they still hold theirs; and at shutdown the
// attacker's messages that were waiting are naked for another replica, not lost.
func TestConsume_namespaceShareAttack(t *testing.T) {
	t.Parallel()
	const ackWait = 3 * time.Second
	js := startBusAckWait(t, ackWait)
	ctx := t.Context()
	release := make(chan struct{})
	var (
		mu      sync.Mutex
		running = map[string]int{}
		most    = map[string]int{}
	)
	victim := make(chan struct{}, 1)
	stop := runConsume(t, js, sharedPhases(), func(hctx context.Context, m *bus.Message) error {
		ns := m.Envelope.GetResource().GetNamespace()
		if ns == "victim" {
			victim <- struct{}{}
			return nil
		}
		mu.Lock()
		running[ns]++
		most[ns] = max(most[ns], running[ns])
		mu.Unlock()
		defer func() {
			mu.Lock()
			running[ns]--
			mu.Unlock()
		}()
		select {
		case <-release:
			return nil
		case <-hctx.Done(): // the drain's timeout
			return hctx.Err()
		}
	})
	pub := bus.NewPublisher(js)
	for i := range 6 {
		if _, err := pub.PublishEvent(ctx, synthesized("attacker", "slow-"+itoa(i), 1, genTrigger(1))); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 10*time.Second, "the attacker's first handlers start", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return running["attacker"] == 2
	})
	if _, err := pub.PublishEvent(ctx, synthesized("victim", "fast", 1, genTrigger(1))); err != nil {
		t.Fatal(err)
	}
	select {
	case <-victim:
	case <-time.After(10 * time.Second):
		t.Fatal("the other namespace's message waited for the attacker's handlers")
	}
	mu.Lock()
	held := most["attacker"]
	mu.Unlock()
	if held != 2 {
		t.Fatalf("the attacker's namespace held %d handlers at once, want its share of 2", held)
	}

	// Shutdown: the 2 running time out in the drain and are naked; the 4 waiting are naked
	// at once. A second replica gets all 6.
	stop()
	close(release)
	got := make(chan string, 6)
	runConsume(t, js, applierPhases(func(o *bus.ConsumeOptions) { o.Concurrency = 6 }), func(_ context.Context, m *bus.Message) error {
		got <- m.Envelope.GetResource().GetName()
		return nil
	})
	seen := map[string]bool{}
	timeout := time.After(ackWait + 10*time.Second)
	for len(seen) < 6 {
		select {
		case n := <-got:
			seen[n] = true
		case <-timeout:
			t.Fatalf("after the drain only %v were delivered again", seen)
		}
	}
}

// An attack: one object's spec edited again and again, each edit a generation and a
// Synthesized; they waited behind the namespace's slow handlers and filled the backlog, so the
// pull stopped for every namespace. With Coalesce, the object's newest Synthesized replaces a
// waiting older one, which is acked unhandled: the edits hold one place, and the handler sees
// only the newest.
func TestConsume_coalescedEditsAttack(t *testing.T) {
	t.Parallel()
	_, js := startBus(t, testTopology)
	ctx := t.Context()
	release := make(chan struct{})
	seen := make(chan int64, 16)
	runConsume(t, js, applierPhases(func(o *bus.ConsumeOptions) {
		o.Concurrency, o.MaxPerKey = 1, 1
		o.FairKey, o.Coalesce = bus.NamespaceKey, bus.IsSynthesized
	}), func(hctx context.Context, m *bus.Message) error {
		if m.Envelope.GetResource().GetName() == "slow" {
			<-release
			return nil
		}
		seen <- m.Envelope.GetGeneration()
		return nil
	})
	pub := bus.NewPublisher(js)
	if _, err := pub.PublishEvent(ctx, synthesized("attacker", "slow", 1, genTrigger(1))); err != nil {
		t.Fatal(err)
	}
	for g := range int64(5) {
		if _, err := pub.PublishEvent(ctx, synthesized("attacker", "edited", g+1, genTrigger(g+1))); err != nil {
			t.Fatal(err)
		}
	}
	cons, err := js.Consumer(ctx, bus.StreamPhases, bus.ServiceApplier)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the superseded edits acked", func() bool {
		info, err := cons.Info(ctx)
		return err == nil && info.NumAckPending == 2 && info.NumPending == 0
	})
	close(release)
	select {
	case g := <-seen:
		if g != 5 {
			t.Fatalf("the handler got generation %d first, want only the newest, 5", g)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the newest edit was not handled")
	}
	select {
	case g := <-seen:
		t.Fatalf("the handler got generation %d too: a superseded edit ran", g)
	case <-time.After(500 * time.Millisecond):
	}
}

// FairKey and OrderKey together are refused: a key's order and a key's share are two
// schedules of one worker pool.
func TestConsume_fairKeyWithOrderKeyRefused(t *testing.T) {
	t.Parallel()
	_, js := startBus(t, testTopology)
	err := bus.Consume(t.Context(), js, applierPhases(func(o *bus.ConsumeOptions) {
		o.FairKey, o.OrderKey = bus.NamespaceKey, bus.ResourceOrderKey
	}), func(context.Context, *bus.Message) error { return nil })
	if err == nil {
		t.Fatal("Consume accepted FairKey with OrderKey")
	}
}

// sharedPhases is the applier's consumer on LAVA_PHASES with four workers shared between
// namespaces, two at most each, and a drain of 100ms.
func sharedPhases() bus.ConsumeOptions {
	return applierPhases(func(o *bus.ConsumeOptions) {
		o.Concurrency, o.MaxPerKey = 4, 2
		o.FairKey = bus.NamespaceKey
		o.DrainTimeout = 100 * time.Millisecond
	})
}

func TestNamespaceKey(t *testing.T) {
	for subject, want := range map[string]string{
		bus.PhaseSubject("team-a", "web", "synthesized"):   "team-a",
		bus.CommandSubject("apply", "team-b", "db", "run"): "team-b",
		"lava.anomaly.warning.drift":                       "",
		"not a subject":                                    "",
	} {
		if got := bus.NamespaceKey(subject); got != want {
			t.Errorf("NamespaceKey(%q) = %q, want %q", subject, got, want)
		}
	}
}

// An attack: one namespace's messages, more than the old backlog of 64, whose handlers never
// end, come first in the stream. The backlog is the consumer's MaxAckPending, so the pull
// never waits on them: another namespace's message published after all of them runs at once,
// and every one of the attacker's waiting messages gets its heartbeats, so none is delivered
// again after the ack wait (a message left in the client's pull buffer would be, and would
// reach MaxDeliver).
func TestConsume_namespaceFloodAttack(t *testing.T) {
	t.Parallel()
	const ackWait = 2 * time.Second
	js := startBusAckWait(t, ackWait)
	ctx := t.Context()
	release := make(chan struct{})
	var (
		mu      sync.Mutex
		started = map[string]int{}
	)
	victim := make(chan struct{}, 1)
	runConsume(t, js, sharedPhases(), func(hctx context.Context, m *bus.Message) error {
		if m.Envelope.GetResource().GetNamespace() == "victim" {
			victim <- struct{}{}
			return nil
		}
		mu.Lock()
		started[m.Envelope.GetResource().GetName()]++
		mu.Unlock()
		select {
		case <-release:
			return nil
		case <-hctx.Done():
			return hctx.Err()
		}
	})
	defer close(release)
	const flood = 150
	pub := bus.NewPublisher(js)
	for i := range flood {
		if _, err := pub.PublishEvent(ctx, synthesized("attacker", "slow-"+itoa(i), 1, genTrigger(1))); err != nil {
			t.Fatal(err)
		}
	}
	cons, err := js.Consumer(ctx, bus.StreamPhases, bus.ServiceApplier)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the flood delivered", func() bool {
		info, err := cons.Info(ctx)
		return err == nil && info.NumPending == 0 && info.NumAckPending == flood
	})
	if _, err := pub.PublishEvent(ctx, synthesized("victim", "fast", 1, genTrigger(1))); err != nil {
		t.Fatal(err)
	}
	select {
	case <-victim:
	case <-time.After(10 * time.Second):
		t.Fatalf("the other namespace's message waited behind %d of the attacker's", flood)
	}
	time.Sleep(3 * ackWait)
	info, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.NumRedelivered != 0 {
		t.Fatalf("%d of the waiting messages were delivered again after the ack wait: they got no heartbeats", info.NumRedelivered)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(started) != 2 {
		t.Fatalf("%d of the attacker's handlers started, want its share of 2", len(started))
	}
}

// The backlog's byte bound: messages wait while their bytes fit; a message that does not fit
// waits for a worker to take one; one larger than the bound is let in when nothing waits.
func TestFairQueue_backlogBytes(t *testing.T) {
	t.Parallel()
	_, js := startBus(t, testTopology)
	ctx := t.Context()
	pub := bus.NewPublisher(js)
	for i := range 3 {
		if _, err := pub.PublishEvent(ctx, synthesized("a", "obj-"+itoa(i), 1, genTrigger(1))); err != nil {
			t.Fatal(err)
		}
	}
	cons, err := js.Consumer(ctx, bus.StreamPhases, bus.ServiceApplier)
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(3, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var msgs []jetstream.Msg
	for m := range batch.Messages() {
		msgs = append(msgs, m)
	}
	if len(msgs) != 3 {
		t.Fatalf("fetched %d messages, want 3", len(msgs))
	}
	size := len(msgs[0].Subject()) + len(msgs[0].Data())
	for k, vs := range msgs[0].Headers() {
		size += len(k) + len(strings.Join(vs, ""))
	}
	full := func(q bus.FairQueueForTest, m jetstream.Msg) bool {
		ctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		return !q.Put(ctx, m)
	}

	q := bus.NewFairQueueForTest(1, 100, 2*size+size/2)
	if full(q, msgs[0]) || full(q, msgs[1]) {
		t.Fatal("two messages did not fit in a bound of two and a half")
	}
	if !full(q, msgs[2]) {
		t.Fatal("a third message was let in past the byte bound")
	}
	if got := q.Take(); got != msgs[0] {
		t.Fatal("the oldest message was not taken first")
	}
	if full(q, msgs[2]) {
		t.Fatal("the third message did not fit once one was taken")
	}

	small := bus.NewFairQueueForTest(1, 100, 1)
	if full(small, msgs[0]) {
		t.Fatal("a message larger than the bound was refused with nothing waiting")
	}
	if !full(small, msgs[1]) {
		t.Fatal("a second message was let in past the byte bound")
	}
}
