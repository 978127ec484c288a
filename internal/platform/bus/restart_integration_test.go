//go:build integration

package bus_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/testutil/natstest"
)

// The nats-server process restarts while a consumer works through a backlog and a publisher
// keeps publishing: nothing is lost, nothing is stored twice, the consumer resumes on its own,
// and the watermarks survive.
func TestBus_serverRestartMidStreamLosesNothing(t *testing.T) {
	t.Parallel()
	srv := natstest.RunBinary(t, t.TempDir())
	ctx := t.Context()
	_, js := srv.Connect(t)
	if err := bus.EnsureTopology(ctx, js, testTopology); err != nil {
		t.Fatal(err)
	}
	wm, err := bus.NewWatermarks(ctx, js, bus.ServiceApplier, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wm.Advance(ctx, "infra", "web.prod", 5); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	seen := map[string]int{}
	_, cjs := srv.Connect(t)
	runConsume(t, cjs, applierPhases(func(o *bus.ConsumeOptions) { o.Concurrency = 2 }), func(_ context.Context, m *bus.Message) error {
		time.Sleep(2 * time.Millisecond) // keep a backlog across the restart
		mu.Lock()
		seen[m.Envelope.GetEventId()]++
		mu.Unlock()
		return nil
	})

	const n = 400
	pub := bus.NewPublisher(js)
	want := map[string]bool{}
	publish := func(i int) {
		ev := synthesized("infra", "r"+itoa(i%7), int64(i+1), genTrigger(int64(i+1)))
		want[ev.GetEnvelope().GetEventId()] = true
		deadline := time.Now().Add(30 * time.Second)
		for {
			pctx, cancel := context.WithTimeout(ctx, time.Second)
			_, err := pub.PublishEvent(pctx, ev)
			cancel()
			if err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("publish %d: %v", i, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	for i := range n / 2 {
		publish(i)
	}
	mu.Lock()
	before := len(seen)
	mu.Unlock()
	if before >= n/2 {
		t.Logf("consumer already caught up before the restart (%d); the restart still interrupts its pull", before)
	}
	t0 := time.Now()
	srv.Restart()
	t.Logf("restart took %v", time.Since(t0))
	for i := n / 2; i < n; i++ {
		publish(i)
	}

	t.Logf("published the second half %v after the restart began", time.Since(t0))
	eventually(t, 60*time.Second, "every event consumed after the restart", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) == n
	})
	t.Logf("all consumed %v after the restart began", time.Since(t0))
	mu.Lock()
	for id := range want {
		if seen[id] == 0 {
			t.Errorf("event %s lost", id)
		}
	}
	mu.Unlock()
	s, err := js.Stream(ctx, bus.StreamPhases)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != n {
		t.Errorf("stream holds %d messages, want %d (retried publishes must be de-duplicated)", info.State.Msgs, n)
	}
	if g, _, err := wm.Get(ctx, "infra", "web.prod"); g != 5 || err != nil {
		t.Errorf("watermark after restart: %d, %v; want 5", g, err)
	}
	t.Logf("consumed before the restart: %d of %d published", before, n/2)
}
