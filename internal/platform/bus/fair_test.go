package bus_test

import (
	"context"
	"sync"
	"testing"
	"time"

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
	topo := testTopology
	topo.BackOff = []time.Duration{ackWait}
	_, js := startBus(t, topo)
	ctx := t.Context()
	release := make(chan struct{})
	var (
		mu      sync.Mutex
		running = map[string]int{}
		most    = map[string]int{}
	)
	victim := make(chan struct{}, 1)
	stop := runConsume(t, js, applierPhases(func(o *bus.ConsumeOptions) {
		o.Concurrency = 4
		o.FairKey = bus.NamespaceKey
		o.MaxPerKey = 2
		o.DrainTimeout = 100 * time.Millisecond
	}), func(hctx context.Context, m *bus.Message) error {
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
