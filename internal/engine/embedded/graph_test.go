package embedded

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestWorkers: functions run one after another reuse one worker; functions that run at once
// get a worker each; idle workers end.
func TestWorkers(t *testing.T) {
	t.Parallel()
	w := newWorkers(200 * time.Millisecond)
	for range 10 {
		done := make(chan struct{})
		w.run(func() { close(done) })
		<-done
		time.Sleep(10 * time.Millisecond) // the worker is back in its select
	}
	// One, or two if a worker is not yet back in its select after 10 ms on a busy machine.
	if n := w.alive.Load(); n > 2 {
		t.Errorf("%d workers after 10 functions one after another, want 1", n)
	}
	release := make(chan struct{})
	var started sync.WaitGroup
	started.Add(5)
	for range 5 {
		w.run(func() { started.Done(); <-release })
	}
	started.Wait()
	if n := w.alive.Load(); n != 5 {
		t.Errorf("%d workers while 5 functions run at once, want 5", n)
	}
	close(release)
	deadline := time.Now().Add(5 * time.Second)
	for w.alive.Load() > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := w.alive.Load(); n != 0 {
		t.Errorf("%d workers left 5 s after the last function (idle 200ms), want 0", n)
	}
}

// TestWalk_panicFailsTheNode: a node whose function panics fails with an error naming it; with
// keepGoing the other nodes still run, and the process goes on.
func TestWalk_panicFailsTheNode(t *testing.T) {
	t.Parallel()
	var ran atomic.Int32
	err := walk(t.Context(), []string{"a", "b", "c"}, map[string][]string{"c": {"a"}}, 2, true, func(_ context.Context, n string) error {
		ran.Add(1)
		if n == "b" {
			panic("boom in b")
		}
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "b: internal error") || !strings.Contains(err.Error(), "panic: boom in b") {
		t.Fatalf("walk: %v, want b's panic as its error", err)
	}
	if ran.Load() != 3 {
		t.Errorf("%d nodes ran, want 3 (keepGoing)", ran.Load())
	}
}
